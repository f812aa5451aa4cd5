"""One scheme's acceptance as the engine measured it, request by request, pooled over the passes
of a comparison: what `python -m validation compare` fits the simulator's acceptance file to,
kept beside it (counts-<label>.json.gz, gzip: EAGLE-2's confidence record is about 3 MB of
JSON a comparison, 0.2 MB packed) so `python -m validation reprice DIR --refit` can fit it again
with another version's fit, or another shrink (validation/dispersion.py), the engine not run
again. `read_counts` reads it packed or not (a name ending .gz is packed).

The file (since 0.46.0):

    {"scheme": label, "source": str,
     "requests": {"<id>": {"hist": [[drafted depth, accepted, steps], ...],
                           "ranks": [[depth, rank, count], ...],
                           "tries": [sequence-steps that could draft, of which drafted],   # prompt lookup
                           "uncut": [[drafted depth, accepted, steps], ...],               # not cut short
                           "passes": [passes with one set of counts, ...],                 # realizations
                           "confidence": {"top1": [...], "rank_mass": [...],               # EAGLE-2
                                          "picks": [[[probabilities], rank], ...]}}}}
"""
from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.confidence_log import ConfidenceLog
from sim.errors import SpecError
from validation.dispersion import signature
from validation.measure import add_counts, grouped_profile, merge_counts, per_depth_rates


@dataclass
class RequestCounts:
    """A scheme's measured acceptance by request (request id -> ...), every pass's added."""
    per_request: dict[int, tuple[dict, dict]] = field(default_factory=dict)  # ((depth, accepted) counts, (depth, rank) counts)
    tries: dict[int, tuple[int, int]] = field(default_factory=dict)  # (sequence-steps that could draft, of which drafted)
    uncut: dict[int, dict] = field(default_factory=dict)  # counts of its steps the sequence's end did not cut short
    confidence: dict[int, ConfidenceLog] = field(default_factory=dict)  # EAGLE-2's drafter record
    passes: dict[int, Counter] = field(default_factory=dict)  # its passes by their counts' signature

    def add(self, res) -> None:
        """One engine pass over the scheme's requests (engine.runner.EngineResult)."""
        for rid, (h, rk) in res.by_request.items():
            h0, r0 = self.per_request.setdefault(rid, ({}, {}))
            add_counts(h0, h)
            add_counts(r0, rk)
        for rid, h in res.uncut.items():
            add_counts(self.uncut.setdefault(rid, {}), h)
        for rid, log in res.confidence.items():
            self.confidence.setdefault(rid, ConfidenceLog()).merge(log)
        for rid, (n, d) in res.tries.items():
            n0, d0 = self.tries.get(rid, (0, 0))
            self.tries[rid] = (n0 + n, d0 + d)
        for rid in set(res.by_request) | set(res.tries):
            sig = signature(res.by_request.get(rid, ({}, {}))[0], res.tries.get(rid))
            self.passes.setdefault(rid, Counter())[sig] += 1

    def totals(self) -> tuple[int, int]:
        """(sequence-steps that could draft, of which drafted), every request's together."""
        return sum(n for n, _ in self.tries.values()), sum(d for _, d in self.tries.values())

    def acceptance_doc(self, scheme, source: str, by_request: bool | None = True) -> dict | None:
        """The simulator's measured acceptance file (validation.measure.grouped_profile), its
        counts shrunk by validation.dispersion (by_request: each request by its own factor; False:
        one for all; None: not shrunk). None where no step drafted."""
        rates, samples = per_depth_rates(merge_counts(h for h, _ in self.per_request.values()))
        if not rates:
            return None
        n, d = self.totals()  # prompt lookup's match rate, per group where some steps found none
        doc = grouped_profile(scheme, self.per_request, tries=self.tries if d < n else None, uncut=self.uncut,
                              confidence=self.confidence, passes=self.passes if by_request is not None else None,
                              by_request=bool(by_request))
        return {**doc, "samples": samples, "requests": len(self.per_request), "source": source}

    def to_json(self, label: str, source: str) -> dict:
        """The counts file's document."""
        ids = sorted(set(self.per_request) | set(self.tries) | set(self.uncut) | set(self.confidence))
        requests = {}
        for rid in ids:
            h, rk = self.per_request.get(rid, ({}, {}))
            entry = {"hist": _rows(h), "ranks": _rows(rk), "passes": sorted(self.passes.get(rid, Counter()).values())}
            if rid in self.tries:
                entry["tries"] = list(self.tries[rid])
            if rid in self.uncut:
                entry["uncut"] = _rows(self.uncut[rid])
            if rid in self.confidence:
                log = self.confidence[rid]
                entry["confidence"] = {"top1": log.top1, "rank_mass": log.rank_mass,
                                       "picks": [[list(p), r] for p, r in log.picks]}
            requests[str(rid)] = entry
        return {"scheme": label, "source": source, "requests": requests}


def _rows(counts: dict) -> list[list]:
    return [[a, b, n] for (a, b), n in sorted(counts.items())]


def _counts(rows, where: str) -> dict:
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 3 for r in rows):
        raise ValueError(f"{where}: expected a list of [key, key, count] rows")
    return {(int(a), int(b)): n for a, b, n in rows}


COUNTS_NAMES = ("counts-{}.json.gz", "counts-{}.json")  # what compare writes; unpacked, as 0.46.0's first runs did


def counts_path(folder: Path, label: str) -> Path | None:
    """The counts file of scheme `label` in a comparison's folder, packed or not; None where none."""
    return next((folder / n.format(label) for n in COUNTS_NAMES if (folder / n.format(label)).is_file()), None)


def write_counts(path: Path, counts: RequestCounts, label: str, source: str) -> None:
    """The counts file, packed where `path` ends .gz."""
    text = json.dumps(counts.to_json(label, source))
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text)


def read_counts(path: Path) -> tuple[str, str, RequestCounts]:
    """(label, source, counts) from a counts file; SpecError naming the file and key where it
    is not one."""
    try:
        doc = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(str(path), "", f"cannot read the request counts: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("requests"), dict) or not isinstance(doc.get("scheme"), str):
        raise SpecError(str(path), "", "expected {scheme, source, requests: {id: counts}} "
                        "(validation/request_counts.py)")
    out = RequestCounts()
    for key, entry in doc["requests"].items():
        where = f"requests.{key}"
        try:
            rid = int(key)
            out.per_request[rid] = (_counts(entry.get("hist", []), f"{where}.hist"),
                                    _counts(entry.get("ranks", []), f"{where}.ranks"))
            if "tries" in entry:
                n, d = entry["tries"]
                out.tries[rid] = (n, d)
            if "uncut" in entry:
                out.uncut[rid] = _counts(entry["uncut"], f"{where}.uncut")
            if "confidence" in entry:
                c = entry["confidence"]
                out.confidence[rid] = ConfidenceLog(list(c["top1"]), list(c["rank_mass"]),
                                                    [(tuple(p), int(r)) for p, r in c["picks"]])
            out.passes[rid] = Counter({j: int(c) for j, c in enumerate(entry.get("passes", []))})
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SpecError(str(path), where, f"not a request's counts ({exc})") from None
    return doc["scheme"], str(doc.get("source", "")), out
