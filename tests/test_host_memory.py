"""engine.host_memory: with freed memory retained, a large tensor allocated again and again
stops page-faulting; glibc's defaults map a block that large afresh every time."""
import subprocess
import sys

import pytest

CHILD = """
import resource, sys, torch
from engine.host_memory import retain_freed_memory
took = retain_freed_memory() if sys.argv[1] == "retain" else None
faults = []
for _ in range(24):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    x = torch.empty(16 * 2**20)  # 64 MiB, above glibc's largest automatic mmap threshold (32 MiB)
    x.fill_(1.0)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    del x
print(took, sum(faults[-8:]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_retained_memory_stops_page_faults():
    pages = 16 * 2**20 * 4 // 4096  # one allocation's pages
    got = {}
    for mode in ("retain", "default"):
        out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True)
        took, faults = out.stdout.split()
        got[mode] = (took, int(faults))
    assert got["retain"][0] == "True"
    assert got["default"][1] >= 8 * pages * 0.9  # every allocation faults its pages afresh
    # after a few allocations (the heap settles in 8 or so here) the next ones reuse freed pages
    assert got["retain"][1] <= 8 * pages * 0.05


GROW = """
import resource, sys, torch
from engine.host_memory import retain_freed_memory
took = retain_freed_memory(int(sys.argv[1]))
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
held = []
for mib in (8, 16, 32, 64):  # the heap grows to new sizes, the blocks kept: 120 MiB in all
    held.append(torch.empty(mib * 2**18))
    held[-1].fill_(1.0)
print(took, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_prefaulted_heap_serves_growth_without_faults():
    pages = 120 * 2**20 // 4096
    got = {}
    for prefault in (256 << 20, 0):
        out = subprocess.run([sys.executable, "-c", GROW, str(prefault)], capture_output=True, text=True, check=True)
        took, faults = out.stdout.split()
        got[prefault] = (took, int(faults))
    assert got[0][0] == got[256 << 20][0] == "True"
    assert got[0][1] >= pages * 0.9  # without it, new heap pages fault as they are first written
    assert got[256 << 20][1] <= pages * 0.05
