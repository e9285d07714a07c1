"""The parts of cunumpy.algorithms, one concern each; the public names are imported from
cunumpy.algorithms."""
