"""The command line: ``devlint check``, ``fix``, ``rule``.

Exit codes: 0 nothing found; 1 findings, pending fixes or files that could not
be checked; 2 usage or configuration error, a path that does not exist, or an
internal error.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

import click

from devlint import __version__
from devlint.config import Config, ConfigError, check_codes, load_config
from devlint.diagnostic import Diagnostic, FileResult
from devlint.files import discover
from devlint.reporters import (
    FORMATS,
    report_github,
    report_json,
    report_sarif,
    report_statistics,
    report_text,
    summary_line,
)
from devlint.runner import Job, default_jobs, jobs_for, run_jobs, unified_diff

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2


def _split_codes(values: Sequence[str]) -> Tuple[str, ...]:
    out: List[str] = []
    for v in values:
        out.extend(c.strip().upper() for c in v.split(",") if c.strip())
    return tuple(out)


def _use_color(mode: str) -> bool:
    if mode == "always":
        return True
    if mode == "never" or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


class _Stdout:
    """A text stream over click.echo (works under click's test runner)."""

    def __init__(self, color: bool = False) -> None:
        self.color = color

    def write(self, text: str) -> None:
        click.echo(text, nl=False, color=self.color)


def _err(msg: str) -> None:
    click.echo(f"devlint: {msg}", err=True)


def all_rules():
    """The rule classes (imported on use: importing a rule imports libcst,
    which a run answered from the cache never needs)."""
    from devlint.rule import all_rules as _all_rules

    return _all_rules()


def _remember(ctx: click.Context, param: click.Parameter, value):
    # options every subcommand shares without changing their signatures
    ctx.meta[f"devlint.{param.name}"] = value
    return value


class _Run:
    """State shared by check and fix: the configuration, the files, the problems."""

    def __init__(self, paths, config_path, select, ignore, extend_select, verbose) -> None:
        hook = _hook_mode()
        self.paths = list(paths) or ([] if hook else ["."])
        self.verbose = verbose
        self.exit = EXIT_OK
        self.unchecked = 0  # paths that could not be checked (each already reported)
        self.internal = 0  # files a rule failed on (internal errors; the exit status is 2)
        try:
            cfg = load_config(self.paths, config_path)
            for codes in (select, ignore, extend_select):
                check_codes(_split_codes(codes), where="command line")
        except ConfigError as exc:
            _err(f"error: {exc}")
            raise SystemExit(EXIT_ERROR)
        if select:
            cfg = replace(cfg, select=_split_codes(select), extend_select=())
        if ignore:
            cfg = replace(cfg, ignore=cfg.ignore + _split_codes(ignore))
        if extend_select:
            cfg = replace(cfg, extend_select=cfg.extend_select + _split_codes(extend_select))
        self.config: Config = cfg
        from devlint.catalog import rule_table

        self.codes = cfg.enabled_codes(rule_table())
        found = discover(self.paths, cfg, force_exclude=hook)
        for missing in found.missing:
            _err(f"error: {missing}: no such file or directory")
            self.exit = EXIT_ERROR
            self.unchecked += 1
        for path, problem in found.problems:
            _err(f"{path}: {problem}")
            self.exit = max(self.exit, EXIT_FOUND)
            self.unchecked += 1
        self.files = found.files
        meta = click.get_current_context().meta
        #: the ast candidate scan (--no-scan: only to compare findings without it)
        self.scan = not meta.get("devlint.no_scan", False)
        self.cache = None
        if not meta.get("devlint.no_cache", False):
            from devlint.cache import ResultCache, cache_dir

            self.cache = ResultCache(cache_dir(cfg.root), cfg.cache_key())
        #: the project run's plan: module names, import order (--no-project: none)
        self.plan = None
        #: files of the project the checked files import that the run reads
        #: only for their summaries (no finding of theirs is reported)
        self.followed: List[str] = []
        if not meta.get("devlint.no_project", False):
            from devlint.project.plan import make_plan

            # files the run does not check: the summaries the last run that did stored
            seed = self.cache.project_summaries(self.files) if self.cache is not None else ()
            self.plan = make_plan(self.files, cfg.source_roots(), seed, follow=True)
            self.followed = self.plan.followed

    def jobs(self, **kw) -> List[Job]:
        """The jobs of the run: the files it checks, then the files it only
        summarises (no rule runs on them)."""
        summaries = [Job(path=f, codes=(), ignore=(), scan=self.scan) for f in self.followed]
        return [*jobs_for(self.files, self.config, self.codes, scan=self.scan, **kw), *summaries]

    def checked(self, results: Sequence[FileResult]) -> List[FileResult]:
        """The results of the files the run checks."""
        followed = set(self.followed)
        return [r for r in results if r.path not in followed] if followed else list(results)

    def save_cache(self) -> None:
        if self.cache is not None:
            problem = self.cache.save()
            if problem:
                _err(f"warning: {problem}")

    def file_problems(self, results: Sequence[FileResult]) -> None:
        for r in results:
            if r.error:
                _err(f"{r.path}: {r.error}")
                self.exit = max(self.exit, EXIT_FOUND)
                self.unchecked += 1
            for e in r.internal_errors:
                _err(f"{r.path}: {e}")
                self.exit = EXIT_ERROR
            self.internal += bool(r.internal_errors)


_common = [
    click.argument("paths", nargs=-1, type=click.Path()),
    click.option("--select", multiple=True, help="Only these rule codes or prefixes (comma-separated)."),
    click.option("--ignore", multiple=True, help="Skip these rule codes or prefixes."),
    click.option("--extend-select", multiple=True, help="Enable these codes on top of the selection."),
    click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Read the configuration from this pyproject.toml."),
    click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Processes to use (default: usable cores)."),
    click.option("--verbose", "-v", is_flag=True, help="Say more about what is skipped and why."),
    click.option("--no-cache", is_flag=True, expose_value=False, callback=_remember, help="Neither read nor write the result cache (.devlint_cache/)."),
    click.option(
        "--no-project",
        is_flag=True,
        expose_value=False,
        callback=_remember,
        help="Check each file alone, without the facts of the project modules it imports.",
    ),
    click.option("--no-scan", is_flag=True, expose_value=False, callback=_remember, hidden=True, help="Parse every file with libcst, without the ast candidate scan (to compare findings)."),
    click.option(
        "--hook",
        is_flag=True,
        expose_value=False,
        callback=lambda ctx, _param, value: ctx.meta.__setitem__("devlint.hook", value),
        help="Run as a pre-commit hook: check exactly the files given, minus those the configuration "
        "excludes; with no files, check nothing and exit 0.",
    ),
]


def _hook_mode() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get("devlint.hook"))


def common(f):
    for deco in reversed(_common):
        f = deco(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="devlint")
def main() -> None:
    """devlint: find and fix PyTorch device-placement bugs before they reach a GPU."""


@main.command()
@common
@click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when problems are found.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True)
@click.option(
    "--add-noqa",
    is_flag=True,
    expose_value=False,
    callback=_remember,
    help="Add `# noqa: DLxxx` to every current finding (a baseline: gate new code now, clean up later).",
)
def check(paths, select, ignore, extend_select, config_path, jobs, verbose, output_format, statistics, exit_zero, color) -> None:
    """Report device-placement bugs; exit 1 when anything is found."""
    run = _Run(paths, config_path, select, ignore, extend_select, verbose)
    if click.get_current_context().meta.get("devlint.add_noqa"):
        _add_noqa(run, jobs, color)
    results = run.checked(run_jobs(run.jobs(), jobs or default_jobs(), cache=run.cache, plan=run.plan))
    run.save_cache()
    run.file_problems(results)
    diagnostics = sorted((d for r in results for d in r.diagnostics), key=Diagnostic.sort_key)
    out = _Stdout(_use_color(color))
    if statistics:
        report_statistics(diagnostics, out)
    elif output_format == "json":
        report_json(diagnostics, out)
    elif output_format == "github":
        report_github(diagnostics, out)
    elif output_format == "sarif":
        report_sarif(diagnostics, all_rules(), out)
    else:
        report_text(diagnostics, out, _use_color(color), show_source=output_format == "text")
        if not diagnostics and run.internal:
            n = run.internal
            click.echo(f"No problems found, but a rule failed on {n} file{'s' if n != 1 else ''} with an internal error (see above).")
        elif not diagnostics and run.unchecked:
            n = run.unchecked
            click.echo(f"No problems found, but {n} path{'s' if n != 1 else ''} could not be checked (see above).")
        elif output_format == "text" or diagnostics:
            files_with = len({d.path for d in diagnostics})
            click.echo(summary_line(diagnostics, files_with))
    if verbose:
        skipped = sum(1 for r in results if r.skipped)
        cached = f", {run.cache.hits} from the cache" if run.cache is not None else ""
        _err(f"checked {len(results)} files ({skipped} skipped by the pre-filter{cached}), rules: {', '.join(run.codes)}")
    code = run.exit
    if diagnostics:
        code = max(code, EXIT_FOUND)
    if exit_zero and code == EXIT_FOUND:
        code = EXIT_OK
    sys.exit(code)


def _add_noqa(run: "_Run", jobs: Optional[int], color: str) -> None:
    """``check --add-noqa``: write the comments, list what could not be suppressed."""
    # no result cache: a cached result would skip the file without writing it
    results = run.checked(run_jobs(run.jobs(add_noqa=True), jobs or default_jobs(), plan=run.plan))
    run.file_problems(results)
    left = sorted((d for r in results for d in r.diagnostics), key=Diagnostic.sort_key)
    report_text(left, _Stdout(_use_color(color)), _use_color(color))
    n = sum(len(r.applied) for r in results if not r.error)
    files = sum(1 for r in results if r.applied and not r.error)
    msg = f"Added `# noqa` for {n} finding{'s' if n != 1 else ''} in {files} file{'s' if files != 1 else ''}"
    if left:
        msg += f"; {len(left)} could not be suppressed"
    click.echo(msg + ".")
    sys.exit(max(run.exit, EXIT_FOUND) if left else run.exit)


@main.command()
@common
@click.option("--apply", is_flag=True, help="Write the fixes (atomically) instead of printing a diff.")
@click.option("--unsafe-fixes", is_flag=True, default=None, help="Also apply fixes that may change behaviour.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True)
@click.option("--verify", is_flag=True, help="With --apply: then run the runtime harness on the fixed files' cases (executes their code).")
@click.option("--timeout", type=click.FloatRange(min=1), default=120, show_default=True, help="With --verify: seconds each case may run.")
@click.option("--simulate", is_flag=True, help="With --verify: simulated CUDA devices even when GPUs are present.")
@click.option("--strict", is_flag=True, help="With --verify: exit 1 when the simulation cannot follow a case, too.")
def fix(paths, select, ignore, extend_select, config_path, jobs, verbose, apply, unsafe_fixes, color, verify, timeout, simulate, strict) -> None:
    """Show the fixes as a unified diff; with --apply, write them."""
    if verify and not apply:
        _err("error: --verify needs --apply (it runs the harness on the fixed files)")
        sys.exit(EXIT_ERROR)
    run = _Run(paths, config_path, select, ignore, extend_select, verbose)
    unsafe = run.config.unsafe_fixes if unsafe_fixes is None else unsafe_fixes
    if verify:
        from devlint.harness.command import read_cases_texts, read_texts

        before_fix = read_cases_texts(run.files)
        # every file as it was: a case may import files the fixes change
        before_all = read_texts(run.files) if run.plan is not None else {}
    results = run.checked(run_jobs(run.jobs(fix=True, unsafe=unsafe, apply=apply), jobs or default_jobs(), cache=run.cache, plan=run.plan))
    run.save_cache()
    run.file_problems(results)
    out = _Stdout(_use_color(color))
    fixed = [r for r in results if r.fixed_text is not None and not r.error]
    n_applied = sum(len(r.applied) for r in fixed)
    if not apply:
        for r in fixed:
            try:
                from devlint.source import decode_source

                with open(r.path, "rb") as fh:
                    before = decode_source(fh.read()).text
            except Exception:
                continue
            out.write(unified_diff(r.path, before, r.fixed_text or ""))
    remaining = sorted((d for r in results for d in r.diagnostics), key=Diagnostic.sort_key)
    # after --apply: what could not be fixed; without it: what the diff does not fix
    report_text(remaining, out, _use_color(color))
    verb = "Fixed" if apply else "Would fix"
    msg = f"{verb} {n_applied} problem{'s' if n_applied != 1 else ''} in {len(fixed)} file{'s' if len(fixed) != 1 else ''}"
    unfixed_unsafe = sum(1 for d in remaining if d.fix is not None and not d.fix.is_safe)
    msg += f"; {len(remaining)} remaining" if remaining else ""
    if unfixed_unsafe and not unsafe:
        msg += f" ({unfixed_unsafe} fixable with --unsafe-fixes)"
    click.echo(msg + ".", err=not apply and bool(fixed))
    code = run.exit
    if remaining or (fixed and not apply):
        code = max(code, EXIT_FOUND)
    if verify:
        from devlint.harness.command import verify_fixed

        project = (run.config, run.plan) if run.plan is not None else None
        verified = verify_fixed(before_fix, fixed, timeout, simulate, jobs or default_jobs(), project, before_all, strict)
        if verified is not None:
            code = max(code, verified)
    sys.exit(code)


@main.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rule(code: Optional[str], show_all: bool, output_format: str) -> None:
    """Explain a rule (what, why, example, fix), or list them all."""
    rules = all_rules()
    if show_all or code is None:
        if output_format == "json":
            click.echo(json.dumps([_rule_json(r) for r in rules.values()], indent=2))
        else:
            for c, r in rules.items():
                default = "" if r.enabled_by_default else " (off by default)"
                click.echo(f"{c}  {r.name:<38} fix: {r.fix_safety:<12} {r.summary()}{default}")
        return
    r = rules.get(code.upper())
    if r is None:
        _err(f"error: unknown rule code '{code}' (see 'devlint rule --all')")
        sys.exit(EXIT_ERROR)
    if output_format == "json":
        click.echo(json.dumps(_rule_json(r), indent=2))
    else:
        click.echo(r.documentation())


def _rule_json(r) -> dict:
    return {
        "code": r.code,
        "name": r.name,
        "fix_safety": r.fix_safety,
        "enabled_by_default": r.enabled_by_default,
        "summary": r.summary(),
        "documentation": r.documentation(),
    }


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
def clean(paths) -> None:
    """Remove the result cache (.devlint_cache/) of the project of PATHS
    (default: the current folder)."""
    from devlint.cache import cache_dir, clean as remove

    done = set()
    for path in list(paths) or ["."]:
        try:
            folder = cache_dir(load_config([path]).root)
        except ConfigError as exc:
            _err(f"error: {exc}")
            sys.exit(EXIT_ERROR)
        if folder in done:
            continue
        done.add(folder)
        try:
            if remove(folder):
                click.echo(f"removed {folder}")
        except OSError as exc:
            _err(f"error: cannot remove {folder}: {exc.strerror or exc}")
            sys.exit(EXIT_ERROR)


@main.command()
@common
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--timeout", type=click.FloatRange(min=1), default=120, show_default=True, help="Seconds each case may run.")
@click.option("--simulate", is_flag=True, help="Simulated CUDA devices even when GPUs are present.")
@click.option("--strict", is_flag=True, help="Exit 1 when the simulation cannot follow a case, too.")
def verify(paths, select, ignore, extend_select, config_path, jobs, verbose, output_format, timeout, simulate, strict) -> None:
    """Run the runtime harness on the files' cases: reproduce each bug, run
    devlint's fix, compare outputs. Executes the files' code; needs PyTorch.
    Exit 0 when every case is confirmed or shows no bug (or cannot be
    simulated, without --strict), 1 when a finding is not reproduced, a fix
    fails or a bug is missed, 2 on errors."""
    from devlint.harness.command import verify_paths

    run = _Run(paths, config_path, select, ignore, extend_select, verbose)
    project = (run.config, run.plan) if run.plan is not None else None
    code = verify_paths(run.files, run.codes, run.config.ignored_for, output_format, timeout, simulate, jobs or default_jobs(), project, strict)
    sys.exit(EXIT_ERROR if run.exit == EXIT_ERROR else code)


@main.command()
def server() -> None:
    """Run the language server (LSP over stdin/stdout) for editors: see
    docs/editors.md. Needs pygls: pip install 'devlint[lsp]'."""
    try:
        from devlint.server import serve
    except ImportError as exc:
        _err(f"error: the language server needs pygls 2 (pip install 'devlint[lsp]'): {exc}")
        sys.exit(EXIT_ERROR)
    serve()


if __name__ == "__main__":  # pragma: no cover
    main()
