"""bench/realbugs.py and bench/ecosystem.py: the manifests are valid and keep
the excluded packages out; both scripts run end to end, offline, on stand-in
distributions laid in a cache of their own; and a smoke run on the real
cached cases when a previous run left them in bench/cache/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import dists  # noqa: E402
import ecosystem  # noqa: E402
import realbugs  # noqa: E402

BUGGY = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Positions(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            pos = torch.arange(x.shape[1])
            return self.proj(x) + pos[None, :, None]
    """
).lstrip()
FIXED = BUGGY.replace("torch.arange(x.shape[1])", "torch.arange(x.shape[1], device=x.device)")
CLEAN = textwrap.dedent(
    """
    import torch


    def resume(model, path, device):
        model.load_state_dict(torch.load(path, map_location=device))
    """
).lstrip()
LOADER = textwrap.dedent(
    """
    import torch


    def resume(model, path):
        model.load_state_dict(torch.load(path))
    """
).lstrip()


def _lay(cache: Path, package: str, version: str, files: dict, dist: str = "wheel") -> None:
    root = cache / "src" / f"{package}-{version}-{dist}"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".complete").write_text("stand-in\n")


def _run(script: str, args, cache: Path):
    env = dict(os.environ, DEVLINT_BENCH_CACHE=str(cache))
    return subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], capture_output=True, text=True,
                          env=env, cwd=ROOT)


def _case(**over):
    case = {
        "id": "fakepkg-positions", "package": "fakepkg", "buggy_version": "1.0", "fixed_version": "1.1",
        "files": ["fakepkg/model.py"], "bug_lines": {"fakepkg/model.py": [11]}, "category": "cpu-factory",
        "rule": "DL001", "cross_file": False, "upstream": "stand-in", "summary": "arange on the CPU in forward",
    }
    case.update(over)
    return case


# -- the manifests in the repository ---------------------------------------------------------------

def test_realbug_manifest_is_valid_and_big_enough():
    cases, problems = realbugs.load_cases()
    assert problems == []
    assert len(cases) >= 80
    assert sum(c.cross_file for c in cases) >= 10
    assert not {c.package for c in cases} & realbugs.EXCLUDED
    clean, clean_problems = realbugs.load_clean()
    assert clean_problems == []
    assert len(clean) >= 40
    assert not {c.package for c in clean} & realbugs.EXCLUDED


def test_ecosystem_manifest_pins_enough_packages():
    packages = ecosystem.load_manifest()
    names = [p["package"] for p in packages]
    assert len(names) == len(set(names)) >= 33
    assert not set(names) & realbugs.EXCLUDED
    assert all(p["version"] and p["dist"] in ("wheel", "sdist") for p in packages)


def test_review_file_judgements_are_well_formed():
    judged = ecosystem.load_review()
    packages = {p["package"] for p in ecosystem.load_manifest()}
    for key, j in judged.items():
        assert key.split(":", 1)[0] in packages, key
        assert j.get("reason"), key


def test_manifest_problems_are_one_line_each(tmp_path):
    case, problems = realbugs.parse_case(_case(package="torchvision", category="nonsense", bug_lines={"x.py": [0]}),
                                         "t.json[0]")
    assert case is None
    assert len(problems) == 4
    assert all("\n" not in p and p.startswith("t.json[0] fakepkg-positions: ") for p in problems)


# -- end to end on stand-in distributions ----------------------------------------------------------------

def test_realbugs_end_to_end_offline(tmp_path):
    cache = tmp_path / "cache"
    _lay(cache, "fakepkg", "1.0", {"fakepkg/model.py": BUGGY, "fakepkg/ckpt.py": LOADER, "fakepkg/io.py": CLEAN})
    _lay(cache, "fakepkg", "1.1", {"fakepkg/model.py": "# a comment moves every line\n" + FIXED,
                                   "fakepkg/ckpt.py": LOADER, "fakepkg/io.py": CLEAN})
    data = tmp_path / "data"
    (data / "cases").mkdir(parents=True)
    cases = [
        _case(),
        # the fix did not touch the bug: found, not cleared
        _case(id="fakepkg-load", files=["fakepkg/ckpt.py"], bug_lines={"fakepkg/ckpt.py": [5]},
              category="load-without-map-location", rule="DL010", fixed_version="1.1"),
        # a line nowhere near a finding: missed
        _case(id="fakepkg-missed", files=["fakepkg/io.py"], bug_lines={"fakepkg/io.py": [1]}, cross_file=True,
              category="other-device-bug", rule=None),
        # a distribution that is not cached: skipped offline
        _case(id="otherpkg-x", package="otherpkg"),
    ]
    (data / "cases" / "a.json").write_text(json.dumps(cases))
    (data / "clean.json").write_text(json.dumps([
        {"package": "fakepkg", "version": "1.0", "file": "fakepkg/io.py", "why": "map_location given"},
        {"package": "fakepkg", "version": "1.0", "file": "fakepkg/ckpt.py", "why": "stand-in with a finding",
         "judgements": {"fakepkg/ckpt.py:5:DL010": {"judgement": "real", "reason": "no map_location"}}},
    ]))
    out = tmp_path / "out"
    proc = _run("realbugs.py", ["--data", str(data), "--offline", "--out", str(out)], cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads((out / "results.json").read_text())
    rows = {r["id"]: r for r in res["cases"]}
    assert set(rows) == {"fakepkg-positions", "fakepkg-load", "fakepkg-missed"}
    assert rows["fakepkg-positions"]["found"] and rows["fakepkg-positions"]["found_by_rule"]
    assert rows["fakepkg-positions"]["cleared"] is True  # through the line map: the fixed file moved by one line
    assert rows["fakepkg-load"]["found"] and rows["fakepkg-load"]["cleared"] is False
    assert not rows["fakepkg-missed"]["found"] and rows["fakepkg-missed"]["cleared"] is None
    assert [c["judgement"] for c in res["clean"]] == ["real"]
    report = (out / "report.md").read_text()
    assert "| all | 3 | 2 (67%) | 2 (67%) | 3 | 2 (67%) | 1 of 2 (50%) |" in report
    assert "| cross-file | 1 | 0 (0%) |" in report
    assert "1 skipped" in report


def test_realbugs_rejects_a_bad_manifest(tmp_path):
    data = tmp_path / "data"
    (data / "cases").mkdir(parents=True)
    (data / "cases" / "bad.json").write_text("{not json")
    proc = _run("realbugs.py", ["--data", str(data), "--validate"], tmp_path / "cache")
    assert proc.returncode == 2
    assert "bad.json: not readable JSON" in proc.stderr


def test_ecosystem_end_to_end_offline(tmp_path):
    cache = tmp_path / "cache"
    _lay(cache, "fakepkg", "1.0", {"fakepkg/model.py": BUGGY, "fakepkg/ckpt.py": LOADER, "fakepkg/io.py": CLEAN})
    manifest = tmp_path / "eco.json"
    manifest.write_text(json.dumps({"packages": [{"package": "fakepkg", "version": "1.0", "dist": "wheel"}]}))
    review = tmp_path / "review.json"
    review.write_text(json.dumps({"findings": {
        "fakepkg:fakepkg/model.py:11:DL001": {"judgement": "real", "reason": "CPU arange meets x", "fix": "right"}}}))
    out, sheet = tmp_path / "out", tmp_path / "sheet.md"
    proc = _run("ecosystem.py", ["--manifest", str(manifest), "--review", "--review-file", str(review),
                                 "--worksheet", str(sheet), "--out", str(out), "--jobs", "1"], cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads((out / "results.json").read_text())
    pkg = res["packages"]["fakepkg"]
    assert pkg["files"] == 3 and pkg["per_rule"] == {"DL001": 1, "DL010": 1}
    assert pkg["candidates"]["any"] >= 2 and pkg["internal_errors"] == []
    assert "| DL001 | 1 | 1 | 1 | 1 | 0 | 0 | 100% | 1 | 1 (100%) |" in proc.stdout
    assert "| DL010 | 1 | 1 | 0 |" in proc.stdout
    worksheet = sheet.read_text()
    assert "fakepkg:fakepkg/ckpt.py:5:DL010" in worksheet and "torch.load(path)" in worksheet
    assert "model.py:11:DL001" not in worksheet


def test_ecosystem_diff_lists_added_removed_and_changed():
    def f(path, line, code, msg="m"):
        return {"package": "p", "filename": path, "location": {"line": line, "column": 1}, "code": code, "message": msg}

    base = {"findings": [f("a.py", 1, "DL001"), f("a.py", 5, "DL006"), f("b.py", 2, "DL010")]}
    head = {"findings": [f("a.py", 1, "DL001"), f("a.py", 5, "DL006", "new words"), f("c.py", 3, "DL010")]}
    lines, per_rule = ecosystem.diff(base, head)
    assert lines[0] == "## p: +1 -1 ~1"
    assert "+ c.py:3:1: DL010 m" in lines and "- b.py:2:1: DL010 m" in lines and "~ a.py:5:1: DL006 new words" in lines
    assert per_rule["DL010"] == {"added": 1, "removed": 1} and per_rule["DL006"] == {"changed": 1}


def test_sample_is_deterministic_and_capped():
    findings = [{"package": "p", "filename": f"f{i}.py", "location": {"line": i, "column": 1}, "code": "DL001",
                 "message": ""} for i in range(60)]
    a, b = ecosystem.sample(findings, 25, 0), ecosystem.sample(list(reversed(findings)), 25, 0)
    assert len(a["DL001"]) == 25 and a == b
    assert ecosystem.sample(findings[:7], 25, 0)["DL001"] == findings[:7]


def test_line_map_follows_moved_and_replaced_lines():
    old = ["a", "b", "bug", "c"]
    new = ["x", "a", "b", "fixed 1", "fixed 2", "c"]
    m = realbugs.line_map(old, new)
    assert m[1] == (2, 2) and m[3] == (4, 5) and m[4] == (6, 6)


def test_dists_refuses_unsafe_archive_members():
    assert dists._safe_member("../etc/passwd") is None
    assert dists._safe_member("pkg/./mod.py") == "pkg/mod.py"


# -- smoke run on real cases, when a previous run cached them ---------------------------------------------

def test_realbugs_smoke_on_cached_cases(tmp_path):
    cases, _ = realbugs.load_cases()
    ready = [c for c in cases
             if dists.cached(c.package, c.buggy_version, c.dist) and dists.cached(c.package, c.fixed_version, c.dist)]
    if not ready:
        pytest.skip("no real case is cached in bench/cache/ (run `python bench/realbugs.py` once, online, to cache them)")
    ids = [c.id for c in sorted(ready, key=lambda c: (c.package, c.id))[:5]]
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "realbugs.py"), "--offline", "--no-clean",
                           "--out", str(tmp_path), "--cases", *ids], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads((tmp_path / "results.json").read_text())
    assert {r["id"] for r in res["cases"]} == set(ids)
    assert all(not r["missing_files"] for r in res["cases"])


EXCLUDED_IMPORTS = (
    "accelerate", "deepspeed", "diffusers", "kornia", "monai", "open_clip", "peft", "pyannote", "lightning",
    "sentence_transformers", "speechbrain", "torch_geometric", "torchaudio", "torchvision", "ultralytics",
)


def test_reportstyle_sets_are_well_formed():
    """Every report-style bug names lines that exist, has a fixed look-alike,
    and no program imports a package the independent check keeps for itself."""
    root = ROOT / "bench" / "reportstyle"
    sets = [p for p in root.iterdir() if (p / "expected.json").is_file()]
    assert len(sets) >= 3
    for folder in sets:
        for e in json.loads((folder / "expected.json").read_text()):
            src = (folder / e["file"]).read_text().splitlines()
            assert e["lines"] and all(1 <= n <= len(src) for n in e["lines"]), e
            assert (folder / e["file"].replace(".py", "_fixed.py")).is_file(), e
        for py in folder.glob("*.py"):
            text = py.read_text()
            assert not any(f"import {m}" in text or f"from {m}" in text for m in EXCLUDED_IMPORTS), py


def test_reportstyle_scores_a_set(tmp_path):
    """bench/reportstyle.py runs devlint on a set and its look-alikes: the
    counts agree with the rows, and a bug devlint reports is counted found."""
    import reportstyle

    out = tmp_path / "r.json"
    assert reportstyle.main(["--sets", "c", "--json", str(out)]) == 0
    [r] = json.loads(out.read_text())
    assert r["bugs"] == len(r["rows"]) == 16
    assert r["found_on_a_bug_line"] == sum(row["on_a_bug_line"] for row in r["rows"])
    assert r["found_in_file"] >= r["found_on_a_bug_line"]
    assert r["fixed_files"] == 16
    # c11 is a torch.load without map_location in a CPU-only script: DL010's plain case
    assert next(row for row in r["rows"] if row["file"] == "c11.py")["on_a_bug_line"]


def test_the_base_cache_keeps_every_package_set_run_at_a_commit(tmp_path, monkeypatch):
    """Two package sets diffed against one base commit share its cache: the
    second run computes only its own packages, and neither evicts the other."""
    ran = []

    def fake_run_all(python, packages, roots, env=None, candidates=False, jobs=None, label=""):
        ran.append([p["package"] for p in packages])
        return {
            "packages": {p["package"]: {"version": p["version"]} for p in packages},
            "findings": [{"package": p["package"], "code": "DL001"} for p in packages],
        }

    monkeypatch.setattr(dists, "CACHE", tmp_path)
    monkeypatch.setattr(dists, "install_commit", lambda commit, where: where)
    monkeypatch.setattr(ecosystem, "run_all", fake_run_all)
    first = [{"package": "a", "version": "1"}, {"package": "b", "version": "1"}]
    second = [{"package": "c", "version": "2"}]
    roots = {"a": tmp_path, "b": tmp_path, "c": tmp_path}
    one = ecosystem.base_results("f" * 40, first, roots, None)
    two = ecosystem.base_results("f" * 40, second, roots, None)
    again = ecosystem.base_results("f" * 40, first, roots, None)
    assert ran == [["a", "b"], ["c"]]  # the third call is served from the cache
    assert sorted(one["packages"]) == ["a", "b"] and sorted(two["packages"]) == ["c"]
    assert [d["package"] for d in again["findings"]] == ["a", "b"]
    bumped = ecosystem.base_results("f" * 40, [{"package": "a", "version": "2"}], roots, None)
    assert ran[-1] == ["a"] and bumped["packages"]["a"]["version"] == "2"
