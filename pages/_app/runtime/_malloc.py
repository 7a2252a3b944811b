"""glibc's allocator, tuned for a server of many threads (see pages/_app/__init__.py)."""

from __future__ import annotations

import ctypes
import ctypes.util

M_ARENA_MAX = -8
M_MMAP_THRESHOLD = -3
ARENAS = 2
# Blocks this large are mapped, and given back when freed. 1 MiB saved a little more memory but
# cost 11% of a class's throughput in page faults; 4 MiB cost nothing measurable.
MMAP_BYTES = 4 << 20


def tune() -> bool:
    """Cap glibc's arenas and map large blocks; False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, ARENAS)) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_BYTES))
