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


@pytest.fixture(autouse=True)
def _isolated_result_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own empty result cache (never the repository's)."""
    monkeypatch.setenv("DEVLINT_CACHE_DIR", str(tmp_path_factory.mktemp("devlint_cache")))
