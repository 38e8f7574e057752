"""A checker process that dies by a signal (libcst's native parser
segfaulting, the OOM killer) costs only the file it was working on: one
internal-error line naming the file and the signal, the other files checked
(or fixed) and reported in the usual order, exit 2, no hang, no traceback.

The death is real: the installed ``devlint`` runs in a subprocess with a
test-only rule module (written here, never shipped) that sends its own
process a signal when it meets a ``die_here()`` call. It is loaded through a
``sitecustomize`` module on ``PYTHONPATH`` that adds its folder to the rule
package's path, so no switch exists in devlint itself.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, Optional

import pytest

from clirun import BUG, FIXED, Outcome, devlint_command, no_traceback

SITECUSTOMIZE = """\
import os

if os.environ.get("DEVLINT_TEST_EXTRA_RULES"):
    import devlint.rules

    devlint.rules.__path__.append(os.environ["DEVLINT_TEST_EXTRA_RULES"])
"""

DYING_RULE = '''\
"""Test-only rule: its process dies by a signal on a ``die_here()`` call."""

import multiprocessing
import os
import signal

from devlint.rule import Rule
from devlint.syntax import dotted_name


class TestDying(Rule):
    code = "DL993"
    name = "test-dying-rule"
    message = "test rule"
    tokens = ("die_here",)

    def visit_Call(self, node):
        if dotted_name(node.func) != "die_here":
            return
        if multiprocessing.parent_process() is None:  # never kill devlint itself
            raise RuntimeError("the dying rule ran in the main process, not in a worker")
        once = os.environ.get("DEVLINT_TEST_DIE_ONCE")
        if once:
            if os.path.exists(once):
                return
            open(once, "w").close()
        os.kill(os.getpid(), getattr(signal, os.environ["DEVLINT_TEST_DIE_SIGNAL"]))
'''

NAMES = ["a.py", "b.py", "c.py", "d.py", "e.py", "f.py"]
VICTIM = "c.py"
VICTIM_SOURCE = BUG + "\n\ndie_here()\n"


def _tree(tmp_path: Path) -> Path:
    plugin = tmp_path / "plugin"
    (plugin / "extra_rules").mkdir(parents=True)
    (plugin / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (plugin / "extra_rules" / "dl993_test_dying.py").write_text(DYING_RULE)
    src = tmp_path / "src"
    src.mkdir()
    for name in NAMES:
        (src / name).write_text(VICTIM_SOURCE if name == VICTIM else BUG)
    return src


def _devlint(tmp_path: Path, *args: str, sig: str, once: Optional[Path] = None) -> Outcome:
    env: Dict[str, str] = {
        **os.environ,
        "NO_COLOR": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path / "plugin"), os.environ.get("PYTHONPATH", "")) if p),
        "DEVLINT_TEST_EXTRA_RULES": str(tmp_path / "plugin" / "extra_rules"),
        "DEVLINT_TEST_DIE_SIGNAL": sig,
        "DEVLINT_TEST_DIE_ONCE": str(once) if once else "",
    }
    env.pop("PYTHONFAULTHANDLER", None)
    proc = subprocess.Popen(
        [*devlint_command(), *args, "--no-cache", "-j", "2", "--select", "DL001,DL993", "src"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=120)  # a hang fails here
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("devlint hung after a worker died")
    out = Outcome(proc.returncode, stdout, stderr)
    assert proc.returncode >= 0, f"devlint itself died from signal {-proc.returncode}: {out.output[-2000:]}"
    no_traceback(out)
    assert "Fatal Python error" not in out.output, out.output
    return out


def _one_death_line(out: Outcome, sig: str, number: int) -> None:
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    victim = [l for l in lines if VICTIM in l]
    assert len(victim) == 1, out.output
    line = victim[0]
    assert line.startswith(f"devlint: src/{VICTIM}: internal error"), line
    assert "checker process died" in line and f"{sig} (signal {number})" in line and "report" in line, line
    # nothing else went wrong
    assert [l for l in lines if "internal error" in l] == [line], out.output


@pytest.mark.parametrize("sig, number", [("SIGSEGV", 11), ("SIGKILL", 9), ("SIGABRT", 6)])
def test_check_survives_a_worker_dying_by_a_signal(tmp_path, sig, number):
    _tree(tmp_path)
    out = _devlint(tmp_path, "check", sig=sig)
    assert out.code == 2, out.output
    _one_death_line(out, sig, number)
    # the other files are checked and reported in the usual (sorted) order
    reported = [l.split(":", 1)[0] for l in out.stdout.splitlines() if "DL001" in l]
    assert reported == [f"src/{n}" for n in NAMES if n != VICTIM], out.output


def test_fix_apply_survives_a_worker_dying_by_a_signal(tmp_path):
    src = _tree(tmp_path)
    out = _devlint(tmp_path, "fix", "--apply", sig="SIGSEGV")
    assert out.code == 2, out.output
    _one_death_line(out, "SIGSEGV", 11)
    assert (src / VICTIM).read_text() == VICTIM_SOURCE  # not damaged, not half-written
    for name in NAMES:
        if name != VICTIM:
            assert (src / name).read_text() == FIXED, name  # the others are fixed
    assert sorted(p.name for p in src.iterdir()) == NAMES  # no temporary file left behind


def test_a_worker_that_dies_once_is_retried_alone(tmp_path):
    """The OOM killer may pick a process that was not the culprit: the file
    is checked again, alone, and a second success counts."""
    src = _tree(tmp_path)
    once = tmp_path / "died-once"
    out = _devlint(tmp_path, "check", sig="SIGKILL", once=once)
    assert once.exists(), "the worker never died: the test tests nothing"
    assert out.code == 1, out.output
    assert "internal error" not in out.output
    reported = [l.split(":", 1)[0] for l in out.stdout.splitlines() if "DL001" in l]
    assert reported == [f"src/{n}" for n in NAMES], out.output
    assert (src / VICTIM).read_text() == VICTIM_SOURCE


def test_the_dying_rule_is_loaded_in_the_subprocess(tmp_path):
    """Guard against a test that cannot fail: without the signal variable's
    effect the rule is not there (exit 1, no internal error); with it, it is."""
    _tree(tmp_path)
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.run(
        [*devlint_command(), "check", "--no-cache", "-j", "2", "--select", "DL993", "src"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # without the sitecustomize on PYTHONPATH the code is unknown
    assert proc.returncode == 2 and "DL993" in proc.stderr, proc.stderr


HELPER = "import torch\n\n\ndef make_grid(n):\n    return torch.linspace(0, 1, n)\n"
USER = (
    "import torch.nn as nn\n"
    "\n"
    "from grids import make_grid\n"
    "\n"
    "\n"
    "class Head(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.lin = nn.Linear(4, 4)\n"
    "\n"
    "    def forward(self, x):\n"
    "        return self.lin(x) * make_grid(4)\n"
)


def test_workers_kept_across_waves_learn_the_summaries_of_earlier_waves(tmp_path):
    """A project run forks its workers once and sends each later job the
    summaries the earlier waves added: four files that import a helper of a
    fifth are checked in a wave after it, by workers forked before its
    summary existed, and each sees that the helper makes a CPU tensor. A
    worker that died in the first wave costs only its file."""
    src = _tree(tmp_path)
    (src / "grids.py").write_text(HELPER)
    users = [f"head{i}.py" for i in range(4)]
    for name in users:
        (src / name).write_text(USER)
    out = _devlint(tmp_path, "check", sig="SIGKILL")
    assert out.code == 2, out.output
    _one_death_line(out, "SIGKILL", 9)
    reported = sorted({l.split(":", 1)[0] for l in out.stdout.splitlines() if "DL001" in l})
    assert reported == sorted(f"src/{n}" for n in [*NAMES, *users] if n != VICTIM), out.output
    for name in users:
        assert any(l.startswith(f"src/{name}:12:") and "make_grid" in l for l in out.stdout.splitlines()), out.output
