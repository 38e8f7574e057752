"""Launching N processes the way ``torchrun --nproc_per_node=N`` launches them
on one machine, and stopping every one of them when the group is done.

Used by the harness's ``ddp`` placement (each rank runs
``devlint.harness.ddp``) and by anything that must run a training script on a
few gloo ranks (``launch_script``). No torch here: the processes it starts
import it.

Each rank gets the environment torchrun gives it (``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR=127.0.0.1``,
``MASTER_PORT`` = a port free when the group starts, ``TORCHELASTIC_RUN_ID``,
and the group/role variables of a one-node run), so ``init_process_group``'s
default ``env://`` rendezvous works unchanged. GPUs are hidden
(``CUDA_VISIBLE_DEVICES=""``) unless ``env`` says otherwise.

Every rank runs in a session of its own (``start_new_session``), so the
launcher can stop a rank together with whatever it started (DataLoader
workers); on Linux a rank is also killed when the launcher dies (the
parent-death signal), so a launcher killed with SIGKILL leaves no rank behind
either. The group is stopped, SIGTERM first and SIGKILL ``grace`` seconds
later, when one rank fails, at the time limit, or on KeyboardInterrupt (which
is raised again once every rank is gone).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import IO, Dict, List, Mapping, Optional, Sequence

DEFAULT_TIMEOUT = 120.0
#: seconds a stopped rank gets between SIGTERM and SIGKILL
GRACE = 2.0
#: how often the launcher looks at the ranks
POLL = 0.02

# A rank's command is started through this shim on Linux: it asks the kernel
# to kill the process when the launcher dies (PR_SET_PDEATHSIG survives
# exec), checks the launcher is still there, then becomes the command. A
# separate interpreter instead of ``preexec_fn``, which is not safe when the
# launcher has threads.
_PDEATHSIG_SHIM = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(1)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


@dataclass
class GroupResult:
    """What a group of ranks did: per rank its exit status (negative: the
    signal that ended it), stdout and stderr."""

    returncodes: List[Optional[int]]
    stdout: List[str]
    stderr: List[str]
    timed_out: bool
    seconds: float
    #: the rank whose failure ended the group (None when none failed first)
    first_failed: Optional[int] = None
    #: ranks the launcher stopped (still running when the group ended)
    stopped: List[int] = field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT
    port: int = 0

    @property
    def ok(self) -> bool:
        """Every rank exited with status 0 by itself."""
        return not self.timed_out and all(code == 0 for code in self.returncodes)

    def error_line(self) -> str:
        """One line: the rank that failed first and the last line of its
        traceback, or the timeout; empty when the group succeeded."""
        if self.timed_out:
            running = ", ".join(map(str, self.stopped)) or "none"
            return f"timed out after {self.timeout:g}s (ranks still running: {running}); every rank was stopped"
        if self.first_failed is not None:
            rank = self.first_failed
            last = last_error(self.stderr[rank])
            return f"rank {rank} {describe_exit(self.returncodes[rank])}" + (f": {last}" if last else "")
        if not self.ok:
            bad = [i for i, c in enumerate(self.returncodes) if c != 0]
            return f"rank {bad[0]} {describe_exit(self.returncodes[bad[0]])}" if bad else ""
        return ""


def describe_exit(code: Optional[int]) -> str:
    """``exited with status 1``, ``killed by SIGKILL``."""
    if code is None:
        return "killed"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::|$)")


def last_error(stderr: str) -> str:
    """The exception line of the last traceback in ``stderr`` (``RuntimeError:
    ...``), or its last non-empty line when it holds no traceback. Lines
    printed after the traceback (warnings at exit) are skipped."""
    lines = stderr.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")]
    if starts:
        for ln in lines[starts[-1] + 1:]:
            if ln.strip() and not ln[0].isspace() and _EXCEPTION_LINE.match(ln):
                return ln.strip()
    kept = [ln.strip() for ln in lines if ln.strip()]
    return kept[-1] if kept else ""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the kernel's pick, as torchrun's
    standalone mode takes it). Another process may take it before rank 0
    binds it; the window is a few milliseconds."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def rank_env(rank: int, nprocs: int, port: int, run_id: str, base: Mapping[str, str]) -> Dict[str, str]:
    """The environment torchrun gives rank ``rank`` of a one-node run of
    ``nprocs`` processes, on top of ``base``."""
    env = dict(base)
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(nprocs),
        LOCAL_WORLD_SIZE=str(nprocs),
        GROUP_RANK="0",
        GROUP_WORLD_SIZE="1",
        ROLE_RANK=str(rank),
        ROLE_WORLD_SIZE=str(nprocs),
        ROLE_NAME="default",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        TORCHELASTIC_RUN_ID=run_id,
        TORCHELASTIC_RESTART_COUNT="0",
        TORCHELASTIC_MAX_RESTARTS="0",
    )
    if nprocs > 1:
        env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default for several processes
    return env


def _base_env(env: Optional[Mapping[str, str]]) -> Dict[str, str]:
    base = dict(os.environ)
    base["CUDA_VISIBLE_DEVICES"] = ""
    base.setdefault("PYTHONUNBUFFERED", "1")  # a stopped rank's output is not lost in a buffer
    if env:
        base.update(env)
    return base


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    except OSError:
        pass


def _stop(procs: Sequence[subprocess.Popen], grace: float) -> List[int]:
    """Stop every rank and what it started: SIGTERM to each rank's process
    group (also of ranks that exited, for their leftover children), SIGKILL to
    those still there after ``grace`` seconds, then reap. Returns the ranks
    that were still running."""
    running = [i for i, p in enumerate(procs) if p.poll() is None]
    for p in procs:
        _signal_group(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        _signal_group(p.pid, signal.SIGKILL)
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process SIGKILL cannot end
            pass
    return running


def _read(fh: IO[bytes]) -> str:
    fh.seek(0)
    return fh.read().decode("utf-8", errors="replace")


def _start(command: Sequence[str], env: Dict[str, str], cwd: Optional[str], out: IO[bytes], err: IO[bytes]) -> subprocess.Popen:
    argv = list(command)
    if sys.platform.startswith("linux"):
        argv = [sys.executable, "-I", "-S", "-c", _PDEATHSIG_SHIM, str(os.getpid()), *argv]
    return subprocess.Popen(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
    )


def launch(
    command: Sequence[str],
    nprocs: int = 2,
    timeout: float = DEFAULT_TIMEOUT,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    grace: float = GRACE,
    rank_envs: Optional[Sequence[Mapping[str, str]]] = None,
) -> GroupResult:
    """Run ``command`` as ``nprocs`` ranks of one torchrun-style group and
    wait for all of them, at most ``timeout`` seconds. The first rank to fail
    stops the group. ``rank_envs``: extra variables per rank."""
    if nprocs < 1:
        raise ValueError("nprocs must be at least 1")
    port = free_port()
    run_id = uuid.uuid4().hex[:12]
    base = _base_env(env)
    procs: List[subprocess.Popen] = []
    files: List[tuple] = []
    started = time.monotonic()
    codes: List[Optional[int]] = [None] * nprocs
    first_failed: Optional[int] = None
    timed_out = False
    stopped: List[int] = []
    try:
        for rank in range(nprocs):
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            files.append((out, err))
            environment = rank_env(rank, nprocs, port, run_id, base)
            if rank_envs is not None:
                environment.update(rank_envs[rank])
            procs.append(_start(command, environment, cwd, out, err))
        deadline = started + timeout
        while True:
            for i, p in enumerate(procs):
                if codes[i] is None:
                    codes[i] = p.poll()
                    if codes[i] not in (None, 0) and first_failed is None:
                        first_failed = i
            if first_failed is not None or all(c is not None for c in codes):
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
            time.sleep(POLL)
    finally:
        # on success, failure, timeout and KeyboardInterrupt alike
        stopped = _stop(procs, grace)
    result = GroupResult(
        returncodes=[p.returncode for p in procs],
        stdout=[_read(o) for o, _ in files],
        stderr=[_read(e) for _, e in files],
        timed_out=timed_out,
        seconds=time.monotonic() - started,
        first_failed=first_failed,
        stopped=stopped,
        timeout=timeout,
        port=port,
    )
    for out, err in files:
        out.close()
        err.close()
    return result


def launch_script(
    script: str,
    argv: Sequence[str] = (),
    nprocs: int = 2,
    timeout: float = DEFAULT_TIMEOUT,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    python: Optional[str] = None,
    grace: float = GRACE,
) -> GroupResult:
    """Run ``python script argv...`` as ``nprocs`` processes exactly as
    ``torchrun --nproc_per_node=nprocs script argv...`` would on one machine,
    on the CPU unless ``env`` sets ``CUDA_VISIBLE_DEVICES``. ``python``: the
    interpreter (default: this one)."""
    return launch([python or sys.executable, script, *argv], nprocs, timeout, env, cwd, grace)
