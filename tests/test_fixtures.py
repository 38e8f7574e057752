"""The fixture corpus, per rule (``fixtures/DLxxx/``):

* ``bad_*.py``: buggy programs. ``bad_X.txt`` is the snapshot of what
  ``devlint check`` reports on it (``LINE:COL CODE message [*]``);
  ``bad_X.fixed.py`` the file after ``devlint fix --apply`` (safe fixes) and,
  when the rule has unsafe fixes, ``bad_X.unsafe.py`` after ``--unsafe-fixes``.
* ``clean_*.py``: correct look-alikes on which no rule may report anything.

Set ``DEVLINT_UPDATE_SNAPSHOTS=1`` to rewrite the snapshots after a reviewed change.
"""

from __future__ import annotations

from pathlib import Path

import libcst
import pytest

from conftest import FIXTURES, check_snapshot
from devlint.engine import fix_source, lint_source
from devlint.rule import all_rules

BAD = sorted(p for p in FIXTURES.glob("DL*/bad_*.py") if p.name.count(".") == 1)
CLEAN = sorted(FIXTURES.glob("DL*/clean_*.py"))


def _codes(path: Path):
    """The rules on by default, plus the folder's own rule when it is off by
    default (DL100): a fixture shows its rule next to the default set."""
    return [c for c, r in all_rules().items() if r.enabled_by_default or c == path.parent.name]


def _render(path: Path) -> str:
    result = lint_source(path.read_text(), path.name, _codes(path))
    assert not result.internal_errors, result.internal_errors
    lines = [
        f"{d.line}:{d.col} {d.code} {d.message}{' [*]' if d.fixable else ''}"
        for d in result.diagnostics
    ]
    return "\n".join(lines) + "\n"




def test_every_rule_has_fixtures():
    for code in all_rules():
        folder = FIXTURES / code
        assert list(folder.glob("bad_*.py")), f"{code} has no buggy fixture"
        assert len(list(folder.glob("clean_*.py"))) >= 3, f"{code} needs at least three clean look-alikes"


@pytest.mark.parametrize("path", BAD, ids=[f"{p.parent.name}/{p.name}" for p in BAD])
def test_bad_fixture_is_reported(path):
    rendered = _render(path)
    code = path.parent.name
    assert f" {code} " in rendered, f"{path} does not trigger {code}"
    check_snapshot(path.with_suffix(".txt"), rendered)


@pytest.mark.parametrize("path", BAD, ids=[f"{p.parent.name}/{p.name}" for p in BAD])
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_bad_fixture_fix(path, unsafe):
    src = path.read_text()
    result = fix_source(src, path.name, _codes(path), unsafe=unsafe)
    assert not result.internal_errors, result.internal_errors
    fixed = result.fixed_text
    libcst.parse_module(fixed)  # still parses
    compile(fixed, str(path), "exec")
    again = fix_source(fixed, path.name, _codes(path), unsafe=unsafe)
    assert again.fixed_text == fixed, "fixing twice changed the code the second time"
    target = path.with_name(path.stem + (".unsafe.py" if unsafe else ".fixed.py"))
    if unsafe and not target.exists():
        safe_target = path.with_name(path.stem + ".fixed.py")
        # no separate unsafe snapshot: unsafe fixes must not change anything more
        assert fixed == safe_target.read_text(), f"{path.name} has unsafe fixes: add {target.name}"
        return
    check_snapshot(target, fixed)


@pytest.mark.parametrize("path", CLEAN, ids=[f"{p.parent.name}/{p.name}" for p in CLEAN])
def test_clean_fixture_is_silent(path):
    result = lint_source(path.read_text(), path.name, _codes(path))
    assert not result.internal_errors, result.internal_errors
    assert result.diagnostics == [], [(d.line, d.code, d.message) for d in result.diagnostics]
