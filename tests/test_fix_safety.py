"""A fix never loses data: atomic writes that keep mode, encoding, BOM and
line endings and touch no byte outside the fix; a file changed since it was
read is skipped; a fix that breaks the code is never written and names the
rule; a crashing rule is an internal error (exit 2) and the run goes on;
fixing twice changes nothing; a run killed part-way leaves every file either
as it was or completely fixed."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import libcst as cst
import pytest

from clirun import BUG, BUGGY_CALL, FIXED, FIXED_CALL, cli, devlint_command, run
from conftest import FIXTURES
from devlint.engine import fix_source
from devlint.rule import Rule, all_rules
from devlint.syntax import dotted_name


# --------------------------------------------------------------------------
# bytes, mode, atomicity


def test_only_the_fixed_bytes_change(tmp_path):
    # BOM, CRLF, a tab, trailing blanks, non-ASCII, a form feed, no final newline
    head = "\ufeff# -*- coding: utf-8 -*-\r\n# modèle \t \r\n\x0c\r\n"
    body = BUG.replace("\n", "\r\n").replace("return x +", "return x\t+").rstrip("\r\n")
    src = (head + body).encode("utf-8")
    f = tmp_path / "m.py"
    f.write_bytes(src)
    f.chmod(0o754)
    out = cli("fix", "--apply", "--no-cache", str(f))
    assert out.code == 0, out.output
    assert f.read_bytes() == src.replace(BUGGY_CALL.encode(), FIXED_CALL.encode())
    assert stat.S_IMODE(f.stat().st_mode) == 0o754
    assert sorted(os.listdir(tmp_path)) == ["m.py"]  # no temporary file left behind


def test_write_goes_through_a_temporary_file_in_the_same_folder(tmp_path, monkeypatch):
    f = tmp_path / "m.py"
    f.write_text(BUG)
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append((Path(src).parent, Path(src).read_text(), Path(dst), f.read_text()))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    assert cli("fix", "--apply", "--no-cache", "-j", "1", str(f)).code == 0
    (folder, tmp_content, dst, content_before_rename), = seen
    assert folder == tmp_path and dst == f
    assert tmp_content == FIXED and content_before_rename == BUG


def test_failed_rename_leaves_the_original_and_no_temporary_file(tmp_path, monkeypatch):
    f = tmp_path / "m.py"
    f.write_text(BUG)

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    out = cli("fix", "--apply", "--no-cache", "-j", "1", str(f))
    assert out.code == 1
    assert [l for l in out.stderr.splitlines() if "m.py" in l and "No space left" in l]
    assert f.read_text() == BUG and os.listdir(tmp_path) == ["m.py"]


def test_file_changed_between_reading_and_writing_is_skipped(tmp_path, monkeypatch):
    import devlint.engine as engine

    f = tmp_path / "m.py"
    f.write_text(BUG)
    edited = BUG + "# edited by someone else meanwhile\n"
    real_fix = engine.fix_source

    def fix_while_someone_edits(*args, **kwargs):
        result = real_fix(*args, **kwargs)
        f.write_text(edited)
        return result

    monkeypatch.setattr(engine, "fix_source", fix_while_someone_edits)
    out = cli("fix", "--apply", "--no-cache", "-j", "1", str(f))
    assert out.code == 1
    assert [l for l in out.stderr.splitlines() if "m.py" in l and "changed since it was read" in l], out.output
    assert f.read_text() == edited


def test_fixing_twice_changes_nothing(tmp_path):
    # one buggy fixture per rule (tests/test_fixtures.py fixes each of them twice in-process)
    for folder in sorted(FIXTURES.glob("DL*")):
        first = sorted(p for p in folder.glob("bad_*.py") if p.name.count(".") == 1)[:1]
        for p in first:
            shutil.copy(p, tmp_path / f"{folder.name}_{p.name}")
    cli("fix", "--apply", "--unsafe-fixes", "--no-cache", str(tmp_path))
    once = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    out = cli("fix", "--apply", "--unsafe-fixes", "--no-cache", str(tmp_path))
    assert "Fixed 0 problems" in out.output, out.output
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == once


def test_fix_prints_no_syntax_warning_about_the_users_code(tmp_path):
    """The fix is validated with compile() (never run), which warns about
    dubious code ("is" with a literal, calling a str); those warnings are not
    devlint's to print (the 2 000-program fuzz run showed them, twice a fix)."""
    dubious = BUG.replace("        return", '        y = "a"("b")\n        z = 1 is 1\n        return')
    f = tmp_path / "m.py"
    f.write_text(dubious)
    out = run("fix", "--apply", "--no-cache", str(f))
    assert out.code == 0 and "Fixed 1 problem" in out.stdout, out.output
    assert "Warning" not in out.output and out.stderr == "", out.output
    assert f.read_text() == dubious.replace(BUGGY_CALL, FIXED_CALL)


# --------------------------------------------------------------------------
# rules that misbehave (test-only rules injected into the registry)


def _is_zeros_call(node: cst.Call) -> bool:
    return dotted_name(node.func) == "torch.zeros"


class _BrokenFix(Rule):
    """A rule whose fix produces code that does not parse."""

    code = "DL990"
    name = "test-broken-fix"
    message = "test rule"

    def visit_Call(self, node: cst.Call) -> None:
        if _is_zeros_call(node):
            self.report(node, fix=self.replace(node, cst.Name("lambda"), "break it"))


class _UncompilableFix(Rule):
    """A rule whose fix parses (libcst is lenient) but does not compile: a
    repeated keyword argument."""

    code = "DL991"
    name = "test-uncompilable-fix"
    message = "test rule"

    def visit_Call(self, node: cst.Call) -> None:
        if _is_zeros_call(node):
            kw = cst.Arg(keyword=cst.Name("device"), value=cst.Name("x"), equal=cst.AssignEqual())
            self.report(node, fix=self.replace(node, node.with_changes(args=[*node.args, kw, kw]), "repeat"))


class _Crashing(Rule):
    """A rule with a bug: it raises on the first call it sees."""

    code = "DL992"
    name = "test-crashing-rule"
    message = "test rule"

    def visit_Call(self, node: cst.Call) -> None:
        raise ZeroDivisionError("rule bug")


@pytest.fixture
def inject(monkeypatch):
    def _inject(*rules):
        registry = all_rules()  # the registry itself (built once per process)
        try:  # the catalogue the CLI reads codes from without importing rules
            from devlint.catalog import rule_table

            table = rule_table()
        except ImportError:  # pragma: no cover - older layout
            table = {}
        for r in rules:
            monkeypatch.setitem(registry, r.code, r)
            monkeypatch.setitem(table, r.code, True)

    return _inject


@pytest.mark.parametrize("rule, why", [(_BrokenFix, "does not parse"), (_UncompilableFix, "does not compile")])
def test_a_fix_that_breaks_the_code_is_never_written(tmp_path, inject, rule, why):
    inject(rule)
    f = tmp_path / "m.py"
    f.write_text(BUG)
    other = tmp_path / "other.py"
    other.write_text(BUG.replace("torch.zeros(3)", "torch.ones(3)"))
    out = cli("fix", "--apply", "--no-cache", "-j", "1", "--select", f"DL001,{rule.code}", str(tmp_path))
    assert out.code == 2, out.output
    lines = [l for l in out.stderr.splitlines() if "m.py" in l]
    assert len(lines) == 1 and "internal error" in lines[0] and rule.code in lines[0] and why in lines[0], out.output
    assert "DL001" not in lines[0]  # the culprit is named, not every rule that fixed something
    assert "report" in lines[0]
    assert f.read_text() == BUG  # not even DL001's good fix: the file is left alone
    assert other.read_text() == BUG.replace("torch.zeros(3)", "torch.ones(3, device=x.device)")  # the run went on


def test_engine_names_the_rule_whose_fix_breaks_the_code(inject):
    inject(_BrokenFix)
    result = fix_source(BUG, "m.py", codes=["DL001", "DL990"])
    assert result.fixed_text == BUG and not result.applied
    assert len(result.internal_errors) == 1 and "DL990" in result.internal_errors[0]


def test_crashing_rule_is_an_internal_error_and_the_run_goes_on(tmp_path, inject):
    inject(_Crashing)
    (tmp_path / "a.py").write_text(BUG)
    (tmp_path / "b.py").write_text(BUG)
    for args in (("check",), ("fix", "--apply")):
        out = cli(*args, "--no-cache", "-j", "1", "--select", "DL001,DL992", str(tmp_path))
        assert out.code == 2, out.output
        for name in ("a.py", "b.py"):
            lines = [l for l in out.stderr.splitlines() if name in l]
            assert len(lines) == 1, out.output
            assert "internal error in DL992" in lines[0] and "ZeroDivisionError" in lines[0] and "report" in lines[0]
    # DL001 still did its job on both files
    assert (tmp_path / "a.py").read_text() == FIXED and (tmp_path / "b.py").read_text() == FIXED


def test_a_crash_on_a_clean_file_never_reads_as_all_checks_passed(tmp_path, inject):
    inject(_Crashing)
    (tmp_path / "a.py").write_text(BUG)
    out = cli("check", "--no-cache", "-j", "1", "--select", "DL992", str(tmp_path))
    assert out.code == 2, out.output
    assert "All checks passed" not in out.stdout
    assert "a rule failed on 1 file with an internal error" in out.stdout


def test_crashing_rule_in_the_process_pool(tmp_path, inject):
    inject(_Crashing)  # the pool forks: the workers inherit the registry
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(BUG)
    out = cli("check", "--no-cache", "-j", "2", "--select", "DL001,DL992", str(tmp_path))
    assert out.code == 2
    assert len([l for l in out.stderr.splitlines() if "internal error in DL992" in l]) == 6
    assert out.stdout.count("DL001") >= 6


# --------------------------------------------------------------------------
# a run killed part-way


def _model(i: int) -> str:
    methods = "".join(
        f"\n    def step_{k}(self, x):\n        return x * torch.ones(4) + torch.zeros(4) * {k}\n" for k in range(8)
    )
    return BUG.replace("class Net(", f"class Net{i}(").replace(
        "        return x + torch.zeros(3)\n",
        "        return self.step_0(x) + torch.zeros(3)\n",
    ) + methods


def test_killed_fix_run_leaves_every_file_original_or_fully_fixed(tmp_path):
    n = 400
    originals, expected = {}, {}
    template = _model(0)
    fixed_template = fix_source(template, "m.py").fixed_text
    assert fixed_template != template
    for i in range(n):  # the files differ only in the class name
        originals[f"m{i:03d}.py"] = template.replace("class Net0(", f"class Net{i}(").encode()
        expected[f"m{i:03d}.py"] = fixed_template.replace("class Net0(", f"class Net{i}(").encode()
    for name, data in originals.items():
        (tmp_path / name).write_bytes(data)
    proc = subprocess.Popen(
        [*devlint_command(), "fix", "--apply", "--no-cache", "-j", "1", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    try:
        # kill as soon as some (not all) files are written
        while time.monotonic() < deadline and proc.poll() is None:
            done = sum((tmp_path / name).read_bytes() == expected[name] for name in ("m000.py", "m100.py", "m200.py"))
            if done:
                break
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL) if proc.poll() is None else None
        proc.wait()
    states = {"original": 0, "fixed": 0}
    for name in originals:
        data = (tmp_path / name).read_bytes()
        if data == originals[name]:
            states["original"] += 1
        elif data == expected[name]:
            states["fixed"] += 1
        else:
            pytest.fail(f"{name} is neither the original nor the complete fix")
    assert states["fixed"] >= 1 and states["original"] >= 1, f"the kill did not land mid-way: {states}"
    # at most the one file being written has a temporary file left, never a .py
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in originals]
    assert len(leftovers) <= 1 and all(p.startswith(".devlint-") and p.endswith(".tmp") for p in leftovers), leftovers
