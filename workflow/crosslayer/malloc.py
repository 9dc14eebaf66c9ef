"""glibc malloc tuning for one job's process (a no-op off glibc).

PyTorch and NumPy allocate large buffers with plain malloc, and glibc's default policy suits
neither of our two workloads:

- training allocates the same activation buffers every step: mmap'ing and unmapping them each
  time costs 15-40% of a step on 2 cores, so keep freed memory (:func:`retain_freed_memory`);
- weight analyses free one layer's matrices before reading the next: glibc's *dynamic* mmap
  threshold rises to the size of the last freed block (up to 32 MiB), after which 32 MiB
  float16 copies land on the heap and fragment it, so memory grows by ~35 MiB per layer;
  a fixed low threshold returns every large block to the OS (:func:`release_freed_memory`).
"""

import ctypes
import sys

__all__ = ["retain_freed_memory", "release_freed_memory"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # from <malloc.h>


def _mallopt(option, value):
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # musl or another libc without mallopt
        return False
    return bool(libc.mallopt(option, value))


def retain_freed_memory():
    """Keep freed large buffers in the heap for reuse (fast repeated allocation)."""
    return _mallopt(_M_MMAP_THRESHOLD, 1 << 30) and _mallopt(_M_TRIM_THRESHOLD, 1 << 30)


def release_freed_memory(threshold=1 << 20):
    """Serve blocks >= `threshold` bytes by mmap and unmap them when freed (bounded memory)."""
    return _mallopt(_M_MMAP_THRESHOLD, threshold)
