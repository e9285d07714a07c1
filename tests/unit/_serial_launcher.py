"""A serial loop-mode launcher in ctypes, for testing the Python layer without the C runtime.

It follows the ABI of ``emu_abi.h``: binds one worker, then calls the block function for
every block in order. Collectives, traps, static __shared__ variables and the memory checks are
not supported (loop mode, checks mode 0 only).
"""

import ctypes

import numpy as np


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class Worker(ctypes.Structure):
    _fields_ = [
        ("current", ctypes.c_void_p),
        ("block_idx", Dim3),
        ("block_dim", Dim3),
        ("grid_dim", Dim3),
        ("dynamic_shared", ctypes.c_void_p),
        ("dynamic_shared_bytes", ctypes.c_size_t),
        ("api", ctypes.c_void_p),
        ("static_shared", ctypes.c_void_p),
    ]


BIND = ctypes.CFUNCTYPE(None, ctypes.POINTER(Worker))
BLOCK = ctypes.CFUNCTYPE(None, ctypes.POINTER(Worker), ctypes.c_void_p)


def serial_emu_launch(
    bind,
    thread_fn,
    block_fn,
    grid,
    block,
    args,
    *,
    shared_mem,
    fibers,
    checked,
    workers,
    kernel_name,
    checks=0,
    **unused,
):
    if fibers or checks:
        raise NotImplementedError("the serial test launcher runs loop-mode kernels without checks only")
    w = Worker()
    w.block_dim = Dim3(*block)
    w.grid_dim = Dim3(*grid)
    shared = np.zeros(max(shared_mem, 16), np.uint8)
    w.dynamic_shared = shared.ctypes.data
    w.dynamic_shared_bytes = shared_mem
    BIND(bind)(ctypes.byref(w))
    table = np.frombuffer(args, np.uint8).ctypes.data if args is not None else 0
    run = BLOCK(block_fn)
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                w.block_idx = Dim3(x, y, z)
                run(ctypes.byref(w), table)
