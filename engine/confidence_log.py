"""What an EAGLE-2 drafter's confidences were and how the target answered them, at temperature 0:
the measurements the simulator's confidence model (sim/dyntree.py) is fitted to
(validation/confidence.py).

Per verified plan (its `cand_probs`: every expanded node's candidates' probabilities, ranked):
* every expanded node's top-1 probability (its count, sum and sum of squares: a Beta's moments)
  and the mass at each rank (the shares of the mass beyond the top-1);
* at the root and at every accepted node that was expanded, the candidates' probabilities and
  the rank of the target's greedy token among them (-1: none of them), one `pick` each: how
  often the target takes a candidate of a given confidence, against its siblings'.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ConfidenceLog:
    top1: list[float] = field(default_factory=lambda: [0, 0.0, 0.0])  # [nodes, sum, sum of squares]
    rank_mass: list[float] = field(default_factory=list)  # rank r -> the summed probability there
    picks: list[tuple[tuple[float, ...], int]] = field(default_factory=list)  # (probabilities, target's rank)

    def record(self, cand_probs: dict[int, list[float]], cands: dict[int, list[int]], emitted: list[int],
               path: list[int]) -> None:
        """One verified plan: its expanded nodes' probabilities (`cand_probs`, node -> ranked),
        their candidates' tokens (`cands`, the kept nodes'), the target's tokens `emitted` along
        the accepted `path` (node ids)."""
        for probs in cand_probs.values():
            if not probs:
                continue
            self.top1[0] += 1
            self.top1[1] += probs[0]
            self.top1[2] += probs[0] * probs[0]
            self._add_mass(probs)
        node = -1
        for d, tok in enumerate(emitted):
            probs, toks = cand_probs.get(node), cands.get(node)
            if not probs or toks is None:
                break
            self.picks.append((tuple(probs[:len(toks)]), toks.index(tok) if tok in toks else -1))
            if d >= len(path):
                break
            node = path[d]

    def merge(self, other: "ConfidenceLog") -> "ConfidenceLog":
        """self += other; returns self."""
        for i in range(3):
            self.top1[i] += other.top1[i]
        self._add_mass(other.rank_mass)
        self.picks.extend(other.picks)
        return self

    def _add_mass(self, by_rank) -> None:
        """rank_mass += by_rank, rank by rank (growing to its length)."""
        if len(self.rank_mass) < len(by_rank):
            self.rank_mass.extend([0.0] * (len(by_rank) - len(self.rank_mass)))
        for r, m in enumerate(by_rank):
            self.rank_mass[r] += m
