"""``--hook``: what the pre-commit hooks run. Exactly the files given are
checked, minus those the configuration excludes; no files: nothing is checked."""

from __future__ import annotations

import shutil

from click.testing import CliRunner

from conftest import FIXTURES
from devlint.cli import main

BAD = FIXTURES / "DL001" / "bad_seq2seq_positions.py"


def _run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_no_files_checks_nothing(tmp_path, monkeypatch):
    shutil.copy(BAD, tmp_path / "model.py")
    monkeypatch.chdir(tmp_path)
    assert _run("check").exit_code == 1  # plain: checks "."
    for cmd in (["check", "--hook"], ["fix", "--hook"], ["fix", "--apply", "--hook"]):
        result = _run(*cmd)
        assert result.exit_code == 0, result.output
        assert "DL001" not in result.output
    assert (tmp_path / "model.py").read_text() == BAD.read_text()


def test_given_files_minus_configured_excludes(tmp_path, monkeypatch):
    (tmp_path / "vendor").mkdir()
    shutil.copy(BAD, tmp_path / "model.py")
    shutil.copy(BAD, tmp_path / "vendor" / "copied.py")
    (tmp_path / "pyproject.toml").write_text('[tool.devlint]\nextend-exclude = ["vendor"]\n')
    monkeypatch.chdir(tmp_path)
    # named explicitly, a file is checked even when excluded ...
    assert "vendor/copied.py" in _run("check", "model.py", "vendor/copied.py").output
    # ... but not in hook mode, where pre-commit names every staged file
    result = _run("check", "--hook", "model.py", "vendor/copied.py")
    assert result.exit_code == 1
    assert "model.py:17:15: DL001" in result.output
    assert "vendor" not in result.output
    assert _run("check", "--hook", "vendor/copied.py").exit_code == 0
    _run("fix", "--apply", "--hook", "model.py", "vendor/copied.py")
    assert (tmp_path / "vendor" / "copied.py").read_text() == BAD.read_text()
    assert (tmp_path / "model.py").read_text() != BAD.read_text()
