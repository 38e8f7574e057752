"""Running devlint the way users do, for the reliability tests: in-process
through click's CliRunner, and as the installed ``devlint`` command in a
subprocess (where a crash of the native parser would show as a signal)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from click.testing import CliRunner

from devlint.cli import main

#: a DL001 bug and its safe fix, the smallest real finding there is
BUG = (
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "\n"
    "class Net(nn.Module):\n"
    "    def forward(self, x):\n"
    "        return x + torch.zeros(3)\n"
)
BUG_LINE = 7
BUGGY_CALL = "torch.zeros(3)"
FIXED_CALL = "torch.zeros(3, device=x.device)"
FIXED = BUG.replace(BUGGY_CALL, FIXED_CALL)


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def error_lines(self, needle: str) -> List[str]:
        return [line for line in self.stderr.splitlines() if needle in line]


def no_traceback(out: Outcome) -> None:
    assert "Traceback" not in out.output, out.output
    assert out.code in (0, 1, 2), out


def cli(*args: str, cwd: Optional[Path] = None) -> Outcome:
    """``devlint ARGS`` in this process (CliRunner)."""
    runner = CliRunner()
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = runner.invoke(main, list(args), catch_exceptions=True)
    finally:
        os.chdir(old)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    out = Outcome(result.exit_code, result.stdout, result.stderr)
    no_traceback(out)
    return out


def devlint_command() -> List[str]:
    script = Path(sys.executable).with_name("devlint")
    return [str(script)] if script.exists() else [sys.executable, "-m", "devlint"]


def run(*args: str, cwd: Optional[Path] = None, timeout: float = 120, prefix: Sequence[str] = ()) -> Outcome:
    """The installed ``devlint ARGS`` in a subprocess."""
    proc = subprocess.run(
        [*prefix, *devlint_command(), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1"},
    )
    out = Outcome(proc.returncode, proc.stdout, proc.stderr)
    assert proc.returncode >= 0, f"devlint died from signal {-proc.returncode}: {out.output[-2000:]}"
    no_traceback(out)
    return out
