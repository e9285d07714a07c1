"""Timing, NVTX ranges and transfer accounting (API.md section 7)."""

__all__: list[str] = []
