"""The command line: ``devlint check``, ``fix``, ``rule``, ``verify``, ``migrate ddp``.

Exit codes: 0 nothing found; 1 findings, pending fixes or files that could not
be checked; 2 usage or configuration error, a path that does not exist, or an
internal error; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

import click

from devlint import __version__
from devlint.config import Config, ConfigError, check_codes, load_config
from devlint.diagnostic import Diagnostic, FileResult
from devlint.files import Discovery, discover, excluded_by_config
from devlint.reporters import (
    FORMATS,
    hidden,
    hidden_fixes_line,
    report_github,
    report_json,
    report_sarif,
    report_statistics,
    report_text,
    summary_line,
)
from devlint.runner import Job, default_jobs, jobs_for, run_jobs, unified_diff

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
#: the name of standard input on the command line (``check -``), and in
#: findings when ``--stdin-filename`` gives none
STDIN = "-"


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


def _quiet() -> int:
    """-q: 1 (findings only, no summary), -qq: 2 (nothing but errors)."""
    ctx = click.get_current_context(silent=True)
    return int(ctx.meta.get("devlint.quiet") or 0) if ctx is not None else 0


class _Discard:
    """-qq: where output goes."""

    def write(self, text: str) -> None:
        pass


class _Stderr:
    def write(self, text: str) -> None:
        click.echo(text, nl=False, err=True)


def _err(msg: str) -> None:
    if _quiet() >= 2 and not msg.startswith("error"):
        return
    click.echo(f"devlint: {msg}", err=True)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


#: seconds a run lasts before it shows its progress
PROGRESS_DELAY = 1.0


class _Progress:
    """``files checked / total`` on stderr, overwritten in place, for runs
    that last more than ``delay`` seconds on a terminal; cleared at the end."""

    def __init__(self, total: int, stream=None, delay: Optional[float] = None, clock=time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.start = clock()
        self.delay = PROGRESS_DELAY if delay is None else delay
        self.last = 0.0
        self.shown = False

    def __call__(self, n: int) -> None:
        self.done += n
        now = self.clock()
        if now - self.start < self.delay or (self.shown and now - self.last < 0.1 and self.done < self.total):
            return
        self.last = now
        self.shown = True
        self.stream.write(f"\r{self.done}/{self.total} files checked")
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def all_rules():
    """The rule classes (imported on use: importing a rule imports libcst,
    which a run answered from the cache never needs)."""
    from devlint.rule import all_rules as _all_rules

    return _all_rules()


def _remember(ctx: click.Context, param: click.Parameter, value):
    # options every subcommand shares without changing their signatures
    ctx.meta[f"devlint.{param.name}"] = value
    return value


class _Interrupted(Exception):
    """Ctrl-C: the message of the one line that says so."""


class _Run:
    """State shared by check and fix: the configuration, the files, the problems."""

    def __init__(self, paths, config_path, select, ignore, extend_select, verbose) -> None:
        hook = _hook_mode()
        meta = click.get_current_context().meta
        self.paths = list(paths) or ([] if hook else ["."])
        self.verbose = verbose
        self.exit = EXIT_OK
        self.unchecked = 0  # paths that could not be checked (each already reported)
        self.internal = 0  # files a rule failed on (internal errors; the exit status is 2)
        #: ``check -`` / ``fix -``: the bytes read from standard input, checked as ``stdin_name``
        self.stdin: Optional[bytes] = None
        self.stdin_name = meta.get("devlint.stdin_filename") or STDIN
        if STDIN in self.paths:
            if click.get_current_context().command.name not in ("check", "fix"):
                _err("error: '-' (standard input) works with check and fix only")
                raise SystemExit(EXIT_ERROR)
            if len(self.paths) > 1:
                _err("error: '-' (standard input) cannot be combined with other paths")
                raise SystemExit(EXIT_ERROR)
            self.stdin = sys.stdin.buffer.read()
        elif meta.get("devlint.stdin_filename"):
            _err("error: --stdin-filename needs '-' as the path (read the source from standard input)")
            raise SystemExit(EXIT_ERROR)
        # standard input: the configuration of the folder it names (or the current one)
        config_paths = [self.stdin_name if self.stdin_name != STDIN else "."] if self.stdin is not None else self.paths
        try:
            cfg = load_config(config_paths, config_path)
            for option, codes in (("--select", select), ("--ignore", ignore), ("--extend-select", extend_select)):
                if codes and not _split_codes(codes):
                    raise ConfigError(f"command line: {option} names no rule code")
                check_codes(_split_codes(codes), where=f"command line: {option}")
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
        if verbose:
            self._explain_prefixes(rule_table())
        if self.stdin is not None:
            found = Discovery()
            if self.stdin_name != STDIN and excluded_by_config(self.stdin_name, tuple(cfg.exclude) + tuple(cfg.extend_exclude), cfg.root):
                if verbose:
                    _err(f"{self.stdin_name}: excluded by the configuration; not checked")
            else:
                found.files.append(self.stdin_name)
        else:
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
        if not self.files and not found.missing and not hook and self.stdin is None:
            _err("warning: No Python files found under the given paths")
        #: the ast candidate scan (--no-scan: only to compare findings without it)
        self.scan = not meta.get("devlint.no_scan", False)
        self.cache = None
        # standard input: not cached (the file on disk may differ); checked
        # alone unless --stdin-filename says where it lies in the project
        if self.stdin is not None:
            meta = {**meta, "devlint.no_cache": True}
            if self.stdin_name == STDIN:
                meta["devlint.no_project"] = True
        if not meta.get("devlint.no_cache", False):
            from devlint.cache import ResultCache, cache_dir

            self.cache = ResultCache(cache_dir(cfg.root), cfg.cache_key())
        #: the project run's plan: module names, import order (--no-project: none)
        self.plan = None
        #: files of the project the checked files import that the run reads
        #: only for their summaries (no finding of theirs is reported)
        self.followed: List[str] = []
        if cfg.project and not meta.get("devlint.no_project", False):
            from devlint.project.plan import make_plan

            # files the run does not check: the summaries the last run that did stored
            seed = self.cache.project_summaries(self.files) if self.cache is not None else ()
            texts = {self.stdin_name: self.stdin.decode("utf-8", "replace")} if self.stdin is not None else None
            memo = self.cache.imports if self.cache is not None else None
            self.plan = make_plan(self.files, cfg.source_roots(), seed, follow=True, texts=texts, memo=memo)
            self.followed = self.plan.followed

    def _explain_prefixes(self, table) -> None:
        """-v: what each selector that is a strict prefix selects."""
        cfg = self.config
        for key, codes in (("select", cfg.select), ("extend-select", cfg.extend_select), ("ignore", cfg.ignore),
                           *(("per-file-ignores", c) for _, c in cfg.per_file_ignores)):
            for code in codes:
                matched = [c for c in table if code == "ALL" or c.startswith(code)]
                if matched != [code]:
                    _err(f"{key} '{code}' means {', '.join(matched)}")

    def jobs(self, **kw) -> List[Job]:
        """The jobs of the run (standard input: one job holding its bytes),
        then the files it only summarises (no rule runs on them)."""
        jobs = jobs_for(self.files, self.config, self.codes, scan=self.scan, **kw)
        if self.stdin is not None:
            jobs = [replace(j, data=self.stdin, apply=False) for j in jobs]
        return [*jobs, *(Job(path=f, codes=(), ignore=(), scan=self.scan) for f in self.followed)]

    def checked(self, results: Sequence[FileResult]) -> List[FileResult]:
        """The results of the files the run checks (not of those it followed)."""
        followed = set(self.followed)
        return [r for r in results if r.path not in followed] if followed else list(results)

    def run(self, jobs, processes: Optional[int]) -> List[FileResult]:
        """Run the jobs with progress on a terminal; on Ctrl-C keep what was
        done in the cache, say so in one line and exit 130."""
        show = _stderr_is_terminal() and _quiet() == 0 and len(jobs) > 1
        progress = _Progress(len(jobs)) if show else None
        try:
            return self.checked(run_jobs(jobs, processes or default_jobs(), cache=self.cache, plan=self.plan, progress=progress))
        except KeyboardInterrupt:
            if progress is not None:
                progress.clear()
            done = self.cache.stored if self.cache is not None else 0
            self.save_cache()
            kept = f"; the {done} file{'s' if done != 1 else ''} checked so far are cached" if done else ""
            raise _Interrupted(f"interrupted{kept}") from None
        finally:
            if progress is not None:
                progress.clear()

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
        "--isolated",
        "no_project",
        is_flag=True,
        expose_value=False,
        callback=_remember,
        help="Check each file alone, without the facts of the project modules it imports (config: project = false).",
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


def _terminal_options(f):
    """check and fix: standard input, -q."""
    f = click.option(
        "--stdin-filename",
        expose_value=False,
        callback=_remember,
        metavar="PATH",
        help="With '-' as the path: the name of the file standard input holds (its configuration, "
        "excludes and per-file ignores apply; findings name it).",
    )(f)
    return click.option(
        "--quiet",
        "-q",
        count=True,
        expose_value=False,
        callback=_remember,
        help="Print the findings only, no summary; -qq: nothing but error lines (the exit code tells).",
    )(f)


class _Main(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (KeyboardInterrupt, _Interrupted) as exc:
            # Ctrl-C: one line, exit 130 (the workers are already stopped)
            click.echo(f"devlint: {exc if isinstance(exc, _Interrupted) else 'interrupted'}", err=True)
            sys.exit(EXIT_INTERRUPTED)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="devlint")
def main() -> None:
    """devlint: find and fix PyTorch device-placement bugs before they reach a GPU."""


@main.command()
@common
@_terminal_options
@click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them "
              "([*]: fix --apply fixes them all, [-]: some of them; with --output-format json: a JSON list).")
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
    results = run.run(run.jobs(), jobs)
    run.save_cache()
    run.file_problems(results)
    diagnostics = sorted((d for r in results for d in r.diagnostics), key=Diagnostic.sort_key)
    quiet = _quiet()
    unsafe = run.config.unsafe_fixes
    out = _Stdout(_use_color(color)) if quiet < 2 else _Discard()
    if statistics:
        report_statistics(diagnostics, out, unsafe, as_json=output_format == "json")
        if output_format != "json" and quiet == 0:
            more = sum(1 for d in diagnostics if hidden(d, unsafe))
            if more:
                out.write(hidden_fixes_line(more) + "\n")
    elif output_format == "json":
        report_json(diagnostics, out)
    elif output_format == "github":
        report_github(diagnostics, out)
    elif output_format == "sarif":
        report_sarif(diagnostics, all_rules(), out)
    else:
        report_text(diagnostics, out, _use_color(color), show_source=output_format == "text", unsafe=unsafe)
        if quiet:
            pass  # -q: the findings only
        elif not diagnostics and run.internal:
            n = run.internal
            click.echo(f"No problems found, but a rule failed on {n} file{'s' if n != 1 else ''} with an internal error (see above).")
        elif not diagnostics and run.unchecked:
            n = run.unchecked
            click.echo(f"No problems found, but {n} path{'s' if n != 1 else ''} could not be checked (see above).")
        elif not diagnostics and not results:
            pass  # nothing was checked: the warning said so
        elif output_format == "text" or diagnostics:
            files_with = len({d.path for d in diagnostics})
            click.echo(summary_line(diagnostics, files_with, unsafe))
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
    if run.stdin is not None:
        _err("error: --add-noqa cannot write to standard input")
        sys.exit(EXIT_ERROR)
    run.cache = None  # a cached result would skip the file without writing it
    results = run.run(run.jobs(add_noqa=True), jobs)
    run.file_problems(results)
    left = sorted((d for r in results for d in r.diagnostics), key=Diagnostic.sort_key)
    report_text(left, _Stdout(_use_color(color)) if _quiet() < 2 else _Discard(), _use_color(color))
    n = sum(len(r.applied) for r in results if not r.error)
    files = sum(1 for r in results if r.applied and not r.error)
    msg = f"Added `# noqa` for {n} finding{'s' if n != 1 else ''} in {files} file{'s' if files != 1 else ''}"
    if left:
        msg += f"; {len(left)} could not be suppressed"
    if not _quiet():
        click.echo(msg + ".")
    sys.exit(max(run.exit, EXIT_FOUND) if left else run.exit)


@main.command()
@common
@_terminal_options
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
    if run.stdin is not None:
        if verify:
            _err("error: --verify cannot run on standard input (it runs the fixed files)")
            sys.exit(EXIT_ERROR)
        _fix_stdin(run, unsafe, jobs)
    if verify:
        from devlint.harness.command import read_cases_texts, read_texts

        before_fix = read_cases_texts(run.files)
        # every file as it was: a case may import files the fixes change
        before_all = read_texts(run.files) if run.plan is not None else {}
    results = run.run(run.jobs(fix=True, unsafe=unsafe, apply=apply), jobs)
    run.save_cache()
    run.file_problems(results)
    quiet = _quiet()
    out = _Stdout(_use_color(color)) if quiet < 2 else _Discard()
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
    report_text(remaining, out, _use_color(color), unsafe=unsafe)
    if not quiet and results:
        click.echo(_fix_summary(remaining, n_applied, len(fixed), apply, unsafe), err=not apply and bool(fixed))
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


def _fix_summary(remaining, n_applied: int, n_files: int, apply: bool, unsafe: bool) -> str:
    verb = "Fixed" if apply else "Would fix"
    msg = f"{verb} {n_applied} problem{'s' if n_applied != 1 else ''} in {n_files} file{'s' if n_files != 1 else ''}"
    msg += f"; {len(remaining)} remaining" if remaining else ""
    msg += "."
    unfixed_unsafe = sum(1 for d in remaining if hidden(d, unsafe))
    if unfixed_unsafe:
        msg += "\n" + hidden_fixes_line(unfixed_unsafe)
    return msg


def _fix_stdin(run: "_Run", unsafe: bool, jobs: Optional[int]) -> None:
    """``fix -``: the fixed source on stdout (the input unchanged when there
    is nothing to fix or the file is excluded), what is left on stderr."""
    from devlint.source import SourceError, decode_source

    results = run.run(run.jobs(fix=True, unsafe=unsafe), jobs)
    run.file_problems(results)
    data = run.stdin or b""
    fixed = [r for r in results if r.fixed_text is not None and not r.error]
    if fixed and not fixed[0].internal_errors:
        text = fixed[0].fixed_text or ""
        if run.stdin_name.endswith(".ipynb"):
            data = (b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b"") + text.encode("utf-8")
        else:
            try:
                data = decode_source(data).encode(text)
            except SourceError:
                pass  # cannot happen: it was decoded to be fixed
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    remaining = sorted((d for r in results for d in r.diagnostics), key=Diagnostic.sort_key)
    if _quiet() < 2:
        report_text(remaining, _Stderr(), False, unsafe=unsafe)
    n_applied = sum(len(r.applied) for r in fixed)
    if not _quiet() and results:
        click.echo(_fix_summary(remaining, n_applied, len(fixed), True, unsafe), err=True)
    sys.exit(max(run.exit, EXIT_FOUND) if remaining else run.exit)


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


@main.group()
def migrate() -> None:
    """Rewrite a training script for another way of running it. A migration
    changes how the script runs: review the diff (docs/migrate.md)."""


@migrate.command("ddp")
@click.argument("script", type=click.Path())
@click.option("--apply", is_flag=True, help="Write the migrated script (atomically) instead of printing a diff.")
@click.option("--per-rank-batch", is_flag=True, help="Keep the old batch size on every rank (the global batch grows "
              "with the world size) instead of dividing it by the world size.")
@click.option("--nproc", type=click.IntRange(min=1), default=None, metavar="N",
              help="Processes per machine in the launch command the header shows (default: N, the GPUs).")
def ddp(script: str, apply: bool, per_rank_batch: bool, nproc: Optional[int]) -> None:
    """Migrate a DataParallel training script to DistributedDataParallel
    under torchrun: print the change as a unified diff, or write it with
    --apply. Exit 0 after --apply, 1 when a diff is shown or the script
    cannot be migrated (the reason is given, nothing is written), 2 on a
    usage error."""
    from devlint.migrate import CannotMigrate, migrate_ddp
    from devlint.runner import _describe, _looks_like_python, _read, write_atomically
    from devlint.source import SourceError, decode_source

    if not os.path.lexists(script):
        _err(f"error: {script}: no such file or directory")
        sys.exit(EXIT_ERROR)
    if os.path.isdir(script):
        _err(f"error: {script}: is a directory (migrate ddp rewrites one script)")
        sys.exit(EXIT_ERROR)
    try:
        raw = _read(script)
    except OSError as exc:
        _err(f"error: {script}: {_describe(exc)}")
        sys.exit(EXIT_FOUND)
    problem = None
    if script.endswith(".ipynb"):
        problem = "a notebook; export it as a script first (jupyter nbconvert --to script)"
    elif b"\x00" in raw[:8192]:
        problem = "not a Python source file (binary content)"
    elif not _looks_like_python(script, raw):
        problem = "not a Python file (no .py suffix and no python #! line)"
    if problem is None:
        try:
            src = decode_source(raw)
        except SourceError as exc:
            problem = str(exc)
    if problem is not None:
        _err(f"error: {script}: {problem}")
        sys.exit(EXIT_FOUND)
    try:
        migration = migrate_ddp(src.text, script, per_rank_batch=per_rank_batch, nproc=nproc)
    except CannotMigrate as exc:
        where = f"{script}:{exc.line}" if exc.line else script
        _err(f"error: {where}: cannot migrate to DistributedDataParallel: {exc.reason}; nothing was written")
        sys.exit(EXIT_FOUND)
    except Exception as exc:  # a codemod bug must not leave a half-written file or a traceback
        _err(f"error: {script}: internal error ({type(exc).__name__}: {exc}); please report this as a devlint bug")
        sys.exit(EXIT_ERROR)
    _err("warning: migrating to DistributedDataParallel is an unsafe change: the script will run as one "
         "process per device, with its own batches, saving and printing on rank 0; review it before you launch it")
    for note in migration.notes:
        _err(f"note: {note}")
    if not apply:
        _Stdout().write(unified_diff(script, src.text, migration.text))
        click.echo(f"Would migrate {script}; launch it with: {migration.launch} [ARGS]", err=True)
        sys.exit(EXIT_FOUND)
    problem = write_atomically(script, raw, src.encode(migration.text))
    if problem:
        _err(f"error: {script}: {problem}")
        sys.exit(EXIT_FOUND)
    click.echo(f"Migrated {script}; launch it with: {migration.launch} [ARGS]")
    sys.exit(EXIT_OK)


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
