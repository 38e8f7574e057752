"""Launching N processes the way ``torchrun --nproc_per_node=N`` launches them
on one machine, and stopping every one of them when the group is done.

Used by the harness's ``ddp`` placement (each rank runs
``devlint.harness.ddp``: forked from the worker with ``launch_function``, or
started with ``launch``) and by anything that must run a training script on
a few gloo ranks (``launch_script``). No torch here: the processes it starts
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
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Sequence

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
    #: the error line of a first run that failed on the group's own
    #: connections and was run again (empty: it ran once)
    retried: str = ""

    @property
    def ok(self) -> bool:
        """Every rank exited with status 0 by itself."""
        return not self.timed_out and all(code == 0 for code in self.returncodes)

    def error_line(self) -> str:
        """One line: the rank that failed first and the last line of its
        traceback, or the timeout; empty when the group succeeded."""
        if self.timed_out:
            running = ", ".join(map(str, self.stopped)) or "none"
            return f"timed out after {seconds(self.timeout)}s (ranks still running: {running}); every rank was stopped"
        if self.first_failed is not None:
            rank = self.first_failed
            last = last_error(self.stderr[rank])
            return f"rank {rank} {describe_exit(self.returncodes[rank])}" + (f": {last}" if last else "")
        if not self.ok:
            bad = [i for i, c in enumerate(self.returncodes) if c != 0]
            return f"rank {bad[0]} {describe_exit(self.returncodes[bad[0]])}" if bad else ""
        return ""


def seconds(value: float) -> str:
    """``7``, ``2.5``, ``120``: a time limit as people write it."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


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


#: SIGKILL where it exists (POSIX); elsewhere SIGTERM is all there is
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)


def _signal_group(pid: int, sig: int) -> None:
    """``sig`` to the rank's process group (the rank and what it started);
    to the rank alone where there are no process groups."""
    try:
        killpg = getattr(os, "killpg", None)
        if killpg is not None:
            killpg(pid, sig)
        else:  # pragma: no cover - Windows
            os.kill(pid, sig)
    except OSError:  # gone already, or not ours
        pass


def _stop(procs: Sequence[Any], grace: float) -> List[int]:
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
        _signal_group(p.pid, KILL)
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


class _ForkedRank:
    """A rank started with ``os.fork``, with the part of ``Popen``'s
    interface the launcher uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # pragma: no cover - reaped elsewhere
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(POLL)
        return self.returncode  # type: ignore[return-value]


def _fork(target: Callable[[int], int], rank: int, env: Dict[str, str], cwd: Optional[str], out: IO[bytes], err: IO[bytes]) -> _ForkedRank:
    """Start ``target(rank)`` in a forked copy of this process, set up as the
    exec'd rank would be: its own session, the parent-death signal, the
    rank's environment and working folder, stdout and stderr to ``out`` and
    ``err``, default signal handlers. The exit status is what ``target``
    returns (1 and the traceback on stderr when it raises)."""
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    pid = os.fork()
    if pid:
        return _ForkedRank(pid)
    code = 1
    try:
        os.setsid()
        if sys.platform.startswith("linux"):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        # the parent's sys.stdout/sys.stderr may write elsewhere than fds 1
        # and 2 (a test runner's capture, the worker's protocol)
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
        os.environ.clear()
        os.environ.update(env)
        import faulthandler

        if faulthandler.is_enabled():  # the parent's file is not this rank's stderr
            faulthandler.enable(file=sys.stderr)
        if cwd:
            os.chdir(cwd)
        code = int(target(rank) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass
        os._exit(code)


Starter = Callable[[int, Dict[str, str], IO[bytes], IO[bytes]], Any]


#: what a rank prints when the group's own connections fail, not the code
#: under test: the TCPStore or gloo's pairs reset or refused under load, the
#: port taken between :func:`free_port` and rank 0's bind
_RENDEZVOUS_FAILURES = re.compile(
    r"DistNetworkError|Connection reset by peer|Connection refused|[Aa]ddress already in use|EADDRINUSE"
)


def _run_group(
    start: Starter,
    nprocs: int,
    timeout: float,
    env: Optional[Mapping[str, str]],
    grace: float,
    rank_envs: Optional[Sequence[Mapping[str, str]]] = None,
) -> GroupResult:
    """:func:`_run_group_once`, and once more, on a fresh port and within
    what is left of ``timeout``, when a rank failed on the group's own
    connections (:data:`_RENDEZVOUS_FAILURES`): a loaded machine resets a
    gloo connection now and then, and that says nothing of the code. Only
    while at least half the limit is left (a group that failed late would
    be cut short and reported as a timeout); the second run's result
    stands, whatever it is."""
    result = _run_group_once(start, nprocs, timeout, env, grace, rank_envs)
    left = timeout - result.seconds
    if (
        result.timed_out or result.first_failed is None or left < max(1.0, timeout / 2)
        or not _RENDEZVOUS_FAILURES.search(result.stderr[result.first_failed])
    ):
        return result
    again = _run_group_once(start, nprocs, left, env, grace, rank_envs)
    again.seconds += result.seconds
    again.retried = result.error_line()
    return again


def _run_group_once(
    start: Starter,
    nprocs: int,
    timeout: float,
    env: Optional[Mapping[str, str]],
    grace: float,
    rank_envs: Optional[Sequence[Mapping[str, str]]] = None,
) -> GroupResult:
    """Start ``nprocs`` ranks with ``start(rank, environment, out, err)``,
    wait for all of them at most ``timeout`` seconds, stop the group when
    one fails, at the limit or on KeyboardInterrupt; collect what they did."""
    if nprocs < 1:
        raise ValueError("nprocs must be at least 1")
    port = free_port()
    run_id = uuid.uuid4().hex[:12]
    base = _base_env(env)
    procs: List[Any] = []
    files: List[tuple] = []
    started = time.monotonic()
    codes: List[Optional[int]] = [None] * nprocs
    first_failed: Optional[int] = None
    timed_out = False
    try:
        for rank in range(nprocs):
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            files.append((out, err))
            environment = rank_env(rank, nprocs, port, run_id, base)
            if rank_envs is not None:
                environment.update(rank_envs[rank])
            procs.append(start(rank, environment, out, err))
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
        outputs = [(_read(o), _read(e)) for o, e in files]
        for out, err in files:
            out.close()
            err.close()
    return GroupResult(
        returncodes=[p.returncode for p in procs],
        stdout=[o for o, _ in outputs],
        stderr=[e for _, e in outputs],
        timed_out=timed_out,
        seconds=time.monotonic() - started,
        first_failed=first_failed,
        stopped=stopped,
        timeout=timeout,
        port=port,
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
    return _run_group(lambda rank, e, out, err: _start(command, e, cwd, out, err), nprocs, timeout, env, grace, rank_envs)


def can_fork() -> bool:
    return hasattr(os, "fork") and hasattr(os, "setsid")


def launch_function(
    target: Callable[[int], int],
    nprocs: int = 2,
    timeout: float = DEFAULT_TIMEOUT,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    grace: float = GRACE,
) -> GroupResult:
    """``launch`` for a function: each rank is a forked copy of this process
    that runs ``target(rank)`` with the rank's environment and exits with
    what it returns. Starts in milliseconds where an interpreter importing
    torch takes seconds; the caller must not have initialised CUDA (a forked
    process cannot use it) and must be able to fork (POSIX)."""
    if not can_fork():
        raise RuntimeError("launch_function needs os.fork (POSIX); use launch with a command")
    return _run_group(lambda rank, e, out, err: _fork(target, rank, e, cwd, out, err), nprocs, timeout, env, grace)


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
