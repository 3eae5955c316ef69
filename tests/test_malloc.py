"""treedec.engine.malloc: with glibc's thresholds held, blocks of a few to 20 MB allocated and freed
round after round are served from memory the process keeps (no page faults after the first round);
with glibc's own sliding thresholds the same rounds fault their pages in afresh each time, which
made a step's cost depend on what the process allocated before it (the module's docstring)."""
import subprocess
import sys

import pytest

ROUNDS = """
import ctypes, ctypes.util, resource, sys
if sys.argv[1] == "held":
    from treedec.engine.malloc import hold_freed_memory
    assert hold_freed_memory()
libc = ctypes.CDLL(ctypes.util.find_library("c"))  # the C library the module holds
libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
faults = []
for _ in range(4):
    before, blocks = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, []
    for mb in (3, 6, 12, 9, 20):  # an attention step's temporaries: gathered keys and values of its buckets
        blocks.append(libc.malloc(mb << 20))
        ctypes.memset(blocks[-1], 1, mb << 20)
    for b in blocks:
        libc.free(b)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(*faults)
"""


def _faults(mode: str) -> list[int]:
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.split()]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_blocks_are_reused_without_page_faults():
    from treedec.engine.malloc import hold_freed_memory

    if not hold_freed_memory():
        pytest.skip("not glibc")
    pages = (3 + 6 + 12 + 9 + 20) << 20 >> 12  # 4 kB pages touched a round
    default, held = _faults("default"), _faults("held")
    assert min(default[1:]) > pages // 2  # glibc's own policy: mapped and faulted in again every round
    assert max(held[1:]) < pages // 100  # held: the first round's memory serves the others
