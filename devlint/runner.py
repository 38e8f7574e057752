"""Running the engine over files: reading, a process pool, and writing fixes
atomically (temporary file in the same folder, then rename)."""

from __future__ import annotations

import contextlib
import difflib
import gc
import os
import stat
import tempfile
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

from devlint.config import Config
from devlint.diagnostic import FileResult
from devlint.files import NOTEBOOK_SUFFIXES, PYTHON_SUFFIXES
from devlint.limits import run_deep
from devlint.source import SourceError, decode_source

if TYPE_CHECKING:  # pragma: no cover
    from devlint.cache import ResultCache
    from devlint.project.plan import ProjectPlan


@dataclass(frozen=True)
class Job:
    """What to do with one file (picklable for the process pool)."""

    path: str
    codes: Tuple[str, ...]
    ignore: Tuple[str, ...]
    fix: bool = False
    unsafe: bool = False
    apply: bool = False
    #: use the ast candidate scan (off only to compare findings without it)
    scan: bool = True
    #: check, then add ``# noqa: CODE`` comments for every finding (--add-noqa)
    add_noqa: bool = False
    #: a project run: the file's module name (None: not importable by name),
    #: whether it is a package's ``__init__``, whether others import it (it
    #: exports a summary); see :mod:`devlint.project`
    project: bool = False
    module: Optional[str] = None
    is_package: bool = False
    summarize: bool = False
    #: the names other files import from it (their summaries are exported)
    exports: Tuple[str, ...] = ()
    #: the file's content when it does not come from ``path`` (``check -``:
    #: standard input, with ``path`` the name given by ``--stdin-filename``)
    data: Optional[bytes] = None


#: the project index of the run in progress: set by :func:`run_jobs` before
#: each wave's workers fork (they inherit it), read by :func:`_run_job`
_INDEX = None


#: never read more than this from one file (the engine skips anything over a few MB)
MAX_READ_BYTES = 64 * 1024 * 1024


class _TooLarge(OSError):
    pass


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        data = fh.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise _TooLarge(f"file too large (over {MAX_READ_BYTES // (1024 * 1024)} MB)")
    return data


def _looks_like_python(path: str, raw: bytes) -> bool:
    """A file named on the command line is checked when its name ends in
    .py/.pyi or its first line is a python ``#!``."""
    if path.endswith(PYTHON_SUFFIXES) or path.endswith(NOTEBOOK_SUFFIXES):
        return True
    first = raw[:200].split(b"\n", 1)[0]
    return first.startswith(b"#!") and b"python" in first


def _describe(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "cannot read: permission denied"
    if isinstance(exc, IsADirectoryError):
        return "is a directory"
    if isinstance(exc, _TooLarge):
        return f"skipped: {exc}"
    return f"cannot read: {exc.strerror or exc}"


def run_job(job: Job) -> FileResult:
    """Check or fix one file. Never raises: every problem lands in the result."""
    return _run_job_digest(job)[1]


def _run_job_digest(job: Job) -> Tuple[Optional[str], FileResult]:
    """:func:`run_job`, plus the content digest of the bytes it checked (for
    the result cache; None when the file could not be read)."""
    try:
        raw = _read(job.path) if job.data is None else job.data
    except OSError as exc:
        return None, FileResult(path=job.path, error=_describe(exc))
    from devlint.cache import content_digest

    digest = content_digest(raw)
    if job.data is None and not _looks_like_python(job.path, raw):
        return digest, FileResult(path=job.path, error="not a Python file (no .py/.pyi suffix and no python #! line); skipped")
    try:
        # a deep stack: deeply nested (legal) code must not overflow it
        return digest, run_deep(_run_job, job, raw)
    except RecursionError:
        return digest, FileResult(path=job.path, error="skipped: too deeply nested to analyse")
    except MemoryError:
        return digest, FileResult(path=job.path, error="skipped: out of memory")
    except Exception as exc:  # an engine bug must not stop the run
        return digest, FileResult(
            path=job.path,
            internal_errors=[f"internal error ({type(exc).__name__}: {exc}); please report this as a devlint bug"],
        )


def _run_job(job: Job, raw: bytes) -> FileResult:
    from devlint.engine import fix_source, lint_source

    if b"\x00" in raw[:8192]:
        return FileResult(path=job.path, error="not a Python source file (binary content)")
    if job.path.endswith(".ipynb"):
        from devlint.notebook import run_notebook_job

        return run_notebook_job(job, raw)
    try:
        src = decode_source(raw)
    except SourceError as exc:
        return FileResult(path=job.path, error=str(exc))
    project = None
    if job.project and _INDEX is not None:
        from devlint.project.index import ProjectContext

        project = ProjectContext(job.module, job.is_package, _INDEX)
    if job.add_noqa:
        return _add_noqa(job, raw, src, project)
    if not job.fix:
        return _depends(lint_source(src.text, job.path, job.codes, job.ignore, scan=job.scan, project=project,
                                    summarize=job.summarize, exports=job.exports), project)
    result = fix_source(src.text, job.path, job.codes, unsafe=job.unsafe, ignore=job.ignore, scan=job.scan,
                        project=project, summarize=job.summarize, exports=job.exports)
    _depends(result, project)
    if result.fixed_text is None or result.fixed_text == src.text:
        result.fixed_text = None
        return result
    if job.apply:
        problem = write_atomically(job.path, raw, src.encode(result.fixed_text))
        if problem:
            result.error = problem
            # nothing was written: the findings are those of the original
            original = lint_source(src.text, job.path, job.codes, job.ignore, scan=job.scan, project=project)
            result.diagnostics = original.diagnostics
            result.applied = []
    return result


def _depends(result: FileResult, project) -> FileResult:
    """A project run: the result depends on the summaries of every project
    module the file imports (as they are now, none included), besides
    those its check read."""
    if project is not None:
        result.consulted = dict(sorted({**project.index.imported_modules(project.module), **result.consulted}.items()))
    return result


def _add_noqa(job: Job, raw: bytes, src, project=None) -> FileResult:
    """``check --add-noqa``: suppress every finding in place. ``applied``: the
    findings now suppressed; ``diagnostics``: those that could not be."""
    from devlint.engine import lint_source
    from devlint.noqa import add_noqa

    result = lint_source(src.text, job.path, job.codes, job.ignore, scan=job.scan, project=project,
                         summarize=job.summarize, exports=job.exports)
    if result.error or not result.diagnostics:
        return result
    added = add_noqa(src.text, result.diagnostics)
    if added.text == src.text:
        return result
    problem = write_atomically(job.path, raw, src.encode(added.text))
    if problem:
        result.error = problem
        return result
    result.fixed_text = added.text
    result.applied = added.added
    result.diagnostics = [d for d, _ in added.failed]
    return result


def write_atomically(path: str, expected: bytes, data: bytes) -> Optional[str]:
    """Replace ``path`` with ``data`` unless it changed since it was read as
    ``expected``. Keeps the file's mode. Returns a one-line problem or None."""
    try:
        if _read(path) != expected:
            return "changed since it was read; not fixed (run devlint again)"
        st = os.stat(path)
    except OSError as exc:
        return f"cannot re-read before writing: {exc.strerror or exc}"
    folder = os.path.dirname(os.path.abspath(path))
    real = os.path.realpath(path)  # write through a symlink, keep the link
    try:
        fd, tmp = tempfile.mkstemp(prefix=".devlint-", suffix=".tmp", dir=os.path.dirname(real) or folder)
    except OSError as exc:
        return f"cannot write: cannot create a temporary file beside it ({exc.strerror or exc})"
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except OSError:
            pass
        os.replace(tmp, real)
    except BaseException as exc:  # also Ctrl-C / SIGTERM: leave no temporary file behind
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            return f"cannot write: {exc.strerror or exc}"
        raise
    _sync_folder(os.path.dirname(real) or folder)
    return None


def _sync_folder(folder: str) -> None:
    """Make the rename itself durable (best effort: not every system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def run_jobs(jobs: Sequence[Job], processes: int, cache: "Optional[ResultCache]" = None,
             plan: "Optional[ProjectPlan]" = None, progress: Optional[Callable[[int], None]] = None) -> List[FileResult]:
    """Run jobs, in a process pool when it pays; results in job order.

    With a ``cache``, a file whose content, rules and configuration match a
    cached result is not checked again (nor fixed, when the cached result has
    no fix to apply), and fresh results are stored in it.

    With a project ``plan`` (:mod:`devlint.project.plan`), the files run in
    import order, wave by wave; each wave sees the summaries of the waves
    before it through the project index, and a cached result is reused only
    while every summary it consulted is unchanged.

    ``progress(n)`` is called as ``n`` more files are done. Each result goes
    into the cache as soon as it is computed, so an interrupted run
    (KeyboardInterrupt, raised from here once the workers are stopped) keeps
    what it did."""
    with checking_gc():
        if plan is None:
            return _run_jobs(jobs, processes, cache, progress=progress)
        return _run_project(jobs, processes, cache, plan, progress)


def _run_project(jobs: Sequence[Job], processes: int, cache: "Optional[ResultCache]", plan: "ProjectPlan",
                 progress: Optional[Callable[[int], None]]) -> List[FileResult]:
    global _INDEX
    from devlint.project.index import ProjectIndex

    index = ProjectIndex(summaries=plan.seed, aliases=plan.aliases, paths=plan.paths)
    by_path = {j.path: i for i, j in enumerate(jobs)}
    results: List[Optional[FileResult]] = [None] * len(jobs)
    placed: set = set()
    # the workers fork once, at the first wave that needs them, and learn
    # each later wave's summaries with their next job; a large run with one
    # job runs in one such worker, which retires as the others do, rather
    # than in this process, whose heap only grows
    pool = _WorkerPool(processes) if processes > 1 or len(jobs) >= ONE_WORKER_MIN_FILES else None
    _INDEX = index
    try:
        for wave in plan.waves + [[j.path for j in jobs]]:
            wave_ix = [by_path[p] for p in wave if p in by_path and by_path[p] not in placed]
            if not wave_ix:
                continue
            placed.update(wave_ix)
            wave_jobs = []
            for i in wave_ix:
                fp = plan.files.get(jobs[i].path)
                job = jobs[i]
                if fp is not None:
                    job = replace(job, project=True, module=fp.module, is_package=fp.is_package, summarize=fp.summarize,
                                  exports=tuple(sorted(fp.exports)))
                wave_jobs.append(job)
            done = _run_jobs(wave_jobs, processes, cache, index, progress, pool)
            for i, job, result in zip(wave_ix, wave_jobs, done):
                results[i] = result
                if job.module and result.summary is not None:
                    index.add(job.module, result.summary)
                    if pool is not None:
                        pool.log.append((job.module, result.summary))
    finally:
        _INDEX = None
        if pool is not None:
            pool.close()
    return [r for r in results if r is not None]


def _run_jobs(jobs: Sequence[Job], processes: int, cache: "Optional[ResultCache]" = None,
              index=None, progress: Optional[Callable[[int], None]] = None,
              pool: "Optional[_WorkerPool]" = None) -> List[FileResult]:
    results: List[Optional[FileResult]] = [None] * len(jobs)
    keys: List[Optional[str]] = [None] * len(jobs)
    sizes = [0] * len(jobs)
    todo = list(range(len(jobs)))
    if cache is not None:
        from devlint.cache import content_digest

        todo = []
        for i, job in enumerate(jobs):
            try:
                raw = _read(job.path)
            except OSError:
                todo.append(i)
                continue
            sizes[i] = len(raw)
            keys[i] = cache.entry_key(content_digest(raw), job.codes, job.ignore, _project_key(job))
            hit = cache.get(job.path, keys[i])
            if hit is not None and job.project and not _still_valid(hit, job, index):
                hit = None
            if hit is not None and not (job.fix and _has_fix_to_apply(hit, job.unsafe)):
                results[i] = hit
            else:
                todo.append(i)
    else:
        sizes = [_size(j.path) for j in jobs]
    if progress is not None and len(todo) < len(jobs):
        progress(len(jobs) - len(todo))

    def finished(k: int, digest: Optional[str], result: FileResult) -> None:
        i = todo[k]
        results[i] = result
        job = jobs[i]
        if cache is not None and digest is not None and (not job.fix or result.fixed_text is None):
            cache.put(job.path, cache.entry_key(digest, job.codes, job.ignore, _project_key(job)), result)
        if progress is not None:
            progress(1)

    _run_many([jobs[i] for i in todo], [sizes[i] for i in todo], processes, finished, pool)
    return [r for r in results if r is not None]


def _project_key(job: Job) -> str:
    if not job.project:
        return ""
    exports = ",".join(job.exports)
    return f"project={job.module or ''}{'/' if job.is_package else ''}{'+summary' if job.summarize else ''}:{exports}"


def _still_valid(hit: FileResult, job: Job, index) -> bool:
    """A cached result of a project run holds while every summary it read is
    unchanged (mypy's interface hashes), and it has the summary others need."""
    if index is None:
        return False
    return all(index.digest_of(m) == d for m, d in hit.consulted.items())


def _has_fix_to_apply(result: FileResult, unsafe: bool) -> bool:
    return any(d.fix is not None and (unsafe or d.fix.is_safe) for d in result.diagnostics)


def _run_many(jobs: Sequence[Job], sizes: Sequence[int], processes: int,
              finished: Optional[Callable[[int, Optional[str], FileResult], None]] = None,
              pool: "Optional[_WorkerPool]" = None) -> List[Tuple[Optional[str], FileResult]]:
    """Run the jobs; ``finished(i, digest, result)`` as each one's result is
    final (a job whose worker died gets it after its retry)."""
    if not jobs:
        return []
    # the engine and the rules load once, before the workers fork from us
    import importlib

    importlib.import_module("devlint.engine")
    importlib.import_module("devlint.rule").all_rules()
    if (processes <= 1 and pool is None) or len(jobs) < 4:
        out = []
        for k, j in enumerate(jobs):
            out.append(_run_job_digest(j))
            if finished is not None:
                finished(k, *out[-1])
        return out
    # big files first so the pool does not end waiting on one straggler
    order = sorted(range(len(jobs)), key=lambda i: -sizes[i])
    done, died = pool.run(jobs, order, finished) if pool is not None else _run_pool(jobs, order, processes, finished)
    if died:
        # a worker died (a native crash, the OOM killer...): try each of its
        # files once more, alone, after the others (the OOM killer may have
        # picked the wrong process); a second death is that file's error
        again, died = _run_pool(jobs, sorted(died), 1, finished)
        done.update(again)
        for i, exitcode in died.items():
            done[i] = (None, FileResult(path=jobs[i].path, internal_errors=[_death_message(exitcode)]))
            if finished is not None:
                finished(i, *done[i])
    return [done[i] for i in range(len(jobs))]


def _death_message(exitcode: Optional[int]) -> str:
    if exitcode is not None and exitcode < 0:
        import signal

        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        how = f"killed by {name} (signal {-exitcode})"
        if -exitcode == signal.SIGKILL:
            how += ", perhaps by the system's out-of-memory killer"
    else:
        how = f"exit status {exitcode}"
    return (
        f"internal error (the checker process died on this file, twice: {how}); "
        "the file was not checked; please report this as a devlint bug"
    )


#: a pool worker whose resident memory has grown by more than this since it
#: started (after handing freed heap back to the system) sends its last
#: result and exits, and a fresh one takes its place. A long-lived worker's
#: heap fragments: the freed trees of large files leave pages that small
#: objects made meanwhile keep (transformers' 2,912 files took a kept worker
#: from 130 to 330 MiB, of which a dozen MiB were live objects).
RECYCLE_GROWTH_MIB = 64
#: a worker that has checked files is retired *before* a job, and a fresh
#: fork takes the job, when its resident memory plus the job's expected peak
#: (:data:`JOB_PEAK_BYTES_PER_BYTE` times the file's size) would pass this.
#: The growth a worker keeps (up to :data:`RECYCLE_GROWTH_MIB`) and a large
#: file's transient tree (80 MiB for a 190 KB modeling file) add up: on
#: transformers a worker near its retirement point that drew such a file
#: peaked at 262 MiB where a fresh one peaks under 230
WORKER_BUDGET_MIB = 230
#: a worker that lacks more than this many of the index's summaries does not
#: receive them: a fresh fork, which shares the parent's copy, takes the job.
#: Unpickled in the worker they are a copy of their own: a worker that
#: checked the first wave's small files and then received the summaries of
#: the next thousand files on transformers grew from 113 to 192 MiB before
#: its job began (and peaked at 238 in it)
MAX_DELTA_SUMMARIES = 200
#: ... but only when a fresh fork (which starts from the parent's memory)
#: would start at least this much lower, so that a large parent does not
#: make every worker retire before every large file
FRESH_FORK_GAIN_MIB = 16
#: a file's analysis takes about this many bytes at its peak per byte of
#: source (libcst's tree, positions, the facts): 420-490 on transformers'
#: largest files, each checked alone (``/usr/bin/time -f %M``)
JOB_PEAK_BYTES_PER_BYTE = 450
#: a project run of at least this many files with one job runs them in one
#: pool worker (retiring like the others), not in the parent: the parent's
#: heap keeps what a run of a thousand files fragments (464 MiB on
#: transformers with ``-j 1``, against 250 per process)
ONE_WORKER_MIN_FILES = 200


#: the cyclic garbage collector's thresholds while files are checked: a
#: young collection after 20,000 new container objects rather than 700 (mypy's
#: build raises them the same way). A parsed module is a tree of a few
#: hundred thousand nodes with no cycles, freed by reference counting; with
#: the default threshold the collector ran every few hundred of them, walking
#: the young part of the tree being built each time. On transformers (2,912
#: files, two jobs) it cut the CPU time of a cold check by a fifth (191 ->
#: 151 s) with the same peak memory (225 MiB); 200,000 saved little more and
#: took 40 MiB more. ``bench/run_bench.py`` gives the figures
GC_THRESHOLDS = (20_000, 10, 10)


@contextlib.contextmanager
def checking_gc() -> Iterator[None]:
    """Collect garbage cycles less often while files are checked (see
    :data:`GC_THRESHOLDS`); the old thresholds come back after."""
    old = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*old)


def resident_mib() -> float:
    """This process's resident memory now, in MiB (Linux: ``/proc``; elsewhere
    the peak so far, which only grows, so a worker retires at the same point)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1048576
    except (OSError, ValueError, IndexError, AttributeError):
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 1048576 if sys.platform == "darwin" else peak / 1024


def _release_heap() -> None:
    """Hand freed heap pages back to the system where the C library can
    (glibc's ``malloc_trim``); nothing elsewhere."""
    try:
        import ctypes
        import ctypes.util

        name = ctypes.util.find_library("c")
        if name:
            trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
            if trim is not None:
                trim(0)
    except (OSError, AttributeError):  # pragma: no cover - no C library to ask
        pass


def _should_retire(start_mib: float) -> bool:
    if resident_mib() - start_mib <= RECYCLE_GROWTH_MIB:
        return False
    _release_heap()
    return resident_mib() - start_mib > RECYCLE_GROWTH_MIB


def _pool_worker(conn, parent_end=None) -> None:
    """A pool process: run the jobs it receives, send back each result, with
    whether it retires after it (:data:`RECYCLE_GROWTH_MIB`). ``parent_end``
    (the parent's end of the pipe, which a fork inherits) is closed first, so
    that the pipe ends when the parent does."""
    import signal

    if parent_end is not None:
        parent_end.close()

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    # the parent stops us with SIGTERM on Ctrl-C: unwind (a fix being written
    # removes its temporary file), then exit
    signal.signal(signal.SIGTERM, _exit_on_term)
    # what the parent held when it forked (the index so far, the imported
    # modules) stays as long as this worker: the collector need not walk it,
    # and leaving it alone keeps its pages shared with the parent
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    start = resident_mib()
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        if isinstance(job, tuple):
            # a worker kept across a project run's waves: the summaries the
            # parent's index gained since this worker's last job come first
            delta, job = job
            if _INDEX is not None:
                from devlint.project.index import shared

                for module, summary in delta:
                    _INDEX.add(module, shared(summary))
        result = _run_job_digest(job)
        retire = _should_retire(start)
        try:
            conn.send((result, retire, resident_mib()))
        except Exception as exc:  # a result that does not pickle: an engine bug
            conn.send(((None, FileResult(path=job.path, internal_errors=[
                f"internal error (cannot send the result back: {type(exc).__name__}: {exc}); "
                "please report this as a devlint bug"
            ])), retire, resident_mib()))
        if retire:
            conn.close()
            return


def _share(result: FileResult) -> None:
    """Intern the strings of what a result brings the index (its summary, the
    digests it consulted): see :func:`devlint.project.index.shared`."""
    if result.summary is not None or result.consulted:
        from devlint.project.index import shared

        if result.summary is not None:
            result.summary = shared(result.summary)
        if result.consulted:
            result.consulted = shared(result.consulted)


def _exit_on_term(signum, frame) -> None:
    raise SystemExit(128 + signum)


class _WorkerPool:
    """Worker processes kept across the waves of a project run: forked once
    (from a parent whose ``_INDEX`` is the index so far), then each job goes
    with the summaries the parent added since that worker's last one
    (``log``, appended by :func:`run_jobs`). Forking a fresh pair per wave
    cost about a second of system time on timm's twelve waves. A worker
    whose memory grew past :data:`RECYCLE_GROWTH_MIB` retires after its job
    and a fresh fork (with the index so far) takes the next one; so does
    one that has checked files and would pass :data:`WORKER_BUDGET_MIB`
    with the next job's expected peak (:func:`job_peak_mib`)."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        #: (module, summary) in the order the parent's index gained them
        self.log: List[Tuple[str, Any]] = []
        #: workers between jobs: [connection, process, how much of ``log``
        #: it has, its resident MiB after its last job (None: no job yet)]
        self._idle: List[list] = []

    def _start(self):
        import multiprocessing

        ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
        here, there = ctx.Pipe()
        # the worker closes its copy of our end: once we are gone (killed
        # by a signal, by the OOM killer) its next read ends instead of
        # waiting forever, an orphan
        proc = ctx.Process(target=_pool_worker, args=(there, here), daemon=True)
        proc.start()
        there.close()
        return [here, proc, len(self.log), None]

    @staticmethod
    def _stop(worker: list) -> None:
        try:
            worker[0].send(None)
        except OSError:
            pass
        worker[0].close()
        worker[1].join()

    def _send(self, worker: list, job: Job) -> None:
        delta = self.log[worker[2]:]
        worker[0].send((delta, job))
        worker[2] = len(self.log)

    def run(self, jobs: Sequence[Job], order: Sequence[int], finished=None):
        """Run ``jobs[i]`` for each i of ``order``, one job at a time per
        worker (up to ``processes``, started as needed). A worker that dies
        (a signal, an exit) loses only the job it held: another takes its
        place. Returns ({i: (digest, result)}, {i: exitcode of the worker
        that died on it}); on an interruption the busy workers are stopped
        (SIGTERM lets one writing a fix clean up, SIGKILL what has not ended
        half a second later)."""
        from multiprocessing.connection import wait

        todo = list(reversed(order))
        done: dict = {}
        died: dict = {}
        busy: dict = {}  # connection -> (worker, job index)
        width = min(self.processes, len(order))

        def give(worker: list) -> bool:
            while todo:
                i = todo.pop()
                if len(self.log) - worker[2] > MAX_DELTA_SUMMARIES or (
                        worker[3] is not None and worker[3] + job_peak_mib(jobs[i].path) > WORKER_BUDGET_MIB
                        and worker[3] > resident_mib() + FRESH_FORK_GAIN_MIB):
                    # a worker that has grown would peak past the budget on
                    # this file, and a fresh fork would start lower: it
                    # takes the file
                    self._stop(worker)
                    worker = self._start()
                try:
                    self._send(worker, jobs[i])
                except OSError:  # it died between two jobs: nothing lost
                    todo.append(i)
                    worker[1].join()
                    return False
                busy[worker[0]] = (worker, i)
                return True
            self._idle.append(worker)
            return True

        try:
            while todo and len(busy) < width:
                give(self._idle.pop() if self._idle else self._start())
            while busy:
                ready = set(wait([*busy, *(w[1].sentinel for w, _ in busy.values())]))
                for conn, (worker, i) in list(busy.items()):
                    if conn not in ready and worker[1].sentinel not in ready:
                        continue
                    result, retired = None, False
                    if conn in ready or conn.poll():
                        try:
                            result, retired, worker[3] = conn.recv()
                        except (EOFError, OSError):
                            result = None
                    del busy[conn]
                    if result is not None:
                        _share(result[1])
                        done[i] = result
                        if finished is not None:
                            finished(i, *result)
                        if retired:  # its heap grew: a fresh fork takes its place
                            conn.close()
                            worker[1].join()
                        else:
                            give(worker)
                    else:  # the process ended without sending a result
                        conn.close()
                        worker[1].join()
                        died[i] = worker[1].exitcode
                    while todo and len(busy) < width:
                        give(self._idle.pop() if self._idle else self._start())
        except BaseException:
            for worker, _ in busy.values():
                worker[1].terminate()
            for worker, _ in busy.values():
                worker[1].join(0.5)
                if worker[1].exitcode is None:
                    worker[1].kill()
                    worker[1].join()
                worker[0].close()
            raise
        return done, died

    def close(self) -> None:
        for worker in self._idle:
            self._stop(worker)
        self._idle = []


def _run_pool(jobs: Sequence[Job], order: Sequence[int], processes: int, finished=None):
    """Run ``jobs[i]`` for each i of ``order`` in up to ``processes`` worker
    processes, one job at a time per worker. A worker that dies (a signal, an
    exit) loses only the job it held: it is replaced and the run goes on.
    Returns ({i: (digest, result)}, {i: exitcode of the worker that died on it})."""
    pool = _WorkerPool(processes)
    try:
        return pool.run(jobs, order, finished)
    finally:
        pool.close()


def job_peak_mib(path: str) -> float:
    """What checking ``path`` is expected to add to a worker's memory at its
    peak (:data:`JOB_PEAK_BYTES_PER_BYTE`), in MiB."""
    return _size(path) * JOB_PEAK_BYTES_PER_BYTE / 1048576


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def diff_path(path: str) -> str:
    """The name a diff gives ``path``: relative to the current folder, with
    ``/`` separators and no ``./`` (``git apply`` and ``patch -p1`` run from
    there take it); a path outside the current folder stays absolute."""
    full = os.path.abspath(path)
    rel = os.path.relpath(full)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        rel = full.lstrip(os.sep)
    return rel.replace(os.sep, "/")


def unified_diff(path: str, before: str, after: str) -> str:
    name = diff_path(path)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
    )
    # a last line without its newline: say so, as diff and git do, or the
    # patch does not apply
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def jobs_for(files: Iterable[str], config: Config, codes: Sequence[str], **kw) -> List[Job]:
    return [Job(path=f, codes=tuple(codes), ignore=config.ignored_for(f), **kw) for f in files]
