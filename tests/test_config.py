"""``[tool.devlint]`` in pyproject.toml: every key, command-line overrides,
and clear errors for unknown keys, unknown codes and wrong types."""

from __future__ import annotations

import os

from click.testing import CliRunner

from devlint.cli import main

BUGGY = """
import torch
import torch.nn as nn

class M(nn.Module):
    def forward(self, x):
        return x + torch.ones(3)
"""


def check(tmp_path, *args):
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        return CliRunner().invoke(main, ["check", *args], catch_exceptions=False)
    finally:
        os.chdir(old)


def pyproject(write, body: str):
    return write("pyproject.toml", "[tool.devlint]\n" + body)


def test_ignore_in_config(write, tmp_path):
    write("m.py", BUGGY)
    pyproject(write, 'ignore = ["DL001"]\n')
    assert check(tmp_path, "m.py").exit_code == 0


def test_select_in_config_and_cli_override(write, tmp_path):
    write("m.py", BUGGY)
    pyproject(write, 'select = ["DL00"]\nignore = ["DL001"]\n')
    assert check(tmp_path, "m.py").exit_code == 0
    # --select on the command line replaces the configured selection; the
    # configured ignore still applies
    assert check(tmp_path, "--select", "DL001", "m.py").exit_code == 0


def test_extend_select(write, tmp_path):
    write("m.py", BUGGY)
    pyproject(write, 'select = []\nextend-select = ["DL001"]\n')
    assert check(tmp_path, "m.py").exit_code == 1


def test_exclude_and_extend_exclude(write, tmp_path):
    write("gen/m.py", BUGGY)
    write("legacy/old.py", BUGGY)
    write("src/m.py", BUGGY)
    pyproject(write, 'extend-exclude = ["legacy"]\nexclude = ["gen", ".git"]\n')
    r = check(tmp_path, ".")
    assert r.exit_code == 1
    assert "src/m.py" in r.output
    assert "gen/m.py" not in r.output and "legacy/old.py" not in r.output
    # a file named on the command line is always checked
    assert "legacy/old.py" in check(tmp_path, "legacy/old.py").output


def test_default_excludes(write, tmp_path):
    for folder in (".venv", "build", "dist", "__pycache__", "node_modules", "site-packages", ".git"):
        write(f"{folder}/m.py", BUGGY)
    write("src/m.py", BUGGY)
    r = check(tmp_path, ".")
    assert r.output.count("DL001") == 1


def test_gitignore_is_honoured(write, tmp_path):
    write(".gitignore", "generated/\n*_pb2.py\n!keep_pb2.py\n")
    write("generated/m.py", BUGGY)
    write("api_pb2.py", BUGGY)
    write("keep_pb2.py", BUGGY)
    write("src/m.py", BUGGY)
    write("src/.gitignore", "local.py\n")
    write("src/local.py", BUGGY)
    r = check(tmp_path, "--output-format", "json", ".")
    import json

    paths = sorted(d["filename"] for d in json.loads(r.output))
    assert paths == ["./keep_pb2.py", "./src/m.py"]


def test_per_file_ignores(write, tmp_path):
    write("tests/test_m.py", BUGGY)
    write("src/m.py", BUGGY)
    pyproject(write, '[tool.devlint.per-file-ignores]\n"tests/*" = ["DL001"]\n')
    r = check(tmp_path, ".")
    assert "src/m.py" in r.output and "tests/test_m.py" not in r.output


def test_unsafe_fixes_key(write, tmp_path):
    pyproject(write, "unsafe-fixes = true\n")
    write("m.py", BUGGY)
    assert check(tmp_path, "m.py").exit_code == 1


def test_unknown_key_is_an_error(write, tmp_path):
    write("m.py", BUGGY)
    pyproject(write, 'selekt = ["DL001"]\n')
    r = check(tmp_path, "m.py")
    assert r.exit_code == 2
    assert "unknown key 'selekt'" in r.output
    assert "Traceback" not in r.output


def test_unknown_code_in_config_is_an_error(write, tmp_path):
    write("m.py", BUGGY)
    pyproject(write, 'ignore = ["DL0O1"]\n')
    r = check(tmp_path, "m.py")
    assert r.exit_code == 2
    assert "unknown rule code 'DL0O1'" in r.output


def test_wrong_type_is_an_error(write, tmp_path):
    write("m.py", BUGGY)
    pyproject(write, 'select = "DL001"\n')
    r = check(tmp_path, "m.py")
    assert r.exit_code == 2
    assert "'select' must be a list of strings" in r.output


def test_invalid_toml_is_an_error(write, tmp_path):
    write("m.py", BUGGY)
    write("pyproject.toml", "[tool.devlint\nselect = [\n")
    r = check(tmp_path, "m.py")
    assert r.exit_code == 2
    assert "invalid TOML" in r.output and "pyproject.toml" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_nearest_pyproject_with_a_devlint_table_wins(write, tmp_path):
    pyproject(write, 'ignore = ["DL001"]\n')
    write("sub/pyproject.toml", "[project]\nname = 'x'\n")  # no [tool.devlint]: keep looking up
    write("sub/m.py", BUGGY)
    assert check(tmp_path, "sub/m.py").exit_code == 0


def test_explicit_config_option(write, tmp_path):
    write("m.py", BUGGY)
    write("other/pyproject.toml", '[tool.devlint]\nignore = ["DL001"]\n')
    assert check(tmp_path, "--config", "other/pyproject.toml", "m.py").exit_code == 0
