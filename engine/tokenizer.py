"""A byte-level BPE tokenizer (Sennrich et al. 2016; byte-level as in GPT-2), trained here.

Text is UTF-8 bytes; ids 0..255 are the bytes themselves, so every string round-trips
(`decode(encode(s)) == s`). Text is first cut into pieces by `PATTERN` (pre-tokenization: a word
with its leading space, an identifier with its underscores, up to 3 digits, a run of punctuation,
newlines with the blanks before them, other blank runs), and merges never cross a piece boundary.
Training counts the pieces of a sample, then repeatedly merges the most frequent adjacent pair of
ids (ties: the smallest pair) into a new id, keeping pair counts incrementally. Encoding applies
the merges by rank within each piece and caches each distinct piece's ids.

Ids: 0..255 bytes, 256..256+M-1 merges in training order, then the special tokens
(`<|endoftext|>`: the document separator used in training; `encode` never emits it from text).
Saved as JSON (`engine/family/tokenizer.json`): the pattern, the merges as id pairs, the specials
and how it was trained.

CLI: `python -m engine.tokenizer train` (on a capped sample of the corpus' train split) and
`python -m engine.tokenizer stats` (bytes per token on each domain's held-out split).
"""
from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

from engine.corpus import FAMILY_DIR
TOKENIZER = FAMILY_DIR / "tokenizer.json"
EOT = "<|endoftext|>"
VOCAB_SIZE = 4096
SAMPLE_BYTES = {"code": 1_600_000, "text": 1_600_000}  # training sample per domain

PATTERN = (r"'(?:[sdmt]|ll|ve|re)(?![^\W\d])"  # contractions ('s, 'll ...), not the start of a word
           r"| ?[^\W\d]+"  # a word or identifier (letters and underscores) with its leading space
           r"| ?\d{1,3}"  # up to three digits
           r"| ?[^\s\w]+[\r\n]*"  # punctuation, with the newlines that follow it
           r"|\s*[\r\n]+"  # newlines, with the blanks before them
           r"|\s+(?!\S)"  # blanks, leaving the last one to the next word
           r"|\s+")


def _merge(seq: list[int], a: int, b: int, new: int) -> list[int]:
    out, i, n = [], 0, len(seq)
    while i < n:
        if i + 1 < n and seq[i] == a and seq[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out


class Tokenizer:
    def __init__(self, merges: list[tuple[int, int]], special: list[str] = (EOT,), pattern: str = PATTERN,
                 meta: dict | None = None):
        self.merges = [(int(a), int(b)) for a, b in merges]
        self.pattern = pattern
        self._re = re.compile(pattern)
        self.ranks = {pair: 256 + i for i, pair in enumerate(self.merges)}  # pair -> the id it makes
        self.vocab: list[bytes] = [bytes([i]) for i in range(256)]
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self.special = {s: len(self.vocab) + i for i, s in enumerate(special)}
        self.meta = dict(meta or {})
        self._cache: dict[str, tuple[int, ...]] = {}

    # ---- properties ----------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return len(self.vocab) + len(self.special)

    @property
    def eot(self) -> int:
        return self.special[EOT]

    def to_json(self) -> str:
        d = {"format": "specsim-bpe", "version": 1, "vocab_size": self.vocab_size, "pattern": self.pattern,
             "special": self.special, "meta": self.meta}
        body = json.dumps(d, indent=1)[:-2]
        merges = ",\n".join("  [%d, %d]" % m for m in self.merges)
        return body + ',\n "merges": [\n' + merges + "\n ]\n}\n"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @staticmethod
    def from_json(text: str) -> "Tokenizer":
        d = json.loads(text)
        if d.get("format") != "specsim-bpe":
            raise ValueError("not a specsim-bpe tokenizer file")
        special = sorted(d["special"], key=d["special"].get)
        tok = Tokenizer([tuple(m) for m in d["merges"]], special, d["pattern"], d.get("meta"))
        if tok.special != d["special"] or tok.vocab_size != d["vocab_size"]:
            raise ValueError("inconsistent tokenizer file (special ids or vocab_size)")
        return tok

    def save(self, path: Path = TOKENIZER) -> None:
        Path(path).write_text(self.to_json())

    # ---- encoding ------------------------------------------------------------------------------
    def pieces(self, text: str) -> list[str]:
        return self._re.findall(text)

    def _encode_piece(self, piece: str) -> tuple[int, ...]:
        seq = list(piece.encode("utf-8"))
        ranks = self.ranks
        while len(seq) > 1:
            best, at = None, None
            for pair in zip(seq, seq[1:]):
                r = ranks.get(pair)
                if r is not None and (best is None or r < best):
                    best, at = r, pair
            if best is None:
                break
            seq = _merge(seq, at[0], at[1], best)
        return tuple(seq)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (special-token strings in the text are encoded as plain bytes)."""
        out: list[int] = []
        cache = self._cache
        for piece in self._re.findall(text):
            ids = cache.get(piece)
            if ids is None:
                ids = self._encode_piece(piece)
                if len(cache) < 2_000_000:
                    cache[piece] = ids
            out.extend(ids)
        return out

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        inv = {v: k.encode() for k, v in self.special.items()}
        n = len(self.vocab)
        return b"".join(self.vocab[i] if 0 <= i < n else inv[i] for i in ids)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids` (a cut through a multi-byte character decodes to U+FFFD)."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def token_str(self, i: int) -> str:
        """A readable form of one token (for inspection)."""
        for k, v in self.special.items():
            if v == i:
                return k
        return self.vocab[i].decode("utf-8", errors="backslashreplace")


def train(texts: Iterable[str], vocab_size: int = VOCAB_SIZE, special: list[str] = (EOT,), pattern: str = PATTERN,
          meta: dict | None = None, verbose: bool = False) -> Tokenizer:
    """Learn vocab_size - 256 - len(special) merges from `texts` (deterministic in their content)."""
    rx = re.compile(pattern)
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(rx.findall(t))
    words = sorted(counts)  # a fixed order, whatever the input order
    seqs = [list(w.encode("utf-8")) for w in words]
    freq = [counts[w] for w in words]
    n_merges = vocab_size - 256 - len(special)
    if n_merges < 0:
        raise ValueError(f"vocab_size {vocab_size} is below 256 bytes + {len(special)} special tokens")

    pair_count: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for wi, seq in enumerate(seqs):
        for pair in zip(seq, seq[1:]):
            pair_count[pair] += freq[wi]
            where[pair].add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    t0 = time.perf_counter()
    while len(merges) < n_merges and heap:
        negc, pair = heapq.heappop(heap)
        cur = pair_count.get(pair, 0)
        if cur <= 0:
            continue
        if -negc != cur:  # stale entry: requeue at its current count
            heapq.heappush(heap, (-cur, pair))
            continue
        new = 256 + len(merges)
        merges.append(pair)
        a, b = pair
        changed: set[tuple[int, int]] = set()
        for wi in sorted(where.pop(pair)):
            seq = seqs[wi]
            merged = _merge(seq, a, b, new)
            if len(merged) == len(seq):
                continue
            f = freq[wi]
            for p in zip(seq, seq[1:]):
                pair_count[p] -= f
                changed.add(p)
            for p in zip(merged, merged[1:]):
                pair_count[p] += f
                where[p].add(wi)
                changed.add(p)
            seqs[wi] = merged
        pair_count.pop(pair, None)
        for p in changed:
            c = pair_count.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, p))
            elif p in pair_count:
                del pair_count[p]
        if verbose and len(merges) % 500 == 0:
            print(f"  {len(merges)}/{n_merges} merges, {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    if len(merges) < n_merges:
        raise ValueError(f"the sample allows only {len(merges)} merges, {n_merges} wanted")
    return Tokenizer(merges, list(special), pattern, meta)


def sample_texts(docs, budget: dict[str, int] = SAMPLE_BYTES) -> tuple[list[str], dict]:
    """A capped, deterministic sample of the train split: per domain, whole documents in
    sha256(name) order until the domain's byte budget is reached (the last one cut)."""
    out, info = [], {}
    for dom, cap in budget.items():
        pool = sorted((d for d in docs if d.domain == dom and d.split == "train"),
                      key=lambda d: hashlib.sha256(d.name.encode()).hexdigest())
        used, n = 0, 0
        for d in pool:
            if used >= cap:
                break
            b = d.text.encode("utf-8")[:cap - used].decode("utf-8", errors="ignore")
            out.append(b)
            used += len(b.encode("utf-8"))
            n += 1
        info[dom] = {"docs": n, "bytes": used}
    return out, info


def load_tokenizer(path: Path = TOKENIZER) -> Tokenizer:
    return Tokenizer.from_json(Path(path).read_text())


def main(argv: list[str] | None = None) -> int:
    from engine.corpus import DOMAINS, load_docs, manifest_sha256

    p = argparse.ArgumentParser(prog="python -m engine.tokenizer", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help=f"train on a capped train-split sample and write {TOKENIZER.name}")
    t.add_argument("--vocab", type=int, default=VOCAB_SIZE)
    t.add_argument("--out", type=Path, default=TOKENIZER)
    sub.add_parser("stats", help="bytes per token on each domain's splits")
    args = p.parse_args(argv)
    docs = load_docs()
    if args.cmd == "train":
        texts, info = sample_texts(docs)
        t0 = time.perf_counter()
        tok = train(texts, args.vocab, meta={"sample": info, "sample_rule": "train split, whole documents in "
                                                "sha256(name) order up to the byte budget per domain",
                                             "manifest_sha256": manifest_sha256()}, verbose=True)
        tok.save(args.out)
        print(f"wrote {args.out}: {tok.vocab_size} ids ({len(tok.merges)} merges) in {time.perf_counter() - t0:.0f}s")
    else:
        tok = load_tokenizer()
        for dom in DOMAINS:
            for split in ("train", "heldout"):
                ds = [d for d in docs if d.domain == dom and d.split == split]
                nb = sum(len(d.text.encode()) for d in ds)
                t0 = time.perf_counter()
                nt = sum(len(tok.encode(d.text)) for d in ds)
                print(f"{dom:5s} {split:8s} {nb:>11,d} bytes {nt:>10,d} tokens {nb / nt:.2f} bytes/token "
                      f"({nb / (time.perf_counter() - t0) / 1e6:.1f} MB/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
