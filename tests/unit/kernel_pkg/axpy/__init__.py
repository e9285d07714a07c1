"""y += alpha * x"""
