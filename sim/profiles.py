"""Acceptance specs in a trace (DESIGN.md §4): inline forms, named profiles, engine measurements.

    {per_depth: [a1, ..., aK]}        chain; depth j accepted with probability a_j given j-1 was
    {mean_accepted: tau}              tau tokens per step (bonus included) -> a constant rate
    {rank_depth: [[p11, p12], ...]}   trees; row d: P(the r-th ranked candidate at depth d is the target's)
    {confidence: {top1_mean, ...}}    EAGLE-2 dynamic trees (sim/dyntree.py): top1_mean,
                                      top1_concentration, depth_decay, tail (or measured
                                      shares: [s1, s2, ...]), calibration, sharpness
    {mixture: [{weight: w, <form>: ...}, ...]}
                                      requests differ: each request draws one component (in
                                      proportion to the weights) and keeps it; every component
                                      one of the four forms above, all chains/trees or all
                                      confidence; a component's `request_ids: [id, ...]` gives
                                      it those requests instead of a draw (the requests an
                                      engine run measured it on); a component's `match` (0..1)
                                      the probability that one of its sequences' steps drafts
                                      (prompt lookup: the engine's requests find matches at
                                      0.42-0.94 of their steps), else the scheme's
    {profile: NAME}                   traces/acceptance/NAME.yaml, which cites its source
    {measured: path.json}             written by the engine's acceptance measurement

Depths beyond a per_depth or rank_depth table reuse its last entry. A mixture's pooled model
(its components' weighted mean: rank_depth cell by cell, confidence field by field) shapes static
trees and describes the scheme; sampling and expectations use the components.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path

from sim.acceptance import RankDepth, chain_rates, solve_rate
from sim.dyntree import Confidence
from sim.errors import SpecError
from sim.specio import Node, load_yaml

PROFILE_DIRS = (Path(__file__).resolve().parents[1] / "traces" / "acceptance",)
FORMS = ("per_depth", "mean_accepted", "rank_depth", "confidence")
MAX_COMPONENTS = 64


@dataclass(frozen=True)
class Acceptance:
    """The parsed model: `rank` for chains and static trees, `confidence` for dynamic trees."""

    rank: RankDepth | None = None
    confidence: Confidence | None = None
    source: str = "inline"
    # a mixture's components: (weight, Acceptance), weights summing to 1; empty: one population
    components: tuple = ()
    # ((request id, component index), ...): requests that keep the component named for them
    # (request_ids) instead of drawing one; the rest draw
    assigned: tuple = ()
    # a mixture component's own match rate (prompt lookup: P(a step of its sequences drafts));
    # None: the scheme's `match`
    match: float | None = None

    def groups(self) -> tuple:
        """((weight, Acceptance), ...): the components, or the model itself with weight 1."""
        return self.components or ((1.0, self),)

    def describe(self) -> dict:
        if self.components:
            ids: dict[int, list] = {}
            for rid, g in self.assigned:
                ids.setdefault(g, []).append(rid)
            return {"mixture": [{"weight": round(w, 6), **{k: v for k, v in a.describe().items() if k != "source"},
                                 **({"match": a.match} if a.match is not None else {}),
                                 **({"request_ids": ids[g]} if g in ids else {})}
                                for g, (w, a) in enumerate(self.components)], "source": self.source}
        if self.confidence is not None:
            c = self.confidence
            extra = {**({"sharpness": c.sharpness} if c.sharpness != 1.0 else {}),
                     **({"shares": list(c.shares)} if c.shares else {})}
            return {"confidence": {"top1_mean": c.top1_mean, "top1_concentration": c.top1_concentration,
                                   "depth_decay": c.depth_decay, "tail": c.tail, "calibration": c.calibration, **extra},
                    "source": self.source}
        return {"rank_depth": [list(r) for r in self.rank.probs], "source": self.source}


def acceptance_from_node(node: Node, base_dir: Path, depth: int) -> Acceptance:
    keys = FORMS + ("mixture", "profile", "measured")
    f = node.mapping(keys)
    if len(f) != 1:
        raise node.error(f"expected exactly one of: {', '.join(keys)}")
    (key, sub), = f.items()
    if key == "profile":
        return _profile(sub, base_dir, depth)
    if key == "measured":
        return _measured(sub, base_dir, depth)
    if key == "mixture":
        return _mixture(sub, depth, "inline")
    return _form(key, sub, depth, "inline")


def _mixture(sub: Node, depth: int, source: str) -> Acceptance:
    """Components [{weight, <one form>}, ...] (weights relative, normalised here), pooled as the
    module docstring says."""
    comps, assigned = [], {}
    for g, item in enumerate(sub.seq(min_len=1, max_len=MAX_COMPONENTS)):
        f = item.mapping(("weight", "request_ids", "match") + FORMS, required=("weight",))
        forms = [k for k in FORMS if k in f]
        if len(forms) != 1:
            raise item.error(f"expected a weight and exactly one of: {', '.join(FORMS)}")
        form = _form(forms[0], f[forms[0]], depth, source)
        if "match" in f:
            form = replace(form, match=f["match"].number(lo=0.0, hi=1.0))
        comps.append((f["weight"].number(lo=0.0, hi=1e9, lo_open=True), form))
        for n in f["request_ids"].seq(min_len=1, max_len=10**7) if "request_ids" in f else ():
            rid = n.integer(lo=0, hi=2**63 - 1)
            if rid in assigned:
                raise n.error(f"request {rid} is given to component {assigned[rid]} already")
            assigned[rid] = g
    kinds = {a.confidence is None for _, a in comps}
    if len(kinds) > 1:
        raise sub.error("expected every component to be a chain/tree form (per_depth, mean_accepted, rank_depth) "
                        "or every one a confidence model, not both")
    assigned = tuple(sorted(assigned.items()))
    total = sum(w for w, _ in comps)
    comps = tuple((w / total, a) for w, a in comps)
    if comps[0][1].confidence is not None:
        names = [f.name for f in fields(Confidence) if f.name != "shares"]
        pooled = Confidence(**{n: sum(w * getattr(a.confidence, n) for w, a in comps) for n in names},
                            shares=pooled_shares(comps))
        return Acceptance(confidence=pooled, source=source, components=comps, assigned=assigned)
    rows = max(len(a.rank.probs) for _, a in comps)
    ranks = [max(len(a.rank.p_row(d)) for _, a in comps) for d in range(1, rows + 1)]
    probs = tuple(tuple(sum(w * a.rank.p(d, r) for w, a in comps) for r in range(ranks[d - 1]))
                  for d in range(1, rows + 1))
    return Acceptance(rank=RankDepth(probs), source=source, components=comps, assigned=assigned)


def pooled_shares(comps) -> tuple[float, ...]:
    """The components' `shares` weighted rank by rank (as far as the shortest goes; () if one
    has none: the geometric tail then shapes the pooled model)."""
    rows = [(w, a.confidence.shares) for w, a in comps]
    if not all(s for _, s in rows):
        return ()
    n = min(len(s) for _, s in rows)
    return tuple(sum(w * s[r] for w, s in rows) for r in range(n))


def _prob(n: Node) -> float:
    return n.number(lo=0.0, hi=1.0)


def _form(key: str, sub: Node, depth: int, source: str) -> Acceptance:
    if key == "per_depth":
        return Acceptance(rank=chain_rates([_prob(n) for n in sub.seq(min_len=1, max_len=64)]), source=source)
    if key == "mean_accepted":
        tau = sub.number(lo=1.0, hi=1000.0)
        if tau > depth + 1:
            raise sub.error(f"expected at most depth + 1 = {depth + 1} tokens per step, got {tau:g}")
        return Acceptance(rank=chain_rates([solve_rate(tau, depth)]), source=source)
    if key == "rank_depth":
        rows = []
        for row in sub.seq(min_len=1, max_len=64):
            probs = tuple(_prob(n) for n in row.seq(min_len=1, max_len=1024))
            if sum(probs) > 1.0 + 1e-9:
                raise row.error(f"expected ranks at one depth to sum to at most 1, got {sum(probs):.4g}")
            rows.append(probs)
        return Acceptance(rank=RankDepth(tuple(rows)), source=source)
    f = sub.mapping(("top1_mean", "top1_concentration", "depth_decay", "tail", "calibration", "sharpness", "shares"),
                    required=("top1_mean",))
    d = Confidence()
    shares = tuple(_prob(n) for n in f["shares"].seq(min_len=1, max_len=1024)) if "shares" in f else ()
    if sum(shares) > 1.0 + 1e-9:
        raise f["shares"].error(f"expected shares of the mass beyond the top-1 summing to at most 1, got {sum(shares):.4g}")
    return Acceptance(confidence=Confidence(
        top1_mean=f["top1_mean"].number(lo=0.0, hi=1.0, lo_open=True),
        top1_concentration=f["top1_concentration"].number(lo=0.0, hi=1e4, lo_open=True) if "top1_concentration" in f else d.top1_concentration,
        depth_decay=f["depth_decay"].number(lo=0.0, hi=1.0, lo_open=True) if "depth_decay" in f else d.depth_decay,
        tail=f["tail"].number(lo=0.0, hi=1.0) if "tail" in f else d.tail,
        calibration=f["calibration"].number(lo=0.0, hi=1.0) if "calibration" in f else d.calibration,
        sharpness=f["sharpness"].number(lo=0.0, hi=100.0, lo_open=True) if "sharpness" in f else d.sharpness,
        shares=shares,
    ), source=source)


def find_profile(name: str, base_dir: Path) -> Path | None:
    for d in (base_dir / "acceptance", base_dir, *PROFILE_DIRS):
        p = d / f"{name}.yaml"
        if p.is_file():
            return p
    return None


def profile_names() -> list[str]:
    return sorted(p.stem for d in PROFILE_DIRS if d.is_dir() for p in d.glob("*.yaml"))


def _profile(sub: Node, base_dir: Path, depth: int) -> Acceptance:
    name = sub.string()
    path = find_profile(name, base_dir)
    if path is None:
        raise sub.error(f"unknown acceptance profile '{name}'; expected one of: {', '.join(profile_names())}")
    doc = Node(load_yaml(path, "acceptance profile"), str(path), "")
    f = doc.mapping(("source", "scheme", "model", "dataset", "temperature", "published", "notes", "acceptance"),
                    required=("source", "acceptance"))
    inner = f["acceptance"].mapping(FORMS)
    if len(inner) != 1:
        raise f["acceptance"].error(f"expected exactly one of: {', '.join(FORMS)}")
    (key, node), = inner.items()
    return _form(key, node, depth, f"profile {name}: {f['source'].string()}")


def _measured(sub: Node, base_dir: Path, depth: int) -> Acceptance:
    rel = sub.string()
    path = Path(rel) if Path(rel).is_absolute() else base_dir / rel
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise sub.error(f"measured acceptance file not found: {path}") from None
    except (OSError, ValueError) as exc:
        raise SpecError(str(path), "", f"cannot read measured acceptance: {exc}") from None
    doc = Node(data, str(path), "")
    f = doc.mapping(FORMS + ("mixture", "source", "scheme", "domain", "temperature", "samples", "requests",
                             "per_rank_counts", "histogram", "dispersion"))
    forms = [k for k in FORMS + ("mixture",) if k in f]
    if len(forms) != 1:
        raise doc.error(f"expected exactly one of: {', '.join(FORMS + ('mixture',))}")
    if forms[0] == "mixture":
        return _mixture(f["mixture"], depth, f"measured {path.name}")
    return _form(forms[0], f[forms[0]], depth, f"measured {path.name}")
