"""The pre-commit hooks, run by the real ``pre-commit try-repo`` on a fresh git
repository, as a user would. The hook environment is built by pre-commit
itself (a virtualenv with ``pip install`` of this repository), so this test
needs the package index; it is skipped when pre-commit is not installed.

``try-repo`` clones the hook repository at a commit (uncommitted changes to
tracked files are added, untracked files are not), so the test commits a
snapshot of this working tree first: it tests exactly the code under test, in
a fresh clone in CI as in a developer's tree with new files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

PRE_COMMIT = shutil.which("pre-commit") or (
    str(Path(sys.executable).with_name("pre-commit")) if Path(sys.executable).with_name("pre-commit").exists() else None
)
pytestmark = [
    pytest.mark.skipif(PRE_COMMIT is None, reason="pre-commit is not installed (pip install -e '.[test]')"),
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.slow,
]

#: what a pip install of devlint needs; everything else in the tree stays out
_PACKAGE_PARTS = ("pyproject.toml", "README.md", "LICENSE", ".pre-commit-hooks.yaml", "devlint/", "rules/")

BUGGY = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(100, 16)

        def forward(self, src):
            pos = torch.arange(0, src.shape[1]).unsqueeze(0)
            return self.tok(src) + pos.unsqueeze(-1)
    """
)

CLEAN = textwrap.dedent(
    """\
    import torch


    def grid(n, device):
        return torch.arange(n, device=device)
    """
)


def _git(cwd: Path, *args: str) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
    )
    out = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _tree_files() -> list:
    if (ROOT / ".git").exists():
        listed = _git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
        return [f for f in listed if f and (ROOT / f).is_file()]
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and "__pycache__" not in p.parts]


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """A committed snapshot of this working tree (what a user would clone)."""
    repo = tmp_path_factory.mktemp("devlint-hook-repo")
    for rel in _tree_files():
        if rel in _PACKAGE_PARTS or rel.startswith(tuple(p for p in _PACKAGE_PARTS if p.endswith("/"))):
            dest = repo / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest)
    if not (repo / "README.md").exists():  # pyproject's readme must exist to build
        (repo / "README.md").write_text("devlint\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "snapshot")
    return repo


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def user_repo(tmp_path) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "model.py").write_text(BUGGY)
    (repo / "utils.py").write_text(CLEAN)
    (repo / "notes.txt").write_text("torch.zeros(3) is not Python here\n")
    shutil.copy(ROOT / "fixtures" / "notebooks" / "transformer_tutorial.ipynb", repo / "tutorial.ipynb")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    return repo


def _pre_commit(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PRE_COMMIT_HOME=str(home), PRE_COMMIT_COLOR="never")
    return subprocess.run([PRE_COMMIT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _use_hooks(user_repo: Path, hook_repo: Path, **overrides) -> None:
    """Write the .pre-commit-config.yaml a user would (JSON is YAML)."""
    config = {
        "repos": [
            {
                "repo": str(hook_repo),
                "rev": _git(hook_repo, "rev-parse", "HEAD").strip(),
                "hooks": [{"id": "devlint", **overrides}, {"id": "devlint-fix", **overrides}],
            }
        ]
    }
    (user_repo / ".pre-commit-config.yaml").write_text(json.dumps(config, indent=2))


def test_try_repo_check_fails_fix_fixes(hook_repo, pre_commit_home, user_repo):
    # try-repo builds its hook environment in a temporary store each time
    first = _pre_commit(user_repo, pre_commit_home, "try-repo", str(hook_repo), "devlint", "--all-files")
    out = first.stdout + first.stderr
    assert first.returncode == 1, out
    assert "model.py:11:15: DL001" in out, out
    assert "tutorial.ipynb:In [3]:13:15: DL001" in out, out  # types_or: jupyter
    assert "utils.py" not in out and "notes.txt" not in out, out

    fixed = _pre_commit(user_repo, pre_commit_home, "try-repo", str(hook_repo), "devlint-fix", "--all-files")
    out = fixed.stdout + fixed.stderr
    assert fixed.returncode == 1, out  # pre-commit fails a hook that modified files
    assert "files were modified by this hook" in out, out
    assert "torch.arange(0, src.shape[1], device=src.device)" in (user_repo / "model.py").read_text()
    assert (user_repo / "utils.py").read_text() == CLEAN
    assert "torch.arange(0, length, device=src.device)" in (user_repo / "tutorial.ipynb").read_text()

    _git(user_repo, "add", "-A")
    again = _pre_commit(user_repo, pre_commit_home, "try-repo", str(hook_repo), "devlint", "--all-files")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Passed" in again.stdout


def test_installed_hooks_and_their_environment(hook_repo, pre_commit_home, user_repo):
    _use_hooks(user_repo, hook_repo)
    _git(user_repo, "add", "-A")
    run = _pre_commit(user_repo, pre_commit_home, "run", "devlint", "--all-files")
    assert run.returncode == 1 and "model.py:11:15: DL001" in run.stdout, run.stdout + run.stderr
    # the hook environment holds devlint, libcst and click, never torch
    envs = [p for p in pre_commit_home.rglob("py_env-*") if p.is_dir()]
    assert envs, "pre-commit built no python environment"
    for env in envs:
        installed = {p.name.split("-")[0].lower() for p in env.rglob("site-packages/*.dist-info")}
        assert {"devlint", "libcst", "click"} <= installed, installed
        assert "torch" not in installed, installed


def test_hooks_called_with_no_files_check_nothing(hook_repo, pre_commit_home, user_repo):
    _use_hooks(user_repo, hook_repo)
    # nothing staged: pre-commit skips the hooks (always_run is false) ...
    run = _pre_commit(user_repo, pre_commit_home, "run", "devlint")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no files to check" in run.stdout
    # ... and hooks a user forces to run with zero files check nothing
    # instead of the whole repository
    _use_hooks(user_repo, hook_repo, always_run=True)
    forced = _pre_commit(user_repo, pre_commit_home, "run")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "DL001" not in forced.stdout
    assert (user_repo / "model.py").read_text() == BUGGY


def test_hook_manifest_is_valid():
    run = subprocess.run([PRE_COMMIT, "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    import yaml  # pre-commit's own dependency

    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"devlint", "devlint-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "jupyter"]
        assert "--hook" in hook["entry"].split()
    assert hooks["devlint"]["entry"].startswith("devlint check")
    assert hooks["devlint-fix"]["entry"].startswith("devlint fix --apply")


def test_the_documented_local_hook_works(hook_repo, pre_commit_home, user_repo):
    """README's `repo: local` hook, with its checkout path filled in."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in readme.split("```yaml\n")[1:] if "repo: local" in b).split("```", 1)[0]
    assert "/path/to/devlint" in block
    (user_repo / ".pre-commit-config.yaml").write_text(block.replace("/path/to/devlint", str(hook_repo)))
    first = _pre_commit(user_repo, pre_commit_home, "run", "--all-files")
    out = first.stdout + first.stderr
    assert first.returncode == 1, out
    assert "model.py:11:15: DL001" in out and "tutorial.ipynb:In [3]:13:15: DL001" in out, out
    assert "utils.py" not in out and "notes.txt" not in out, out
