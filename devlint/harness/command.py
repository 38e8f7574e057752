"""The glue between the CLI and the harness (``devlint verify``,
``devlint fix --apply --verify``). No torch here."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import click

from devlint.harness.cases import declares_cases
from devlint.harness.report import exit_code, report_json, report_text
from devlint.harness.supervise import FileJob, finding_json, job_for_text, torch_available, verify_jobs
from devlint.source import SourceError, decode_source

EXIT_ERROR = 2


def read_cases_texts(files: Sequence[str]) -> Dict[str, str]:
    """The text of every file that declares harness cases."""
    out: Dict[str, str] = {}
    for path in files:
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
            text = decode_source(raw).text
        except (OSError, SourceError):
            continue
        if declares_cases(text):
            out[path] = text
    return out


def read_texts(files: Sequence[str]) -> Dict[str, str]:
    """The text of every file that can be read."""
    out: Dict[str, str] = {}
    for path in files:
        try:
            with open(path, "rb") as fh:
                out[path] = decode_source(fh.read()).text
        except (OSError, SourceError):
            continue
    return out


def _no_torch() -> int:
    click.echo(
        "devlint: error: the runtime harness needs PyTorch (pip install 'devlint[harness]'); "
        "`devlint check` and `devlint fix` do not",
        err=True,
    )
    return EXIT_ERROR


def run_and_report(jobs: List[FileJob], output_format: str, timeout: float, simulate: bool, workers: int,
                   strict: bool = False) -> int:
    if not torch_available():
        return _no_torch()
    results = verify_jobs(jobs, simulate=simulate, timeout=timeout, workers=workers)
    out = click.get_text_stream("stdout")
    if output_format == "json":
        report_json(results, out)
    else:
        report_text(results, out)
    return exit_code(results, strict=strict)


def verify_paths(
    files: Sequence[str],
    codes: Sequence[str],
    ignored_for,
    output_format: str,
    timeout: float,
    simulate: bool,
    workers: int,
    project=None,
    strict: bool = False,
) -> int:
    """``devlint verify``: each file's cases against the engine's own fixes
    (unsafe fixes included) applied to a copy. ``project``: (config, plan)
    of a project run: a case file that imports other files of the run is
    verified against copies of those files too, before and after the fixes
    of the whole project (a bug between files reproduces, and so does its
    fix)."""
    texts = read_cases_texts(files)
    if not texts:
        click.echo("devlint: no harness cases found (a file declares them with a devlint_cases() function; see docs/harness.md)", err=True)
        return 1
    fixed: Dict[str, str] = {}
    applied: Dict[str, set] = {}
    found: Dict[str, list] = {}
    closures = {p: _imported_files(project[1], p) if project is not None and len(files) > 1 else set() for p in texts}
    if any(closures.values()):
        from devlint.runner import jobs_for, run_jobs

        config, plan = project
        # only the case files that import others and what they import: the
        # findings and fixes of a file depend on the modules it imports alone
        needed = [f for f in files if f in {p for p, c in closures.items() if c} or any(f in c for c in closures.values())]
        results = run_jobs(jobs_for(needed, config, codes, fix=True, unsafe=True), workers, plan=plan)
        fixed = {r.path: r.fixed_text for r in results if r.fixed_text is not None and not r.error}
        applied = {r.path: {d.code for d in r.applied} for r in results}
        # what `devlint check` reports in them (positions in the original text)
        found = {r.path: [finding_json(d, r.path) for d in r.diagnostics] for r in run_jobs(jobs_for(needed, config, codes), workers, plan=plan)}
    jobs = []
    for path, text in texts.items():
        closure = closures[path]
        if not closure:
            jobs.append(job_for_text(path, text, codes, ignored_for(path)))
            continue
        rules = set().union(*(applied.get(f, set()) for f in {path, *closure}))
        job = project_job(path, text, fixed.get(path, text), closure, fixed, project[0], rules=rules)
        job.findings = [f for p in sorted({path, *closure}) for f in found.get(p, [])]
        jobs.append(job)
    return run_and_report(jobs, output_format, timeout, simulate, workers, strict)


def project_job(path: str, original: str, fixed_text: str, closure, fixed: Dict[str, str], config,
                before: Optional[Dict[str, str]] = None, rules: Sequence[str] = ()) -> FileJob:
    """The job of a case file that imports other files of the run: the
    original and fixed text of each file of its import closure, relative to
    a common root, with the source roots. ``before``: the text of files as
    they were before ``fix --apply`` wrote them (the disk holds the fixed)."""
    import os

    files = sorted({path, *closure})
    roots = [os.path.abspath(r) for r in config.source_roots()]
    root = os.path.commonpath([os.path.abspath(config.root), *(os.path.abspath(f) for f in files)])
    pairs = {}
    for f in files:
        if f == path:
            pairs[os.path.relpath(os.path.abspath(f), root)] = (original, fixed_text)
            continue
        try:
            with open(f, "rb") as fh:
                on_disk = decode_source(fh.read()).text
        except (OSError, SourceError):
            continue
        was = (before or {}).get(f, on_disk)
        pairs[os.path.relpath(os.path.abspath(f), root)] = (was, fixed.get(f, on_disk))
    rels = [os.path.relpath(r, root) for r in roots if not os.path.relpath(r, root).startswith("..")] or ["."]
    return FileJob(path, original, fixed_text, sorted(rules), project_files=pairs, root=root, source_roots=rels)


def _imported_files(plan, path: str) -> set:
    """The other files of the run that ``path`` imports, directly or not
    (with the packages above each module), by the plan's import aliases;
    empty when it imports none."""
    from devlint.project.names import script_package

    fp = plan.files.get(path) if plan is not None else None
    if fp is None or not fp.module:
        return set()
    by_module = plan.paths
    seen = {fp.module}
    todo = [fp.module]
    while todo:
        m = todo.pop()
        pkg = script_package(m)
        for target in plan.aliases.get(m, {}).values():
            for cand in (target, f"{pkg}.{target}" if pkg else ""):
                parts = cand.split(".") if cand else []
                for i in range(len(parts), 0, -1):
                    name = ".".join(parts[:i])
                    if name in by_module:
                        for j in range(1, i + 1):  # the packages above it run on import too
                            above = ".".join(parts[:j])
                            if above in by_module and above not in seen:
                                seen.add(above)
                                todo.append(above)
                        break
    seen.discard(fp.module)
    return {by_module[m] for m in seen if m in by_module and by_module[m] != path}


def verify_fixed(
    before: Dict[str, str], fixed_results, timeout: float, simulate: bool, workers: int, project=None,
    before_all: Optional[Dict[str, str]] = None, strict: bool = False,
) -> Optional[int]:
    """``fix --apply --verify``: the cases of the files just fixed, with the
    text before the fixes as the original. None when there is nothing to run.
    ``project``: (config, plan); ``before_all``: every file's text before the
    fixes, for a case file that imports other files of the run."""
    jobs = []
    fixed_texts = {r.path: r.fixed_text for r in fixed_results if r.fixed_text is not None}
    applied = {r.path: {d.code for d in r.applied} for r in fixed_results}
    # what devlint reported before writing: the fixes it applied (positions
    # in the text before the fix) and what it left (positions after it)
    found = {r.path: [finding_json(d, r.path) for d in list(r.applied) + list(r.diagnostics)] for r in fixed_results}
    for path, original in before.items():
        fixed_text = fixed_texts.get(path, original)
        closure = _imported_files(project[1], path) if project is not None else set()
        if not any(f in fixed_texts for f in (path, *closure)):
            continue  # nothing this case runs was fixed
        rules = set().union(*(applied.get(f, set()) for f in (path, *closure)))
        findings = [f for p in sorted({path, *closure}) for f in found.get(p, [])]
        if closure:
            # the disk holds the fixed project now: the original run needs the texts from before
            job = project_job(path, original, fixed_text, closure, fixed_texts, project[0], before_all or before, rules)
            job.findings = findings
            jobs.append(job)
        else:
            jobs.append(FileJob(path, original, fixed_text, sorted(rules), findings=findings))
    if not jobs:
        click.echo("devlint: --verify: none of the fixed files declares harness cases", err=True)
        return None
    click.echo("")
    return run_and_report(jobs, "text", timeout, simulate, workers, strict)
