"""a[i, j] *= factors[i]"""
