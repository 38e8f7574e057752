"""The command line as a user drives it: check, fix, rule; options, exit codes,
output formats. Most tests use click's runner; a few run the installed
``devlint`` as a real subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from click.testing import CliRunner

from devlint.cli import main

BUGGY = """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(10, 4)

    def forward(self, src):
        pos = torch.arange(src.shape[1])
        return self.tok(src) + pos[None, :, None]
"""

CLEAN = """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def forward(self, src):
        return src + torch.arange(src.shape[1], device=src.device)
"""

NO_ANCHOR = """
import torch
from torch import nn

class Noise(nn.Module):
    def forward(self, x):
        return x + self.noise(x.shape[0])[0]

    @staticmethod
    def noise(n: int):
        return [torch.randn(n)]  # a list: its call has no .to() either
"""


def run(args, cwd=None):
    runner = CliRunner()
    if cwd is not None:
        old = os.getcwd()
        os.chdir(cwd)
    try:
        return runner.invoke(main, args, catch_exceptions=False)
    finally:
        if cwd is not None:
            os.chdir(old)


def test_check_reports_with_source_caret_and_summary(write):
    p = write("model.py", BUGGY)
    r = run(["check", str(p)])
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0] == f"{p}:10:15: DL001 `torch.arange` in `Encoder.forward` creates its tensor on the CPU; it meets a tensor on the inputs' device through an operation, which fails when that is on a GPU [*]"
    assert lines[1].strip() == "pos = torch.arange(src.shape[1])"
    assert lines[2].strip() == "^" * len("torch.arange(src.shape[1])")
    assert lines[1].index("torch") == lines[2].index("^")
    assert lines[-1] == "Found 1 problem in 1 file (1 fixable with 'devlint fix --apply')."


def test_check_clean_exits_zero(write):
    p = write("model.py", CLEAN)
    r = run(["check", str(p)])
    assert r.exit_code == 0, r.output
    assert "All checks passed!" in r.output


def test_check_defaults_to_current_directory(write, tmp_path):
    write("pkg/model.py", BUGGY)
    r = run(["check"], cwd=tmp_path)
    assert r.exit_code == 1
    assert "pkg/model.py:10:15: DL001" in r.output


def test_exit_zero(write):
    p = write("model.py", BUGGY)
    assert run(["check", "--exit-zero", str(p)]).exit_code == 0


def test_select_ignore_and_prefixes(write):
    p = write("model.py", BUGGY)
    assert run(["check", "--ignore", "DL001", str(p)]).exit_code == 0
    assert run(["check", "--ignore", "DL", str(p)]).exit_code == 0
    assert run(["check", "--select", "DL0", str(p)]).exit_code == 1
    assert run(["check", "--select", "DL001,DL0", str(p)]).exit_code == 1
    r = run(["check", "--select", "DL9", str(p)])
    assert r.exit_code == 2 and "unknown rule code 'DL9'" in r.output


def test_unknown_code_on_command_line_is_an_error(write):
    p = write("model.py", CLEAN)
    r = run(["check", "--select", "XYZ1", str(p)])
    assert r.exit_code == 2
    assert "unknown rule code 'XYZ1'" in r.output


def test_statistics(write):
    p = write("a.py", BUGGY)
    q = write("b.py", BUGGY)
    r = run(["check", "--statistics", str(p), str(q)])
    assert r.exit_code == 1
    assert r.output.split() == ["2", "DL001", "[*]", "factory-without-device"]


def test_json_output(write):
    p = write("model.py", BUGGY)
    r = run(["check", "--output-format", "json", str(p)])
    assert r.exit_code == 1
    data = json.loads(r.output)
    assert len(data) == 1
    d = data[0]
    assert d["code"] == "DL001" and d["name"] == "factory-without-device"
    assert d["filename"] == str(p)
    assert d["location"] == {"line": 10, "column": 15}
    assert d["end_location"] == {"line": 10, "column": 41}
    assert d["fix"]["applicability"] == "safe"
    assert d["fix"]["edits"] == [
        {
            "start": {"line": 10, "column": 15},
            "end": {"line": 10, "column": 41},
            "content": "torch.arange(src.shape[1], device=src.device)",
        }
    ]


def test_github_output(write):
    p = write("model.py", BUGGY)
    r = run(["check", "--output-format", "github", str(p)])
    assert r.exit_code == 1
    assert r.output.startswith(f"::error title=devlint (DL001),file={p},line=10,col=15,endLine=10,endColumn=41::DL001 ")


def test_sarif_output_structure(write):
    p = write("model.py", BUGGY)
    r = run(["check", "--output-format", "sarif", str(p)])
    doc = json.loads(r.output)
    assert doc["version"] == "2.1.0"
    run0 = doc["runs"][0]
    rules = run0["tool"]["driver"]["rules"]
    assert any(rule["id"] == "DL001" for rule in rules)
    res = run0["results"][0]
    assert res["ruleId"] == "DL001"
    assert rules[res["ruleIndex"]]["id"] == "DL001"
    region = res["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (10, 15)
    assert res["fixes"][0]["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"].endswith("device=src.device)")


def test_no_color_unless_terminal(write, monkeypatch):
    p = write("model.py", BUGGY)
    assert "\x1b[" not in run(["check", str(p)]).output
    assert "\x1b[" in run(["check", "--color", "always", str(p)]).output
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in run(["check", "--color", "auto", str(p)]).output


def test_finding_without_fix_says_why(write):
    p = write("noise.py", NO_ANCHOR)
    r = run(["check", str(p)])
    assert r.exit_code == 1
    assert "[*]" not in r.output
    assert "no autofix: no tensor on the right device is in scope where it is created" in r.output


def test_fix_prints_diff_and_changes_nothing(write):
    p = write("model.py", BUGGY)
    before = p.read_bytes()
    r = run(["fix", str(p)])
    assert r.exit_code == 1
    # a path outside the current folder: absolute, under a/ and b/ (patch -p1 from /)
    assert f"--- a/{str(p).lstrip('/')}" in r.output
    assert "-        pos = torch.arange(src.shape[1])" in r.output
    assert "+        pos = torch.arange(src.shape[1], device=src.device)" in r.output
    assert p.read_bytes() == before


def test_fix_apply_writes_and_second_run_is_clean(write):
    p = write("model.py", BUGGY)
    r = run(["fix", "--apply", str(p)])
    assert r.exit_code == 0, r.output
    assert "Fixed 1 problem in 1 file." in r.output
    assert "torch.arange(src.shape[1], device=src.device)" in p.read_text()
    after = p.read_bytes()
    r2 = run(["fix", "--apply", str(p)])
    assert r2.exit_code == 0
    assert p.read_bytes() == after
    assert run(["check", str(p)]).exit_code == 0


def test_fix_apply_reports_what_it_could_not_fix(write):
    p = write("noise.py", NO_ANCHOR)
    before = p.read_bytes()
    r = run(["fix", "--apply", str(p)])
    assert r.exit_code == 1
    assert "DL001" in r.output and "1 remaining" in r.output
    assert p.read_bytes() == before


def test_missing_path_is_exit_2_and_others_still_checked(write, tmp_path):
    p = write("model.py", BUGGY)
    r = run(["check", str(tmp_path / "nope.py"), str(p)])
    assert r.exit_code == 2
    assert f"{tmp_path / 'nope.py'}: no such file or directory" in r.output
    assert "DL001" in r.output


def test_rule_command():
    r = run(["rule", "DL001"])
    assert r.exit_code == 0
    assert r.output.startswith("DL001 factory-without-device")
    for section in ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety"):
        assert f"## {section}" in r.output
    r = run(["rule", "dl001"])
    assert r.exit_code == 0
    r = run(["rule", "DL999"])
    assert r.exit_code == 2 and "unknown rule code 'DL999'" in r.output


def test_rule_all_lists_every_rule():
    from devlint.rule import all_rules

    r = run(["rule", "--all"])
    assert r.exit_code == 0
    for code, rule in all_rules().items():
        assert any(line.startswith(f"{code}  {rule.name}") and f"fix: {rule.fix_safety}" in line for line in r.output.splitlines())
    data = json.loads(run(["rule", "--all", "--output-format", "json"]).output)
    assert [d["code"] for d in data] == list(all_rules())


def test_output_is_sorted_by_path_then_position(write, tmp_path):
    write("b.py", BUGGY)
    write("a/z.py", BUGGY)
    write("a.py", BUGGY)
    r = run(["check", "--output-format", "json", "-j", "2", str(tmp_path)])
    paths = [d["filename"] for d in json.loads(r.output)]
    assert paths == sorted(paths)
    assert len(paths) == 3


def test_python_dash_m_and_installed_entry_point(write):
    p = write("model.py", BUGGY)
    r = subprocess.run([sys.executable, "-m", "devlint", "check", str(p)], capture_output=True, text=True)
    assert r.returncode == 1
    assert "DL001" in r.stdout
    exe = shutil.which("devlint") or os.path.join(os.path.dirname(sys.executable), "devlint")
    r = subprocess.run([exe, "check", "--output-format", "json", str(p)], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)[0]["code"] == "DL001"


def test_check_does_not_import_torch(write):
    p = write("model.py", BUGGY)
    code = (
        "import sys; from devlint.cli import main\n"
        "try:\n    main(['check', sys.argv[1]])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'check imported torch'\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
