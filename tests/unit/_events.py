"""A test helper: the transfer events cunumpy reports, collected by kind."""

from cunumpy import _transfers


class Events:
    """Collects transfer events through the one hook every cunumpy copy reports to."""

    def __init__(self):
        self.events = []

    def _receive(self, event):
        self.events.append(event)

    def __enter__(self):
        _transfers.sinks.append(self)
        return self

    def __exit__(self, *exc):
        _transfers.sinks.remove(self)

    def kinds(self, kind):
        return [e for e in self.events if e.kind == kind]
