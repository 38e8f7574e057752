"""The flake8 plugin, run by the real flake8: ``flake8 --select DL`` reports
devlint's findings, and flake8's own ``# noqa``, configuration and formatters
apply to them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

flake8 = pytest.importorskip("flake8", reason="flake8 is not installed (pip install -e '.[test]')")

MODEL = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class M(nn.Module):
        def forward(self, x):
            a = torch.zeros(3)
            b = torch.ones(3)  # noqa: DL001
            c = torch.arange(3)  # noqa: E501
            return x + a + b + c
    """
)


def _plugin_registered() -> bool:
    from importlib.metadata import entry_points

    eps = entry_points()
    group = eps.select(group="flake8.extension") if hasattr(eps, "select") else eps.get("flake8.extension", [])
    return any(ep.value == "devlint.flake8_plugin:DevlintChecker" for ep in group)


pytestmark = pytest.mark.skipif(not _plugin_registered(), reason="devlint is not installed with its entry points")


def _flake8(cwd, *args):
    run = subprocess.run([sys.executable, "-m", "flake8", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in run.stderr, run.stderr
    return run


@pytest.fixture
def project(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "clean.py").write_text("import torch\n\n\ndef make(n, device):\n    return torch.zeros(n, device=device)\n")
    return tmp_path


def test_select_dl_reports_devlint_findings(project):
    run = _flake8(project, "--select", "DL", "model.py", "clean.py")
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        "model.py:7:13: DL001 `torch.zeros` in `M.forward` creates its tensor on the CPU; it meets `x` through an operation, which fails when that is on a GPU",
        "model.py:9:13: DL001 `torch.arange` in `M.forward` creates its tensor on the CPU; it meets a tensor on the inputs' device through an operation, which fails when that is on a GPU",
    ]
    assert _flake8(project, "--select", "DL", "clean.py").returncode == 0


def test_flake8_noqa_decides(project):
    # devlint's own suppression is off under flake8: --disable-noqa shows everything
    run = _flake8(project, "--select", "DL", "--disable-noqa", "model.py")
    assert [l.split(":")[1] for l in run.stdout.splitlines()] == ["7", "8", "9"]


def test_flake8_configuration_and_formatters(project):
    (project / ".flake8").write_text("[flake8]\nselect = DL,E\nper-file-ignores =\n    legacy/*.py: DL001\n")
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text(MODEL)
    run = _flake8(project, "--format", "pylint", ".")
    lines = run.stdout.splitlines()
    assert "./model.py:7: [DL001] `torch.zeros` in `M.forward` creates its tensor on the CPU; it meets `x` through an operation, which fails when that is on a GPU" in lines
    assert not any("legacy" in l and "DL001" in l for l in lines), lines
    ignored = _flake8(project, "--extend-ignore", "DL001", "model.py")
    assert "DL001" not in ignored.stdout
    stats = _flake8(project, "--select", "DL", "--count", "--statistics", "-q", "model.py")
    assert "2     DL001" in stats.stdout


def test_syntax_errors_are_left_to_flake8(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n    torch.zeros(3)\n")
    run = _flake8(tmp_path, "--select", "DL,E9", "broken.py")
    assert "E999" in run.stdout and "DL" not in run.stdout, run.stdout
