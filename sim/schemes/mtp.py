"""`mtp`: DeepSeek-V3-style multi-token prediction (arXiv:2412.19437 §2.2): D sequential modules,
each one transformer block of the target's kind after a 2h -> h projection of [hidden; next
embedding], sharing the embedding and LM head; the target verifies the chain of D+1."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.drafters import mtp_module
from sim.models import ModelSpec
from sim.schemes.base import ModelDraftScheme, need_rank_acceptance, parse_common
from sim.specio import Node


@dataclass(frozen=True)
class MTP(ModelDraftScheme):
    name = "mtp"
    module: ModelSpec | None = None
    # each module catches up its own committed entries and keeps its own features
    # (engine/drafting/mtp.py): on the host every pass is a first pass, draft_seq_s a sequence.
    # With draft_pass_seq_s for the later ones (EAGLE's measure, one head over its drafted nodes)
    # module 2's pass read 362 us a sequence added from 1 to 16, 301 us priced
    # (validation/results/cpu-epyc-zen3/0.36.0/chain_passes.txt)
    catch_up = True
    shared_lm = True  # the target's LM head (engine/drafting/heads.py)
    layers_again = False  # module k runs pass k

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec, base_dir: Path) -> "MTP":
        f, common = parse_common(cls, node, (), "depth", base_dir, max_depth=8)
        scheme = cls(module=mtp_module(model), **common)
        need_rank_acceptance(scheme, "an MTP chain")
        return scheme

    def drafter_spec(self):
        return self.module, True

    def passes(self, n, depth, tree, fresh, first, several):
        """Module k's pass (engine/drafting/mtp.py) runs its entries from the first it has not
        committed to the last: the fresh tokens, plus its k-1 scratch entries of the last step
        (now committed, or dropped with the rejected drafts), which a first draft does not have;
        logits at the last committed entry and each scratch one. From module 2 on every sequence
        has several rows (its scratch entries and the fresh one, or a first draft's prompt)."""
        return [(fresh + (k - 1) * (n - first), k * n, several if k == 1 else n) for k in range(1, depth + 1)]
