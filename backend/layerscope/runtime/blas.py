"""Run the scaled numpy layer's tiny matmuls on one BLAS thread.

A decode step of the scaled layer multiplies one token by small matrices: OpenBLAS's thread pool costs more than
it saves there, and on a busy 2-core machine its spinning threads double the wall time. OpenBLAS >= 0.3.27 has a
per-thread setting (openblas_set_num_threads_local), so this does not touch other threads (e.g. the server's).
Without a recognisable OpenBLAS the context manager does nothing.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import numpy as np


@cache
def _set_local() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    root = Path(np.__file__).resolve().parent
    for lib in sorted([*root.parent.glob("numpy.libs/*openblas*.so*"), *root.glob(".libs/*openblas*.so*")]):
        try:
            fn = ctypes.CDLL(str(lib)).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        return fn
    return None


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    fn = _set_local()
    if fn is None:
        yield
        return
    previous = fn(1)
    try:
        yield
    finally:
        fn(previous)
