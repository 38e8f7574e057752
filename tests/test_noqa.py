"""Adopting devlint on a large codebase: ``check --add-noqa`` suppresses every
current finding in place, and DL100 (off by default, computed by the engine's
suppression step) reports ``# noqa: DLxxx`` codes that suppress nothing."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from click.testing import CliRunner

from conftest import ROOT
from devlint.cli import main
from devlint.engine import fix_source, lint_source
from devlint.noqa import add_noqa, merged_comment
from devlint.rule import all_rules

MODEL = textwrap.dedent(
    '''\
    import torch
    import torch.nn as nn


    class M(nn.Module):
        def forward(self, x):
            a = torch.zeros(3)
            b = torch.ones(  # shape below
                3,
            )
            c = torch.arange(3)  # noqa: E501
            d = torch.zeros(len("""first
    second"""))
            e = torch.ones(2) + torch.zeros(2)
            return x + a + b + c + d + e
    '''
)

DEFAULT = [c for c, r in all_rules().items() if r.enabled_by_default]
WITH_DL100 = DEFAULT + ["DL100"]


def _run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _found(text, codes=None):
    return [(d.line, d.code) for d in lint_source(text, "m.py", codes).diagnostics]


# --------------------------------------------------------------------------
# --add-noqa


def test_add_noqa_suppresses_every_finding_it_can():
    findings = lint_source(MODEL, "m.py").diagnostics
    assert [d.line for d in findings] == [7, 8, 11, 12, 14, 14]
    result = add_noqa(MODEL, findings)
    lines = result.text.splitlines()
    assert lines[6].endswith("a = torch.zeros(3)  # noqa: DL001")
    # a multi-line statement: on the line the finding is on, after the comment there
    assert lines[7].endswith("b = torch.ones(  # shape below  # noqa: DL001")
    # merged into the noqa directive already there
    assert lines[10].endswith("c = torch.arange(3)  # noqa: E501, DL001")
    # two findings on a line: one code, once
    assert lines[13].endswith("e = torch.ones(2) + torch.zeros(2)  # noqa: DL001")
    # a line that ends inside a string cannot take a comment
    assert [(d.line, why) for d, why in result.failed] == [
        (12, "the line ends inside a string or after a backslash: no comment can go there")
    ]
    assert len(result.added) == 5
    assert _found(result.text) == [(12, "DL001")]
    # only comments changed
    assert re.sub(r"\s*# noqa.*", "", result.text) == re.sub(r"\s*# noqa.*", "", MODEL)


def test_merged_comment():
    assert merged_comment(None, ["DL002", "DL001"]) == "# noqa: DL001, DL002"
    assert merged_comment("# noqa:DL001", ["DL002"]) == "# noqa:DL001, DL002"
    assert merged_comment("# noqa: DL001", ["DL001"]) == "# noqa: DL001"
    assert merged_comment("# type: ignore", ["DL001"]) == "# type: ignore  # noqa: DL001"


def test_cli_add_noqa_writes_a_baseline_then_check_passes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    clean = MODEL.replace('len("""first\nsecond""")', "2")
    Path("m.py").write_bytes(clean.replace("\n", "\r\n").encode())
    result = _run("check", "--add-noqa", ".")
    assert result.exit_code == 0, result.output
    assert "Added `# noqa` for 6 findings in 1 file." in result.output
    data = Path("m.py").read_bytes()
    assert data.count(b"\r\n") == clean.count("\n") and b"\n" not in data.replace(b"\r\n", b"")  # CRLF kept
    assert _run("check", ".").exit_code == 0
    again = _run("check", "--add-noqa", ".")
    assert again.exit_code == 0 and "for 0 findings in 0 files" in again.output
    assert Path("m.py").read_bytes() == data


def test_cli_add_noqa_reports_what_it_cannot_suppress(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.py").write_text(MODEL)
    result = _run("check", "--add-noqa", "m.py")
    assert result.exit_code == 1
    assert "m.py:12:13: DL001" in result.output
    assert "1 could not be suppressed" in result.output


# --------------------------------------------------------------------------
# DL100 unused-noqa

STALE = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class M(nn.Module):
        def forward(self, x):
            a = torch.zeros(3, device=x.device)  # noqa: DL001
            b = torch.ones(3)  # noqa: DL001
            c = torch.ones(3, device=x.device)  # keep  # noqa: E501, DL001
            d = torch.ones(3, device=x.device)  # noqa: DL001, DL100
            e = torch.ones(3, device=x.device)  # noqa: DL0
            return x + a + b + c + d + e
    """
)


def test_dl100_is_off_by_default():
    assert all_rules()["DL100"].enabled_by_default is False
    assert _found(STALE) == []


def test_dl100_reports_codes_that_suppress_nothing():
    found = lint_source(STALE, "m.py", WITH_DL100).diagnostics
    assert [(d.line, d.col, d.message) for d in found] == [
        (7, 46, "`# noqa` suppresses nothing here (unused: DL001)"),
        (9, 53, "`# noqa` suppresses nothing here (unused: DL001)"),
        (11, 45, "`# noqa` suppresses nothing here (unused: DL0)"),
    ]
    assert all(d.code == "DL100" and d.name == "unused-noqa" and d.fix is not None for d in found)


def test_dl100_only_judges_rules_that_ran():
    assert _found(STALE, ["DL100"]) == []  # DL001 did not run
    assert [d.code for d in lint_source(STALE, "m.py", WITH_DL100, ignore=("DL001",)).diagnostics] == []


def test_dl100_fix_removes_only_the_stale_codes():
    result = fix_source(STALE, "m.py", WITH_DL100)
    lines = result.fixed_text.splitlines()
    assert lines[6].endswith("a = torch.zeros(3, device=x.device)")
    assert lines[7].endswith("b = torch.ones(3)  # noqa: DL001")  # used: neither fixed nor removed
    assert lines[8].endswith("c = torch.ones(3, device=x.device)  # keep  # noqa: E501")
    assert lines[9].endswith("# noqa: DL001, DL100")
    assert lines[10].endswith("e = torch.ones(3, device=x.device)")
    assert fix_source(result.fixed_text, "m.py", WITH_DL100).fixed_text == result.fixed_text


def test_dl100_sarif_edits_match_the_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("m.py").write_text(STALE)
    import json

    doc = json.loads(_run("check", "--extend-select", "DL100", "--output-format", "json", "m.py").output)
    lines = STALE.splitlines(keepends=True)
    for d in doc:
        (edit,) = d["fix"]["edits"]
        line = lines[edit["start"]["line"] - 1]
        assert edit["start"]["line"] == edit["end"]["line"]
        assert line[edit["start"]["column"] - 1 : edit["end"]["column"] - 1].lstrip().startswith("#")


def test_rule_dl100_is_documented():
    result = _run("rule", "DL100")
    assert result.exit_code == 0
    assert result.output.startswith("DL100 unused-noqa")
    assert "Off by default" in " ".join(result.output.split())


def test_engine_names_no_rule_but_its_own():
    for path in (ROOT / "devlint").glob("*.py"):
        code = "\n".join(l for l in path.read_text().splitlines() if not l.lstrip().startswith(("#", '"""')))
        named = set(re.findall(r"[\"']DL\d{3}[\"']", code))
        assert named <= {'"DL000"', '"DL100"'}, (path.name, named)
