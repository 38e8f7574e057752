"""Pool workers whose memory grew retire after their job and a fresh fork
takes the next one: every file is still checked once, in order, with the
same findings as in one process, and the parent's index reaches the fresh
workers (they fork from it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devlint import runner
from devlint.runner import Job, _WorkerPool, run_job

BUG = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) + torch.zeros(4)
"""

CLEAN = "x = 1\n"


def _jobs(tmp_path: Path, n: int = 7):
    jobs = []
    for i in range(n):
        f = tmp_path / f"m{i}.py"
        f.write_text(BUG if i % 2 == 0 else CLEAN)
        jobs.append(Job(path=str(f), codes=("DL001",), ignore=()))
    return jobs


def _codes(result):
    return [(d.code, d.line) for d in result.diagnostics]


@pytest.mark.parametrize("limit, starts", [(float("-inf"), 7), (float("inf"), 2)])
def test_workers_retire_past_the_growth_limit(tmp_path, monkeypatch, limit, starts):
    monkeypatch.setattr(runner, "RECYCLE_GROWTH_MIB", limit)  # inherited by the forks
    jobs = _jobs(tmp_path)
    pool = _WorkerPool(2)
    started = []
    real_start = pool._start

    def counting_start():
        worker = real_start()
        started.append(worker[1].pid)
        return worker

    pool._start = counting_start
    try:
        done, died = pool.run(jobs, list(range(len(jobs))))
    finally:
        pool.close()
    assert died == {}
    assert sorted(done) == list(range(len(jobs)))
    # a limit below any growth: each worker takes one job and retires
    assert len(started) == starts and len(set(started)) == starts
    for i, job in enumerate(jobs):
        digest, result = done[i]
        assert digest is not None
        assert _codes(result) == _codes(run_job(job))
        assert bool(result.diagnostics) == (i % 2 == 0)


def test_should_retire_reads_the_growth(monkeypatch):
    monkeypatch.setattr(runner, "RECYCLE_GROWTH_MIB", 64)
    now = runner.resident_mib()
    assert now > 0
    assert not runner._should_retire(now)
    assert runner._should_retire(now - 1000)


PACKAGE_BASE = """\
import torch.nn as nn


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.device = "cuda:0"
"""

PACKAGE_USER = """\
import torch
from pkg.base import Base


class Net(Base):
    def forward(self, x):
        return x + torch.zeros(4, device=self.device)
"""


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text(PACKAGE_BASE)
    (pkg / "user.py").write_text(PACKAGE_USER)
    for i in range(5):
        (pkg / f"m{i}.py").write_text(BUG if i % 2 == 0 else CLEAN)
    return tmp_path


def test_a_large_run_with_one_job_runs_in_one_retiring_worker(tmp_path, monkeypatch):
    from conftest import check_tree

    tree = _package(tmp_path)
    in_process = check_tree(tree, processes=1)
    started = []
    real_start = _WorkerPool._start

    def counting_start(self):
        worker = real_start(self)
        started.append(worker[1].pid)
        return worker

    monkeypatch.setattr(_WorkerPool, "_start", counting_start)
    monkeypatch.setattr(runner, "ONE_WORKER_MIN_FILES", 2)
    monkeypatch.setattr(runner, "RECYCLE_GROWTH_MIB", float("-inf"))  # each job in a fresh fork
    in_worker = check_tree(tree, processes=1)
    assert started, "the run stayed in the parent process"
    # the same findings, cross-file ones included (the forks see the index so far)
    assert [(r.path, _codes(r)) for r in in_worker] == [(r.path, _codes(r)) for r in in_process]
    assert any(d.code == "DL002" for r in in_worker for d in r.diagnostics)
