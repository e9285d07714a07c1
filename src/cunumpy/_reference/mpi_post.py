"""Twins of ``_core.exchange_plain`` and ``_core.exchange_post``: the common case of
``cunumpy.mpi.exchange()``."""

from __future__ import annotations

import numpy as np

__all__ = ["exchange_host", "exchange_plain", "exchange_post"]


def _has_objects(fmt: str) -> bool:
    """An 'O' outside the ``:name:`` field names of a struct format."""
    return "O" in "".join(fmt.split(":")[0::2])


def _plain(items, array_type, host: bool, writable: bool) -> bool:
    for item in items:
        if type(item) is not tuple or len(item) != 3:
            return False
        array, rank, tag = item
        if type(array) is not array_type or type(rank) is not int or type(tag) is not int or tag < 0:
            return False
        if not host and type(array).__module__.startswith("cunumpy._fake_cupy"):
            flags = array.flags
            if not flags.c_contiguous:
                return False
        elif host:
            try:
                view = memoryview(array)
            except TypeError:
                return False
            with view:
                if not view.c_contiguous or (writable and view.readonly) or _has_objects(view.format):
                    return False
    return True


def exchange_plain(receives, sends, array_type, host, get_size, proc_null):
    """``(receives, sends, checked)`` when every descriptor is in the common form; else None.
    ``get_size()`` is called once, after the structure of every descriptor passed."""
    proc_null, host = int(proc_null), bool(host)
    if type(receives) not in (list, tuple) or type(sends) not in (list, tuple):
        return None
    receives, sends = tuple(receives), tuple(sends)
    if not _plain(receives, array_type, host, True) or not _plain(sends, array_type, host, False):
        return None
    if not receives and not sends:
        return receives, sends, True
    size = int(get_size())
    for _, rank, _ in receives + sends:
        if not 0 <= rank < size and rank != proc_null:
            return None
    return receives, sends, _checked(receives + sends, host)


def _checked(items, host: bool) -> bool:
    """Host arrays are checked above; device arrays only when they are the fake CuPy's."""
    return host or all(type(item[0]).__module__.startswith("cunumpy._fake_cupy") for item in items)


def exchange_post(irecv, isend, receives, sends):
    """Post every receive, then every send; the list of requests."""
    requests = [irecv(*item) for item in receives]
    requests.extend(isend(*item) for item in sends)
    return requests


def exchange_host(receives, sends, get_size, proc_null, irecv, isend, waitall):
    """The common case of a host exchange in one call: None (nothing posted) when a descriptor
    is not in the common form or ``get_size()`` fails; else post, wait and return True (False
    when there is nothing to post)."""
    try:
        plain = exchange_plain(receives, sends, np.ndarray, True, get_size, proc_null)
    except Exception:  # noqa: BLE001 - the slow path reports it again
        return None
    if plain is None:
        return None
    if not plain[0] and not plain[1]:
        return False
    waitall(exchange_post(irecv, isend, plain[0], plain[1]))
    return True
