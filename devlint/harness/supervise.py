"""The parent side of the harness: fix a copy with the engine, run each file's
cases in a child process (``devlint.harness.worker``) with a time limit per
case, and collect one result per case. Imports neither torch nor user code."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from devlint.engine import fix_source
from devlint.harness.distributed import describe_exit as _describe_exit

DEFAULT_TIMEOUT = 120.0
# the verdicts (docs/harness.md, "Verdicts")
CONFIRMED = "confirmed"  # the bug reproduced, the fix ran, outputs equal
NO_BUG = "no bug"  # devlint reports nothing on the code the case ran, and it ran
NOT_REPRODUCED = "finding not reproduced"  # devlint reports something there, and it ran
FIX_FAILED = "fix failed"  # the bug reproduced and the fixed code failed too (or changed the results)
MISSED = "bug missed"  # the original fails, devlint reports nothing on the code the case ran
CANNOT_SIMULATE = "cannot simulate"  # the simulation cannot follow the code: no verdict on the fix
ERROR = "error"  # a malformed case, a crash, a timeout, a file whose cases cannot be listed
VERDICTS = (CONFIRMED, NO_BUG, NOT_REPRODUCED, FIX_FAILED, MISSED, CANNOT_SIMULATE, ERROR)
#: verdicts that pass (exit 0); CANNOT_SIMULATE too unless --strict
PASSING = (CONFIRMED, NO_BUG)


@dataclass
class FileJob:
    """One file to verify: its text before and after devlint's fixes."""

    path: str
    original: str
    fixed: str
    rules: List[str] = field(default_factory=list)
    #: a file of a multi-file project: the project's files, each as
    #: ``(original, fixed)`` text by path relative to ``root``, and its
    #: source roots (relative): the case runs against a copy of the whole
    #: project before and after devlint's fixes
    project_files: Dict[str, Tuple[str, str]] = field(default_factory=dict)
    root: str = ""
    source_roots: List[str] = field(default_factory=lambda: ["."])
    #: what devlint reports in the original text of the files the case
    #: runs: ``{"path", "line", "end_line", "code", "message", "fixable"}``
    #: (path as the run names it); a case is judged on those its run reached
    findings: List[dict] = field(default_factory=list)

    @property
    def unchanged(self) -> bool:
        """devlint's fixes changed nothing the case runs."""
        if self.project_files:
            return all(a == b for a, b in self.project_files.values())
        return self.original == self.fixed


def finding_json(d, path: Optional[str] = None) -> dict:
    """A :class:`~devlint.diagnostic.Diagnostic` as a job's finding, with the
    lines its fix changes (``fix_lines``)."""
    return {
        "path": path or d.path,
        "line": d.line,
        "end_line": max(d.end_line or d.line, d.line),
        "code": d.code,
        "message": d.message,
        "fixable": d.fix is not None,
        "fix_lines": _fix_lines(d.fix),
    }


def _fix_lines(fix) -> List[int]:
    """The lines a fix's edits change (an edit ending at column 1 of a line
    leaves that line alone)."""
    lines: set = set()
    for e in getattr(fix, "edits", None) or ():
        last = e.end_line - 1 if e.end_col <= 1 and e.end_line > e.start_line else e.end_line
        lines.update(range(e.start_line, max(last, e.start_line) + 1))
    return sorted(lines)


def job_for_text(path: str, text: str, codes: Optional[Sequence[str]] = None, ignore: Sequence[str] = ()) -> FileJob:
    """The job for ``verify``: the engine's own fixes, unsafe ones included."""
    from devlint.engine import lint_source

    result = fix_source(text, path, codes, unsafe=True, ignore=ignore)
    fixed = result.fixed_text if result.fixed_text is not None else text
    findings = [finding_json(d, path) for d in lint_source(text, path, codes, ignore).diagnostics]
    return FileJob(path, text, fixed, sorted({d.code for d in result.applied}), findings=findings)


def torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def _where(f: dict) -> str:
    return f"{f['code']} (line {f['line']})" if f.get("line") else f["code"]


def _findings_text(fs: Sequence[dict], limit: int = 4) -> str:
    shown = ", ".join(_where(f) for f in fs[:limit])
    return shown + (f" and {len(fs) - limit} more" if len(fs) > limit else "")


def _count(items: Sequence, one: str, many: str) -> str:
    return one if len(items) == 1 else many.format(len(items))


def _error_line(info: dict) -> str:
    return f"{info.get('type', '?')}: {info.get('message', '')}"


def simulation_text(info: dict, why: bool = True) -> str:
    """What the simulation could not follow: the operation, where the code
    reached it, and (``why``) the reason."""
    parts = []
    if info.get("operation"):
        parts.append(info["operation"])
    if info.get("line"):
        parts.append(f"at {info['line']}" + (f" `{info['code']}`" if info.get("code") else ""))
    reason = info.get("simulation_limit", "")
    if not why and parts:
        return " ".join(parts)
    return (" ".join(parts) + ": " if parts else "") + reason


def judge(result: dict, findings: Sequence[dict] = ()) -> Tuple[str, str]:
    """The case's verdict and a sentence saying why (docs/harness.md,
    "Verdicts"). ``findings``: the job's, each with ``reached`` set."""
    for key in ("case_error", "harness_error", "timeout", "crash", "file_error"):
        if key in result:
            return ERROR, f"{key.replace('_', ' ')}: {str(result[key]).splitlines()[0] if result[key] else ''}"
    original = result.get("original", {})
    fixed = result.get("fixed", {})
    eq = result.get("equivalence", {})
    o, f, e = original.get("status"), fixed.get("status"), eq.get("status")
    reached = [x for x in findings if x.get("reached")]
    fixed_fine = f == "unchanged" or (f == "ok" and e in ("equal", "not applicable"))
    if o == "cannot simulate":
        return CANNOT_SIMULATE, "the simulation cannot follow the original: " + simulation_text(original.get("error", {}), why=False)
    if o == "not reproduced":
        if reached:
            return NOT_REPRODUCED, (
                f"devlint reports {_findings_text(reached)} on code this case ran, and it ran without error "
                "under the placement"
            )
        if fixed_fine or f == "cannot simulate":
            return NO_BUG, "the original ran under the placement; devlint reports nothing on the code it ran" + (
                f" ({_count(findings, 'its finding is', 'its {} findings are')} on code the case did not reach)" if findings else ""
            )
        return FIX_FAILED, "the original runs under the placement but the fixed code does not: " + _fixed_problem(fixed, eq)
    # the original failed under the placement
    if f == "cannot simulate":
        return CANNOT_SIMULATE, "the simulation cannot follow the fixed code: " + simulation_text(fixed.get("error", {}), why=False)
    if f == "ok" and e in ("equal", "not applicable"):
        return CONFIRMED, "the bug reproduced, the fixed code ran with the expected outputs" + (
            ", equal on one device" if e == "equal" else " (the original fails on one device too)"
        )
    if not reached:
        return MISSED, (
            "the original fails under the placement and devlint reports nothing on the code this case ran"
            + (f" ({_count(findings, 'its finding is', 'its {} findings are')} on code the case did not reach)" if findings else "")
        )
    if f == "unchanged":
        return FIX_FAILED, f"devlint reports {_findings_text(reached)} but its fixes changed nothing the case runs"
    return FIX_FAILED, f"the bug reproduced ({_findings_text(reached)}) and " + _fixed_problem(fixed, eq)


def _fixed_problem(fixed: dict, eq: dict) -> str:
    f = fixed.get("status")
    if f == "failed":
        return "the fixed code fails too: " + _error_line(fixed.get("error", {}))
    if f == "wrong output":
        return "the fixed code gives the wrong outputs: " + fixed.get("detail", "")
    if f == "ok":
        return f"the fixed code's outputs on one device: {eq.get('status', '?')}: {eq.get('detail', '')}"
    return f"the fixed code: {f}: {fixed.get('detail', '')}"


def verdict(result: dict, findings: Sequence[dict] = ()) -> str:
    return judge(result, findings)[0]


def _reached(job: FileJob, lines: Dict[str, List[int]]) -> List[dict]:
    """The job's findings, each marked with whether the original's run
    executed one of its lines."""
    out = []
    for f in job.findings:
        key = f["path"]
        if job.project_files:
            key = os.path.relpath(os.path.abspath(f["path"]), os.path.abspath(job.root))
        ran = set(lines.get(key, ()))
        # its own lines, or the lines its fix changes: DL005's fix rewrites
        # the DDP call, which fails before the move the finding is on runs
        own = range(f["line"], f["end_line"] + 1)
        out.append(dict(f, reached=any(n in ran for n in own) or any(n in ran for n in f.get("fix_lines", ()))))
    return out


def verify_jobs(
    jobs: Sequence[FileJob],
    simulate: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    workers: int = 1,
) -> List[dict]:
    """Run every case of every job; one result dict per case, in file order.

    ``workers`` child processes run at once; each runs files one after the
    other (importing torch once), and is replaced when a case crashes it or
    overruns ``timeout``."""
    per_file: Dict[int, List[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="devlint-verify-") as tmp:

        def run(i: int, child: "_Child") -> None:
            per_file[i] = _supervise(jobs[i], os.path.join(tmp, str(i)), simulate, timeout, child)

        _drain(list(range(len(jobs))), workers, os.path.join(tmp, "worker"), simulate, run)
        if not simulate:
            _simulate_what_one_gpu_cannot_show(jobs, per_file, tmp, timeout, workers)
    results = []
    for i, job in enumerate(jobs):
        for r in per_file.get(i, []):
            r["file"] = job.path
            r["rules"] = job.rules
            findings = _reached(job, r.pop("reached", {}))
            if "original" in r:
                r["findings"] = findings
            r["verdict"], r["why"] = judge(r, findings)
            if "one_gpu" in r:
                r["why"] += f" ({r['one_gpu']})"
            results.append(r)
    return results


#: the device path of a machine with one GPU (env.make_plan): cuda:0, and
#: the CPU standing for every further device
ONE_GPU = "real (cuda:0 + cpu)"


def _needs_a_second_gpu(r: dict) -> bool:
    """The case ran clean on the one-GPU path although it wants two or more
    devices: the CPU standing for cuda:1 cannot show a bug that needs a
    second GPU (code that tests `x.is_cuda` sees False there)."""
    return (
        r.get("device_path") == ONE_GPU
        and isinstance(r.get("devices"), int)
        and r["devices"] > 1
        and r.get("original", {}).get("status") == "not reproduced"
    )


def _drain(indices: Sequence[int], workers: int, child_dir: str, simulate: bool, run: Callable[[int, "_Child"], None]) -> None:
    """``run(i, child)`` for every index, on at most ``workers`` threads,
    each with one child process of its own (``child_dir-<k>``), reused for
    the files it takes."""
    pending: "queue.Queue[int]" = queue.Queue()
    for i in indices:
        pending.put(i)

    def serve(k: int) -> None:
        child = _Child(f"{child_dir}-{k}", simulate)
        try:
            while True:
                try:
                    i = pending.get_nowait()
                except queue.Empty:
                    return
                run(i, child)
        finally:
            child.close()

    n = max(1, min(workers, len(indices)))
    with ThreadPoolExecutor(max_workers=n) as pool:
        list(pool.map(serve, range(n)))


def _simulate_what_one_gpu_cannot_show(
    jobs: Sequence[FileJob], per_file: Dict[int, List[dict]], tmp: str, timeout: float, workers: int
) -> None:
    """Run again, on the simulated path, each case that ran clean on
    ``cuda:0 + cpu`` and wants more devices than that machine has GPUs; its
    result is the simulated run's, and says so (``device_path``,
    ``one_gpu``). Seen on an H200: DL002's "cuda" if x.is_cuda else "cpu"
    picks the CPU on the CPU that stands for cuda:1, and came out "finding
    not reproduced", a false alarm on a machine that cannot show the bug."""
    again = {i: [r["case"] for r in rows if _needs_a_second_gpu(r)] for i, rows in per_file.items()}
    again = {i: names for i, names in again.items() if names}
    if not again:
        return
    rerun: Dict[int, List[dict]] = {}

    def run(i: int, child: "_Child") -> None:
        others = [r["case"] for r in per_file[i] if r["case"] not in again[i]]
        rerun[i] = _supervise(jobs[i], os.path.join(tmp, f"simulated-{i}"), True, timeout, child, skip=others)

    _drain(sorted(again), workers, os.path.join(tmp, "simulated-worker"), True, run)
    for i, rows in rerun.items():
        by_name = {r["case"]: r for r in rows}
        for k, r in enumerate(per_file[i]):
            new = by_name.get(r["case"])
            if new is None or r["case"] not in again[i]:
                continue
            new["device_path"] = f"simulated (1 real GPU: this case needs {r['devices']})"
            new["one_gpu"] = (
                f"on {ONE_GPU} the original ran without error, where the CPU stands for cuda:1 and cannot show "
                f"a bug that needs a second GPU; the verdict is the simulated path's"
            )
            per_file[i][k] = new


def _write(folder: str, name: str, text: str) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def _child_env(simulate: bool = False) -> Dict[str, str]:
    env = dict(os.environ)
    if simulate:
        # the simulated path is the same on every machine: real GPUs, if
        # any, are hidden from the child
        env["CUDA_VISIBLE_DEVICES"] = ""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _tail(path: str, lines: int = 6) -> str:
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return ""
    kept = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join(kept)


def _supervise(
    job: FileJob, folder: str, simulate: bool, timeout: float, child: "_Child", skip: Sequence[str] = ()
) -> List[dict]:
    """Run the job's cases (but those in ``skip``) in ``child``; one row per case run."""
    name = os.path.basename(job.path) or "case.py"
    project = None
    if job.project_files:
        project, original, fixed = _write_project(job, folder)
    else:
        original = _write(os.path.join(folder, "original"), name, job.original)
        fixed = _write(os.path.join(folder, "fixed"), name, job.fixed)
    payload = {
        "display": job.path,
        "fixed_display": f"{job.path} (fixed)",
        "original": original,
        "fixed": fixed,
        "search_path": [] if project else [os.path.dirname(os.path.abspath(job.path))],
        "project": project,
        "simulate": simulate,
        "same": job.unchanged,
        "skip": list(skip),
        "timeout": timeout,
    }
    order: Optional[List[dict]] = None
    done: Dict[str, dict] = {}
    for _attempt in range(64):
        outcome = child.run(payload, timeout, done)
        if outcome.get("cases") is not None and order is None:
            order = outcome["cases"]
        if "file_error" in outcome:
            return [{"case": "-", "file_error": outcome["file_error"]}]
        current = outcome.get("current")
        if current is not None:  # the child died or hung inside this case
            done[current] = {"case": current, outcome["kind"]: outcome["detail"]}
        payload["skip"] = list(done) + list(skip)
        if outcome.get("finished") or (order is not None and all(m["name"] in done or m["name"] in skip for m in order)):
            break
        if current is None and outcome.get("kind"):  # died before reaching a case
            return [{"case": "-", "file_error": outcome["detail"]}]
    rows = []
    for meta in order or []:
        if meta["name"] in skip:
            continue
        r = done.get(meta["name"], {"case": meta["name"], "harness_error": "no result"})
        r.setdefault("placement", meta.get("placement", "-"))
        r.setdefault("devices", meta.get("devices", "-"))
        rows.append(r)
    return rows


def _write_project(job: FileJob, folder: str) -> Tuple[dict, str, str]:
    """Two copies of the project under ``folder``, before and after the
    fixes; the worker's view of them (roots per copy, top-level names) and
    the case file's path in each."""
    rel = os.path.relpath(os.path.abspath(job.path), os.path.abspath(job.root))
    trees = {w: os.path.join(folder, w + "_tree") for w in ("original", "fixed")}
    tops = set()
    for path, (before, after) in job.project_files.items():
        for which, text in (("original", before), ("fixed", after)):
            _write(os.path.dirname(os.path.join(trees[which], path)), os.path.basename(path), text)
        for src in job.source_roots:
            inside = os.path.relpath(path, src) if src not in ("", ".") else path
            if not inside.startswith(".."):
                top = inside.split(os.sep, 1)[0]
                tops.add(top[:-3] if top.endswith(".py") else top)
    project = {"tops": sorted(tops)}
    for which, tree in trees.items():
        project[which + "_tree"] = tree
        project[which] = [os.path.normpath(os.path.join(tree, src)) for src in job.source_roots]
    return project, os.path.join(trees["original"], rel), os.path.join(trees["fixed"], rel)


class _Child:
    """A worker process that runs one file's cases per request."""

    def __init__(self, folder: str, simulate: bool = False) -> None:
        self.folder = folder
        self.simulate = simulate
        self.proc: Optional[subprocess.Popen] = None
        self.lines: "queue.Queue[Optional[bytes]]" = queue.Queue()
        self.starts = 0
        os.makedirs(folder, exist_ok=True)

    @property
    def stderr_path(self) -> str:
        return os.path.join(self.folder, f"stderr-{self.starts}.txt")

    def _start(self) -> None:
        self.starts += 1
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "devlint.harness.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=_child_env(self.simulate),
                start_new_session=True,
            )
        self.lines = queue.Queue()
        proc, lines = self.proc, self.lines

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()

    def run(self, payload: dict, timeout: float, done: Dict[str, dict]) -> dict:
        """Send one file; read its events until the file is done, the child
        dies or a case overruns. A dead or stopped child is replaced next time."""
        fresh = self.proc is None or self.proc.poll() is not None
        if fresh:
            self._start()
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        out: dict = {}
        try:
            proc.stdin.write((json.dumps(payload) + "\n").encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        current: Optional[str] = None
        # importing torch in a fresh child counts towards the first case
        deadline = time.monotonic() + timeout + (60 if fresh else 0)
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                _kill(proc)
                self.proc = None
                out.update(current=current, kind="timeout", detail=f"no result after {timeout:g}s; the case was stopped")
                return out
            if line is None:
                code = proc.wait()
                tail = _tail(self.stderr_path)
                detail = f"the child process {_describe_exit(code)}" + (f":\n{tail}" if tail else "")
                out.update(current=current, kind="crash", detail=detail)
                return out
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("event")
            if kind == "cases":
                out["cases"] = event["cases"]
            elif kind == "start":
                current = event["case"]
                deadline = time.monotonic() + timeout
            elif kind == "result":
                done[event["case"]] = event["result"]
                current = None
                deadline = time.monotonic() + timeout
            elif kind == "file_error":
                out["file_error"] = event.get("message", "cannot read the cases")
            elif kind == "done":
                out["finished"] = True
                return out

    def close(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                if proc.stdin:
                    proc.stdin.close()
                proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if proc.poll() is None:
            _kill(proc)
        self.proc = None


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        try:
            proc.kill()
        except OSError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
