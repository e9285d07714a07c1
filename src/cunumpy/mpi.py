"""MPI with one rank per GPU (API.md section 6).

Launcher detection and the serial stand-in come from the ``maybempi`` dependency; nothing
here imports mpi4py at import time.
"""

from maybempi import (
    OVERRIDE_VARIABLE,
    SerialComm,
    SerialMPI,
    SerialRequest,
    SerialStatus,
    get_mpi,
    is_serial,
    launched_under_mpi,
    local_rank,
)

__all__ = [
    "OVERRIDE_VARIABLE",
    "SerialComm",
    "SerialMPI",
    "SerialRequest",
    "SerialStatus",
    "get_mpi",
    "is_serial",
    "launched_under_mpi",
    "local_rank",
]
