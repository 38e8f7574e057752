"""The result cache: a warm run answers from .devlint_cache/ with the same
output as a cold one, re-checks only what changed, ignores anything in the
cache it does not expect (it may come from an untrusted checkout), and never
imports libcst when every file is answered from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

import devlint.runner as runner
from devlint.cache import CACHE_DIR, ResultCache, code_fingerprint
from devlint.catalog import rule_table
from devlint.cli import main
from devlint.config import Config
from devlint.rule import all_rules

BUGGY = textwrap.dedent(
    """
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
)
CLEAN = "import torch\n\ndef f(x):\n    return x + 1\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder with four files; the cache in its default place."""
    monkeypatch.delenv("DEVLINT_CACHE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text(BUGGY)
    (src / "b.py").write_text(BUGGY.replace("Encoder", "Decoder"))
    (src / "c.py").write_text(CLEAN)
    (src / "d.py").write_text("x = 1\n")
    return tmp_path


def check(*args):
    return CliRunner().invoke(main, ["check", *args], catch_exceptions=False)


@pytest.fixture
def checked(monkeypatch):
    """The paths the engine really checks (not answered from the cache)."""
    seen = []
    real = runner._run_job_digest

    def spy(job):
        seen.append(os.path.basename(job.path))
        return real(job)

    monkeypatch.setattr(runner, "_run_job_digest", spy)
    return seen


def test_warm_run_prints_the_same_and_checks_nothing(project, checked):
    cold = check("src", "-j", "1")
    assert sorted(checked) == ["a.py", "b.py", "c.py", "d.py"]
    assert (project / CACHE_DIR / ".gitignore").read_text().splitlines()[-1] == "*"
    checked.clear()
    warm = check("src", "-j", "1")
    assert checked == []
    assert warm.output == cold.output and warm.exit_code == cold.exit_code == 1
    assert "pos = torch.arange(src.shape[1])" in warm.output  # source lines come back too
    for fmt in ("json", "sarif", "github", "concise"):
        a = check("src", "-j", "1", "--output-format", fmt, "--no-cache").output
        b = check("src", "-j", "1", "--output-format", fmt).output
        assert a == b, fmt


def test_touching_one_file_rechecks_only_that_file(project, checked):
    check("src", "-j", "1")
    checked.clear()
    (project / "src" / "c.py").write_text(CLEAN + "\ny = torch.zeros(3)\n")
    result = check("src", "-j", "1", "-v")
    assert checked == ["c.py"]
    assert "3 from the cache" in result.output
    # a file whose content comes back to a cached state is a hit again
    checked.clear()
    (project / "src" / "a.py").write_text(BUGGY + "\n")
    (project / "src" / "a.py").write_text(BUGGY)
    check("src", "-j", "1")
    assert checked == []


def test_configuration_and_selection_are_part_of_the_key(project, checked):
    check("src", "-j", "1")
    checked.clear()
    out = check("src", "-j", "1", "--ignore", "DL001")
    assert out.exit_code == 0 and sorted(checked) == ["a.py", "b.py", "c.py", "d.py"]
    checked.clear()
    (project / "pyproject.toml").write_text('[tool.devlint]\nper-file-ignores = { "src/a.py" = ["DL001"] }\n')
    out = check("src", "-j", "1")
    assert "a.py" in checked and "src/a.py" not in out.output and "src/b.py" in out.output


def test_no_cache_neither_reads_nor_writes(project, checked):
    check("src", "--no-cache", "-j", "1")
    assert not (project / CACHE_DIR).exists()
    check("src", "-j", "1")
    checked.clear()
    check("src", "--no-cache", "-j", "1")
    assert len(checked) == 4


def test_clean_removes_the_cache(project):
    check("src")
    assert (project / CACHE_DIR).is_dir()
    out = CliRunner().invoke(main, ["clean"], catch_exceptions=False)
    assert out.exit_code == 0 and not (project / CACHE_DIR).exists()
    out = CliRunner().invoke(main, ["clean"], catch_exceptions=False)
    assert out.exit_code == 0 and out.output == ""


def test_fix_uses_the_cache_only_where_nothing_is_to_fix(project, checked):
    check("src", "-j", "1")
    checked.clear()
    out = CliRunner().invoke(main, ["fix", "--apply", "src", "-j", "1"], catch_exceptions=False)
    assert sorted(checked) == ["a.py", "b.py"], "clean files come from the cache"
    assert "device=" in (project / "src" / "a.py").read_text()
    assert out.exit_code == 0
    checked.clear()
    assert check("src", "-j", "1").exit_code == 0
    assert sorted(checked) == ["a.py", "b.py"], "fixed files changed, so they are checked again"


def _only_cache_file(project):
    files = [p for p in (project / CACHE_DIR).iterdir() if p.name.startswith("results-")]
    assert len(files) == 1
    return files[0]


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x80\x81 not json",
        b"[1, 2, 3]",
        b'{"format": 1}',
        b"\n" * 10 + b"{" * 100000,  # deeply nested: RecursionError in json
    ],
)
def test_corrupt_cache_file_is_ignored(project, checked, garbage):
    cold = check("src", "-j", "1")
    _only_cache_file(project).write_bytes(garbage)
    checked.clear()
    again = check("src", "-j", "1")
    assert again.output == cold.output and len(checked) == 4
    json.loads(_only_cache_file(project).read_text())  # rewritten as valid JSON


def test_hostile_entries_are_validated_not_trusted(project, checked):
    cold = check("src", "-j", "1")
    path = _only_cache_file(project)
    data = json.loads(path.read_text())
    files = data["files"]
    a, b, c = os.path.join("src", "a.py"), os.path.join("src", "b.py"), os.path.join("src", "c.py")
    files[a][1]["diagnostics"][0]["location"]["line"] = "1; rm -rf /"  # wrong type
    files[b][1]["diagnostics"][0]["filename"] = "/etc/passwd"  # another file's finding
    files[c][0] = "0" * 32  # another content
    files["src/zzz.py"] = {"__class__": "os.system"}
    path.write_text(json.dumps(data))
    checked.clear()
    again = check("src", "-j", "1")
    assert sorted(checked) == ["a.py", "b.py", "c.py"]
    assert again.output == cold.output


def test_a_symlinked_cache_folder_is_not_followed(project, tmp_path_factory, checked):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    os.symlink(elsewhere, project / CACHE_DIR)
    out = check("src", "-j", "1")
    assert out.exit_code == 1
    assert list(elsewhere.iterdir()) == []
    CliRunner().invoke(main, ["clean"], catch_exceptions=False)
    assert not (project / CACHE_DIR).exists() and elsewhere.is_dir()


def test_key_covers_rule_sources(monkeypatch, tmp_path):
    import devlint.rules as rules_package

    before = code_fingerprint()
    extra = tmp_path / "more_rules"
    (extra / "helpers").mkdir(parents=True)
    helper = extra / "helpers" / "_private.py"
    helper.write_text("# a private helper of a rule\n")
    monkeypatch.setattr(rules_package, "__path__", list(rules_package.__path__) + [str(extra)])
    with_helper = code_fingerprint()
    assert with_helper != before
    helper.write_text("# the helper edited\n")
    assert code_fingerprint() != with_helper
    assert ResultCache(str(tmp_path / "c"), Config().cache_key()).key != ResultCache(
        str(tmp_path / "c"), Config(select=("DL001",)).cache_key()
    ).key


def test_key_covers_every_module_of_the_package():
    # editing a subpackage (the device flow) or a rule's private module
    # (facts/scripts.py) must invalidate cached results
    from devlint.cache import _source_files

    names = {name for name, _ in _source_files()}
    assert {"cache.py", "facts/flow.py", "facts/__init__.py", "facts/scripts.py",
            "rules/dl001_factory_without_device.py"} <= names
    assert not any("__pycache__" in name or not name.endswith(".py") for name in names)


def test_catalog_agrees_with_the_imported_rules():
    assert rule_table() == {code: rule.enabled_by_default for code, rule in all_rules().items()}


def test_warm_run_never_imports_libcst(project):
    env = dict(os.environ)
    env.pop("DEVLINT_CACHE_DIR", None)
    cmd = [sys.executable, "-X", "importtime", "-m", "devlint", "check", "src"]
    subprocess.run(cmd, cwd=project, env=env, capture_output=True)
    warm = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
    assert warm.returncode == 1 and "src/a.py" in warm.stdout
    assert "libcst" not in warm.stderr


def test_a_warm_run_reads_no_imports_again_and_validates_the_stored_ones(project, monkeypatch):
    """The project plan's imports are kept by content digest and module
    name: a warm run reads none; an edited file is read again; a stored
    entry of the wrong shape (an untrusted cache) is read again, not used."""
    import devlint.project.plan as plan

    read = []
    real = plan.read_imports

    def spy(text, module, pkg):
        read.append(module)
        return real(text, module, pkg)

    monkeypatch.setattr(plan, "read_imports", spy)
    cold = check("src", "-j", "1")
    assert sorted(read) == ["a", "b", "c", "d"]
    read.clear()
    assert check("src", "-j", "1").output == cold.output
    assert read == []
    (project / "src" / "c.py").write_text(CLEAN + "\nimport os\n")
    check("src", "-j", "1")
    assert read == ["c"]
    (cache_file,) = [p for p in (project / CACHE_DIR).glob("results-*.json")]
    data = json.loads(cache_file.read_text())
    assert len(data["imports"]) >= 4
    data["imports"] = {k: [["x"], {"a": 1}, True] for k in data["imports"]}  # a non-string alias
    cache_file.write_text(json.dumps(data))
    read.clear()
    fresh = check("src", "-j", "1", "--no-cache").output
    read.clear()
    assert check("src", "-j", "1").output == fresh
    assert sorted(read) == ["a", "b", "c", "d"]
