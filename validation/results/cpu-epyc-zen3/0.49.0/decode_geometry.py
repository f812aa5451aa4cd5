"""Where a decode layer's attention time goes on the CPU reference, by attention geometry.

    python validation/results/cpu-epyc-zen3/0.49.0/decode_geometry.py [CALLS]

For each geometry (KV heads, query heads per KV head, head_dim 64) at 8 and 32 MiB of fp32 K and
V a call (validation.probes.decode_sizes), the decode probe (validation.probes.decode_probe)
under torch.profiler: self CPU time a call in the gather (aten::index_select), the per-head
products (aten::bmm) and the rest, and the products per query head and key. The engine's
allocator settings as the engine runs them (engine.host_memory). One thread."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine.host_memory import retain_freed_memory  # noqa: E402
from validation.probes import decode_probe, decode_sizes  # noqa: E402

GEOMETRIES = ((8, 1, 64), (8, 2, 64), (8, 4, 64), (2, 1, 64), (2, 2, 64), (2, 4, 64), (2, 8, 64))


def main(calls: int = 10) -> None:
    from torch.profiler import profile
    torch.set_num_threads(1)
    retain_freed_memory()
    for size in (2, 3):  # 8 and 32 MiB
        for g in GEOMETRIES:
            seqs, keys = decode_sizes(g)[size]
            fn = decode_probe("cpu", seqs, keys, g)
            fn(), fn()
            with profile() as pr:
                for _ in range(calls):
                    fn()
            ms = {e.key: e.self_cpu_time_total / calls / 1e3 for e in pr.key_averages()}
            total, gather, bmm = sum(ms.values()), ms["aten::index_select"], ms["aten::bmm"]
            head_keys = g[0] * g[1] * seqs * keys
            print(f"{'x'.join(map(str, g)):8} {seqs:3d} x {keys:5d} keys {2 * seqs * keys * g[0] * g[2] * 4 / 2**20:5.1f} MiB: "
                  f"{total:6.2f} ms a call; gather {gather:5.2f}, products {bmm:5.2f} "
                  f"({bmm * 1e6 / head_keys:5.1f} ns per query head and key), rest {total - gather - bmm:5.2f}", flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
