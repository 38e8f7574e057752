"""Whole-project fixtures (``fixtures/projects/<case>/``): multi-file trees
whose bugs live between files.

* ``tree/``: the project as its authors would lay it out;
* ``expected.txt``: what ``devlint check`` reports on it, run from ``tree/``
  (``PATH:LINE:COL CODE message [*]``);
* ``fixed/``: every file ``devlint fix --apply --unsafe-fixes`` changes, as
  it leaves it (files it leaves alone are not there).

A ``clean_*`` case holds correct look-alikes and must be silent both ways.
Each other case must lose at least one of its findings when the files are checked
alone (``--no-project``): otherwise it does not show cross-file analysis.

Set ``DEVLINT_UPDATE_SNAPSHOTS=1`` to rewrite the snapshots after a reviewed change.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Dict, List

import libcst
import pytest

from conftest import FIXTURES, check_snapshot, check_tree, update_snapshots

CASES = sorted(p for p in (FIXTURES / "projects").iterdir() if (p / "tree").is_dir())


def _run(tree: Path, project: bool = True, processes: int = 1, **kw) -> list:
    return check_tree(tree, project=project, processes=processes, **kw)


def _render(results) -> List[str]:
    out = []
    for r in results:
        assert not r.internal_errors, r.internal_errors
        assert r.error is None, r.error
        for d in r.diagnostics:
            path = os.path.normpath(d.path)
            out.append(f"{path}:{d.line}:{d.col} {d.code} {d.message}{' [*]' if d.fixable else ''}")
    return sorted(out)




def _sources(root: Path) -> Dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.py"))}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_project_findings(case):
    found = _render(_run(case / "tree"))
    if case.name.startswith("clean_"):
        # look-alikes of the cross-file bugs: silent as a project and file by file
        assert found == [] and _render(_run(case / "tree", project=False)) == [], found
        return
    check_snapshot(case / "expected.txt", "\n".join(found) + "\n")
    alone = _render(_run(case / "tree", project=False))
    assert set(found) - set(alone), f"{case.name}: every finding is also found file by file (not a cross-file case)"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_project_findings_in_a_pool(case):
    """The process pool (workers forked per wave) finds what one process finds."""
    assert _render(_run(case / "tree", processes=2)) == _render(_run(case / "tree"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_project_fix(case, tmp_path):
    work = tmp_path / "tree"
    shutil.copytree(case / "tree", work)
    results = _run(work, fix=True, unsafe=True, apply=True)
    for r in results:
        assert not r.internal_errors and r.error is None, (r.internal_errors, r.error)
    before, after = _sources(case / "tree"), _sources(work)
    changed = {p: text for p, text in after.items() if text != before[p]}
    for text in changed.values():
        libcst.parse_module(text)
    fixed = case / "fixed"
    if update_snapshots():
        shutil.rmtree(fixed, ignore_errors=True)
        for p, text in changed.items():
            (fixed / p).parent.mkdir(parents=True, exist_ok=True)
            (fixed / p).write_text(text)
    assert changed == (_sources(fixed) if fixed.is_dir() else {}), f"{case.name}: fixed tree differs"
    # fixing twice changes nothing
    again = _run(work, fix=True, unsafe=True, apply=True)
    assert _sources(work) == after, again
    # and the fixed project is left with only the findings that had no fix
    unfixable = [line for line in _render(_run(case / "tree")) if not line.endswith(" [*]")]
    assert _render(_run(work)) == unfixable, f"{case.name}: the fixed project still has findings a fix was offered for"
