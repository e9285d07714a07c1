"""Placeholder demo; replaced as the foundation lands."""
import cunumpy as xp

print("backend:", xp.get_backend())
