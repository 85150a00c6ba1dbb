"""Keep the memory a run frees for the next run (glibc ``malloc`` tuning).

A run allocates and frees a few hundred megabytes of numpy arrays (the
packet columns and the array stages' temporaries, 8 MB each per million
packets).  With glibc's defaults, blocks that size are mapped afresh from the
kernel and returned to it when freed, so every run pays for the kernel
zeroing new pages again: about a quarter of a cache-hit run's time here
(``clear_page_erms`` in ``perf``).  :func:`tune` asks glibc to serve such
blocks from its heap and to keep freed heap memory, so repeated runs -- a
slider being moved -- reuse pages instead.  The process keeps memory up to its
largest run's peak instead of returning it between runs; the peak itself does
not change.

Only on Linux with glibc (elsewhere a no-op); ``ROUTELAB_MALLOC_TUNE=0`` turns
it off.  Model results do not depend on it.
"""
from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["tune"]

# mallopt parameters (glibc <malloc.h>)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

_done = False


def tune() -> bool:
    """Apply the tuning once per process; return whether glibc accepted it."""
    global _done
    if _done:
        return False
    _done = True
    if os.environ.get("ROUTELAB_MALLOC_TUNE", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(M_MMAP_THRESHOLD, 32 << 20)      # the largest glibc accepts (64-bit)
    ok &= mallopt(M_TRIM_THRESHOLD, 1 << 30)      # keep freed heap memory
    ok &= mallopt(M_TOP_PAD, 64 << 20)            # grow the heap in large steps
    return bool(ok)
