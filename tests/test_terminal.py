"""Using devlint from a terminal, as a new user does (issue #19): standard
input, progress and -q, Ctrl-C, diffs that apply, no Python files, selectors,
virtual environments, --statistics, fix markers, rule summaries, notebook
cells as Jupyter names them."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from clirun import BUG, FIXED, Outcome, devlint_command, no_traceback
from devlint import cli as cli_module
from devlint.cli import main
from devlint.rule import all_rules

#: a DL012 finding whose only fix is unsafe
UNSAFE_ONLY = textwrap.dedent(
    """\
    import os

    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP


    def main():
        local_rank = int(os.environ["LOCAL_RANK"])
        model = nn.Linear(2, 2).cuda()
        return DDP(model, device_ids=[0])
    """
)


def invoke(*args: str, cwd: Path | None = None, stdin: bytes | None = None) -> Outcome:
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=True)
    finally:
        os.chdir(old)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    out = Outcome(result.exit_code, result.stdout, result.stderr)
    out.stdout_bytes = result.stdout_bytes
    no_traceback(out)
    return out


def subprocess_env() -> dict:
    return {**os.environ, "NO_COLOR": "1"}


# -- 1. standard input ---------------------------------------------------------


@pytest.fixture
def project(tmp_path):
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "pyproject.toml").write_text(
        '[tool.devlint]\nextend-exclude = ["generated/"]\n\n[tool.devlint.per-file-ignores]\n"legacy/*" = ["DL001"]\n'
    )
    return proj


def test_check_stdin_names_the_file_and_uses_its_configuration(project, tmp_path):
    out = invoke("check", "-", "--stdin-filename", "proj/src/model.py", cwd=tmp_path, stdin=BUG.encode())
    assert out.code == 1, out
    assert out.stdout.startswith("proj/src/model.py:7:20: DL001 "), out.stdout
    # per-file-ignores and excludes of the pyproject.toml above the named path
    legacy = invoke("check", "-", "--stdin-filename", "proj/legacy/model.py", cwd=tmp_path, stdin=BUG.encode())
    assert (legacy.code, "DL001" in legacy.output) == (0, False), legacy
    excluded = invoke("check", "-", "--stdin-filename", "proj/generated/m.py", cwd=tmp_path, stdin=BUG.encode())
    assert (excluded.code, excluded.stdout) == (0, ""), excluded
    assert not (tmp_path / "proj" / "src" / "model.py").exists()


def test_check_stdin_without_a_name(tmp_path):
    out = invoke("check", "-", cwd=tmp_path, stdin=BUG.encode())
    assert out.code == 1
    assert out.stdout.startswith("-:7:20: DL001 "), out.stdout
    assert invoke("check", "-", cwd=tmp_path, stdin=b"x = 1\n").code == 0


def test_fix_stdin_writes_the_fixed_source_to_stdout(project, tmp_path):
    out = invoke("fix", "-", "--stdin-filename", "proj/src/model.py", cwd=tmp_path, stdin=BUG.encode())
    assert (out.code, out.stdout) == (0, FIXED), out
    assert "Fixed 1 problem" in out.stderr
    # nothing to fix, or an excluded file: the input, unchanged
    crlf = BUG.replace("\n", "\r\n").encode()
    excluded = invoke("fix", "-", "--stdin-filename", "proj/generated/model.py", cwd=tmp_path, stdin=crlf)
    assert (excluded.code, excluded.stdout_bytes) == (0, crlf)
    # line endings are kept
    fixed = invoke("fix", "-", cwd=tmp_path, stdin=crlf)
    assert fixed.stdout_bytes == FIXED.replace("\n", "\r\n").encode()
    # what no safe fix covers is reported on stderr, the source still on stdout
    left = invoke("fix", "-", cwd=tmp_path, stdin=UNSAFE_ONLY.encode())
    assert (left.code, left.stdout) == (1, UNSAFE_ONLY), left
    assert "-:10:12: DL012" in left.stderr and "1 hidden fix can be enabled" in left.stderr


def test_stdin_usage_errors(tmp_path):
    both = invoke("check", "-", "x.py", cwd=tmp_path, stdin=b"")
    assert both.code == 2 and len(both.error_lines("error:")) == 1
    name_only = invoke("check", "--stdin-filename", "a.py", str(tmp_path), cwd=tmp_path)
    assert name_only.code == 2 and "--stdin-filename needs '-'" in name_only.stderr


# -- 2. progress and quiet -----------------------------------------------------


def test_progress_shows_after_a_second_and_is_cleared():
    now = [0.0]
    stream = io.StringIO()
    progress = cli_module._Progress(10, stream=stream, clock=lambda: now[0])
    progress(3)
    assert stream.getvalue() == ""  # a short run shows nothing
    now[0] = 1.5
    progress(1)
    assert stream.getvalue() == "\r4/10 files checked"
    now[0] = 1.55
    progress(1)  # throttled
    assert stream.getvalue() == "\r4/10 files checked"
    now[0] = 2.0
    progress(5)
    assert stream.getvalue().endswith("\r10/10 files checked")
    progress.clear()
    assert stream.getvalue().endswith("\r\x1b[K")


def _tree(root: Path, n: int, methods: int = 30) -> Path:
    """``n`` files, each a DL001 bug (so every one is parsed) padded with methods."""
    body = "".join(
        f"\n    def helper_{k}(self, x):\n        y = x * {k} + 1\n        return [y for _ in range(3)]\n"
        for k in range(methods)
    )
    for i in range(n):
        sub = root / f"pkg{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"mod_{i}.py").write_text(BUG + body)
    return root


def test_progress_on_a_terminal_only(tmp_path, monkeypatch):
    tree = _tree(tmp_path / "tree", 8, methods=1)
    piped = invoke("check", "--no-cache", "--jobs", "1", str(tree))  # stderr is not a terminal
    assert piped.code == 1 and "files checked" not in piped.stderr and "\r" not in piped.stderr
    monkeypatch.setattr(cli_module, "_stderr_is_terminal", lambda: True)
    monkeypatch.setattr(cli_module, "PROGRESS_DELAY", 0.0)  # as if the run took a while
    shown = invoke("check", "--no-cache", "--jobs", "1", str(tree))
    assert shown.code == 1 and shown.stdout == piped.stdout
    assert re.search(r"\r\d/8 files checked", shown.stderr) and "\r8/8 files checked" in shown.stderr, shown.stderr
    assert shown.stderr.endswith("\r\x1b[K")  # cleared at the end
    assert invoke("check", "-q", "--no-cache", str(tree)).stderr == ""


def test_a_pty_is_a_terminal_and_a_pipe_is_not():
    pty = pytest.importorskip("pty")
    probe = [sys.executable, "-c", "from devlint.cli import _stderr_is_terminal as t; print(t())"]
    master, slave = pty.openpty()
    try:
        on_tty = subprocess.run(probe, stderr=slave, stdout=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(slave)
        os.close(master)
    assert on_tty.stdout.strip() == "True"
    assert subprocess.run(probe, capture_output=True, text=True, timeout=60).stdout.strip() == "False"


def test_quiet_prints_findings_only_and_very_quiet_nothing(tmp_path):
    (tmp_path / "bug.py").write_text(BUG)
    normal = invoke("check", str(tmp_path))
    assert normal.stdout.splitlines()[-1].startswith("Found 1 problem")
    quiet = invoke("check", "-q", str(tmp_path))
    assert quiet.code == 1
    assert quiet.stdout == normal.stdout.rsplit("Found 1 problem", 1)[0] and "DL001" in quiet.stdout
    silent = invoke("check", "-qq", str(tmp_path))
    assert (silent.code, silent.stdout, silent.stderr) == (1, "", "")
    clean = invoke("check", "-q", str(tmp_path / "nothing"))  # a usage error still says why
    assert clean.code == 2 and "error:" in clean.stderr
    fix = invoke("fix", "-qq", str(tmp_path))
    assert (fix.code, fix.stdout, fix.stderr) == (1, "", "")
    fix_q = invoke("fix", "-q", str(tmp_path))
    assert fix_q.stdout.startswith("--- a/") and "Would fix" not in fix_q.output


# -- 3. Ctrl-C ---------------------------------------------------------------


def _children_of_group(pgid: int) -> list:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, uses a pty")
def test_ctrl_c_stops_at_once_keeps_the_cache_and_leaves_no_worker(tmp_path):
    """Ctrl-C once the progress shows some files done (stderr on a pty, as in
    a terminal), sent to the whole process group as a terminal does."""
    import pty
    import select

    # long enough (about 3.5 s on two cores) that the progress, shown after
    # PROGRESS_DELAY, is there well before the end (150 files of 15 methods
    # took 2 s, then 1.2 s once the collector ran less often: too close)
    n = 400
    tree = _tree(tmp_path / "tree", n, methods=30)
    master, slave = pty.openpty()
    with open(tmp_path / "stdout", "wb") as out:
        # as from a terminal: SIGINT not ignored (a test run in the background
        # of a non-interactive shell inherits it ignored, and Python then
        # installs no KeyboardInterrupt handler)
        proc = subprocess.Popen([*devlint_command(), "check", "--jobs", "2", str(tree)],
                                stdout=out, stderr=slave, env=subprocess_env(), start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(slave)
    pgid = proc.pid
    seen = b""

    def read(timeout: float) -> bool:
        nonlocal seen
        if not select.select([master], [], [], timeout)[0]:
            return True
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the run closed the terminal
            chunk = b""
        seen += chunk
        return bool(chunk)

    deadline = time.monotonic() + 300
    done = 0
    while done == 0 and time.monotonic() < deadline and read(0.1):
        counts = re.findall(rb"\r(\d+)/%d files checked" % n, seen)
        done = int(counts[-1]) if counts else 0
    assert 0 < done < n and proc.poll() is None, ("the run ended before it could be interrupted", seen[-300:])
    assert len(_children_of_group(pgid)) >= 3  # devlint and its workers
    os.killpg(pgid, signal.SIGINT)  # what a terminal's Ctrl-C does
    sent = time.monotonic()
    proc.wait(timeout=30)
    stopped = time.monotonic() - sent
    while read(1.0):
        pass
    os.close(master)
    assert proc.returncode == 130, seen[-500:]
    assert stopped < 3, stopped  # within a second on an idle machine
    assert _children_of_group(pgid) == []  # no worker left running
    # the progress line is cleared, then one line says what happened
    after = seen.rsplit(b"\x1b[K", 1)[1].decode()
    lines = after.splitlines()
    assert len(lines) == 1 and lines[0].startswith("devlint: interrupted"), seen[-500:]
    cached = int(re.search(r"the (\d+) files? checked so far are cached", lines[0]).group(1))
    assert cached >= done
    again = subprocess.run([*devlint_command(), "check", "-v", "--jobs", "2", str(tree)],
                           capture_output=True, text=True, env=subprocess_env(), timeout=600)
    assert again.returncode == 1
    assert int(re.search(r"(\d+) from the cache", again.stderr).group(1)) >= cached


# -- 4. diffs that apply --------------------------------------------------------


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("patch") is None, reason="needs git and patch")
@pytest.mark.parametrize("how", [".", "./top.py", "sub/", "absolute"])
def test_fix_diffs_apply_with_git_and_patch(tmp_path, how):
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "top.py").write_text(BUG)
    (repo / "sub" / "inner.py").write_text(BUG.rstrip("\n"))  # no newline at the end
    (repo / "sub" / "left.py").write_text(UNSAFE_ONLY)  # a finding the diff does not fix
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    arg = str(repo / "sub" / "inner.py") if how == "absolute" else how
    out = invoke("fix", arg, cwd=repo)
    assert out.code == 1 and out.stdout.startswith("--- a/"), out
    assert "a/./" not in out.stdout and "a//" not in out.stdout
    for cmd in (["git", "apply", "--check", "-"], ["patch", "-p1", "--dry-run"]):
        done = subprocess.run(cmd, cwd=repo, input=out.stdout, capture_output=True, text=True)
        assert done.returncode == 0, (cmd, done.stdout, done.stderr, out.stdout)
    subprocess.run(["git", "apply", "-"], cwd=repo, input=out.stdout, text=True, check=True)
    assert "DL001" not in invoke("check", arg, cwd=repo).output


# -- 5. no Python files ----------------------------------------------------------


def test_no_python_files_is_a_warning_and_exit_0(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    for command in ("check", "fix"):
        out = invoke(command, str(tmp_path))
        assert out.code == 0, out
        assert out.stderr.strip() == "devlint: warning: No Python files found under the given paths"
        assert "All checks passed" not in out.output
    assert invoke("check", "-qq", str(tmp_path)).output == ""


# -- 6. selectors ---------------------------------------------------------------


def test_selectors_that_match_no_rule_are_errors(tmp_path):
    (tmp_path / "a.py").write_text(BUG)
    for args in (["--select", ""], ["--ignore", ","], ["--select", "DL99"], ["--extend-select", "XYZ"]):
        out = invoke("check", *args, str(tmp_path))
        assert out.code == 2, (args, out)
        assert len(out.stderr.strip().splitlines()) == 1 and "error:" in out.stderr, out.stderr
    for value in ('[""]', '["DL99"]', '["dl001"]'):
        (tmp_path / "pyproject.toml").write_text(f"[tool.devlint]\nignore = {value}\n")
        out = invoke("check", str(tmp_path))
        assert out.code == 2 and "'ignore'" in out.stderr and len(out.stderr.strip().splitlines()) == 1, (value, out)


def test_a_prefix_means_the_codes_starting_with_it(tmp_path):
    (tmp_path / "a.py").write_text(BUG)
    (tmp_path / "pyproject.toml").write_text('[tool.devlint]\nignore = ["DL10"]\n')
    out = invoke("check", "-v", str(tmp_path))
    assert out.code == 1  # DL10 is DL100 only: DL001 is still reported
    assert "ignore 'DL10' means DL100" in out.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.devlint]\nignore = ["DL00"]\n')
    out = invoke("check", "-v", str(tmp_path))
    assert out.code == 0
    assert "ignore 'DL00' means DL001, DL002, DL003" in out.stderr
    sel = invoke("check", "-v", "--select", "DL01", str(tmp_path))
    assert "select 'DL01' means DL010, DL011, DL012, DL013" in sel.stderr
    assert "rules: DL010, DL011, DL012, DL013" in sel.stderr


# -- 7. virtual environments -------------------------------------------------------


def test_virtual_environments_of_any_name_are_skipped(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    env = tmp_path / "my-odd-env"
    site = env / "lib" / "python3.11" / "site-packages" / "pkg"
    site.mkdir(parents=True)
    (site / "bug.py").write_text(BUG)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "lib64").symlink_to("lib")
    out = invoke("check", "-v", str(tmp_path))
    assert (out.code, "loop" in out.output, "bug.py" in out.output) == (0, False, False), out


def test_a_second_link_to_a_folder_is_not_a_loop(tmp_path):
    lib = tmp_path / "tools" / "lib"
    lib.mkdir(parents=True)
    (lib / "bug.py").write_text(BUG)
    (tmp_path / "tools" / "lib64").symlink_to("lib")
    out = invoke("check", str(tmp_path))
    assert out.code == 1 and "loop" not in out.output, out
    assert out.stdout.count("DL001") == 1  # the folder is checked once


# -- 8. --statistics ------------------------------------------------------------------


def test_statistics_as_json(tmp_path):
    (tmp_path / "a.py").write_text(BUG)
    (tmp_path / "b.py").write_text(BUG)
    (tmp_path / "c.py").write_text(UNSAFE_ONLY)
    out = invoke("check", "--statistics", "--output-format", "json", str(tmp_path))
    assert out.code == 1
    assert json.loads(out.stdout) == [
        {"code": "DL001", "name": "factory-without-device", "count": 2, "fixable": 2, "unsafe_fixable": 0},
        {"code": "DL012", "name": "hardcoded-ddp-device-ids", "count": 1, "fixable": 0, "unsafe_fixable": 1},
    ]
    text = invoke("check", "--statistics", str(tmp_path)).stdout.splitlines()
    assert text[0].split() == ["2", "DL001", "[*]", "factory-without-device"]
    assert text[1].split() == ["1", "DL012", "hardcoded-ddp-device-ids"]  # an unsafe fix only: no marker
    assert text[2] == "1 hidden fix can be enabled with the `--unsafe-fixes` option."


# -- 9. fix markers ---------------------------------------------------------------------


def test_only_what_fix_apply_fixes_is_marked(tmp_path):
    (tmp_path / "a.py").write_text(BUG)
    (tmp_path / "c.py").write_text(UNSAFE_ONLY)
    out = invoke("check", "--output-format", "concise", str(tmp_path))
    lines = out.stdout.splitlines()
    assert [l.endswith("[*]") for l in lines if ": DL" in l] == [True, False], lines
    assert lines[-2:] == [
        "Found 2 problems in 2 files (1 fixable with 'devlint fix --apply').",
        "1 hidden fix can be enabled with the `--unsafe-fixes` option.",
    ]
    # with unsafe-fixes on, fix --apply fixes both: both are marked, nothing hidden
    (tmp_path / "pyproject.toml").write_text("[tool.devlint]\nunsafe-fixes = true\n")
    lines = invoke("check", "--output-format", "concise", str(tmp_path)).stdout.splitlines()
    assert [l.endswith("[*]") for l in lines if ": DL" in l] == [True, True]
    assert lines[-1] == "Found 2 problems in 2 files (2 fixable with 'devlint fix --apply')."
    os.remove(tmp_path / "pyproject.toml")
    # and fix --apply does fix exactly the marked one
    fixed = invoke("fix", "--apply", str(tmp_path))
    assert fixed.code == 1
    assert "Fixed 1 problem in 1 file; 1 remaining." in fixed.stdout
    assert fixed.stdout.rstrip().endswith("1 hidden fix can be enabled with the `--unsafe-fixes` option.")


# -- 10. rule summaries -------------------------------------------------------------------


def test_rule_all_gives_one_short_line_per_rule():
    out = invoke("rule", "--all")
    lines = out.stdout.splitlines()
    assert len(lines) == len(all_rules())
    for line, (code, rule) in zip(lines, all_rules().items()):
        summary = rule.summary()
        assert line.startswith(code) and summary in line
        assert 0 < len(summary) < 100 and "\n" not in summary, (code, summary)
        assert not summary.rstrip().endswith(":"), (code, summary)
    full = invoke("rule", "DL001").stdout
    assert "## Why is this bad?" in full and "## Example" in full and len(full) > 1000


# -- 11. notebook cells as Jupyter shows them ---------------------------------------------


def test_notebook_findings_name_the_cell_as_jupyter_does(tmp_path):
    def code(source, count):
        return {"cell_type": "code", "execution_count": count, "metadata": {}, "outputs": [], "source": source}

    markdown = {"cell_type": "markdown", "metadata": {}, "source": "# title"}
    bug_cell = "class Net(nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(3)\n"
    cells = [markdown, code("import torch\nimport torch.nn as nn\n", None), markdown, code(bug_cell, None)]
    nb = {"cells": cells, "metadata": {"kernelspec": {"language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb, indent=1) + "\n")
    out = invoke("check", "nb.ipynb", cwd=tmp_path)
    # the second code cell (markdown cells do not count), 4th cell of the file
    assert "nb.ipynb:In [2]:3:20: DL001" in out.stdout, out.stdout
    cells[3]["execution_count"] = 42
    path.write_text(json.dumps(nb, indent=1) + "\n")
    out = invoke("check", "--no-cache", "--output-format", "json", "nb.ipynb", cwd=tmp_path)
    (d,) = json.loads(out.stdout)
    assert (d["cell"], d["cell_label"]) == (4, "In [42]")
    assert "nb.ipynb:In [42]:3:20: DL001" in invoke("check", "nb.ipynb", cwd=tmp_path).stdout
