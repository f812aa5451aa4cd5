import os
import sys

# OpenMP threads that spin while idle stall every small op for milliseconds on a small shared VM
# (measured: 8 ms per op with 2 spinning threads vs 15 us passive); decide before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from engine.cli import main  # noqa: E402
from engine.host_memory import retain_freed_memory  # noqa: E402

retain_freed_memory()  # large per-step tensors reuse freed memory instead of faulting fresh pages
sys.exit(main())
