"""Giving freed memory back to the operating system after large, one-off work (model load, batches)."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys


def _glibc_trim():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim  # glibc only: musl and others have no such symbol
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _glibc_trim()


def release_memory() -> None:
    """Collect cycles, then, on glibc, return free heap pages to the OS (``malloc_trim(0)``).

    glibc keeps freed chunks in each thread's heap; after a batch of large tensors they stay resident
    until reused. Trimming costs a few milliseconds, so call it after big work, never per query.
    """
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
