"""deposit: nearest-grid-point charge density of the particles."""
