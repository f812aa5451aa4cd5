"""Continuous batching over a paged KV pool (DESIGN.md §2, §10): one policy for both executors.

Each step: running sequences first (decode, or their next prefill chunk), then new admissions,
within `max_num_seqs` and `max_num_batched_tokens`; KV pages are checked for the whole batch and
sequences are preempted from the tail (recompute) when the pool runs short. The scheme's planner
says how many draft nodes each decoding sequence verifies; after the step the executor reports
which drafted nodes were accepted. No simpy, no torch, no notion of time beyond the `now` stamps.

Token accounting (as in vLLM): a sequence has `num_tokens` = prompt + generated tokens and
`computed` of them have KV. A step feeds `num_tokens - computed` (or a prefill chunk of it); when
it reaches the end, the step samples one new token, plus the accepted drafts when it verified a
draft tree. A preempted sequence recomputes all its tokens as one longer prompt.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from sim import trees as T
from sim.cost import Work, several_rows
from sim.kv import KVAllocator
from sim.kv_count import PageCounter
from sim.spec import ServingSpec
from sim.workload import Request



class Planner(Protocol):
    """Hands out draft plans (objects with `.parents`, or None) for the decoding sequences of a step."""

    def plan(self, seqs: list["SeqState"]) -> list: ...


class SeqState:
    """One request's progress through the replica."""

    __slots__ = ("id", "request", "prompt", "output", "generated", "computed", "first_token", "finish",
                 "steps", "preemptions", "admitted", "arrival", "num_tokens", "drafted")

    def __init__(self, request: Request, arrival: float):
        self.id = request.id
        self.arrival = arrival
        self.request = request
        self.prompt = request.prompt_tokens
        self.output = request.output_tokens
        self.generated = 0
        self.num_tokens = self.prompt  # prompt + generated (kept in step with `generated`)
        self.computed = 0
        self.first_token: float | None = None
        self.finish: float | None = None
        self.steps = 0
        self.preemptions = 0
        self.admitted = False
        # committed tokens the simulator's drafter has processed (sim/speculation.py; the engine's
        # drafters keep their own): 0 again after a preemption, whose recompute they start over
        self.drafted = 0

    @property
    def remaining(self) -> int:
        return self.output - self.generated


@dataclass
class Batch:
    """One scheduled step. Lists are parallel, one entry per scheduled sequence."""

    seqs: list[SeqState]
    query: list[int]  # committed query tokens: a prefill chunk, or 1 (the last sampled token) for decode
    trees: list[tuple]  # draft tree parents per sequence (empty: nothing drafted)
    plans: list  # the planner's object per sequence (None: no drafts), e.g. a CompiledTree in the simulator
    samples: list[bool]  # whether the step ends this sequence's pending tokens and samples
    decode: list[bool]  # a decode step (the sequence had sampled before), as opposed to prefill
    context: list[int]  # KV tokens each sequence had before the step
    slots: list[list[int]] = field(default_factory=list)  # KV slots of the query tokens, then the draft nodes
    repeat: int = 1  # a run of identical decode steps (see Scheduler.extend)
    page_allocs: int = 0  # pool operations caused while scheduling this step
    page_frees: int = 0
    preempted: list[SeqState] = field(default_factory=list)
    accepted: int = 0  # drafted tokens accepted over the batch (set by commit)
    copies: list = field(default_factory=list)  # KV copies (src slot, dst slot) the commit asks for, in order

    @property
    def size(self) -> int:
        return len(self.seqs)

    def aggregates(self) -> tuple[int, int, int, int, int]:
        """(tokens, pairs, kv_read, lm_tokens, prefill) for the cost model, summed over sequences;
        prefill counts the query tokens of sequences that are not decoding. The KV context before
        the step is kv_read - (tokens - drafted nodes), i.e. sum(self.context)."""
        tokens = pairs = kv_read = lm = prefill = 0
        for q, tree, plan, ctx, smp, dec in zip(self.query, self.trees, self.plans, self.context, self.samples,
                                                self.decode):
            t = len(tree)
            tokens += q + t
            kv_read += ctx + q
            # causal queries see the context plus their predecessors; a tree node sees its ancestors
            pairs += q * ctx + q * (q + 1) // 2
            if t:
                pairs += t * (ctx + q) + _depth_sum(plan, tree)
            if smp:
                lm += 1 + t
            if not dec:
                prefill += q
        return tokens, pairs, kv_read, lm, prefill

    def work(self, aggregates: tuple | None = None, model=None) -> Work:
        """The step's forward work as the cost model prices it (`aggregates`: this batch's, where
        the caller already has them; `model`: the target's spec, which splits the padded calls)."""
        tokens, pairs, kv_read, lm, _ = aggregates or self.aggregates()
        return Work(tokens=tokens, seqs=self.size, pairs=pairs, kv_read=kv_read, lm_tokens=lm, mixed=self.mixed(),
                    **self.multi_work(model))

    def multi_work(self, model=None) -> dict:
        """Work.multi_*, own_* and the padding (sim.cost.several_rows; its calls split as the
        reference splits them for `model`) of the sequences with several query tokens (verifying
        drafts, or a prefill chunk): their query tokens + drafted nodes, and those plus their
        context."""
        return several_rows(((q + len(tree), ctx + q + len(tree))
                             for q, tree, ctx in zip(self.query, self.trees, self.context)), model)

    def shapes(self) -> list[tuple]:
        """The draft shapes (parents; () for none) of the sequences that sample this step."""
        return [tuple(t) for t, smp in zip(self.trees, self.samples) if smp]

    def mixed(self) -> int:
        """1 if some sequence runs one query token (a decode that drafted nothing) and another
        several (a prefill chunk, or a decode with drafts to verify), else 0 (Work.mixed)."""
        one = several = False
        for q, tree in zip(self.query, self.trees):
            if q + len(tree) == 1:
                one = True
            else:
                several = True
        return int(one and several)


def _depth_sum(plan, parents: Sequence[int]) -> int:
    """Σ over nodes of their depth: how many drafted ancestors-or-self each node attends to."""
    known = getattr(plan, "depth_sum", None)
    return known if known is not None else sum(T.depths(parents))


class RequestTooLarge(Exception):
    """A request that can never fit the KV pool (its prompt + output exceed every page)."""


class Scheduler:
    def __init__(self, serving: ServingSpec, num_pages: int, kv_bytes_per_token: int, planner: Planner | None = None,
                 max_nodes: int = 0, track_slots: bool = True):
        """track_slots=False (the simulator) keeps page counts only (sim.kv_count.PageCounter,
        proven count-for-count equal to KVAllocator); the engine needs the slots."""
        self.cfg = serving
        kv_class = KVAllocator if track_slots else PageCounter
        self.kv = kv_class(num_pages, serving.page_size, serving.paging, kv_bytes_per_token)
        self.planner = planner
        self.max_nodes = max_nodes
        self.waiting: deque[SeqState] = deque()
        self.running: list[SeqState] = []
        self.preemptions = 0
        self._carry: list[SeqState] = []  # preempted while no batch could be formed
        self.decode_steps = 0  # sequence-steps that decoded (for mean committed tokens per step)
        self.decode_tokens = 0  # tokens those sequence-steps committed, bonus included
        self.acceptance: dict[tuple[int, int], int] = {}  # (drafted depth, accepted drafts) -> sequence-steps
        self.by_request: dict[int, dict] | None = None  # a dict: the same counts per request id as well

    # ---- intake ----------------------------------------------------------------------------
    def add(self, request: Request, now: float) -> SeqState:
        seq = SeqState(request, now)
        worst = request.prompt_tokens + request.output_tokens + self.max_nodes
        pages = -(-worst // self.cfg.page_size)
        if pages > self.kv.num_pages:
            raise RequestTooLarge(
                f"request {request.id} needs {pages} KV pages ({worst} tokens) but the pool has {self.kv.num_pages}")
        self.waiting.append(seq)
        return seq

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    # ---- one step ---------------------------------------------------------------------------
    def schedule(self, now: float) -> Batch | None:
        cfg = self.cfg
        kv = self.kv
        budget = cfg.max_num_batched_tokens
        chunked = cfg.chunked_prefill
        # (sequence, committed query tokens, draft plan or None, pages it needs)
        plan: list[tuple[SeqState, int, object, int]] = []
        drafts = None
        if self.planner is not None:
            decoding = [s for s in self.running if s.num_tokens == s.computed + 1 and s.generated]
            drafts = iter(self.planner.plan(decoding)) if decoding else None
        pages_needed = kv.pages_needed
        need = 0
        for seq in self.running:
            if budget <= 0:
                break
            pending = seq.num_tokens - seq.computed
            if pending == 1 and seq.generated:  # decoding: the last sampled token, plus any drafts
                draft = next(drafts) if drafts is not None else None
                nodes = len(draft.parents) if draft is not None else 0
                if nodes + 1 > budget:
                    draft, nodes = None, 0
                n = pages_needed(seq.id, 1 + nodes)
                plan.append((seq, 1, draft, n))
                budget -= 1 + nodes
            else:
                q = min(pending, budget) if chunked else pending
                if q > budget and plan:
                    continue
                n = pages_needed(seq.id, q)
                plan.append((seq, q, None, n))
                budget -= q
            need += n
        free = kv.free_pages() - need
        preempted = self._carry + (self._fit(plan) if free < 0 else [])
        self._carry = []
        if preempted:
            free = kv.free_pages() - sum(p[3] for p in plan)
        while self.waiting and len(self.running) < cfg.max_num_seqs and budget > 0:
            seq = self.waiting[0]
            pending = seq.num_tokens - seq.computed
            q = min(pending, budget) if chunked else pending
            if q > budget and plan:
                break
            n = pages_needed(seq.id, q)
            if n > free:
                break
            self.waiting.popleft()
            self.running.append(seq)
            seq.admitted = True
            plan.append((seq, q, None, n))
            budget -= q
            free -= n
        if not plan:
            self._carry = preempted  # reported with the next batch, so the executor drops their KV state
            return None
        st = kv.stats
        allocs0, frees0 = st.page_allocs, st.page_frees
        grow, speculate = kv.grow, kv.speculate
        seqs, query, plans, trees, all_slots, samples, decode, context = [], [], [], [], [], [], [], []
        for seq, q, draft, _ in plan:
            slots = grow(seq.id, q)
            tree = draft.parents if draft is not None else ()
            if tree:
                slots = slots + speculate(seq.id, tree)
            seqs.append(seq)
            query.append(q)
            plans.append(draft)
            trees.append(tree)
            all_slots.append(slots)
            context.append(seq.computed)
            end = seq.computed + q == seq.num_tokens
            samples.append(end)
            decode.append(end and q == 1 and seq.generated > 0)
        return Batch(seqs=seqs, query=query, trees=trees, plans=plans, samples=samples, decode=decode,
                     context=context, slots=all_slots, preempted=preempted,
                     page_allocs=st.page_allocs - allocs0, page_frees=st.page_frees - frees0)

    def _fit(self, plan: list[tuple[SeqState, int, object, int]]) -> list[SeqState]:
        """Preempt from the tail of the running list until the planned step's pages fit."""
        kv = self.kv
        preempted = []
        while True:
            if sum(p[3] for p in plan) <= kv.free_pages() or not plan:
                return preempted
            victim = self.running.pop()
            plan[:] = [p for p in plan if p[0] is not victim]
            self._preempt(victim)
            preempted.append(victim)

    def record_acceptance(self, plan, accepted: int, seq_id: int) -> None:
        """Count one verified draft plan of request `seq_id`: its depth (a chain's length) and how
        many drafts were accepted (per request too where `by_request` is a dict)."""
        depth = getattr(plan, "depth", None)
        if depth is None:
            depth = max(T.depths(plan.parents))
        key = (depth, accepted)
        self.acceptance[key] = self.acceptance.get(key, 0) + 1
        if self.by_request is not None:
            mine = self.by_request.setdefault(seq_id, {})
            mine[key] = mine.get(key, 0) + 1

    def _preempt(self, seq: SeqState) -> None:
        self.kv.release(seq.id)
        seq.computed = 0
        seq.drafted = 0
        seq.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(seq)

    # ---- decode runs (simulator fast path) --------------------------------------------------
    def run_limit(self, batch: Batch) -> int:
        """How many identical plain-decode steps this batch may repeat before anything changes:
        1 unless every sequence decodes without drafts and nothing waits to be admitted; otherwise
        up to the step in which the first sequence finishes, within the free pages."""
        if batch.preempted or any(batch.trees) or not all(q == 1 and smp and s.generated > 0
                                                                 for q, smp, s in zip(batch.query, batch.samples, batch.seqs)):
            return 1
        if self.waiting and len(self.running) < self.cfg.max_num_seqs:
            return 1
        k = min(s.remaining for s in batch.seqs)
        if k <= 1:
            return 1
        free = self.kv.free_pages()
        while k > 1 and sum(self.kv.pages_needed(s.id, k - 1) for s in batch.seqs) > free:
            k //= 2
        return max(k, 1)

    def run_allocs(self, batch: Batch, k: int) -> list[int]:
        """Page allocations at each step of a k-step decode run of this batch (step 0's were made
        at schedule time). Pure: changes nothing."""
        per_step = [0] * k
        per_step[0] = batch.page_allocs
        ps = self.cfg.page_size
        kv = self.kv
        for seq in batch.seqs:
            # slots the sequence still holds free after step 0's token; step j needs a page at j = room+1, +ps, ...
            room = kv.pages_owned(seq.id) * ps - kv.length(seq.id)
            for j in range(room + 1, k, ps):
                per_step[j] += 1
        return per_step

    def extend(self, batch: Batch, k: int) -> None:
        """Turn a scheduled decode step into a run of k identical steps (k <= run_limit)."""
        if k > 1:
            for seq in batch.seqs:
                self.kv.grow(seq.id, k - 1)
            batch.repeat = k

    # ---- after the step ---------------------------------------------------------------------
    def commit(self, batch: Batch, accepted: Sequence[Sequence[int]] | None, now: float) -> list[SeqState]:
        """Record the step's outcome. `accepted[i]` is the accepted root path of sequence i's
        draft tree (node indices; empty when every draft was rejected or nothing was drafted).
        Returns the sequences that finished."""
        kv = self.kv
        k = batch.repeat
        finished = []
        accepted_total = 0
        for i, (seq, tree, q, sampled, dec) in enumerate(zip(batch.seqs, batch.trees, batch.query, batch.samples,
                                                             batch.decode)):
            path = accepted[i] if (accepted is not None and tree) else ()
            if tree:
                moves = kv.commit(seq.id, path)
                if moves:
                    batch.copies.extend(moves)
                accepted_total += len(path)
                self.record_acceptance(batch.plans[i], len(path), seq.id)
            seq.computed += q * k + len(path)
            seq.steps += k
            if dec:
                self.decode_steps += k
                self.decode_tokens += (len(path) + 1) * k
            if sampled:
                new = (len(path) + 1) if k == 1 else k
                assert new <= seq.output - seq.generated, "a step may not emit past the requested output"
                if seq.generated == 0:
                    seq.first_token = now
                seq.generated += new
                seq.num_tokens += new
                if seq.generated >= seq.output:
                    seq.finish = now
                    kv.release(seq.id)
                    finished.append(seq)
        if finished:
            done = set(id(s) for s in finished)
            self.running = [s for s in self.running if id(s) not in done]
        batch.accepted = accepted_total
        return finished
