"""engine.corpus: the split rule, the stdlib scan's exclusions, the committed manifest and prompt sets."""
import json
import sys

import pytest

from engine.corpus import (DOMAINS, MANIFEST, PROMPTS, SDIST, build_manifest, data_dir, diff_manifest, heldout_groups,
                           load_manifest, load_prompts, manifest_sha256, scan_code, work_key)
from engine.tokenizer import load_tokenizer

MAN = load_manifest()


def test_heldout_groups_deterministic():
    groups = [f"g{i}" for i in range(40)]
    held = heldout_groups("text", groups)
    assert held == heldout_groups("text", list(reversed(groups)) + groups[:5])
    assert len(held) == 4  # ceil(0.10 x 40)
    assert heldout_groups("code", groups) != held  # the domain salts the order


def test_work_key_pairs_both_editions():
    works = {}
    for e in MAN["text"]["files"]:
        assert e["work"] == work_key(e["path"].rsplit("/", 1)[1][:-4])
        works.setdefault(e["work"], set()).add(e["split"])
    assert all(len(s) == 1 for s in works.values())  # no work straddles the split
    assert work_key("twelfe-night_gut_f") == work_key("twelfth_night_gut") == "twelfth_night"
    assert len(works) == 42


def test_scan_code_rules(tmp_path):
    for rel, data in {"a.py": b"x = 1\n", "pkg/b.py": "s = 'caf\u00e9'\n".encode(), "bad.py": b"x = '\xff'\n",
                      "site-packages/c.py": b"", "_sysconfigdata__x.py": b"", "pkg/__pycache__/d.py": b"",
                      "test/test_e.py": b"pass\n", "notes.txt": b"hi"}.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    entries, skipped = scan_code(tmp_path)
    assert [e["path"] for e in entries] == ["a.py", "pkg/b.py", "test/test_e.py"]
    assert skipped == ["bad.py"]
    assert all(e["split"] in ("train", "heldout") for e in entries)


def test_committed_manifest():
    assert MAN["text"]["sdist"] == SDIST and "Creative Commons Attribution" in MAN["text"]["attribution"]
    for dom in DOMAINS:
        files = MAN[dom]["files"]
        assert [e["path"] for e in files] == sorted(e["path"] for e in files)
        for split, s in MAN[dom]["summary"].items():
            es = [e for e in files if e["split"] == split]
            assert s == {"files": len(es), "bytes": sum(e["bytes"] for e in es)} and s["files"] > 0
    code_split = {}
    for e in MAN["code"]["files"]:  # identical files share a split
        assert code_split.setdefault(e["sha256"], e["split"]) == e["split"]


@pytest.mark.skipif(sys.version.split()[0] != MAN["code"]["python"], reason="the manifest pins another Python")
@pytest.mark.skipif(not (data_dir() / SDIST["filename"]).exists(), reason="the sdist is not in data/")
def test_local_sources_match_manifest():
    assert diff_manifest(MAN, build_manifest()) == []


def test_committed_prompts():
    tok = load_tokenizer()
    for dom in DOMAINS:
        data = json.loads(PROMPTS[dom].read_text())
        assert data["domain"] == dom and data["tokenizer_sha256"] == tok.sha256
        assert data["manifest_sha256"] == manifest_sha256()
        held = {e["path"] for e in MAN[dom]["files"] if e["split"] == "heldout"}
        prompts = load_prompts(dom)
        assert len(prompts) == 64 and all(64 <= len(p) <= 256 for p in prompts)
        for p in data["prompts"]:
            assert p["source"] in held and len(p["next"]) == 64
            assert all(0 <= i < tok.vocab_size and i != tok.eot for i in p["tokens"] + p["next"])
    with pytest.raises(ValueError):
        load_prompts("poetry")
    assert MANIFEST.exists()
