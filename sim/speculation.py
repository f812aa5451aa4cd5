"""Per-run speculation planning for one scheme, used by both executors: the policy picks the
depth each step, every decoding sequence gets a draft tree (never drafting past its remaining
output), the drafter's work is priced, and (simulator side) the accepted paths are sampled."""
from __future__ import annotations

import random
from bisect import bisect_right
from itertools import accumulate

import numpy as np

from sim.acceptance import CompiledTree
from sim.cost import Cost, ForwardCost, Work, alike_rows, call_seqs, host_time, pad_of, verify_host
from sim.dyntree import TreeLibrary
from sim.errors import SpecError
from sim.policy import Goodput
from sim.schemes.base import ZERO_COST, ModelDraftScheme, SpecScheme
from sim import trees as T


GOLDEN = 0.6180339887498949  # the Weyl sequence's step (golden ratio - 1): shares follow the weights closely


class Speculator:
    def __init__(self, scheme: SpecScheme, trace, seed: int):
        if scheme.acceptance is None:
            node = scheme.node
            raise SpecError(node.file if node else None, f"{node.path if node else 'speculation'}.acceptance",
                            "missing: the simulator needs an acceptance model (per_depth, mean_accepted, "
                            "rank_depth, confidence, profile or measured)")
        self.scheme = scheme
        self.trace = trace
        self.draft = scheme.drafter(trace)
        self.target = ForwardCost(trace.model, trace.hardware, trace.tp)
        self.random = random.Random(seed).random
        self.pick = np.random.default_rng(np.random.SeedSequence([seed, 7]))
        # requests differ (a mixture): each request keeps one component, assigned in arrival order
        # along a seeded low-discrepancy sequence, so the shares follow the weights closely
        self.groups = scheme.acceptance.groups()
        self.libraries = ([TreeLibrary(a.confidence, scheme.topk, scheme.tree_tokens, seed, vocab=trace.model.vocab)
                           for _, a in self.groups]
                          if scheme.dynamic else None)
        self.library = self.libraries[0] if self.libraries else None
        self.mixed = len(self.groups) > 1
        self._cum = list(accumulate(w for w, _ in self.groups))
        self._phase = random.Random(int(np.random.SeedSequence([seed, 13]).generate_state(1)[0])).random()
        self._group: dict[int, int] = {}  # request id -> its component
        self._assigned = dict(scheme.acceptance.assigned)  # request id -> the component measured on it
        self._drawn = 0  # requests that drew a component
        self._static: dict[tuple[int, int, int], CompiledTree] = {}  # (depth, limit, group)
        self._picks: list[int] = []
        # below 1: each drafting sequence finds a match with this probability, its mixture
        # component's own where the acceptance gives one (prompt lookup's requests differ), and
        # `match` their weighted mean
        self.group_match = [scheme.match_rate() if a.match is None else a.match for _, a in self.groups]
        self.match = sum(w * m for (w, _), m in zip(self.groups, self.group_match))
        self.all_match = min(self.group_match) >= 1
        self.matches = random.Random(int(np.random.SeedSequence([seed, 11]).generate_state(1)[0])).random
        self.policy = scheme.policy if scheme.policy != "goodput" else \
            Goodput(scheme.max_depth, self.expected_accepted, self.predict_step)
        self.depth = 0  # the depth chosen for the current step
        self.fresh = self.first = self.several = 0  # the drafter's catch-up in the current step (see catch_up)
        self.tried = 0  # sequences the current step offered a draft (prompt lookup looks up each)
        self.prices_tries = scheme.prices_tries

    # ---- trees ------------------------------------------------------------------------------
    def nodes(self, depth: int) -> int:
        return self.scheme.nodes_at(depth) if self.library else len(self.scheme.tree(depth))

    def expected_accepted(self, depth: int) -> float:
        """Expected accepted drafts per sequence-step at `depth` (steps without a match: none)."""
        if depth == 0:
            return 0.0
        if self.libraries:
            return sum(w * lib.expected(depth) for (w, _), lib in zip(self.groups, self.libraries))
        tree = self.scheme.tree(depth)
        return sum(w * m * a.rank.compile(tree).expected for (w, a), m in zip(self.groups, self.group_match))

    def group(self, seq) -> int:
        """The mixture component of seq's request (0 without a mixture), fixed at first sight: the
        one measured on that request where the acceptance names it (request_ids), else drawn."""
        g = self._group.get(seq.id)
        if g is None:
            g = self._assigned.get(seq.id)
            if g is None:
                u = (self._phase + self._drawn * GOLDEN) % 1.0
                g = min(bisect_right(self._cum, u), len(self._cum) - 1)
                self._drawn += 1
            self._group[seq.id] = g
        return g

    def _matched(self, plans: list, seqs=None) -> list:
        """Each planned tree kept with probability `match` (one draw per tree, in order), else None:
        with `seqs` (a mixture), each its sequence's component's."""
        draw = self.matches
        if seqs is None:
            m = self.match
            return [p if p is None or draw() < m else None for p in plans]
        ms, group = self.group_match, self.group
        return [p if p is None or draw() < ms[group(s)] else None for p, s in zip(plans, seqs)]

    def tree(self, depth: int, limit: int, group: int = 0) -> CompiledTree:
        """A draft tree at `depth` that never drafts more than `limit` tokens deep (a static shape
        cut; a dynamic tree grown to that depth), with the acceptance of mixture component `group`."""
        if self.library:
            # near a request's end a dynamic tree is grown to the depth left, as the engine's
            # EAGLE-2 grows it (its tree_tokens nodes within that depth), not the deep tree cut:
            # cut, the fitted family's trees at depth 2-4 accept 0.1-0.2 fewer tokens and hold
            # fewer nodes (the allocator's pages; the simulator's EAGLE-2 at concurrency 32 made
            # 1.1% fewer allocator operations than the engine's)
            lib = self.libraries[group].trees(min(depth, max(1, limit)))
            if not self._picks:
                self._picks = self.pick.integers(0, len(lib), size=4096).tolist()
            return lib[self._picks.pop()]
        key = (depth, min(depth, limit), group)
        t = self._static.get(key)
        if t is None:
            t = self.groups[group][1].rank.compile(T.truncate(self.scheme.tree(depth), key[1]))
            self._static[key] = t
        return t

    def plan(self, seqs) -> list[CompiledTree | None]:
        """Draft trees for the decoding sequences of one step (None: no drafts for that one)."""
        if not seqs:
            return []
        ctx = sum(s.computed for s in seqs) / len(seqs)
        d = self.depth = self.policy.choose(len(seqs), ctx)
        if d == 0:
            self.fresh = self.first = self.several = self.tried = 0
            return [None] * len(seqs)
        tree = self.tree
        if self.mixed:
            group = self.group
            plans = [tree(d, s.output - s.generated - 1, group(s)) if s.output - s.generated > 1 else None
                     for s in seqs]
            if not self.all_match:
                plans = self._matched(plans, seqs)
        elif self.library:  # the common case inline: a whole library tree for every sequence not near its end
            lib = self.library.trees(d)
            picks = self._picks
            if len(picks) < len(seqs):
                picks.extend(self.pick.integers(0, len(lib), size=4096).tolist())
            plans = [lib[picks.pop()] if s.output - s.generated > d else
                     (tree(d, s.output - s.generated - 1) if s.output - s.generated > 1 else None) for s in seqs]
        else:
            plans = [tree(d, s.output - s.generated - 1) if s.output - s.generated > 1 else None for s in seqs]
            if self.match < 1:
                plans = self._matched(plans)
        if self.prices_tries:
            self.tried = sum(1 for s in seqs if s.output - s.generated > 1)
        self.fresh, self.first, self.several = catch_up(s for s, p in zip(seqs, plans) if p is not None)
        return plans

    def plan_full(self, seqs, depth: int) -> list[CompiledTree | None]:
        """plan() for sequences that may all draft full trees at a known depth (the simulator's
        steady runs): the same draws in the same order, without the per-sequence checks."""
        self.depth = depth
        n = len(seqs)
        if self.mixed:
            group, tree = self.group, self.tree
            plans = [tree(depth, depth, group(s)) for s in seqs]
            if not self.all_match:
                plans = self._matched(plans, seqs)
        elif self.library:
            lib = self.library.trees(depth)
            picks = self._picks
            if len(picks) < n:
                picks.extend(self.pick.integers(0, len(lib), size=4096).tolist())
            plans = [lib[picks.pop()] for _ in range(n)]
        else:
            plans = [self.tree(depth, depth)] * n
            if self.match < 1:
                plans = self._matched(plans)
        self.tried = n
        self.fresh, self.first, self.several = catch_up(s for s, p in zip(seqs, plans) if p is not None)
        return plans

    # ---- cost -------------------------------------------------------------------------------
    def draft_cost(self, batch) -> Cost:
        contexts = [c for tree, c in zip(batch.trees, batch.context) if tree]
        return self.step_draft(len(contexts), sum(contexts), self.pad(contexts))

    def pad(self, contexts: list) -> int:
        """Context the drafting sequences' passes gather beyond their own on the CPU reference
        (hardware.attn_dense): each up to its call's longest (sim.cost.Work.group_pad), its calls
        split as the reference splits one-row passes over the drafter's network (call_seqs);
        0 elsewhere."""
        if not self.trace.hardware.attn_dense or not contexts:
            return 0
        net = self.scheme.drafter_spec()[0] if isinstance(self.scheme, ModelDraftScheme) else None
        return pad_of(contexts, call_seqs(net, max(contexts), 1))

    def step_draft(self, n: int, ctx: int, pad: int = 0) -> Cost:
        """The drafter's price in the step just planned: n drafting sequences of Σ context ctx, at
        the planned depth, catching up on the fresh tokens `plan` counted (at least one each); a
        scheme that `prices_tries` (prompt lookup) pays for every sequence offered a draft, found
        or not. With `pad` (Σ of the longest's context less each one's) its time is that of
        sequences all as long as the longest, its flops and bytes its own."""
        if self.prices_tries:
            n = self.tried
        if not n:
            return ZERO_COST
        d = self.depth
        args = (d, () if self.library else self.scheme.tree(d), self.fresh, self.first, self.several)
        cost = self.draft(n, ctx, *args)
        if not pad:
            return cost
        padded = self.draft(n, ctx + pad, *args)
        return cost._replace(time=padded.time, compute_time=padded.compute_time, memory_time=padded.memory_time)

    def predict_step(self, batch: int, context: float, depth: int) -> float:
        """Predicted time of a step of `batch` decoding sequences at a mean context, drafting at
        `depth`: the goodput policy's denominator."""
        nodes = self.nodes(depth) if depth else 0
        drafting = max(1, round(batch * self.match)) if depth else 0  # sequences with drafts (prompt lookup: a match)
        tokens = batch + drafting * nodes
        ctx = int(context)
        several = drafting if nodes else 0  # the sequences verifying drafted nodes
        work = Work(tokens=tokens, seqs=batch, pairs=tokens * (ctx + 1) + drafting * nodes * max(depth, 1),
                    kv_read=batch * (ctx + 1), lm_tokens=tokens, mixed=int(0 < drafting < batch),
                    **alike_rows(several * (1 + nodes), several * (ctx + 1 + nodes), several))
        hw = self.trace.hardware
        t = self.target(work).time + host_time(hw, batch)
        if not depth:
            return t + verify_host(hw)
        # verification: a call for the sequences decoding beside, one for a static shape, one a
        # sequence for dynamic trees
        shape = () if self.library else self.scheme.tree(depth)
        calls = drafting if self.library else 1
        trees = calls if self.library or not T.is_chain(shape) else 0
        t += verify_host(hw, calls + (drafting < batch), trees, trees * nodes, drafting, drafting * nodes)
        # in steady decoding a drafter catches up on the last step's accepted drafts + 1: as many
        # sequences with several entries as the accepted drafts allow
        fresh = round(drafting * (1 + self.expected_accepted(depth) / self.match))
        priced = batch if self.prices_tries else drafting
        return t + self.draft(priced, priced * ctx, depth, shape, fresh, 0, min(drafting, fresh - drafting)).time

    # ---- acceptance (simulator) -------------------------------------------------------------
    def accept(self, batch) -> list[list[int]]:
        rnd = self.random
        return [plan.sample(rnd) if plan is not None else [] for plan in batch.plans]


def catch_up(seqs) -> tuple[int, int, int]:
    """(Σ over drafting sequences of the committed tokens their drafter has not processed, at
    least 1 each since the last committed entry always reruns; how many draft for the first time
    since admission or preemption; how many have more than one), marking the tokens processed.
    As the engine's drafters: the whole context at a first draft, then the last step's accepted
    drafts + 1 (engine/drafting: each drafter's `done`)."""
    fresh = first = several = 0
    for s in seqs:
        c, done = s.computed, s.drafted
        if not done:
            first += 1
        if c - done > 1:
            fresh += c - done
            several += 1
        else:
            fresh += 1
        s.drafted = c
    return fresh, first, several
