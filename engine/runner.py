"""The engine's executor (DESIGN.md §2, §10): sim's Scheduler and KV allocator driven by real
forward passes.

    batch = sched.schedule(now)          # the planner (e.g. prompt lookup) drafts inside it
    logits = model(batch)                # one flat forward over every query token of the step
    emitted, paths = verify(batch)       # greedy at temperature 0, rejection sampling above
    sched.commit(batch, paths, now + dt) # which calls kv.commit / kv.rollback; naive copies follow

Clock: a virtual clock that advances by each step's measured duration (time.perf_counter around
schedule + draft + forward + verify, then the KV copies the commit asked for; on CUDA with
torch.cuda.synchronize() before each reading). Idle time does not exist on it: with open-loop
arrivals the engine admits every request whose arrival time the clock has passed before each
step, and when nothing can run it jumps the clock to the next arrival. So latencies are what a
replica running back to back would see, wherever the host spends its time between steps (the
report's writing, the progress bar, the measurements kept for validation: `_tally`). Closed-loop
runs add a new request each time one finishes, stamped with the clock at that moment, as the
simulator does.

Per-step rows carry the measured duration; flops, bytes and bound come from sim's cost model
(`sim.cost.ForwardCost`) for the model actually run, priced on the trace's `hardware:` (the
engine runs on whatever it runs on; the columns say what the simulator would charge for the same
batch, which is what validation compares).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Callable

import torch

from engine.confidence_log import ConfidenceLog
from engine.drafting import SCHEMES, DraftContext, make_drafter
from engine.drafting.heads import Drafters
from engine.kv_cache import KVCache, SlotTables, pages_bound
from engine.model import Model, SeqQuery, StepBatch
from engine.prompts import prompt_tokens
from engine.sampling import warp
from engine.verify import (verify_chain, verify_chain_greedy, verify_tree, verify_tree_greedy,
                           verify_tree_typical_lossy)
from sim import trees as T
from sim.cost import ForwardCost, bound_of
from sim.errors import SpecError
from sim.scheduler import Scheduler, SeqState
from sim.simulator import RunResult
from sim.spec import TraceSpec
from sim.steplog import StepLog
from sim.workload import Request, Workload

def check_schemes(trace: TraceSpec) -> None:
    """A scheme the engine does not know, or a variant it does not run, is a SpecError at its entry."""
    for i, scheme in enumerate(trace.speculation):
        if scheme.name not in SCHEMES:
            raise SpecError(str(trace.path), f"speculation[{i}].scheme",
                            f"the engine does not run scheme '{scheme.name}' (it runs: {', '.join(SCHEMES)})")
        if scheme.name == "medusa" and not scheme.shared_lm_head:
            raise SpecError(str(trace.path), f"speculation[{i}].lm_head",
                            "the engine's Medusa heads read the target's LM head: write lm_head: shared "
                            "(own, the default, prices one LM head per head)")


@dataclass
class EngineResult:
    result: RunResult
    tokens: dict[int, list[int]]  # request id -> generated token ids
    ranks: dict[tuple[int, int], int]  # (depth, rank of the target's token among the drafter's candidates) -> count
    # request id -> ((drafted depth, accepted) counts, (depth, rank) counts), per request
    by_request: dict[int, tuple[dict, dict]] = field(default_factory=dict)
    # request id -> (its sequence-steps that could draft, of which drafted; TimedPlanner): prompt
    # lookup's match rate per request
    tries: dict[int, tuple[int, int]] = field(default_factory=dict)
    # request id -> (drafted depth, accepted) counts of its steps whose drafts the sequence's end
    # did not cut short (a model drafter's DraftPlan.cut): EAGLE-2's fit reads these
    uncut: dict[int, dict] = field(default_factory=dict)
    # with a `reference` call after every step: the host's speed during the run (validation.compare),
    # the inverse of each call's returned seconds, weighted by its step's duration
    reference_speed: float | None = None
    # request id -> its EAGLE-2 drafter's confidences and the target's answers (temperature 0)
    confidence: dict[int, ConfidenceLog] = field(default_factory=dict)

    @property
    def draftable(self) -> int:
        """Sequence-steps that could draft (a depth above 0, more than one token left)."""
        return sum(n for n, _ in self.tries.values())

    @property
    def drafted(self) -> int:
        """Of those, the ones that drafted (prompt lookup: where it found a match)."""
        return sum(d for _, d in self.tries.values())


class EngineRun:
    """One (scheme, workload) run on one model: continuous batching until every request is done."""

    def __init__(self, trace: TraceSpec, scheme, workload: Workload, model: Model, seed: int | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 prompts: Callable[[int, int], list[int]] | None = None, drafters: Drafters | None = None,
                 reference: Callable[[], float] | None = None, clock: Callable[[], float] = time.perf_counter):
        """prompts(request id, length) -> token ids; default: the seeded random stream.
        drafters: the model's drafter weights (engine/drafting/heads.py) for model-based schemes.
        reference: a call after every step, outside the engine's clock, that returns the seconds of
        what it timed (the host's speed: its inverse, weighted by the step's duration).
        clock: the seconds the steps and the planner's calls are timed by (validation.traffic: a
        calibration probe's, which leaves out the memory traffic it adds around each pass)."""
        self.reference, self.clock = reference, clock
        self.trace, self.scheme, self.workload, self.model = trace, scheme, workload, model
        self.prompts = prompts or (lambda rid, n: prompt_tokens(trace.seed, rid, n, model.spec.vocab))
        self.progress = progress
        self.device = model.device
        self.temperature = trace.workload.temperature
        serving = replace(trace.serving, paging=scheme.paging) if scheme.paging else trace.serving
        self.tokens: dict[int, list[int]] = {}  # prompt + generated, per live or finished request
        cache_bytes = model.spec.layers * 2 * model.spec.kv_heads * model.spec.head_dim * model.embed.element_size()
        self.gen = torch.Generator(self.device).manual_seed(trace.seed if seed is None else seed)
        self.tables = SlotTables()
        dctx = DraftContext(trace=trace, tokens=self.tokens, index=lambda sid: self.tables.row(sid, self.kv.index(sid)),
                            temperature=self.temperature, generator=self.gen, rows=serving.max_num_seqs,
                            page_size=serving.page_size, device=self.device)
        self.planner = make_drafter(scheme, dctx, drafters)
        self.features = getattr(self.planner, "wants_features", False)
        self.typical = bool(getattr(scheme, "typical", False))
        self.ranks: dict[tuple[int, int], int] = {}
        self.sync = torch.cuda.synchronize if self.device.type == "cuda" else (lambda: None)
        self.timed = TimedPlanner(self.planner, self.sync, clock) if self.planner is not None else None
        self.sched = Scheduler(serving, trace.num_pages, cache_bytes, planner=self.timed,
                               max_nodes=scheme.max_nodes())
        self.sched.by_request = {}  # acceptance per request (validation.compare: requests differ)
        self.ranks_by_request: dict[int, dict[tuple[int, int], int]] = {}
        self.uncut: dict[int, dict[tuple[int, int], int]] = {}  # EngineResult.uncut
        self.confidence: dict[int, ConfidenceLog] = {}  # EngineResult.confidence
        self.kv = self.sched.kv
        reqs = workload.requests
        live = min(serving.max_num_seqs, workload.closed_concurrency or len(reqs))
        pages = pages_bound((r.prompt_tokens + r.output_tokens + scheme.max_nodes() for r in reqs),
                            serving.page_size, live, trace.num_pages)
        self.cache = KVCache(model.spec, pages, serving.page_size, self.device, model.dtype)
        self.cost = ForwardCost(model.spec, trace.hardware, 1)
        self.log = StepLog()
        self.seqs: list[SeqState] = []
        self.pending: deque[Request] = deque(reqs)
        self.now = 0.0
        self.done = 0
        self._counted = (0, 0)  # allocator (allocs, frees) already logged

    # ---- intake ----------------------------------------------------------------------------
    def _admit(self, req: Request, at: float) -> None:
        self.tokens[req.id] = list(self.prompts(req.id, req.prompt_tokens))
        self.seqs.append(self.sched.add(req, at))

    def _arrivals(self) -> None:
        while self.pending and self.pending[0].arrival <= self.now:
            req = self.pending.popleft()
            self._admit(req, req.arrival)

    # ---- the loop ---------------------------------------------------------------------------
    def run(self) -> EngineResult:
        total = len(self.workload.requests)
        closed = self.workload.closed_concurrency
        if closed:
            for _ in range(min(closed, len(self.pending))):
                self._admit(self.pending.popleft(), 0.0)
        self._warm_up()
        sync, clock = self.sync, self.clock
        reference, weighted, busy = self.reference, 0.0, 0.0  # sum of dt / seconds, of dt (not idle time)
        while self.done < total:
            if not closed:
                self._arrivals()
            t0 = clock()
            if self.timed is not None:
                self.timed.last = 0.0
            batch = self.sched.schedule(self.now)
            if batch is None:
                if not closed and self.pending:
                    self.now = max(self.now, self.pending[0].arrival)
                    continue
                raise RuntimeError("the scheduler has nothing to run but requests are unfinished")
            ops = self._pool_ops()  # as the simulator counts them: since the last step was scheduled
            for seq in batch.preempted:
                self._drop(seq.id)
            emitted, paths = self._forward_verify(batch)
            sync()
            dt = clock() - t0
            self._tally(batch, emitted, paths)
            finished = self.sched.commit(batch, paths, self.now + dt)
            copies = batch.copies
            if copies:  # naive trees: accepted nodes move to consecutive positions, before anything reuses pages
                t1 = clock()
                self.cache.copy(copies)
                sync()
                dt += clock() - t1
            self._record(batch, emitted, paths, dt, ops)
            for seq in finished:
                self._drop(seq.id)
            self.now += dt
            self.done += len(finished)
            if closed and self.pending:
                for _ in range(min(len(finished), len(self.pending))):
                    self._admit(self.pending.popleft(), self.now)
            if finished and self.progress:
                self.progress(self.done, total)
            if reference is not None:  # a run's speed is its work over its time: the steps' speeds by their durations
                weighted += dt / reference()
                busy += dt
        for s in self.seqs:
            got = len(self.tokens[s.id]) - s.prompt
            assert got == s.output, f"request {s.id}: {got} tokens generated, {s.output} requested"
        result = RunResult(seqs=sorted(self.seqs, key=lambda s: s.id), steps=self.log, allocator=self.kv.stats,
                           preemptions=self.sched.preemptions, duration=self.now,
                           decode_seq_steps=self.sched.decode_steps, decode_tokens=self.sched.decode_tokens,
                           acceptance=dict(self.sched.acceptance))
        gen = {s.id: self.tokens[s.id][s.prompt:] for s in result.seqs}
        t = self.timed
        by_request = {s.id: (self.sched.by_request.get(s.id, {}), self.ranks_by_request.get(s.id, {}))
                      for s in result.seqs}
        return EngineResult(result, gen, dict(sorted(self.ranks.items())), by_request,
                            dict(sorted(t.tries.items())) if t else {}, dict(sorted(self.uncut.items())),
                            weighted / busy if busy > 0 else None, dict(sorted(self.confidence.items())))

    def _drop(self, seq_id: int) -> None:
        self.tables.drop(seq_id)
        if self.planner is not None and hasattr(self.planner, "drop"):
            self.planner.drop(seq_id)

    def _warm_up(self) -> None:
        """One untimed 1-token step into slot 0 (first-call set-up costs stay off the clock). The
        slot is free; whatever later owns it writes its own KV there before reading it."""
        step = StepBatch.pack([SeqQuery(tokens=[0], ctx=0, index=[0])], self.device)
        self.model.forward(step, self.cache)

    # ---- one step ---------------------------------------------------------------------------
    def _forward_verify(self, batch) -> tuple[list[list[int]], list[list[int]]]:
        """Run the batch; returns per sequence the emitted tokens (accepted drafts + one sampled)
        and the accepted node path (both empty for a sequence that does not sample this step)."""
        kv = self.kv
        queries = []
        top = 0
        for i, seq in enumerate(batch.seqs):
            ctx, q, tree = batch.context[i], batch.query[i], batch.trees[i]
            plan = batch.plans[i] if tree else None
            queries.append(SeqQuery(tokens=self.tokens[seq.id][ctx:ctx + q], ctx=ctx,
                                    index=self.tables.row(seq.id, kv.index(seq.id)),
                                    nodes=plan.tokens if tree else (), parents=tree,
                                    spec_slots=kv.spec_slots(seq.id) if tree else (), logits=batch.samples[i]))
            if batch.slots[i]:
                top = max(top, max(batch.slots[i]))
        self.cache.ensure(top)
        step = StepBatch.pack(queries, self.device)
        hidden, logits = self.model.forward(step, self.cache)  # (N, H), (R, V)
        n = batch.size
        emitted: list[list[int]] = [[] for _ in range(n)]
        paths: list[list[int]] = [[] for _ in range(n)]
        groups: dict[tuple, list[int]] = {}
        for i in range(n):
            if batch.samples[i]:
                groups.setdefault(tuple(batch.trees[i]), []).append(i)
        for parents, idx in sorted(groups.items(), key=lambda g: (len(g[0]), g[0])):
            t = len(parents)
            rows = group_rows(logits, [step.logit_start[i] for i in idx], t + 1)  # (G, t+1, V)
            drafts = torch.tensor([list(batch.plans[i].tokens) if t else [] for i in idx], dtype=torch.int64,
                                  device=self.device).view(len(idx), t)  # (G, t)
            q = [getattr(batch.plans[i], "probs", None) if t else None for i in idx]
            q = torch.stack(q) if t and all(x is not None for x in q) else None  # (G, t, V)
            toks, num, path = self._verify(rows, drafts, parents, q)
            toks, num = toks.tolist(), num.tolist()
            path = path.tolist() if path is not None else None
            for b, i in enumerate(idx):
                k = num[b]
                emitted[i] = toks[b][:k]
                paths[i] = list(range(k - 1)) if path is None else path[b][:k - 1]
        if self.features:
            self._observe(batch, step, hidden, paths)
        return emitted, paths

    def _tally(self, batch, emitted: list[list[int]], paths: list[list[int]]) -> None:
        """The measurements a step leaves for validation, off the step's clock (the simulator
        prices no such bookkeeping): ranks, EAGLE-2's confidences (temperature 0), the counts of
        steps not cut short."""
        for i, plan in enumerate(batch.plans):
            cands = getattr(plan, "cands", None)
            if cands and self.temperature == 0:
                rid = batch.seqs[i].id
                self._count_ranks(cands, emitted[i], paths[i], self.ranks_by_request.setdefault(rid, {}))
                if plan.cand_probs:
                    self.confidence.setdefault(rid, ConfidenceLog()).record(plan.cand_probs, cands, emitted[i], paths[i])
            if batch.trees[i] and not getattr(plan, "cut", True):
                mine = self.uncut.setdefault(batch.seqs[i].id, {})
                key = (plan.depth, len(paths[i]))
                mine[key] = mine.get(key, 0) + 1

    def _observe(self, batch, step: StepBatch, hidden: torch.Tensor, paths: list[list[int]]) -> None:
        """Hand the drafter the target's features of every position this step committed: the
        drafter's work, timed as the step's drafting (TimedPlanner.timing)."""
        def hand_off() -> None:
            for i, seq in enumerate(batch.seqs):
                r0, q = step.row_start[i], batch.query[i]
                rows = list(range(r0, r0 + q)) + [r0 + q + j for j in paths[i]]
                self.planner.observe(seq.id, batch.context[i], hidden[torch.as_tensor(rows, device=self.device)])
        self.timed.timing(hand_off)

    def _count_ranks(self, cands: dict, emitted: list[int], path: list[int], mine: dict) -> None:
        """At temperature 0 the emitted tokens are the target's greedy ones along the accepted
        path: count the rank each had among the drafter's candidates there (len(candidates):
        not among them), in the run's counts and the request's (`mine`)."""
        node = -1
        for d, tok in enumerate(emitted, start=1):
            cl = cands.get(node)
            if cl is None:
                break
            key = (d, cl.index(tok) if tok in cl else len(cl))
            self.ranks[key] = self.ranks.get(key, 0) + 1
            mine[key] = mine.get(key, 0) + 1
            if d - 1 >= len(path):
                break
            node = path[d - 1]

    def _verify(self, rows: torch.Tensor, drafts: torch.Tensor, parents: tuple, q: torch.Tensor | None = None):
        """(tokens, num_tokens, path or None for chains) for one group of same-shaped drafts;
        q (G, t, V): the drafts' distributions when they were sampled (chains), else point masses."""
        chain = T.is_chain(parents)
        if self.temperature == 0:
            if chain:
                return (*verify_chain_greedy(rows, drafts), None)
            return verify_tree_greedy(rows, drafts, list(parents))
        probs = warp(rows, self.temperature)
        if self.typical and parents:
            return verify_tree_typical_lossy(probs, drafts, list(parents), generator=self.gen)
        if chain:
            return (*verify_chain(probs, q, drafts, generator=self.gen), None)
        return verify_tree(probs, None, drafts, list(parents), generator=self.gen)

    def _pool_ops(self) -> tuple[int, int]:
        st = self.kv.stats
        ops = (st.page_allocs - self._counted[0], st.page_frees - self._counted[1])
        self._counted = (st.page_allocs, st.page_frees)
        return ops

    def _record(self, batch, emitted, paths, dt: float, ops: tuple[int, int]) -> None:
        for i, seq in enumerate(batch.seqs):
            if emitted[i]:
                self.tokens[seq.id].extend(emitted[i])
                assert len(self.tokens[seq.id]) == seq.num_tokens
        allocs, frees = ops
        agg = tokens, _, _, _, prefill = batch.aggregates()
        c = self.cost(batch.work(agg))
        self.log.append(1, self.now, dt, batch.size, tokens, sum(batch.context), c.flops, c.bytes,
                        bound_of(c.compute_time, c.memory_time), batch.accepted, allocs, frees, prefill,
                        self.timed.last if self.timed is not None else 0.0)


def group_rows(logits: torch.Tensor, starts: list[int], width: int) -> torch.Tensor:
    """Rows starts[g] .. starts[g] + width - 1 of logits (R, V) for each sequence g of a group, as
    (G, width, V): a view where the sequences' rows lie back to back (every sequence of the step
    in one group, the usual case), else a copy. Copying them cost Medusa's batch-4 steps 0.6 ms,
    and 2.3-2.7 ms in runs where the 4 MB copy landed in fresh pages (1,024 page faults)."""
    s0 = starts[0]
    if all(s == s0 + g * width for g, s in enumerate(starts)):
        return logits[s0:s0 + len(starts) * width].view(len(starts), width, logits.shape[-1])
    return torch.stack([logits[s:s + width] for s in starts])


class TimedPlanner:
    """The scheme's planner as the scheduler sees it, timing each `plan` call and each hand-off
    of the target's features to it (`timing`): the step's drafting, the per-step `draft_time`
    the simulator's drafter price is compared with. (The simulator's drafter price takes the
    hand-off in: its draft_seq_us is measured on whole engine steps of an MTP drafter. Until
    0.32.0 the hand-off was timed in the step's rest: there `split` read the rest of the
    feature schemes' steps 0.65-0.68x its price at concurrency 32, about 40 us a sequence.)"""

    def __init__(self, planner, sync: Callable[[], None], clock: Callable[[], float] = time.perf_counter):
        self.planner, self.sync, self.clock = planner, sync, clock
        self.last = 0.0  # seconds of this step's plan call and hand-off (zeroed before each step)
        # request id -> its sequence-steps that could draft (a depth above 0, more than one token
        # left), and of those the ones that did: prompt lookup drafts only where it finds a match
        # (the simulator's `match`)
        self.tries: dict[int, tuple[int, int]] = {}

    def timing(self, fn: Callable[[], None]) -> None:
        """Run fn, the drafter's share of the step outside its plan call, adding its seconds to `last`."""
        t0 = self.clock()
        fn()
        self.sync()
        self.last += self.clock() - t0

    def plan(self, seqs):
        t0 = self.clock()
        out = self.planner.plan(seqs)
        self.sync()
        self.last += self.clock() - t0
        if self.planner.depth > 0:
            tries = self.tries
            for s, p in zip(seqs, out):
                if s.remaining > 1:
                    n, d = tries.get(s.id, (0, 0))
                    tries[s.id] = (n + 1, d + (p is not None))
        return out


def run_scheme(trace: TraceSpec, scheme, workload: Workload, model: Model,
               progress: Callable[[int, int], None] | None = None,
               prompts: Callable[[int, int], list[int]] | None = None,
               drafters: Drafters | None = None, reference: Callable[[], float] | None = None,
               clock: Callable[[], float] = time.perf_counter) -> EngineResult:
    return EngineRun(trace, scheme, workload, model, progress=progress, prompts=prompts, drafters=drafters,
                     reference=reference, clock=clock).run()
