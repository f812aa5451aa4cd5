"""The interface every scheme implements, and the parts speculative schemes share.

A scheme is a frozen description parsed from one `speculation:` entry. For each decoding
sequence and step it offers a draft tree (parent indices) of a depth its policy picks; the
simulator prices the drafter's passes (`draft_cost`) and samples the accepted path from the
acceptance model; the engine fills the same tree with real drafts and verifies it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar

from sim import trees as T
from sim.cost import Cost, model_shapes, whole_shapes
from sim.drafters import PassPricer
from sim.models import ModelSpec
from sim.policy import parse_policy
from sim.profiles import Acceptance, acceptance_from_node
from sim.specio import Node

ZERO_COST = Cost(time=0.0, flops=0.0, bytes=0.0, compute_time=0.0, memory_time=0.0)
MAX_TREE = 1024  # nodes verified per sequence per step


@dataclass(frozen=True)
class Scheme:
    name: ClassVar[str]
    label: str  # unique name in a trace's report (defaults to the scheme name)
    paging: str | None  # overrides serving.paging for this entry (naive | indexshare), e.g. to compare them

    @classmethod
    def from_node(cls, node: Node, model: ModelSpec, base_dir: Path) -> "Scheme":
        raise NotImplementedError

    def params(self) -> dict:
        """The scheme's parameters as written in the report."""
        return {"paging": self.paging} if self.paging else {}

    @property
    def depth(self) -> int:
        return 0

    def max_nodes(self) -> int:
        """The largest draft tree it may propose in one step (0 for no speculation)."""
        return 0

    def matrix_shapes(self, model: ModelSpec, tp: int = 1) -> set[tuple[int, int]]:
        """(k, n) of the weight matrices its drafter multiplies by, serving `model` over tp
        devices (what a calibration times for this trace: validation/calibrate.py); none here."""
        return set()


@dataclass(frozen=True)
class SpecScheme(Scheme):
    """A speculative scheme: a maximum depth, an acceptance model and a depth policy."""

    max_depth: int
    acceptance: Acceptance | None
    policy: object  # sim.policy.Fixed | BatchTable | the string "goodput"
    node: Node | None  # where it was written, for errors raised later (e.g. missing acceptance)

    dynamic: ClassVar[bool] = False  # trees drawn per step (EAGLE-2) rather than one static shape
    # its drafter's price counts every sequence offered a draft, whether it drafted or not
    # (prompt lookup looks each one up), not only the drafting ones
    prices_tries: ClassVar[bool] = False

    @property
    def depth(self) -> int:
        return self.max_depth

    def tree(self, depth: int) -> tuple[int, ...]:
        """The static draft tree at a depth (a chain unless the scheme says otherwise)."""
        return T.chain(depth)

    def max_nodes(self) -> int:
        return len(self.tree(self.max_depth))

    def match_rate(self) -> float:
        """The probability that a sequence which may draft does (prompt lookup: a match found)."""
        return 1.0

    def params(self) -> dict:
        out = {**super().params(), "depth": self.max_depth,
               "policy": self.policy if isinstance(self.policy, str) else self.policy.describe()}
        if self.acceptance is not None:
            out["acceptance"] = self.acceptance.describe()
        return out

    def drafter(self, trace) -> Callable[[int, int, int, tuple[int, ...], int, int, int], Cost]:
        """Prices the drafter's work in one step, bound to the trace's model and device:
        (n sequences, Σ their context, depth, the draft tree's parents, fresh, first, several) -> Cost.
        `fresh` is Σ over the n sequences of the committed tokens their drafter has not processed
        yet (at least 1 each), `first` how many of them draft for the first time since admission
        or preemption, `several` how many have more than one (sim/speculation.py catch_up). A model drafter catches up on them, as the
        engine's do: the whole context at a first draft, then the last step's accepted drafts + 1."""
        raise NotImplementedError


@dataclass(frozen=True)
class ModelDraftScheme(SpecScheme):
    """A scheme whose drafter is a network run in sequential passes (draft model, MTP, EAGLE)."""

    tree_levels = False  # its later passes are tree levels: rows beyond one per sequence are further nodes
    catch_up = False  # every pass catches up as a first pass does (sim.drafters.drafter_host_time)
    shared_lm = False  # its LM head is the target's (sim.drafters.PassPricer.scale)
    layers_again = True  # every pass runs the same layers (an MTP chain runs a module each)

    def passes(self, n: int, depth: int, tree: tuple[int, ...], fresh: int, first: int, several: int) -> list:
        """The drafter's passes in one step: query rows, or (query rows, LM-head rows), or (query
        rows, LM-head rows, sequences with several rows) per pass (sim.drafters.pass_rows),
        exactly as the engine's drafter runs them (tests/test_engine_drafters.py compares)."""
        raise NotImplementedError

    def drafter_spec(self) -> tuple[ModelSpec, bool]:
        """(the network a pass runs, whether it first projects [feature; embedding] down)."""
        raise NotImplementedError

    def matrix_shapes(self, model, tp=1):
        spec, fuse = self.drafter_spec()
        h = spec.hidden  # and the fused input's 2h -> h projection (sim.drafters.linear_cost)
        return model_shapes(spec, tp) | (whole_shapes([(2 * h, h / tp)]) if fuse else set())

    def pass_pricer(self, trace) -> PassPricer:
        """What this drafter's passes cost on the trace's hardware (sim.drafters.PassPricer)."""
        spec, fuse = self.drafter_spec()
        return PassPricer(spec, trace.hardware.drafter(), trace.tp, fuse_input=fuse, tree_levels=self.tree_levels,
                          catch_up=self.catch_up, shared_lm=self.shared_lm, layers_again=self.layers_again)

    def drafter(self, trace):
        price = self.pass_pricer(trace)
        passes = self.passes
        return lambda n, ctx, depth, tree, fresh, first, several: price(n, ctx, passes(n, depth, tree, fresh, first, several))


COMMON = ("scheme", "label", "paging", "acceptance", "policy")


def parse_label_paging(cls, f: dict[str, Node]) -> dict:
    return dict(label=f["label"].string() if "label" in f else cls.name,
                paging=f["paging"].string(("naive", "indexshare")) if "paging" in f else None)


def parse_common(cls, node: Node, extra: tuple[str, ...], depth_key: str, base_dir: Path,
                 max_depth: int = 32) -> tuple[dict[str, Node], dict]:
    """Reads label, depth, acceptance and policy; returns the fields and the common kwargs."""
    f = node.mapping(COMMON + (depth_key,) + extra, required=(depth_key,))
    depth = f[depth_key].integer(lo=1, hi=max_depth)
    acc = acceptance_from_node(f["acceptance"], base_dir, depth) if "acceptance" in f else None
    policy = parse_policy(f["policy"], depth) if "policy" in f else parse_policy(Node("fixed", node.file, ""), depth)
    common = dict(**parse_label_paging(cls, f), max_depth=depth, acceptance=acc, policy=policy, node=node)
    return f, common


def need_rank_acceptance(scheme: SpecScheme, what: str) -> None:
    if scheme.acceptance is not None and scheme.acceptance.rank is None:
        raise scheme.node.child("acceptance").error(f"{what} needs a per_depth, mean_accepted or rank_depth acceptance")

