"""glibc's allocator held to fixed thresholds, so that a step's cost on a CPU depends on its shape,
not on what the process allocated before it.

An engine step's temporaries (a page-blocked step's gathered keys and values, a few MB to 16 MB
each: `treedec.models.page_attention.GATHER_BYTES`) are allocated and freed dozens of times a step.
glibc serves a request above its mmap threshold with a fresh mapping, faulted in page by page and
unmapped at free; the threshold starts at 128 kB and rises to the size of each mapped block freed,
and the heap's top is returned to the system above twice that (its trim threshold). So the same
step cost what the process's history made of those thresholds: at 0.1b, a step of 8 pages x 5.7 k
keys read 1.22 CPU-s with 104 k minor page faults in a fresh process and 0.51 CPU-s with 2.8 k once
the thresholds were fixed (2026-12-04, this machine); in the run, 0.83, and its cost model's probe
in the same process after it, 0.43, so the projection missed (sequential at 0.1b, +26.5 %).

`hold_freed_memory` fixes the mmap threshold at glibc's largest (32 MB on 64-bit) and the trim
threshold at `TRIM_BYTES`: blocks below 32 MB come from the heap and are reused, freed memory is
kept for the next step. The engine and the cost model's probes call it; once per process."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD = -1  # mallopt's parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_BYTES = 32 << 20  # glibc's upper bound for the mmap threshold on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_BYTES = 1 << 30  # free memory at the heap's top kept up to this (RSS then stays near its peak)


@functools.cache
def hold_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (see the module); False where the C
    library is not glibc (or refuses), which then keeps its own policy."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # glibc only: other C libraries' mallopt differ or are absent
    except (OSError, AttributeError, TypeError):
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_BYTES))
