"""The trace file (DESIGN.md §4, contract version 1) as frozen dataclasses.

`load_trace(path)` is the only entry point; it reads YAML with `yaml.safe_load`, rejects unknown
keys and raises `SpecError(file, key path, expectation)` for anything it cannot accept.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.errors import SpecError
from sim.hardware import HardwareSpec, hardware_from_node
from sim.models import ModelSpec, model_from_node
from sim.schemes import SchemeSpec, scheme_from_node
from sim.specio import Node, is_file, load_yaml, opt

MAX_REQUESTS = 10_000_000
MAX_TOKENS = 10_000_000
MAX_PAGES = 10_000_000  # the allocator holds its free pages in a list: about 40 bytes a page


@dataclass(frozen=True)
class LengthDist:
    """Token-count distribution: fixed | uniform | lognormal | empirical."""

    dist: str
    value: int = 0
    min: int = 1
    max: int = MAX_TOKENS
    median: float = 0.0
    sigma: float = 0.0
    values: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()

    @property
    def upper(self) -> int:
        """The largest length it can produce."""
        return {"fixed": self.value, "empirical": max(self.values or (0,))}.get(self.dist, self.max)


@dataclass(frozen=True)
class ArrivalSpec:
    process: str  # poisson | gamma | closed | replay
    rate_per_s: float = 0.0
    cv: float = 1.0
    concurrency: int = 0
    file: Path | None = None
    format: str = "azure"
    time_scale: float = 1.0  # replay: multiply inter-arrival gaps (0.5 = twice the rate)
    skip: int = 0  # replay: rows to skip before the first request


@dataclass(frozen=True)
class WorkloadSpec:
    requests: int
    arrival: ArrivalSpec
    prompt_tokens: LengthDist | None  # None only for replay, which takes lengths from the file
    output_tokens: LengthDist | None
    temperature: float = 0.0


@dataclass(frozen=True)
class ServingSpec:
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    page_size: int = 16
    memory_fraction: float = 0.9
    paging: str = "indexshare"
    chunked_prefill: bool = True
    kv_pages: int | None = None  # override the pool size derived from memory


@dataclass(frozen=True)
class SLOSpec:
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None


@dataclass(frozen=True)
class EngineSpec:
    """Read by the engine only; the simulator ignores it. Values are checked by the engine."""

    checkpoint: object = None  # family name | {random_shape: preset, layers: n, ...}
    backend: str | None = None
    device: str | None = None
    node: Node | None = None  # where it came from, for the engine's own error messages


@dataclass(frozen=True)
class TraceSpec:
    version: int
    name: str
    description: str
    seed: int
    hardware: HardwareSpec
    model: ModelSpec
    tp: int
    serving: ServingSpec
    workload: WorkloadSpec
    speculation: tuple[SchemeSpec, ...]
    sweep_concurrency: tuple[int, ...]
    slo: SLOSpec
    engine: EngineSpec
    path: Path
    num_pages: int  # KV pages in one replica's pool

    @property
    def base_dir(self) -> Path:
        return self.path.parent


_TOP = ("version", "name", "description", "seed", "hardware", "model", "parallel", "serving",
        "workload", "speculation", "sweep", "slo", "engine")


def load_trace(path: str | Path) -> TraceSpec:
    path = Path(path)
    data = load_yaml(path, "trace file")
    try:
        return trace_from_node(Node(data, str(path), ""), path)
    except RecursionError:  # e.g. `preset:` mappings nested hundreds deep
        raise SpecError(str(path), "", "nested too deeply to read") from None


def trace_from_node(root: Node, path: Path) -> TraceSpec:
    f = root.mapping(_TOP, required=("version", "name", "hardware", "model", "workload"))
    version = f["version"].integer()
    if version != 1:
        raise f["version"].error(f"unsupported trace version {version}; this simulator reads version 1")
    base = path.parent
    hardware = hardware_from_node(f["hardware"], base)
    model = model_from_node(f["model"], base)
    tp = 1
    if "parallel" in f:
        pf = f["parallel"].mapping(("tp",))
        tp = opt(pf, "tp", 1, lambda n: n.integer(lo=1, hi=hardware.devices_per_node))
        if "tp" in pf and model.heads % tp:
            raise pf["tp"].error(f"tp {tp} must divide the model's {model.heads} heads")
    # priced on the warm matmul and gather curves where its weights fit the last-level cache (a
    # drafter's own, a fraction of the target's, are not counted)
    hardware = hardware.for_weights(model.weight_bytes / tp)
    serving = _serving(f["serving"]) if "serving" in f else ServingSpec()
    workload = _workload(f["workload"], base)
    spec_nodes = f["speculation"].seq(min_len=1, max_len=32) if "speculation" in f \
        else [Node({"scheme": "none"}, root.file, "speculation[0]")]
    schemes = tuple(scheme_from_node(n, model, base) for n in spec_nodes)
    seen: set[str] = set()
    for n, sch in zip(spec_nodes, schemes):
        _name(n.child("label") if isinstance(n.value, dict) and "label" in n.value else n, sch.label)
        if sch.label in seen:
            raise n.error(f"label '{sch.label}' is used twice; give each entry a distinct `label:`")
        seen.add(sch.label)
    sweep: tuple[int, ...] = ()
    if "sweep" in f:
        sf = f["sweep"].mapping(("concurrency",), required=("concurrency",))
        sweep = tuple(n.integer(lo=1, hi=100_000) for n in sf["concurrency"].seq(min_len=1, max_len=64))
    slo = SLOSpec()
    if "slo" in f:
        lf = f["slo"].mapping(("ttft_p99_s", "tpot_p99_s"))
        slo = SLOSpec(*(opt(lf, k, None, lambda n: n.number(lo=0, lo_open=True)) for k in ("ttft_p99_s", "tpot_p99_s")))
    engine = _engine(f["engine"]) if "engine" in f else EngineSpec()
    num_pages = _kv_pages(f, hardware, model, tp, serving)
    return TraceSpec(
        version=version,
        name=_name(f["name"]),
        description=f["description"].string() if "description" in f else "",
        seed=opt(f, "seed", 0, lambda n: n.integer(lo=0, hi=2**63 - 1)),
        hardware=hardware, model=model, tp=tp, serving=serving, workload=workload,
        speculation=schemes, sweep_concurrency=sweep, slo=slo, engine=engine, path=path,
        num_pages=num_pages,
    )


def _name(node: Node, name: str | None = None) -> str:
    """The trace's name (its default output folder, out/<name>) or a scheme's label (in the names
    of its CSV files): a plain file name."""
    name = node.string() if name is None else name
    if not name or len(name) > 200 or name in (".", "..") or any(c in name for c in "/\\") \
            or not name.isprintable():
        raise node.error(f"expected a file name (1-200 printable characters, no / or \\), got {name!r}")
    return name


def _serving(node: Node) -> ServingSpec:
    f = node.mapping(("max_num_seqs", "max_num_batched_tokens", "page_size", "memory_fraction", "paging",
                      "chunked_prefill", "kv_pages"))
    d = ServingSpec()
    s = ServingSpec(
        max_num_seqs=opt(f, "max_num_seqs", d.max_num_seqs, lambda n: n.integer(lo=1, hi=100_000)),
        max_num_batched_tokens=opt(f, "max_num_batched_tokens", d.max_num_batched_tokens, lambda n: n.integer(lo=1, hi=10_000_000)),
        page_size=opt(f, "page_size", d.page_size, lambda n: n.integer(lo=1, hi=4096)),
        memory_fraction=opt(f, "memory_fraction", d.memory_fraction, lambda n: n.number(lo=0, hi=1, lo_open=True)),
        paging=opt(f, "paging", d.paging, lambda n: n.string(("naive", "indexshare"))),
        chunked_prefill=opt(f, "chunked_prefill", d.chunked_prefill, Node.boolean),
        kv_pages=opt(f, "kv_pages", None, lambda n: n.integer(lo=1, hi=MAX_PAGES)),
    )
    return s


def _kv_pages(f: dict[str, Node], hw: HardwareSpec, model: ModelSpec, tp: int, serving: ServingSpec) -> int:
    if serving.kv_pages is not None:
        return serving.kv_pages
    budget = serving.memory_fraction * hw.mem_bytes * tp
    free = budget - model.weight_bytes
    page_bytes = model.kv_bytes_per_token * serving.page_size
    pages = int(free // page_bytes) if free > 0 else 0
    if pages < 1:
        raise f["model"].error(
            f"does not fit: {model.weight_bytes / 1e9:.1f} GB of weights leave no room for one KV page in "
            f"{serving.memory_fraction:g} x {hw.mem_bytes / 1e9:.0f} GB x tp {tp} = {budget / 1e9:.1f} GB "
            "(raise parallel.tp, serving.memory_fraction, or pick a larger device)")
    if pages > MAX_PAGES:
        raise SpecError(f["model"].file, "serving", f"{pages:.3g} KV pages of {serving.page_size} tokens exceed the "
                        f"simulator's limit of {MAX_PAGES:,}; raise serving.page_size or set serving.kv_pages")
    return pages


def _length(node: Node) -> LengthDist:
    kind = node.tag("dist", ("fixed", "uniform", "lognormal", "empirical"))
    tok = lambda n: n.integer(lo=1, hi=MAX_TOKENS)  # noqa: E731
    if kind == "fixed":
        f = node.mapping(("dist", "value"), required=("value",))
        return LengthDist(kind, value=tok(f["value"]))
    if kind == "uniform":
        f = node.mapping(("dist", "min", "max"), required=("min", "max"))
        lo, hi = tok(f["min"]), tok(f["max"])
        if hi < lo:
            raise f["max"].error(f"expected max >= min ({lo}), got {hi}")
        return LengthDist(kind, min=lo, max=hi)
    if kind == "lognormal":
        f = node.mapping(("dist", "median", "sigma", "min", "max"), required=("median", "sigma"))
        lo, hi = opt(f, "min", 1, tok), opt(f, "max", MAX_TOKENS, tok)
        if hi < lo:
            raise f["max"].error(f"expected max >= min ({lo}), got {hi}")
        return LengthDist(kind, median=f["median"].number(lo=1, hi=MAX_TOKENS), sigma=f["sigma"].number(lo=0, hi=10),
                          min=lo, max=hi)
    f = node.mapping(("dist", "values", "weights"), required=("values",))
    values = tuple(tok(n) for n in f["values"].seq(min_len=1, max_len=1_000_000))
    weights: tuple[float, ...] = ()
    if "weights" in f:
        weights = tuple(n.number(lo=0) for n in f["weights"].seq(min_len=len(values), max_len=len(values)))
        if sum(weights) <= 0:
            raise f["weights"].error("expected weights with a positive sum")
    return LengthDist(kind, values=values, weights=weights)


def _arrival(node: Node, base: Path) -> ArrivalSpec:
    process = node.tag("process", ("poisson", "gamma", "closed", "replay"))
    if process == "poisson":
        f = node.mapping(("process", "rate_per_s"), required=("rate_per_s",))
        return ArrivalSpec(process, rate_per_s=f["rate_per_s"].number(lo=0, hi=1e7, lo_open=True))
    if process == "gamma":
        f = node.mapping(("process", "rate_per_s", "cv"), required=("rate_per_s", "cv"))
        return ArrivalSpec(process, rate_per_s=f["rate_per_s"].number(lo=0, hi=1e7, lo_open=True),
                           cv=f["cv"].number(lo=0, hi=100, lo_open=True))
    if process == "closed":
        f = node.mapping(("process", "concurrency"), required=("concurrency",))
        return ArrivalSpec(process, concurrency=f["concurrency"].integer(lo=1, hi=100_000))
    f = node.mapping(("process", "file", "format", "time_scale", "skip"), required=("file",))
    rel = f["file"].string()
    file = Path(rel) if Path(rel).is_absolute() else base / rel
    if not is_file(file):
        raise f["file"].error(f"replay file not found: {file} (the Azure LLM inference trace 2023 CSVs; "
                              "see ../shared/data/azure-llm-2023/README.md)")
    return ArrivalSpec(process, file=file, format=opt(f, "format", "azure", lambda n: n.string(("azure",))),
                       time_scale=opt(f, "time_scale", 1.0, lambda n: n.number(lo=0, hi=1e6, lo_open=True)),
                       skip=opt(f, "skip", 0, lambda n: n.integer(lo=0, hi=MAX_REQUESTS)))


def _workload(node: Node, base: Path) -> WorkloadSpec:
    f = node.mapping(("requests", "arrival", "prompt_tokens", "output_tokens", "temperature"),
                     required=("requests", "arrival"))
    arrival = _arrival(f["arrival"], base)
    lengths = {}
    for key in ("prompt_tokens", "output_tokens"):
        if key in f:
            lengths[key] = _length(f[key])
        elif arrival.process != "replay":
            raise node.error(f"missing required key '{key}' (only a replay takes lengths from its file)")
        else:
            lengths[key] = None
    return WorkloadSpec(
        requests=f["requests"].integer(lo=1, hi=MAX_REQUESTS),
        arrival=arrival,
        prompt_tokens=lengths["prompt_tokens"],
        output_tokens=lengths["output_tokens"],
        temperature=opt(f, "temperature", 0.0, lambda n: n.number(lo=0, hi=100)),
    )


def _engine(node: Node) -> EngineSpec:
    f = node.mapping(("checkpoint", "backend", "device", "prompts"))
    ckpt = f["checkpoint"].value if "checkpoint" in f else None
    if ckpt is not None and not isinstance(ckpt, (str, dict)):
        raise f["checkpoint"].error("expected a family name or a mapping like {random_shape: llama-3.2-1b, layers: 1}")
    return EngineSpec(
        checkpoint=ckpt,
        backend=opt(f, "backend", None, Node.string),
        device=opt(f, "device", None, Node.string),
        node=node,
    )


__all__ = ["TraceSpec", "WorkloadSpec", "ArrivalSpec", "LengthDist", "ServingSpec", "SLOSpec", "EngineSpec",
           "load_trace", "trace_from_node", "SpecError"]
