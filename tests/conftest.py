"""Shared test helpers."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.fixture
def write(tmp_path):
    """Write a dedented file under tmp_path and return its path."""

    def _write(name: str, content: str, mode: str = "w") -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if "b" in mode:
            p.write_bytes(content)
        else:
            p.write_text(textwrap.dedent(content).lstrip("\n"))
        return p

    return _write


def update_snapshots() -> bool:
    return os.environ.get("DEVLINT_UPDATE_SNAPSHOTS") == "1"


def check_snapshot(path: Path, actual: str) -> None:
    """``actual`` must be the snapshot ``path`` holds; a missing snapshot is
    written and fails the test (review it); ``DEVLINT_UPDATE_SNAPSHOTS=1``
    rewrites them."""
    if update_snapshots() or not path.exists():
        path.write_text(actual)
        if not update_snapshots():
            pytest.fail(f"snapshot {path} was missing and has been written; review it")
    assert actual == path.read_text(), f"{path} differs (DEVLINT_UPDATE_SNAPSHOTS=1 rewrites it)"


@pytest.fixture(autouse=True)
def _isolated_result_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own empty result cache (never the repository's)."""
    monkeypatch.setenv("DEVLINT_CACHE_DIR", str(tmp_path_factory.mktemp("devlint_cache")))


def check_tree(tree, project: bool = True, processes: int = 1, cache=None, **kw):
    """Run devlint (the rules on by default) over every file under ``tree``,
    from ``tree``, as one project (``project=False``: file by file); ``kw``
    goes to the jobs (``fix=True``, ``unsafe=True``, ``apply=True``)."""
    from devlint.config import Config
    from devlint.files import discover
    from devlint.project.plan import make_plan
    from devlint.rule import all_rules
    from devlint.runner import jobs_for, run_jobs

    codes = [c for c, r in all_rules().items() if r.enabled_by_default]
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        config = Config(root=".")
        files = discover(["."], config).files
        plan = make_plan(files, config.source_roots()) if project else None
        return run_jobs(jobs_for(files, config, codes, **kw), processes, cache=cache, plan=plan)
    finally:
        os.chdir(cwd)
