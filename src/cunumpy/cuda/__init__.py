"""Devices, memory, streams, events, debug mode and CUDA source tools (API.md section 4).

Every function is safe on the NumPy backend (a no-op or a neutral value) unless documented
otherwise. Nothing here imports CuPy at import time.
"""

from . import _debug, _devices, _source, _streams
from ._debug import *  # noqa: F403
from ._devices import *  # noqa: F403
from ._source import *  # noqa: F403
from ._streams import *  # noqa: F403

__all__ = [*_debug.__all__, *_devices.__all__, *_streams.__all__, *_source.__all__]
