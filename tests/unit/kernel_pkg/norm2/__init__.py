"""out[i] = sqrt(sum_j a[i, j]**2)"""
