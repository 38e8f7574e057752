"""The glue between the CLI and the harness (``devlint verify``,
``devlint fix --apply --verify``). No torch here."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import click

from devlint.harness.cases import declares_cases
from devlint.harness.report import exit_code, report_json, report_text
from devlint.harness.supervise import FileJob, job_for_text, torch_available, verify_jobs
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


def _no_torch() -> int:
    click.echo(
        "devlint: error: the runtime harness needs PyTorch (pip install 'devlint[harness]'); "
        "`devlint check` and `devlint fix` do not",
        err=True,
    )
    return EXIT_ERROR


def run_and_report(jobs: List[FileJob], output_format: str, timeout: float, simulate: bool, workers: int) -> int:
    if not torch_available():
        return _no_torch()
    results = verify_jobs(jobs, simulate=simulate, timeout=timeout, workers=workers)
    out = click.get_text_stream("stdout")
    if output_format == "json":
        report_json(results, out)
    else:
        report_text(results, out)
    return exit_code(results)


def verify_paths(
    files: Sequence[str],
    codes: Sequence[str],
    ignored_for,
    output_format: str,
    timeout: float,
    simulate: bool,
    workers: int,
) -> int:
    """``devlint verify``: each file's cases against the engine's own fixes
    (unsafe fixes included) applied to a copy."""
    texts = read_cases_texts(files)
    if not texts:
        click.echo("devlint: no harness cases found (a file declares them with a devlint_cases() function; see docs/harness.md)", err=True)
        return 1
    jobs = [job_for_text(path, text, codes, ignored_for(path)) for path, text in texts.items()]
    return run_and_report(jobs, output_format, timeout, simulate, workers)


def verify_fixed(
    before: Dict[str, str], fixed_results, timeout: float, simulate: bool, workers: int
) -> Optional[int]:
    """``fix --apply --verify``: the cases of the files just fixed, with the
    text before the fixes as the original. None when there is nothing to run."""
    jobs = []
    for r in fixed_results:
        original = before.get(r.path)
        if original is None or r.fixed_text is None or r.fixed_text == original:
            continue
        jobs.append(FileJob(r.path, original, r.fixed_text, sorted({d.code for d in r.applied})))
    if not jobs:
        click.echo("devlint: --verify: none of the fixed files declares harness cases", err=True)
        return None
    click.echo("")
    return run_and_report(jobs, "text", timeout, simulate, workers)
