"""push: move particles along x with their velocity, periodic in [0, length)."""
