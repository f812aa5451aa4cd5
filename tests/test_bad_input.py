"""Bad traces end in a clean error, never a traceback (DESIGN.md §4 rules).

A Hypothesis fuzz test mutates small valid traces (wrong types, negative / zero / non-finite /
absurd numbers, unknown keys, missing keys and sections, unknown presets, models that do not fit,
broken YAML syntax, YAML tags that try to build Python objects) and runs ``python -m sim run`` in
process on each. Every run must either succeed (only for mutations that can stay valid) or return
exit code 2 with one line ``error: <trace file>: <key path>: <message>`` on stderr; an exception
escaping ``sim.cli.main`` fails the test. Example tests pin the exact key path of one case per
category, and a few subprocess runs check the real command line.
"""
from __future__ import annotations

import contextlib
import copy
import io
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from hypothesis import assume, given, note
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st

from sim.cli import main

TRACE_NAME = "fuzzed-trace.yaml"
REPO = Path(__file__).resolve().parents[1]

# Two small valid traces: each simulates in well under a second.
BASE_A = {
    "version": 1,
    "name": "fuzz-a",
    "description": "closed loop, presets by name",
    "seed": 3,
    "hardware": "h100-sxm",
    "model": "llama-3.2-1b",
    "parallel": {"tp": 1},
    "serving": {"max_num_seqs": 8, "max_num_batched_tokens": 2048, "page_size": 16, "memory_fraction": 0.9,
                "paging": "indexshare", "chunked_prefill": True},
    "workload": {
        "requests": 20,
        "arrival": {"process": "closed", "concurrency": 4},
        "prompt_tokens": {"dist": "uniform", "min": 16, "max": 64},
        "output_tokens": {"dist": "fixed", "value": 16},
        "temperature": 0.0,
    },
    "speculation": [{"scheme": "none"}],
    "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.05},
    "engine": {"checkpoint": "tiny", "backend": "torch", "device": "cpu"},
}
BASE_B = {
    "version": 1,
    "name": "fuzz-b",
    "seed": 11,
    "hardware": {"preset": "a100-80g", "memory_gb": 80, "eta_memory": 0.8, "launch_us": 2.0,
                 "tflops": {"bf16": 312.0, "fp32": 19.5}},
    "model": {"preset": "llama-3.2-1b", "layers": 16, "tied_embeddings": True, "attention": "mha",
              "bytes_per_kv": 2},
    "parallel": {"tp": 2},
    "serving": {"max_num_seqs": 16, "page_size": 32, "paging": "naive", "chunked_prefill": False,
                "kv_pages": 4000},
    "workload": {
        "requests": 20,
        "arrival": {"process": "poisson", "rate_per_s": 40.0},
        "prompt_tokens": {"dist": "lognormal", "median": 48, "sigma": 0.5, "min": 8, "max": 128},
        "output_tokens": {"dist": "empirical", "values": [4, 8, 12], "weights": [1, 2, 1]},
    },
    "speculation": [{"scheme": "none"}],
    "sweep": {"concurrency": [2, 4]},
    "slo": {"ttft_p99_s": 1.0},
}
BASE_C = {  # gamma arrivals, the smallest trace: only the required sections
    "version": 1,
    "name": "fuzz-c",
    "hardware": "h200",
    "model": "llama-3.1-8b",
    "workload": {
        "requests": 12,
        "arrival": {"process": "gamma", "rate_per_s": 20.0, "cv": 2.0},
        "prompt_tokens": {"dist": "fixed", "value": 32},
        "output_tokens": {"dist": "uniform", "min": 2, "max": 9},
    },
}
BASES = (BASE_A, BASE_B, BASE_C)

# ---------------------------------------------------------------------------------- key paths

Path_ = tuple  # a key path as a tuple of str keys and int indices


def dotted(path: Path_) -> str:
    """('speculation', 0, 'scheme') -> 'speculation[0].scheme', as sim.specio names it."""
    out = ""
    for k in path:
        out = f"{out}[{k}]" if isinstance(k, int) else (f"{out}.{k}" if out else k)
    return out


def walk(value, path: Path_ = ()):
    """Every (path, value) under `value`, containers included, the root excluded."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for k, v in items:
        yield path + (k,), v
        yield from walk(v, path + (k,))


def get(doc, path: Path_):
    for k in path:
        doc = doc[k]
    return doc


def put(doc, path: Path_, value) -> None:
    get(doc, path[:-1])[path[-1]] = value


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def category(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if is_number(v):
        return "number"
    return {str: "str", list: "list", dict: "mapping"}[type(v)]


# Keys whose value may be of any type (the engine checks them, the simulator does not).
ANY_TYPE = {"engine.checkpoint"}
# Numbers without an upper bound: an absurd value there is merely odd, not wrong.
UNBOUNDED = {"slo.ttft_p99_s", "slo.tpot_p99_s", "workload.output_tokens.weights"}

_DISCRIMINATED = {  # tag key -> tag value -> keys that value requires beside the tag
    "process": {"poisson": {"rate_per_s"}, "gamma": {"rate_per_s", "cv"}, "closed": {"concurrency"}},
    "dist": {"fixed": {"value"}, "uniform": {"min", "max"}, "lognormal": {"median", "sigma"},
             "empirical": {"values"}},
}
_REQUIRED = {
    (): {"version", "name", "hardware", "model", "workload"},
    ("workload",): {"requests", "arrival", "prompt_tokens", "output_tokens"},
    ("workload", "arrival"): {"process"},
    ("workload", "prompt_tokens"): {"dist"},
    ("workload", "output_tokens"): {"dist"},
    ("sweep",): {"concurrency"},
}


def required_keys(doc, parent: Path_) -> set[str]:
    """The keys of the mapping at `parent` that a trace may not omit."""
    req = set(_REQUIRED.get(parent, ()))
    m = get(doc, parent)
    for tag, table in _DISCRIMINATED.items():
        if tag in req and m.get(tag) in table:
            req |= table[m[tag]]
    if len(parent) == 2 and parent[0] == "speculation":
        req.add("scheme")
    if parent in (("hardware",), ("model",)):
        req.add("preset")  # the mappings in BASE_B lean on their preset for the required fields
    return req


# ---------------------------------------------------------------------------------- mutations

@dataclass
class Mutation:
    kind: str
    data: object = None  # the trace as a Python object (dumped to YAML), or
    text: str | None = None  # the trace as raw YAML text
    must_fail: bool = True
    path: str | None = None  # the key path the error must name (prefix match), None: any
    message: list[str] = field(default_factory=list)  # substrings the error line must contain
    yaml_error: bool = False  # the error is the YAML parser's: "invalid YAML at line N"

    def yaml_text(self) -> str:
        return self.text if self.text is not None else yaml.safe_dump(self.data, sort_keys=False)


WRONG_TYPES = {"str": "abc", "list": [1, "x"], "mapping": {"zz": 1}, "null": None, "bool": True}
NEGATIVE = (-1, -0.5, -1e30, -(10**30))
ZERO = (0, 0.0)
NON_FINITE = (math.nan, math.inf, -math.inf)
ABSURD = (1e30, 10**30, 10**400, 1e308)
PLAUSIBLE = (0.5, 1, 3, 100)
UNKNOWN_NAMES = ("gpt-7", "H100-SXM", "h100", "", " ", "[/]", "[bold]x", "x" * 300, "a\x00b",
                 "nope.yaml", "../nope.yml", ".", "sub/dir", "0", "none ", "preset")
PYTHON_TAGS = ('!!python/object/apply:os.system ["touch {canary}"]', "!!python/name:os.system",
               '!!python/object/new:os.system ["touch {canary}"]', "!!python/module:os",
               "!!python/tuple [1, 2]", "!foo bar", "!<tag:example.com,2024:thing> 1")
VALUE_TAGS = ("!!binary aGVsbG8=", "!!set {a, b}", "!!timestamp 2001-12-14", "!!str 12")
# scalars the safe constructors cannot build: YAML errors with a line, like the Python tags
BAD_SCALARS = ("!!int abc", "!!bool maybe", "!!timestamp x", "!!float abc", "2001-13-45", "1" * 5000)


@st.composite
def mutations(draw) -> Mutation:
    base = copy.deepcopy(draw(st.sampled_from(BASES)))
    kind = draw(st.sampled_from(("wrong_type", "negative", "zero", "non_finite", "absurd", "plausible",
                                 "unknown_key", "delete", "unknown_name", "does_not_fit", "broken_yaml",
                                 "python_tag", "value_tag")))
    paths = [p for p, _ in walk(base)]
    numeric = [p for p, v in walk(base) if is_number(v)]
    mappings = [()] + [p for p, v in walk(base) if isinstance(v, dict)]

    if kind == "wrong_type":
        path = draw(st.sampled_from(paths))
        old = category(get(base, path))
        new = draw(st.sampled_from(sorted(c for c in WRONG_TYPES if c != old)))
        put(base, path, copy.deepcopy(WRONG_TYPES[new]))
        return Mutation(kind, base, must_fail=dotted(path) not in ANY_TYPE, path=dotted(path))

    if kind in ("negative", "zero", "non_finite", "absurd", "plausible"):
        path = draw(st.sampled_from(numeric))
        pool = {"negative": NEGATIVE, "zero": ZERO, "non_finite": NON_FINITE, "absurd": ABSURD,
                "plausible": PLAUSIBLE}[kind]
        put(base, path, draw(st.sampled_from(pool)))
        key = dotted(path[:-1]) if isinstance(path[-1], int) else dotted(path)
        must = kind in ("negative", "non_finite") or (kind == "absurd" and key not in UNBOUNDED)
        # a plausible number may break a relation between fields, reported at a neighbour's path
        return Mutation(kind, base, must_fail=must, path=dotted(path) if must else None)

    if kind == "unknown_key":
        parent = draw(st.sampled_from(mappings))
        if dotted(parent) in ANY_TYPE:
            parent = ()
        get(base, parent)["zz_unknown"] = draw(st.sampled_from((1, "x", None, [1], {"a": 1})))
        return Mutation(kind, base, path=dotted(parent + ("zz_unknown",)), message=["unknown key"])

    if kind == "delete":
        parent = draw(st.sampled_from([m for m in mappings if get(base, m)]))
        key = draw(st.sampled_from(sorted(get(base, parent))))
        required = key in required_keys(base, parent)
        del get(base, parent)[key]
        if required:
            return Mutation(kind, base, path=dotted(parent) or "(top level)", message=["missing required key"])
        return Mutation(kind, base, must_fail=False)

    if kind == "unknown_name":
        targets = [p for p, v in walk(base) if isinstance(v, str) and p[-1] in
                   ("hardware", "model", "preset", "scheme", "dist", "process", "paging", "attention")]
        path = draw(st.sampled_from(targets))
        put(base, path, draw(st.sampled_from(UNKNOWN_NAMES)))
        return Mutation(kind, base, path=dotted(path))

    if kind == "does_not_fit":
        case = draw(st.sampled_from(("70b-a100", "fraction", "tiny-device", "small-pool")))
        serving = base.setdefault("serving", {})
        if case == "small-pool":  # a pool smaller than one request: found when the request arrives
            serving["kv_pages"] = 1
            return Mutation(kind, base, path="serving", message=["KV pages"])
        serving.pop("kv_pages", None)
        if case == "70b-a100":
            base.update(hardware="a100-80g", model="llama-3.1-70b", parallel={"tp": 1})
        elif case == "fraction":
            base["model"] = "llama-3.1-8b"
            serving["memory_fraction"] = 0.01
        else:
            base["hardware"] = {"preset": "h100-sxm", "memory_gb": 1}
        return Mutation(kind, base, path="model", message=["does not fit"])

    if kind == "broken_yaml":
        lines = yaml.safe_dump(base, sort_keys=False).splitlines()
        i = draw(st.integers(0, len(lines) - 1))
        indent = re.match(r" *", lines[i]).group()
        how = draw(st.sampled_from(("bracket", "brace", "quote", "tab", "indent", "control", "colon")))
        if how == "bracket":
            lines.insert(i, f"{indent}zz_broken: [1, 2")
        elif how == "brace":
            lines.insert(i, f"{indent}zz_broken: {{a: 1")
        elif how == "quote":
            lines.insert(i, f'{indent}zz_broken: "abc')
        elif how == "tab":
            lines[i] = "\t" + lines[i].lstrip(" ")
        elif how == "indent":  # a key indented deeper than the scalar before it
            j = next((k for k in range(i, len(lines)) if re.fullmatch(r" *(- )?[\w-]+: [^\[{]+", lines[k])), None)
            assume(j is not None)
            lines.insert(j + 1, " " * (len(re.match(r" *", lines[j]).group()) + 3) + "zz_broken: 1")
        elif how == "control":
            lines[i] += "\x07"
        else:
            lines.insert(i, f"{indent}zz_broken: a: b")
        return Mutation(f"{kind}:{how}", text="\n".join(lines) + "\n", path="(top level)",
                        message=["invalid YAML"], yaml_error=True)

    # YAML tags: put a placeholder at a random path, then swap the tagged node in as text
    path = draw(st.sampled_from(paths))
    old = category(get(base, path))
    put(base, path, "ZZ_PLACEHOLDER")
    text = yaml.safe_dump(base, sort_keys=False)
    assert text.count("ZZ_PLACEHOLDER") == 1
    if kind == "python_tag":
        tag = draw(st.sampled_from(PYTHON_TAGS + BAD_SCALARS))
        return Mutation(kind, text=text.replace("ZZ_PLACEHOLDER", tag), path="(top level)",
                        message=["invalid YAML"], yaml_error=True)
    tag = draw(st.sampled_from(VALUE_TAGS))
    must = dotted(path) not in ANY_TYPE and not (tag.startswith("!!str") and old == "str")
    return Mutation(kind, text=text.replace("ZZ_PLACEHOLDER", tag), must_fail=must, path=dotted(path) if must else None)


# ---------------------------------------------------------------------------------- running

def run_cli(trace: Path, out: Path) -> tuple[int, str, str]:
    """`python -m sim run TRACE --out OUT --quiet --no-progress` in process: (code, stdout, stderr)."""
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        code = main(["run", str(trace), "--out", str(out), "--quiet", "--no-progress"])
    return code, so.getvalue(), se.getvalue()


_ERROR = re.compile(r"error: (?P<file>.+?): (?P<path>\S+?): (?P<message>.*)")


def reported(err: str, trace: Path) -> tuple[str, str]:
    """(key path, message) of the one error line naming `trace`."""
    prefix = f"error: {trace}: "
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one error line, got:\n{err}"
    assert lines[0].startswith(prefix), f"the error does not name the trace file {trace}:\n{err}"
    path, _, message = lines[0][len(prefix):].partition(": ")
    assert path and message, f"no key path in: {lines[0]}"
    return path, message


def names(path: str, expected: str) -> bool:
    return path == expected or path.startswith((expected + ".", expected + "["))


def _note(text: str) -> None:
    if currently_in_test_context():
        note(text)


def check(m: Mutation, workdir: Path) -> None:
    trace = workdir / TRACE_NAME
    text = m.yaml_text().replace("{canary}", str(workdir / "canary"))
    trace.write_text(text, encoding="utf-8")
    _note(f"mutation {m.kind} (must fail: {m.must_fail}, path: {m.path})\n{text}")
    code, out, err = run_cli(trace, workdir / "out")
    _note(f"exit {code}\nstdout: {out}\nstderr: {err}")
    assert "Traceback" not in out + err
    assert not (workdir / "canary").exists(), "a YAML tag ran a Python call"
    if code == 0:
        assert not m.must_fail, f"{m.kind}: the mutated trace was accepted"
        assert (workdir / "out" / "report.json").is_file()
        return
    assert code == 2, f"exit code {code}"
    path, message = reported(err, trace)
    if m.path is not None:
        assert names(path, m.path), f"{m.kind}: the error names {path!r}, expected {m.path!r}: {message}"
    for s in m.message:
        assert s in message, f"{m.kind}: {s!r} not in {message!r}"
    if m.yaml_error:
        assert re.search(r"invalid YAML at line \d+", message), message


@given(mutations())
def test_mutated_traces_fail_cleanly(m: Mutation):
    with tempfile.TemporaryDirectory() as tmp:
        check(m, Path(tmp))


@pytest.mark.parametrize("base", BASES, ids=lambda b: b["name"])
def test_base_traces_are_valid(base, tmp_path):
    check(Mutation("none", copy.deepcopy(base), must_fail=False), tmp_path)


# ---------------------------------------------------------------------------------- one case each

def _fails(tmp_path: Path, doc=None, text: str | None = None) -> tuple[str, str]:
    """Run a trace that must be rejected; returns its (key path, message)."""
    trace = tmp_path / TRACE_NAME
    trace.write_text(text if text is not None else yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    code, out, err = run_cli(trace, tmp_path / "out")
    assert code == 2, (code, out, err)
    assert "Traceback" not in out + err
    return reported(err, trace)


def _with(base: dict, path: Path_, value) -> dict:
    doc = copy.deepcopy(base)
    put(doc, path, value)
    return doc


def _without(base: dict, path: Path_) -> dict:
    doc = copy.deepcopy(base)
    del get(doc, path[:-1])[path[-1]]
    return doc


def test_wrong_type(tmp_path):
    path, msg = _fails(tmp_path, _with(BASE_A, ("workload", "requests"), "twenty"))
    assert path == "workload.requests" and "expected an integer" in msg
    path, msg = _fails(tmp_path, _with(BASE_A, ("speculation", 0, "scheme"), ["none"]))
    assert path == "speculation[0].scheme" and "expected a string" in msg
    path, msg = _fails(tmp_path, _with(BASE_A, ("serving",), None))
    assert path == "serving" and "expected a mapping" in msg
    path, msg = _fails(tmp_path, _with(BASE_A, ("serving", "chunked_prefill"), "yes please"))
    assert path == "serving.chunked_prefill" and "true or false" in msg


def test_negative_and_zero(tmp_path):
    path, msg = _fails(tmp_path, _with(BASE_B, ("workload", "arrival", "rate_per_s"), -8.0))
    assert path == "workload.arrival.rate_per_s" and "> 0" in msg
    path, msg = _fails(tmp_path, _with(BASE_A, ("workload", "arrival", "concurrency"), 0))
    assert path == "workload.arrival.concurrency" and ">= 1" in msg
    path, msg = _fails(tmp_path, _with(BASE_B, ("sweep", "concurrency", 1), -4))
    assert path == "sweep.concurrency[1]"


def test_non_finite(tmp_path):
    path, msg = _fails(tmp_path, _with(BASE_A, ("serving", "memory_fraction"), math.nan))
    assert path == "serving.memory_fraction" and "finite" in msg
    path, msg = _fails(tmp_path, _with(BASE_B, ("hardware", "tflops", "bf16"), math.inf))
    assert path == "hardware.tflops.bf16" and "finite" in msg
    path, msg = _fails(tmp_path, _with(BASE_A, ("workload", "requests"), -math.inf))
    assert path == "workload.requests" and "integer" in msg


def test_absurd_sizes(tmp_path):
    path, msg = _fails(tmp_path, _with(BASE_A, ("workload", "requests"), 10**30))
    assert path == "workload.requests" and "<=" in msg
    path, msg = _fails(tmp_path, _with(BASE_A, ("serving", "max_num_seqs"), 1e30))
    assert path == "serving.max_num_seqs"
    path, msg = _fails(tmp_path, _with(BASE_B, ("workload", "prompt_tokens", "median"), 10**400))
    assert path == "workload.prompt_tokens.median" and "finite" in msg
    path, msg = _fails(tmp_path, _with(BASE_A, ("seed",), 10**400))
    assert path == "seed" and "<=" in msg


def test_absurd_pool(tmp_path):
    """A device so large (within each field's range) that the KV pool would not fit in this
    machine's memory is rejected up front, not built page by page."""
    doc = _with(BASE_A, ("hardware",), {"preset": "h100-sxm", "memory_gb": 1e6})
    doc["serving"]["page_size"] = 1
    path, msg = _fails(tmp_path, doc)
    assert path == "serving" and "kv_pages" in msg
    path, msg = _fails(tmp_path, _with(BASE_B, ("serving", "kv_pages"), 10**9))
    assert path == "serving.kv_pages"


def test_unknown_key(tmp_path):
    path, msg = _fails(tmp_path, _with(BASE_A, ("workload", "arrival", "rate"), 3))
    assert path == "workload.arrival.rate" and "unknown key" in msg and "concurrency" in msg
    path, msg = _fails(tmp_path, _with(BASE_A, ("speculations",), [{"scheme": "none"}]))
    assert path == "speculations" and "unknown key" in msg


def test_missing_key_and_section(tmp_path):
    path, msg = _fails(tmp_path, _without(BASE_A, ("workload",)))
    assert path == "(top level)" and "missing required key 'workload'" in msg
    path, msg = _fails(tmp_path, _without(BASE_B, ("workload", "arrival", "rate_per_s")))
    assert path == "workload.arrival" and "missing required key 'rate_per_s'" in msg
    # the tag of a tagged mapping: named as missing, not its siblings as unknown
    path, msg = _fails(tmp_path, _without(BASE_A, ("workload", "output_tokens", "dist")))
    assert path == "workload.output_tokens" and "missing required key 'dist'" in msg
    path, msg = _fails(tmp_path, _without(BASE_A, ("workload", "arrival", "process")))
    assert path == "workload.arrival" and "missing required key 'process'" in msg
    path, msg = _fails(tmp_path, _without(BASE_A, ("workload", "prompt_tokens")))
    assert path == "workload" and "prompt_tokens" in msg
    path, msg = _fails(tmp_path, _with(BASE_A, ("speculation",), []))
    assert path == "speculation" and "at least 1" in msg


@pytest.mark.parametrize("path, value, expected", [
    (("hardware",), "h100", "unknown hardware preset"),
    (("model",), "llama-9", "unknown model preset"),
    (("speculation", 0, "scheme"), "medusa2", "expected one of"),
    (("workload", "prompt_tokens", "dist"), "zipf", "expected one of"),
    (("workload", "arrival", "process"), "hawkes", "expected one of"),
    (("serving", "paging"), "buddy", "expected one of"),
])
def test_unknown_presets(tmp_path, path, value, expected):
    got, msg = _fails(tmp_path, _with(BASE_A, path, value))
    assert got == dotted(path) and expected in msg and value in msg


@pytest.mark.parametrize("value", ["missing.yaml", ".", "sub/dir", "x" * 300, "a\x00b", "[/]"])
def test_unknown_profile_paths(tmp_path, value):
    """A hardware or model name that is neither a preset nor a readable file names the trace's key."""
    for key in ("hardware", "model"):
        got, msg = _fails(tmp_path, _with(BASE_A, (key,), value))
        assert got == key, msg
    got, msg = _fails(tmp_path, _with(BASE_B, ("hardware", "preset"), value))
    assert got == "hardware.preset", msg


def test_profile_that_refers_to_itself(tmp_path):
    """Profiles whose `preset:` chain leads back to the first: the error names the profile and its key."""
    (tmp_path / "a.yaml").write_text("preset: b.yaml\n")
    (tmp_path / "b.yaml").write_text("preset: a.yaml\n")
    trace = tmp_path / TRACE_NAME
    for key in ("hardware", "model"):
        trace.write_text(yaml.safe_dump(_with(BASE_A, (key,), "a.yaml")))
        code, out, err = run_cli(trace, tmp_path / "out")
        assert code == 2 and "Traceback" not in out + err, err
        assert err.startswith(f"error: {tmp_path / 'b.yaml'}: preset: ") and "cycle" in err, err


def test_model_does_not_fit(tmp_path):
    doc = copy.deepcopy(BASE_A)
    doc.update(hardware="a100-80g", model="llama-3.1-70b", parallel={"tp": 1})
    path, msg = _fails(tmp_path, doc)
    assert path == "model" and "does not fit" in msg
    doc = _with(BASE_A, ("serving", "memory_fraction"), 0.01)
    path, msg = _fails(tmp_path, doc)
    assert path == "model" and "does not fit" in msg
    path, msg = _fails(tmp_path, _with(BASE_B, ("serving", "kv_pages"), 2))
    assert path == "serving" and "KV pages" in msg


@pytest.mark.parametrize("text, line", [
    ("version: 1\nname: x\nworkload: {requests: [1, 2\n", 4),
    ("version: 1\nname: x\n  hardware: h100-sxm\n", 3),
    ("version: 1\n\tname: x\n", 2),
    ("version: 1\nname: 'x\n", 3),
    ("version: 1\nname: x\x07\n", 2),
])
def test_broken_yaml(tmp_path, text, line):
    path, msg = _fails(tmp_path, text=text)
    assert path == "(top level)" and msg.startswith(f"invalid YAML at line {line}"), msg


@pytest.mark.parametrize("tag", PYTHON_TAGS)
def test_python_tags_are_refused(tmp_path, tag):
    text = yaml.safe_dump(BASE_A, sort_keys=False).replace("name: fuzz-a", "name: " + tag)
    text = text.replace("{canary}", str(tmp_path / "canary"))
    path, msg = _fails(tmp_path, text=text)
    assert path == "(top level)" and msg.startswith("invalid YAML at line 2"), msg
    assert not (tmp_path / "canary").exists()


@pytest.mark.parametrize("scalar", BAD_SCALARS)
def test_scalars_yaml_cannot_build(tmp_path, scalar):
    text = yaml.safe_dump(BASE_A, sort_keys=False).replace("seed: 3", "seed: " + scalar)
    path, msg = _fails(tmp_path, text=text)
    assert path == "(top level)" and msg.startswith("invalid YAML at line 4"), msg


def test_deep_nesting(tmp_path):
    path, msg = _fails(tmp_path, text="version: 1\nname: " + "[" * 5000 + "]" * 5000 + "\n")
    assert path == "(top level)" and "invalid YAML" in msg
    for depth in (50, 400, 3000):  # `preset:` mappings inside each other: the reader's or the loader's limit
        hw = "{preset: " * depth + "h100-sxm" + "}" * depth
        text = yaml.safe_dump(BASE_A, sort_keys=False).replace("hardware: h100-sxm", "hardware: " + hw)
        trace = tmp_path / TRACE_NAME
        trace.write_text(text)
        code, out, err = run_cli(trace, tmp_path / "out")
        assert "Traceback" not in out + err
        if code:
            assert code == 2 and reported(err, trace)[0] == "(top level)" and "nested too deeply" in err, err


def test_value_tags(tmp_path):
    text = yaml.safe_dump(BASE_A, sort_keys=False).replace("name: fuzz-a", "name: !!binary aGVsbG8=")
    path, msg = _fails(tmp_path, text=text)
    assert path == "name" and "expected a string" in msg
    text = yaml.safe_dump(BASE_A, sort_keys=False).replace("seed: 3", "seed: !!str 3")
    path, msg = _fails(tmp_path, text=text)
    assert path == "seed" and "expected an integer" in msg


@pytest.mark.parametrize("name", ["", "a/b", "..", "a\x00b", "x" * 300])
def test_trace_name_must_be_a_folder_name(tmp_path, name):
    """The name becomes the default output folder (out/<name>)."""
    path, msg = _fails(tmp_path, _with(BASE_A, ("name",), name))
    assert path == "name"


@pytest.mark.parametrize("label", ["a/b", "..", "x" * 300])
def test_scheme_label_must_be_a_file_name(tmp_path, label):
    """A label names the run's CSV files (runs/<label>-<concurrency>-requests.csv)."""
    path, msg = _fails(tmp_path, _with(BASE_A, ("speculation", 0), {"scheme": "none", "label": label}))
    assert path == "speculation[0].label"


def test_duplicate_labels(tmp_path):
    path, msg = _fails(tmp_path, _with(BASE_A, ("speculation",), [{"scheme": "none"}, {"scheme": "none"}]))
    assert path == "speculation[1]" and "twice" in msg


def test_missing_scheme_beside_other_keys(tmp_path):
    path, msg = _fails(tmp_path, _with(BASE_A, ("speculation", 0), {"label": "base"}))
    assert path == "speculation[0]" and "missing required key 'scheme'" in msg


def test_medusa_explicit_tree_larger_than_its_budget(tmp_path):
    """An explicit tree the heads cannot hold is an error; the default tree shrinks to fit."""
    doc = _with(BASE_A, ("speculation",), [{"scheme": "none"}, {"scheme": "medusa", "heads": 2, "tree": "medusa-63",
                                                                 "acceptance": {"per_depth": [0.6, 0.4]}}])
    path, msg = _fails(tmp_path, doc)
    assert path == "speculation[1].tree" and "larger than its budget" in msg
    from sim.spec import trace_from_node
    from sim.specio import Node
    ok = _with(BASE_A, ("speculation",), [{"scheme": "none"}, {"scheme": "medusa", "heads": 2,
                                                                "acceptance": {"per_depth": [0.6, 0.4]}}])
    trace = trace_from_node(Node(ok, "t.yaml", ""), tmp_path / "t.yaml")
    assert trace.speculation[1].tree_nodes == 2


def test_medusa_lm_head(tmp_path):
    doc = _with(BASE_A, ("speculation",), [{"scheme": "none"}, {"scheme": "medusa", "heads": 2, "lm_head": "tied",
                                                                 "acceptance": {"per_depth": [0.6, 0.4]}}])
    path, msg = _fails(tmp_path, doc)
    assert path == "speculation[1].lm_head" and "own" in msg and "shared" in msg


def test_unwritable_output_folder(tmp_path):
    trace = tmp_path / TRACE_NAME
    trace.write_text(yaml.safe_dump(BASE_C))
    (tmp_path / "file").write_text("not a folder")
    code, out, err = run_cli(trace, tmp_path / "file" / "out")
    assert code == 2 and "Traceback" not in out + err
    assert err.startswith(f"error: {tmp_path / 'file' / 'out'}: --out: cannot write the report"), err


def test_output_folder_with_markup_characters(tmp_path):
    trace = tmp_path / TRACE_NAME
    trace.write_text(yaml.safe_dump(BASE_C))
    code, out, err = run_cli(trace, tmp_path / "[/]out")
    assert code == 0 and "Traceback" not in out + err and (tmp_path / "[/]out" / "report.json").is_file()


def test_not_a_mapping_and_unreadable(tmp_path):
    for text in ("", "- 1\n- 2\n", "just a string\n", "---\nversion: 1\n---\nversion: 1\n"):
        path, msg = _fails(tmp_path, text=text)
        assert path == "(top level)", msg
    trace = tmp_path / TRACE_NAME
    trace.write_bytes(b"version: 1\nname: \xff\xfe\n")
    code, out, err = run_cli(trace, tmp_path / "out")
    assert code == 2 and "Traceback" not in err
    assert reported(err, trace)[0] == "(top level)"


def test_missing_trace_file(tmp_path):
    trace = tmp_path / "nope.yaml"
    code, _, err = run_cli(trace, tmp_path / "out")
    assert code == 2 and reported(err, trace) == ("(top level)", "trace file not found")


def test_missing_replay_file(tmp_path):
    doc = _with(BASE_A, ("workload", "arrival"), {"process": "replay", "file": "nope.csv"})
    path, msg = _fails(tmp_path, doc)
    assert path == "workload.arrival.file" and "not found" in msg


# ---------------------------------------------------------------------------------- the real command

def _subprocess(trace: Path, out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "sim", "run", str(trace), "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=60, cwd=out.parent, env=env)


@pytest.mark.parametrize("case", ["type", "tag", "missing"])
def test_command_line(tmp_path, case):
    trace = tmp_path / "bad.yaml"
    if case == "type":
        trace.write_text(yaml.safe_dump(_with(BASE_A, ("workload", "arrival", "concurrency"), "four")))
        expected = "workload.arrival.concurrency: expected an integer"
    elif case == "tag":
        canary = tmp_path / "canary"
        trace.write_text(f'version: 1\nname: !!python/object/apply:os.system ["touch {canary}"]\n')
        expected = "(top level): invalid YAML at line 2"
    else:
        expected = "(top level): trace file not found"
    proc = _subprocess(trace, tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f"error: {trace}: {expected}" in proc.stderr
    if case == "tag":
        assert not canary.exists()


def test_speed_rates(tmp_path):
    """The device's speed quantiles: a list, ascending, not all zero (BASE_B's hardware is a mapping)."""
    hw = dict(BASE_B["hardware"], speed_spell_ms=100.0)
    path, msg = _fails(tmp_path, _with(BASE_B, ("hardware",), {**hw, "speed_rates": [0.5, 1.2, 1.0]}))
    assert path == "hardware.speed_rates[2]" and "descend" in msg
    path, msg = _fails(tmp_path, _with(BASE_B, ("hardware",), {**hw, "speed_rates": [0.0, 0.0]}))
    assert path == "hardware.speed_rates" and "positive" in msg
    path, msg = _fails(tmp_path, _with(BASE_B, ("hardware",), {**hw, "speed_rates": 1.0}))
    assert path == "hardware.speed_rates"
    path, msg = _fails(tmp_path, _with(BASE_B, ("hardware",), {**hw, "speed_drift_rates": [1.0, 0.5]}))
    assert path == "hardware.speed_drift_rates[1]" and "descend" in msg
    path, msg = _fails(tmp_path, _with(BASE_B, ("hardware",), {**hw, "speed_drift_ms": -1}))
    assert path == "hardware.speed_drift_ms"
