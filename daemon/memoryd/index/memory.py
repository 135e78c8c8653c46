"""The daemon's heap: fewer glibc arenas and large blocks mapped alone from the start, pyarrow's buffers from
that same heap, and freed memory given back after large work."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import sys

#: glibc's ``mallopt`` parameter number of ``M_ARENA_MAX`` (malloc.h).
_M_ARENA_MAX = -8
#: Heaps a daemon keeps: glibc's default is 8 per core; each thread that allocates while the others hold
#: their heap gets a new one, and freed chunks stay resident in it. Two measured 17 MB lower at the
#: 16-agent peak with no slower search (the model's own threads allocate little once loaded).
ARENAS = 2
#: glibc's ``mallopt`` parameter number of ``M_MMAP_THRESHOLD`` (malloc.h).
_M_MMAP_THRESHOLD = -3
#: Blocks from this size on get a mapping of their own, unmapped when freed. glibc's default starts at
#: 128 KiB and rises to the largest block freed (up to 32 MiB), so the large buffers of LanceDB's writes,
#: compactions and index refreshes and of onnxruntime's arena then come from the heaps, where the small
#: blocks allocated between them pin their pages until a trim, and some after it. Measured with 1 MiB: a
#: daemon after 3,000 memories 452 MB instead of 515 (with the model's arena); a store alone, 18,000 rows
#: and 9 refreshes, 352 instead of 370 MB after a trim, 366 instead of 425 before it. But 1 MiB made every
#: ``search_memories`` map and fault a buffer: p50 ~12 ms instead of ~9 through the shim at 200 memories
#: (4 runs each); 4 MiB: 6.3-10.0 ms, and the daemon's RSS after 200 memories 446 MB (1 MiB: 441, glibc's
#: own threshold: 468-473).
MMAP_THRESHOLD = 4 << 20
#: The environment variable naming pyarrow's default allocator, read when the pool is first used.
ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def _glibc(name: str):
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return getattr(libc, name)  # glibc only: musl and others have no such symbols
    except (OSError, AttributeError):
        return None


_TRIM = _glibc("malloc_trim")
if _TRIM is not None:
    _TRIM.argtypes, _TRIM.restype = [ctypes.c_size_t], ctypes.c_int
_MALLOPT = _glibc("mallopt")
if _MALLOPT is not None:
    _MALLOPT.argtypes, _MALLOPT.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int


def limit_arenas(environ: dict[str, str] | None = None) -> bool:
    """On glibc, cap the process's malloc heaps at :data:`ARENAS`; ``True`` when set.

    Call it before the process starts threads (heaps made earlier stay). ``MALLOC_ARENA_MAX`` in the
    environment wins: glibc read it at start, and the user chose it."""
    env = os.environ if environ is None else environ
    if _MALLOPT is None or env.get("MALLOC_ARENA_MAX"):
        return False
    return bool(_MALLOPT(_M_ARENA_MAX, ARENAS))


def map_large_blocks(environ: dict[str, str] | None = None) -> bool:
    """On glibc, give every block of :data:`MMAP_THRESHOLD` bytes or more its own mapping (a fixed
    threshold: glibc no longer raises it); ``True`` when set.

    Call it at start, before large blocks are allocated. ``MALLOC_MMAP_THRESHOLD_`` in the environment
    wins, as the user's choice."""
    env = os.environ if environ is None else environ
    if _MALLOPT is None or env.get("MALLOC_MMAP_THRESHOLD_"):
        return False
    return bool(_MALLOPT(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def system_arrow_pool(environ: dict[str, str] | None = None) -> bool:
    """Make pyarrow allocate with malloc (its ``system`` pool) instead of its bundled mimalloc; ``True``
    when set.

    The writer's tables (``pa.Table.from_pylist``, the tokenizer's arrays) are freed on the threads that
    made them, and mimalloc keeps those threads' freed pages resident: its reservation held 15-19 MB at
    rest after 10,000 memories stored by tool calls, with no pyarrow buffer alive. From malloc's heap, a
    large buffer is unmapped when freed (:func:`map_large_blocks`) and the rest goes at the next
    :func:`trim`. Call it before pyarrow is first imported (a pool already in use stays); a value the user
    set in the environment wins."""
    env = os.environ if environ is None else environ
    if env.get(ARROW_POOL_VARIABLE):
        return False
    env[ARROW_POOL_VARIABLE] = "system"
    return True


def release_memory() -> None:
    """Collect cycles, then hand free heap pages back to the OS (:func:`trim`).

    The collection holds the GIL for ~150 ms in a daemon with a large heap: for start-up and one-off
    work only; after writes use :func:`trim`.
    """
    gc.collect()
    trim()


def trim() -> None:
    """On glibc, return free heap pages of every arena to the OS (``malloc_trim(0)``); and free memory
    pyarrow's allocator holds for reuse.

    glibc keeps freed chunks in each thread's heap: after a batch of large tensors, or a LanceDB
    compaction, they stay resident until reused. Costs a few milliseconds (14 ms with a ~1 GB heap),
    during which other threads' ``malloc`` may wait: call it after big work, never per query.
    """
    if _TRIM is not None:
        _TRIM(0)
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:  # only when loaded (LanceDB loads it): importing it here would cost ~100 MB
        arrow.default_memory_pool().release_unused()
