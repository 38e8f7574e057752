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


def _counting_pool(processes):
    """A pool that records the pid of every worker it starts."""
    pool = _WorkerPool(processes)
    started = []
    real_start = pool._start

    def counting_start():
        worker = real_start()
        started.append(worker[1].pid)
        return worker

    pool._start = counting_start
    return pool, started


def _codes(result):
    return [(d.code, d.line) for d in result.diagnostics]


@pytest.mark.parametrize("limit, starts", [(float("-inf"), 7), (float("inf"), 2)])
def test_workers_retire_past_the_growth_limit(tmp_path, monkeypatch, limit, starts):
    monkeypatch.setattr(runner, "RECYCLE_GROWTH_MIB", limit)  # inherited by the forks
    jobs = _jobs(tmp_path)
    pool, started = _counting_pool(2)
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


def test_checking_raises_the_gc_thresholds_and_puts_them_back(tmp_path, monkeypatch):
    """While files are checked the collector runs at runner.GC_THRESHOLDS
    (a parsed tree has no cycles: the default threshold made it walk each
    young tree over and over); after the run, the caller's thresholds are
    back, a run that raises included."""
    import gc

    seen = []
    real = runner._run_jobs

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "_run_jobs", spy)
    old = gc.get_threshold()
    gc.set_threshold(555, 7, 7)
    try:
        results = runner.run_jobs(_jobs(tmp_path, 3), 1)
        assert seen == [runner.GC_THRESHOLDS]
        assert [_codes(r) for r in results] == [[("DL001", 11)], [], [("DL001", 11)]]
        assert gc.get_threshold() == (555, 7, 7)

        def boom(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(runner, "_run_jobs", boom)
        with pytest.raises(KeyboardInterrupt):
            runner.run_jobs(_jobs(tmp_path, 1), 1)
        assert gc.get_threshold() == (555, 7, 7)
    finally:
        gc.set_threshold(*old)
    assert runner.GC_THRESHOLDS[0] > old[0]


def test_a_pool_worker_freezes_what_it_forked_with(tmp_path, monkeypatch):
    """A pool worker moves what the parent held at the fork (the index, the
    imported modules) to the collector's permanent generation and collects
    at GC_THRESHOLDS while it runs its jobs."""
    import gc

    from devlint.diagnostic import FileResult

    def report_gc(job):  # inherited by the fork: runs in the worker
        state = (gc.get_freeze_count() > 0, gc.get_threshold())
        return None, FileResult(path=job.path, internal_errors=[repr(state)])

    monkeypatch.setattr(runner, "_run_job_digest", report_gc)
    jobs = _jobs(tmp_path, 2)
    pool = _WorkerPool(2)
    try:
        done, died = pool.run(jobs, [0, 1])
    finally:
        pool.close()
    assert not died
    assert [done[i][1].internal_errors for i in (0, 1)] == [[repr((True, runner.GC_THRESHOLDS))]] * 2


def test_a_worker_whose_parent_was_killed_exits(tmp_path):
    """A parent killed outright (SIGKILL: a CI timeout, the OOM killer)
    cannot stop its pool workers; each closed its copy of the parent's end
    of the pipe, so its next read ends and it exits rather than waiting
    forever as an orphan."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    script = textwrap.dedent("""
        import sys, time
        from devlint.runner import _WorkerPool
        pool = _WorkerPool(1)
        worker = pool._start()
        print(worker[1].pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()

    def alive() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # an exited orphan is reaped by init; a zombie counts as gone
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().split()[2] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 20
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    still = alive()
    if still:
        os.kill(pid, signal.SIGKILL)
    assert not still, "the worker outlived its killed parent"


@pytest.mark.parametrize("budget, gain, starts", [
    (float("-inf"), float("-inf"), 7),  # every job would pass the budget: each goes to a fresh fork
    (float("inf"), float("-inf"), 2),  # nothing would: the two first workers take all
    (float("-inf"), float("inf"), 2),  # a fresh fork would not start lower: no point retiring
])
def test_a_grown_worker_retires_before_a_job_that_would_pass_the_budget(tmp_path, monkeypatch, budget, gain, starts):
    monkeypatch.setattr(runner, "RECYCLE_GROWTH_MIB", float("inf"))
    monkeypatch.setattr(runner, "WORKER_BUDGET_MIB", budget)
    monkeypatch.setattr(runner, "FRESH_FORK_GAIN_MIB", gain)
    jobs = _jobs(tmp_path)
    pool, started = _counting_pool(2)
    try:
        done, died = pool.run(jobs, list(range(len(jobs))))
    finally:
        pool.close()
    assert not died
    assert len(started) == starts
    assert [_codes(done[i][1]) for i in range(len(jobs))] == [_codes(run_job(j)) for j in jobs]


def test_a_jobs_expected_peak_follows_its_size(tmp_path):
    small, large = tmp_path / "s.py", tmp_path / "l.py"
    small.write_text("x = 1\n")
    large.write_text("x = 1\n" * 40_000)
    assert runner.job_peak_mib(str(small)) < 0.01
    assert 100 < runner.job_peak_mib(str(large)) < 120  # 240 KB at 450 bytes a byte
    assert runner.job_peak_mib(str(tmp_path / "gone.py")) == 0


@pytest.mark.parametrize("most, starts", [(0, 4), (10, 2)])
def test_a_worker_far_behind_the_index_gives_way_to_a_fresh_fork(tmp_path, monkeypatch, most, starts):
    """Between waves the parent's index gains summaries; a worker lacking
    more than MAX_DELTA_SUMMARIES of them is replaced by a fork that shares
    the parent's copy instead of receiving them."""
    monkeypatch.setattr(runner, "RECYCLE_GROWTH_MIB", float("inf"))
    monkeypatch.setattr(runner, "WORKER_BUDGET_MIB", float("inf"))
    monkeypatch.setattr(runner, "MAX_DELTA_SUMMARIES", most)
    jobs = _jobs(tmp_path, 4)
    pool, started = _counting_pool(2)
    try:
        pool.run(jobs[:2], [0, 1])
        pool.log.append(("some.module", None))  # the wave's summary reaches the index
        done, died = pool.run(jobs[2:], [0, 1])
    finally:
        pool.close()
    assert not died
    assert len(started) == starts
