"""Does a longer prompt (more KV between the products) move the in-situ probe's parts? (2026-12-05,
0.42.0, exploratory.) Run from the repository root of a checkout of a9a82e2, alone:

  python validation/results/cpu-epyc-zen3/0.42.0/prompt_check.py

The probe's runs (validation.reuse.insitu_probe's, products timed by wrapping `@`) at 4 and 16
sequences with 16-token prompts (the probe's) and 160-token ones (the family traces' 128 plus
part of the 64 generated), three runs each (mode_check.py's with_patch); each part's median time a step.
"""
import importlib.util
import statistics
from pathlib import Path

import torch
from engine.host_memory import retain_freed_memory

_spec = importlib.util.spec_from_file_location("mode_check", Path(__file__).resolve().parent / "mode_check.py")
mode_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mode_check)  # its with_patch: the products timed with `@` wrapped
torch.set_num_threads(1)
retain_freed_memory()
m = mode_check.m
print(m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.kv_bytes_per_token)
for r in (4, 16):
    for entry, passes in (({"scheme": "none"}, 0), ({"scheme": "eagle", "depth": 5}, 5)):
        res = {}
        for prompt in (16, 160):
            res[prompt] = [mode_check.with_patch(r, entry, passes, prompt)[0] for _ in range(3)]
        print(f"r={r} {entry['scheme']}")
        for k in res[16][0]:
            a = statistics.median(x[k] for x in res[16]); b = statistics.median(x[k] for x in res[160])
            print(f"    {k:14} prompt16 {a*1e6:8.0f} prompt160 {b*1e6:8.0f} ratio {b/a:.3f}")
