"""Host staging, device mirrors and asynchronous host copies (API.md section 5)."""

__all__: list[str] = []
