"""Particle-code algorithms on either backend (API.md section 9): Morton keys, sort by key, segment sums, compaction."""

__all__: list[str] = []
