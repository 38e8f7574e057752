"""Running the engine over files: reading, a process pool, and writing fixes
atomically (temporary file in the same folder, then rename)."""

from __future__ import annotations

import difflib
import os
import stat
import tempfile
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Tuple

from devlint.config import Config
from devlint.engine import FileResult, fix_source, lint_source
from devlint.files import PYTHON_SUFFIXES
from devlint.limits import run_deep
from devlint.source import SourceError, decode_source


@dataclass(frozen=True)
class Job:
    """What to do with one file (picklable for the process pool)."""

    path: str
    codes: Tuple[str, ...]
    ignore: Tuple[str, ...]
    fix: bool = False
    unsafe: bool = False
    apply: bool = False


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
    if path.endswith(PYTHON_SUFFIXES):
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
    try:
        raw = _read(job.path)
    except OSError as exc:
        return FileResult(path=job.path, error=_describe(exc))
    if not _looks_like_python(job.path, raw):
        return FileResult(path=job.path, error="not a Python file (no .py/.pyi suffix and no python #! line); skipped")
    try:
        # a deep stack: deeply nested (legal) code must not overflow it
        return run_deep(_run_job, job, raw)
    except RecursionError:
        return FileResult(path=job.path, error="skipped: too deeply nested to analyse")
    except MemoryError:
        return FileResult(path=job.path, error="skipped: out of memory")
    except Exception as exc:  # an engine bug must not stop the run
        return FileResult(
            path=job.path,
            internal_errors=[f"internal error ({type(exc).__name__}: {exc}); please report this as a devlint bug"],
        )


def _run_job(job: Job, raw: bytes) -> FileResult:
    if b"\x00" in raw[:8192]:
        return FileResult(path=job.path, error="not a Python source file (binary content)")
    try:
        src = decode_source(raw)
    except SourceError as exc:
        return FileResult(path=job.path, error=str(exc))
    if not job.fix:
        return lint_source(src.text, job.path, job.codes, job.ignore)
    result = fix_source(src.text, job.path, job.codes, unsafe=job.unsafe, ignore=job.ignore)
    if result.fixed_text is None or result.fixed_text == src.text:
        result.fixed_text = None
        return result
    if job.apply:
        problem = write_atomically(job.path, raw, src.encode(result.fixed_text))
        if problem:
            result.error = problem
            # nothing was written: the findings are those of the original
            original = lint_source(src.text, job.path, job.codes, job.ignore)
            result.diagnostics = original.diagnostics
            result.applied = []
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
        _sync_folder(os.path.dirname(real) or folder)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return f"cannot write: {exc.strerror or exc}"
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


def run_jobs(jobs: Sequence[Job], processes: int) -> List[FileResult]:
    """Run jobs, in a process pool when it pays; results in job order."""
    if processes <= 1 or len(jobs) < 4:
        return [run_job(j) for j in jobs]
    import multiprocessing

    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    # big files first so the pool does not end waiting on one straggler
    order = sorted(range(len(jobs)), key=lambda i: -_size(jobs[i].path))
    with ctx.Pool(min(processes, len(jobs))) as pool:
        out = pool.map(run_job, [jobs[i] for i in order], chunksize=1)
    results: List[Optional[FileResult]] = [None] * len(jobs)
    for i, r in zip(order, out):
        results[i] = r
    return [r for r in results if r is not None]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
    )


def jobs_for(files: Iterable[str], config: Config, codes: Sequence[str], **kw) -> List[Job]:
    return [Job(path=f, codes=tuple(codes), ignore=config.ignored_for(f), **kw) for f in files]
