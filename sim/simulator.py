"""The SimPy executor (DESIGN.md §2): the only file that imports simpy.

An arrivals process feeds the scheduler; a replica process loops
schedule → step cost → timeout → acceptance → commit on a simulated clock. A batch of plain decode
steps that nothing can change (no arrival admitted, no sequence finishing, no page shortage) is
priced and advanced as one run of k steps with the same arithmetic, vectorised over the run; a
speculative batch that repeats (every sequence decoding, nobody to admit) skips rescheduling and
goes straight to plan -> price -> sample -> commit. Either way the per-step rows are identical to
stepping one at a time (tests/test_simulator.py and tests/test_schemes.py check this).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import simpy

from sim.cost import ForwardCost, Work, alike_rows, bound_of, call_seqs, host_time, pad_of, verify_calls, verify_host
from sim.kv import AllocatorStats
from sim.scheduler import Batch, Scheduler, SeqState
from sim.schemes.base import ZERO_COST, Scheme, SpecScheme
from sim.speculation import Speculator
from sim.speed import speed_process
from sim.spec import TraceSpec
from sim.steplog import StepLog
from sim.workload import Workload


@dataclass
class RunResult:
    seqs: list[SeqState]
    steps: StepLog
    allocator: AllocatorStats
    preemptions: int
    duration: float  # simulated seconds until the last request finished
    decode_seq_steps: int  # sequence-steps that sampled after a decode (for mean accepted tokens)
    decode_tokens: int  # tokens those sequence-steps committed
    acceptance: dict | None = None  # (drafted depth, accepted drafts) -> sequence-steps


class Replica:
    def __init__(self, trace: TraceSpec, scheme: Scheme, workload: Workload, fast: bool = True,
                 progress: Callable[[int, int], None] | None = None, draw: int = 0):
        """draw: which of the simulator's own random draws (acceptance, the device's speed) to
        use for the same requests: 0 is the trace seed's; `compare --repeats` pools several."""
        self.trace = trace
        self.scheme = scheme
        self.workload = workload
        self.fast = fast
        self.progress = progress
        self.env = simpy.Environment()
        seed = draw_seed(trace.seed, draw)
        self.spec = Speculator(scheme, trace, seed) if isinstance(scheme, SpecScheme) else None
        serving = replace(trace.serving, paging=scheme.paging) if scheme.paging else trace.serving
        self.sched = Scheduler(serving, trace.num_pages, int(trace.model.kv_bytes_per_token),
                               planner=self.spec, max_nodes=scheme.max_nodes(), track_slots=False)
        self.target_cost = ForwardCost(trace.model, trace.hardware, trace.tp)
        self.speed = speed_process(trace.hardware, seed)  # None: constant speed
        self.verify_priced = trace.hardware.prices_verification
        self.log = StepLog()
        self.seqs: list[SeqState] = []
        self.pending = list(reversed(workload.requests))  # not yet arrived, next at the end
        self.wakeup: simpy.Event | None = None
        self.done = 0
        self._charged = (0, 0, 0)  # allocator (allocs, frees, copy bytes) already priced

    # ---- processes --------------------------------------------------------------------------
    def _arrive(self, n: int = 1) -> None:
        for _ in range(min(n, len(self.pending))):
            self.seqs.append(self.sched.add(self.pending.pop(), self.env.now))
        if self.wakeup is not None and not self.wakeup.triggered:
            self.wakeup.succeed()

    def arrivals(self):
        while self.pending:
            gap = self.pending[-1].arrival - self.env.now
            if gap > 0:
                yield self.env.timeout(gap)
            self._arrive()

    def replica(self):
        total = len(self.workload.requests)
        runs = self.fast and self.spec is not None
        while self.done < total:
            if runs and self._steady_depth():  # the next steps repeat the running batch
                finished = yield from self._speculative_run()
            else:
                batch = self.sched.schedule(self.env.now)
                if batch is None:
                    self.wakeup = self.env.event()
                    yield self.wakeup
                    continue
                _, dt = self._price(batch)
                yield self.env.timeout(dt)
                accepted = self.spec.accept(batch) if (self.spec is not None and any(batch.trees)) else None
                finished = self.sched.commit(batch, accepted, self.env.now)
                if batch.accepted:
                    self.log.set_last("accepted", batch.accepted)
            self.done += len(finished)
            if self.workload.closed_concurrency:
                self._arrive(len(finished))
            if finished and self.progress:
                self.progress(self.done, total)

    # ---- speculative runs (fast path) --------------------------------------------------------
    def _steady_depth(self) -> int:
        """The depth the next step drafts at if it repeats the running batch: every running
        sequence decoding, none to be joined by a waiting request, the token budget and free pages
        enough for every tree. 0 otherwise."""
        sched, spec = self.sched, self.spec
        seqs = sched.running
        cfg = sched.cfg
        if not seqs or (sched.waiting and len(seqs) < cfg.max_num_seqs):
            return 0
        nodes = sched.max_nodes
        if len(seqs) * (1 + nodes) > cfg.max_num_batched_tokens:
            return 0
        ctx = 0
        for s in seqs:
            if s.num_tokens != s.computed + 1 or not s.generated:
                return 0
            ctx += s.computed
        kv = sched.kv
        if sum(kv.pages_needed(s.id, 1 + nodes) for s in seqs) > kv.free_pages():
            return 0
        return spec.policy.choose(len(seqs), ctx / len(seqs))

    def _speculative_run(self):
        """Steps that repeat the running batch, done with the same calls in the same order as
        schedule -> price -> commit (so the same random draws and the same rows; a test compares
        the two paths), without building a Batch or scheduling around the running set. A step in
        which a sequence finishes goes through the scheduler's own commit and ends the run.
        Returns the finished sequences."""
        sched, spec, kv, log = self.sched, self.spec, self.sched.kv, self.log
        hw, st, cfg = self.trace.hardware, kv.stats, sched.cfg
        nodes = sched.max_nodes
        steady = self._steady_depth()
        least = min(s.output - s.generated for s in sched.running)
        dense, model = hw.attn_dense, self.trace.model
        while steady:
            seqs = sched.running
            B = len(seqs)
            plans = spec.plan_full(seqs, steady) if least > steady else spec.plan(seqs)
            tokens = pairs = kv_read = ctx_sum = n_draft = ctx_draft = verifying = 0
            # where the reference's padded calls cost time (hardware.attn_dense; sim.cost.Work.group_pad):
            # the decoding sequences' and the verifying ones' keys, the drafting ones' contexts
            keys: tuple[list, list] = ([], [])
            draft_ctx: list = []
            rows_most = 1  # the verifying sequences' most query rows (a group call's padded rows)
            for seq, plan in zip(seqs, plans):
                ctx = seq.computed
                t = len(plan.parents) if plan is not None else 0
                kv.decode_step(seq.id, t)
                tokens += 1 + t
                pairs += (ctx + 1) * (1 + t) + (plan.depth_sum if t else 0)
                kv_read += ctx + 1
                ctx_sum += ctx
                if dense:
                    keys[t > 0].append(ctx + 1 + t)
                    rows_most = max(rows_most, 1 + t)
                    if t:
                        draft_ctx.append(ctx)
                if t:
                    n_draft += 1
                    ctx_draft += ctx
                    verifying += 1 + t
            allocs, frees = st.page_allocs - self._charged[0], st.page_frees - self._charged[1]
            copy = st.kv_copy_bytes - self._charged[2]
            self._charged = (st.page_allocs, st.page_frees, st.kv_copy_bytes)
            pads = {}
            if dense:  # each call as the reference splits it (call_seqs), over the batch's longest row of slots
                longest = max(keys[0] + keys[1], default=0)
                pads = {"group_pad": pad_of(keys[1], call_seqs(model, longest, rows_most)) if n_draft > 1 else 0,
                        "decode_pad": pad_of(keys[0], call_seqs(model, longest, 1))}
            main = self.target_cost(Work(tokens, B, pairs, kv_read, tokens, int(0 < n_draft < B),
                                         **alike_rows(verifying, verifying + ctx_draft, n_draft), **pads))
            draft = spec.step_draft(n_draft, ctx_draft, spec.pad(draft_ctx))
            host = host_time(hw, B, allocs + frees, copy)
            if self.verify_priced:
                host += verify_host(hw, *verify_calls(p.parents if p is not None else () for p in plans), tokens - B)
            dt, drafting = self._wall(self.env.now, main.time + draft.time + host, draft.time)
            log.append(1, self.env.now, dt, B, tokens, ctx_sum, main.flops + draft.flops, main.bytes + draft.bytes,
                       bound_of(main.compute_time + draft.compute_time, main.memory_time + draft.memory_time),
                       0, allocs, frees, 0, drafting)
            yield self.env.timeout(dt)
            rnd = spec.random
            paths = [plan.sample(rnd) if plan is not None else () for plan in plans]
            if any(s.generated + len(p) + 1 >= s.output for s, p in zip(seqs, paths)):
                # someone finishes: the scheduler's own commit stamps, releases and drops it
                batch = Batch(seqs=list(seqs), query=[1] * B, trees=[p.parents if p is not None else () for p in plans],
                              plans=plans, samples=[True] * B, decode=[True] * B, context=[], slots=[])
                finished = sched.commit(batch, paths, self.env.now)
                if batch.accepted:
                    log.set_last("accepted", batch.accepted)
                return finished
            accepted = ctx_next = 0
            least = None
            for seq, plan, path in zip(seqs, plans, paths):
                if plan is not None:
                    kv.commit(seq.id, path)
                    sched.record_acceptance(plan, len(path), seq.id)
                new = len(path) + 1
                accepted += new - 1
                seq.computed += new
                seq.generated += new
                seq.num_tokens += new
                seq.steps += 1
                sched.decode_tokens += new
                # what the next step needs to be another repeat
                ctx_next += seq.computed
                left = seq.output - seq.generated
                least = left if least is None or left < least else least
            sched.decode_steps += B
            if accepted:
                log.set_last("accepted", accepted)
            if sched.waiting and B < cfg.max_num_seqs:
                break
            free = kv.free_pages()
            if free < B * (2 + (1 + nodes) // cfg.page_size):  # not plainly enough: count exactly
                if sum(kv.pages_needed(s.id, 1 + nodes) for s in seqs) > free:
                    break
            steady = spec.policy.choose(B, ctx_next / B)
        return []

    # ---- pricing ----------------------------------------------------------------------------
    def _wall(self, now: float, nominal: float, drafting: float) -> tuple[float, float]:
        """(wall seconds, of which drafting) of a step of `nominal` seconds starting at `now`,
        through the device's speed spells (unchanged at a constant speed)."""
        if self.speed is None or nominal <= 0:
            return nominal, drafting
        wall = self.speed.stretch(now, nominal)
        return wall, drafting * wall / nominal

    def _price(self, batch):
        """Price the scheduled step, or the longest undisturbed run of it; returns (k, total seconds)."""
        tr = self.trace
        sched = self.sched
        st = sched.kv.stats
        k = sched.run_limit(batch) if self.fast else 1
        agg = tokens, pairs, kv_read, lm, prefill = batch.aggregates()
        ctx = sum(batch.context)  # KV tokens before the step
        B = batch.size
        # pool operations since the last priced step (a naive commit's frees and copies land here)
        allocs0 = st.page_allocs - self._charged[0]
        frees0 = st.page_frees - self._charged[1]
        copy = st.kv_copy_bytes - self._charged[2]
        now = self.env.now
        if k > 1:  # a decode run: every sequence's context grows by one token per step
            j = np.arange(k)
            work = Work(tokens=tokens, seqs=B, pairs=pairs + j * B, kv_read=kv_read + j * B, lm_tokens=lm,
                        decode_pad=batch.multi_work(tr.model)["decode_pad"] if tr.hardware.attn_dense else 0)  # grows alike
            allocs = np.asarray(sched.run_allocs(batch, k), dtype=np.int64)
            allocs[0] = allocs0
            frees = np.zeros(k, dtype=np.int64)
            frees[0] = frees0
        else:
            work = batch.work(agg, tr.model)
            allocs, frees = allocs0, frees0
        main = self.target_cost(work)
        draft = self.spec.draft_cost(batch) if self.spec is not None else ZERO_COST
        host = host_time(tr.hardware, B, allocs + frees, copy)
        if self.verify_priced:
            host = host + verify_host(tr.hardware, *verify_calls(batch.shapes()), sum(map(len, batch.trees)))
        dt = main.time + draft.time + host
        if k > 1:
            dt = dt - (copy * 2.0 / (tr.hardware.mem_bw * tr.hardware.eta_memory)) * (j > 0)  # copies: step 0 only
            if self.speed is not None:
                dt = self.speed.stretch_run(now, dt)
            if self.pending and len(sched.running) < tr.serving.max_num_seqs:
                # stop at the first step that ends at or after the next arrival, which may join then
                ends = np.cumsum(dt)
                k = int(min(k, np.searchsorted(ends, self.pending[-1].arrival - now) + 1))
            dt, allocs, frees, j = dt[:k], allocs[:k], frees[:k], j[:k]
            starts = now + np.concatenate(([0.0], np.cumsum(dt)[:-1]))
            sl = lambda x: x[:k] if isinstance(x, np.ndarray) else x  # noqa: E731
            self.log.append(k, starts, dt, B, tokens, ctx + j * B, sl(main.flops + draft.flops),
                            sl(main.bytes + draft.bytes),
                            bound_of(sl(main.compute_time + draft.compute_time), sl(main.memory_time + draft.memory_time)),
                            0, allocs, frees, prefill, 0.0)  # a decode run drafts nothing
            total = float(dt.sum())
        else:
            dt, drafting = self._wall(now, dt, draft.time)
            self.log.append(1, now, dt, B, tokens, ctx, main.flops + draft.flops, main.bytes + draft.bytes,
                            bound_of(main.compute_time + draft.compute_time, main.memory_time + draft.memory_time),
                            0, allocs, frees, prefill, drafting)
            total = dt
        sched.extend(batch, k)
        self._charged = (st.page_allocs, st.page_frees, st.kv_copy_bytes)
        return k, total

    def run(self) -> RunResult:
        if self.workload.closed_concurrency:
            self._arrive(self.workload.closed_concurrency)
        else:
            self.env.process(self.arrivals())
        proc = self.env.process(self.replica())
        self.env.run(until=proc)
        st = self.sched.kv.stats
        return RunResult(seqs=sorted(self.seqs, key=lambda s: s.id), steps=self.log, allocator=st,
                         preemptions=self.sched.preemptions, duration=self.env.now,
                         decode_seq_steps=self.sched.decode_steps, decode_tokens=self.sched.decode_tokens,
                         acceptance=dict(self.sched.acceptance))


def draw_seed(seed: int, draw: int) -> int:
    """The seed of a run's simulator draws: the trace's for draw 0, an independent one otherwise."""
    return seed if draw == 0 else int(np.random.SeedSequence([seed, draw]).generate_state(1)[0])


def simulate(trace: TraceSpec, scheme: Scheme, workload: Workload, fast: bool = True,
             progress: Callable[[int, int], None] | None = None, draw: int = 0) -> RunResult:
    return Replica(trace, scheme, workload, fast=fast, progress=progress, draw=draw).run()
