"""Three-point smoothing; not ported to CUDA yet."""
