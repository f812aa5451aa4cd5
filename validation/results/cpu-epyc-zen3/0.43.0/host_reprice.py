"""The drafters' host figures from the drafter host probe on the family's own shape after the
trace's median prompt (0.43.0's calibration where the context fits the last-level cache) against
the probe's 1-layer hidden-64 model amid the family's traffic (0.42.0's), both with 0.43.0's
figures (the first, catch-up, decode step left out; each per-row figure less a row's picks over
the probe's vocabulary at the profile's draft_logit_ns), ROUNDS rounds alternating; then each
comparison DIR's profile with its five drafter host fields replaced by each set, written beside
(DIR/../host-{family,probe}-NAME.yaml) for `python -m validation reprice DIR --hardware ...`
(2026-12-05). Run from the repository root with the project's environment, alone:

  python validation/results/cpu-epyc-zen3/0.43.0/host_reprice.py ROUNDS OUT DIR [DIR ...]

It needs a checkout of 2933eb4 (drafter_host_figures' logit_row_s and the probe's first step left
out were reverted after it).
"""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import torch
import yaml

from sim.models import model_from_node
from sim.specio import Node
from validation.drafter_host import drafter_host_figures, drafter_host_probe
from validation.host_probes import TINY_CHECKPOINT, checkpoint_of
from validation.traffic import Traffic

FIELDS = {"draft_first_s": "draft_first_us", "draft_seq_s": "draft_seq_us", "draft_pass_s": "draft_pass_us",
          "draft_pass_seq_s": "draft_pass_seq_us", "draft_node_s": "draft_node_us"}


def main(rounds: int, out: Path, dirs: list[Path]) -> None:
    torch.set_num_threads(1)
    fam = model_from_node(Node("tiny", "command line", "model"), None)
    traffic = Traffic.of(fam)
    setups = {"family": (lambda: drafter_host_probe("cpu", None, checkpoint_of(fam), 128), fam.vocab),
              "probe": (lambda: drafter_host_probe("cpu", traffic), TINY_CHECKPOINT["vocab"])}
    got = {k: [] for k in setups}
    for _ in range(rounds):
        for k, (fn, _) in setups.items():
            got[k].append(fn())
    out.mkdir(parents=True, exist_ok=True)
    for d in dirs:
        text = (d / "measured-hardware.yaml").read_text()
        logit_s = yaml.safe_load(text)["draft_logit_ns"] * 1e-9
        print(f"{d}: its profile's " + ", ".join(f"{v} {yaml.safe_load(text)[v]}" for v in FIELDS.values()))
        for k, (_, vocab) in setups.items():
            t = {x: statistics.mean(r[x] for r in got[k]) for x in got[k][0]}
            fig = drafter_host_figures(t, vocab * logit_s)
            new = text
            for f, key in FIELDS.items():
                new = re.sub(rf"^{key}: .*$", f"{key}: {fig[f] * 1e6:.2f}", new, flags=re.M)
            path = out / f"host-{k}-{d.name}.yaml"
            path.write_text(new)
            print(f"  {k:6} (us): " + ", ".join(f"{FIELDS[f]} {v * 1e6:.1f}" for f, v in fig.items()) + f" -> {path}")


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]), [Path(x) for x in sys.argv[3:]])
