"""The runtime harness on multi-file projects (docs/harness.md, "Projects"):
a case file that imports other files of the run is verified against copies
of the whole project, before and after devlint's fixes of every file, so a
bug between files reproduces and its fix is confirmed.

The project fixtures with cases (``fixtures/projects/*/tree``) run in one
``devlint verify`` each, on the simulated path."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES

pytest.importorskip("torch")

PROJECTS = FIXTURES / "projects"


def _verify(tree, *extra):
    proc = subprocess.run(
        [sys.executable, "-m", "devlint", "verify", "--simulate", "--no-cache", "--output-format", "json", *extra, "."],
        capture_output=True, text=True, cwd=tree,
    )
    return proc, (json.loads(proc.stdout) if proc.stdout.strip().startswith(("[", "{")) else None)


@pytest.mark.parametrize("case,file", [("captured_device_in_base", "train.py"), ("stages_in_other_module", "run.py"), ("seed_pinned_lm", "cases.py")])
def test_cross_file_bug_reproduced_and_fix_confirmed(case, file, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(PROJECTS / case / "tree", tree)
    proc, report = _verify(tree)
    assert report is not None, proc.stdout + proc.stderr
    assert report["summary"]["cases"] == report["summary"]["confirmed"] == 1, json.dumps(report, indent=1)
    assert proc.returncode == 0
    (row,) = report["cases"]
    assert row["original"]["status"] == "reproduced", row
    # the tree on disk is untouched: the fixes ran on copies
    for path in (PROJECTS / case / "tree").rglob("*.py"):
        assert (tree / path.relative_to(PROJECTS / case / "tree")).read_text() == path.read_text()


def test_alone_the_case_file_sees_no_bug_to_fix(tmp_path):
    """File by file (--no-project) the bug of another module is not found, so
    nothing is fixed and the bug is missed: the project run is what makes the
    harness prove a cross-file fix."""
    tree = tmp_path / "tree"
    shutil.copytree(PROJECTS / "captured_device_in_base" / "tree", tree)
    proc, report = _verify(tree, "--no-project")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert report["summary"]["cases"] == report["summary"]["bug_missed"] == 1, report
    (row,) = report["cases"]
    assert row["original"]["status"] == "reproduced" and row["fixed"]["status"] == "unchanged", row
    assert row["findings"] == []


def test_projects_verified_from_the_repository_root():
    """From the repository's root the project fixtures' packages are not
    top-level names of the source root (``fixtures/projects/x/tree/segkit``):
    the fixed run must still import the fixed copy, not the original's
    modules left in ``sys.modules``."""
    import subprocess as sp

    from conftest import ROOT

    proc = sp.run(
        [sys.executable, "-m", "devlint", "verify", "--simulate", "--no-cache", "--output-format", "json",
         *(f"fixtures/projects/{c}/tree" for c in ("captured_device_in_base", "stages_in_other_module"))],
        capture_output=True, text=True, cwd=ROOT,
    )
    report = json.loads(proc.stdout)
    assert [r["verdict"] for r in report["cases"]] == ["confirmed", "confirmed"], json.dumps(report, indent=1)[:3000]
    assert {f["code"] for r in report["cases"] for f in r["findings"] if f["reached"]} == {"DL002", "DL008"}


def test_fix_apply_verify_on_a_project(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(PROJECTS / "captured_device_in_base" / "tree", tree)
    proc = subprocess.run(
        [sys.executable, "-m", "devlint", "fix", "--apply", "--verify", "--simulate", "--no-cache", "."],
        capture_output=True, text=True, cwd=tree,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 case: 1 confirmed" in out, out
    assert "device=h.device" in (tree / "segkit" / "unet.py").read_text()
