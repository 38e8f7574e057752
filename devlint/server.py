"""``devlint server``: a Language Server (LSP over stdio) built on pygls.

What it does (docs/editors.md has the editor settings):

- diagnostics when a document opens, changes (debounced, the latest text
  wins) and is saved, from the same engine, configuration and project index
  as ``devlint check <file>``; linting runs on a worker thread, never on the
  event loop;
- code actions: each finding's fix (safe ones as ``quickfix``, unsafe ones
  labelled "(unsafe)"), "Disable DLxxx for this line" (a ``# noqa`` comment,
  :func:`devlint.noqa.add_noqa`), and the source action "Fix all safe
  devlint problems" (``source.fixAll.devlint``; also the command
  ``devlint.applyAutofix``);
- hover on a finding or on a code in ``# noqa: DLxxx``: the rule's page;
- settings from ``[tool.devlint]`` of the nearest ``pyproject.toml``,
  re-read when one changes (``workspace/didChangeWatchedFiles``, or a saved
  ``pyproject.toml``); excluded files get no diagnostics;
- notebook documents: the code cells are linted as one module as for an
  ``.ipynb`` file, findings published on their cells.

Positions: devlint counts columns in code points; LSP clients count in
UTF-16 code units unless they negotiate otherwise (``positionEncoding``),
so every column is converted with the line's text.

pygls is an optional dependency (``pip install 'devlint[lsp]'``): nothing
else in devlint imports this module.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from devlint import __version__
from devlint.config import Config, ConfigError, load_config
from devlint.diagnostic import Diagnostic, Edit, FileResult

log = logging.getLogger("devlint.server")

#: how long after the last keystroke a changed document is linted
DEBOUNCE_SECONDS = 0.3
SOURCE = "devlint"
FIX_ALL_KIND = "source.fixAll.devlint"
FIX_ALL_COMMAND = "devlint.applyAutofix"
FIX_ALL_TITLE = "Fix all safe devlint problems"
#: the rule pages; the same address SARIF's ``helpUri`` gives
def _docs_url() -> Optional[str]:
    """The rule pages a diagnostic links to: ``docs/rules.md`` of the
    devlint checkout the server runs from, as a ``file:`` URI with the rule's
    anchor; None for an installed package, which ships no docs (the hover
    shows the page itself). devlint has no published site to point at."""
    from pathlib import Path

    page = Path(__file__).resolve().parent.parent / "docs" / "rules.md"
    return page.as_uri() + "#{anchor}" if page.is_file() else None


DOCS_URL = _docs_url()
_NOQA_CODES = re.compile(r"#\s*noqa\s*:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*)", re.I)


# --------------------------------------------------------------------------
# positions: devlint's 1-based code-point columns <-> the client's units


def _units(text: str, encoding: str) -> int:
    if encoding == types.PositionEncodingKind.Utf32:
        return len(text)
    if encoding == types.PositionEncodingKind.Utf8:
        return len(text.encode("utf-8", errors="surrogatepass"))
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def to_client_column(line: str, column: int, encoding: str) -> int:
    """The client's column of 0-based code-point column ``column`` of ``line``."""
    return _units(line[:column], encoding)


def from_client_column(line: str, column: int, encoding: str) -> int:
    """The 0-based code-point column of the client's column ``column``."""
    if encoding == types.PositionEncodingKind.Utf32:
        return min(column, len(line))
    units = 0
    for i, ch in enumerate(line):
        if units >= column:
            return i
        units += _units(ch, encoding)
    return len(line)


def _lines(text: str) -> List[str]:
    # the lines as the engine counts them (\r\n, \r and \n end a line)
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _position(lines: Sequence[str], line: int, col: int, encoding: str) -> types.Position:
    """1-based line, 1-based code-point column -> an LSP position."""
    if line < 1:
        return types.Position(0, 0)
    if line > len(lines):
        return types.Position(len(lines), 0)
    return types.Position(line - 1, to_client_column(lines[line - 1], max(col - 1, 0), encoding))


def _range(lines: Sequence[str], d_line: int, d_col: int, end_line: int, end_col: int, encoding: str) -> types.Range:
    start = _position(lines, d_line, d_col, encoding)
    if end_line < d_line or (end_line == d_line and end_col <= d_col):
        # a finding without an extent: underline to the end of its line
        text = lines[d_line - 1] if 0 < d_line <= len(lines) else ""
        end = types.Position(start.line, max(start.character, _units(text, encoding)))
        return types.Range(start, end)
    return types.Range(start, _position(lines, end_line, end_col, encoding))


def _text_edit(lines: Sequence[str], e: Edit, encoding: str) -> types.TextEdit:
    return types.TextEdit(
        range=types.Range(_position(lines, e.start_line, e.start_col, encoding), _position(lines, e.end_line, e.end_col, encoding)),
        new_text=e.content,
    )


def _whole_document(lines: Sequence[str], new_text: str, encoding: str) -> types.TextEdit:
    """Replace the whole text (its end: the end of its last line)."""
    end = types.Position(len(lines) - 1, _units(lines[-1], encoding))
    return types.TextEdit(range=types.Range(types.Position(0, 0), end), new_text=new_text)


def _minimal_edit(old: str, new: str, encoding: str) -> types.TextEdit:
    """One edit turning ``old`` into ``new``: the span between their common
    prefix and suffix (what a one-line comment change needs)."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[len(old) - 1 - end] == new[len(new) - 1 - end]:
        end += 1
    lines = _lines(old)

    def at(offset: int) -> types.Position:
        before = old[:offset].replace("\r\n", "\n").replace("\r", "\n")
        line = before.count("\n")
        col = len(before) - (before.rfind("\n") + 1)
        return types.Position(line, to_client_column(lines[line], col, encoding))

    return types.TextEdit(types.Range(at(start), at(len(old) - end)), new[start : len(new) - end])


# --------------------------------------------------------------------------
# documents and settings


def uri_to_path(uri: str) -> Optional[str]:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    path = unquote(parsed.path)
    if os.name == "nt" and re.match(r"^/[A-Za-z]:", path):  # pragma: no cover
        path = path[1:]
    return path


@dataclass
class Settings:
    """What linting one file needs: its configuration and rule codes."""

    config: Config
    codes: Tuple[str, ...]
    ignore: Tuple[str, ...]
    excluded: bool


@dataclass
class LintResult:
    version: Optional[int]
    text: str
    result: FileResult
    settings: Optional[Settings] = None
    #: a notebook: cell index (1-based, markdown cells counted) -> cell uri, cell text
    cells: Dict[int, Tuple[str, str]] = field(default_factory=dict)


def _rule_doc(code: str) -> Optional[str]:
    from devlint.rule import all_rules

    rule = all_rules().get(code)
    if rule is None:
        return None
    return rule.documentation()


class DevlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "devlint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        cells=[types.NotebookCellLanguage(language="python")],
                        notebook="jupyter-notebook",
                    )
                ],
                save=True,
            ),
        )
        #: one worker: lints run one at a time, off the event loop
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="devlint-lint")
        self.pending: Dict[str, asyncio.TimerHandle] = {}
        #: uri -> checks of it on their way; uris to check again once they end
        self.running: Dict[str, int] = {}
        self.again: set = set()
        self.results: Dict[str, LintResult] = {}
        #: folder -> its configuration (cleared when a pyproject.toml changes)
        self._configs: Dict[str, Config] = {}
        self._config_errors: set = set()
        #: (cache folder, config key) -> (results file, its mtime, seed) for the project index
        self._seeds: Dict[Tuple[str, str], Tuple[str, Any, list]] = {}
        self._lock = threading.Lock()
        #: (path, config key) -> (content digest, summary, summaries it read): modules summarised here
        self._summaries: Dict[Tuple[str, str], Tuple[str, Optional[dict], Dict[str, str]]] = {}
        #: the event loop (set once the client has initialized)
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        #: checks running on the worker thread
        self.busy = 0
        #: (uri, version, text) -> the edit fixing every safe problem (None: nothing to fix)
        self._fix_all: Dict[str, Tuple[Any, str, Optional[types.WorkspaceEdit]]] = {}

    # -- settings ------------------------------------------------------------
    def encoding(self) -> str:
        try:
            enc = self.workspace.position_encoding
        except Exception:
            enc = None
        return str(getattr(enc, "value", enc) or types.PositionEncodingKind.Utf16.value)

    def _folder_for(self, path: Optional[str]) -> Optional[str]:
        """The workspace folder holding ``path`` (the deepest), else the root."""
        best = None
        try:
            folders = [uri_to_path(f.uri) for f in self.workspace.folders.values()]
            root = self.workspace.root_path
        except Exception:
            folders, root = [], None
        for folder in folders:
            if folder and path and (path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)):
                if best is None or len(folder) > len(best):
                    best = folder
        return best or root

    def settings_for(self, path: Optional[str]) -> Settings:
        """The configuration ``devlint check <path>`` would use, the rule codes
        it enables, the codes ignored for the file and whether the
        configuration excludes it."""
        from devlint.catalog import rule_table
        from devlint.files import excluded_by_config

        folder = self._folder_for(path)
        start = path if path else (folder or os.getcwd())
        key = os.path.dirname(start) if path else start
        with self._lock:
            cfg = self._configs.get(key)
        if cfg is None:
            try:
                cfg = load_config([start])
            except ConfigError as exc:
                message = str(exc)
                if message not in self._config_errors:
                    self._config_errors.add(message)
                    self._notify(f"devlint: {message}; using the default settings until it is fixed", types.MessageType.Error)
                cfg = Config()
            if cfg.source is None and folder:
                # no pyproject.toml with [tool.devlint]: the workspace folder
                # stands for the current folder of a command-line run
                cfg = replace(cfg, root=folder)
            with self._lock:
                self._configs[key] = cfg
        codes = tuple(cfg.enabled_codes(rule_table()))
        if path is None:
            return Settings(cfg, codes, (), False)
        excluded = excluded_by_config(path, tuple(cfg.exclude) + tuple(cfg.extend_exclude), cfg.root)
        return Settings(cfg, codes, cfg.ignored_for(path), excluded)

    def reload_settings(self) -> None:
        with self._lock:
            self._configs.clear()
            self._seeds.clear()
        self._fix_all.clear()
        self._config_errors.clear()

    def _notify(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        """``window/showMessage``, from any thread (sent by the event loop)."""
        self._on_loop(lambda: self.window_show_message(types.ShowMessageParams(type=kind, message=message)), message)

    def _log(self, message: str) -> None:
        """``window/logMessage``, from any thread (sent by the event loop)."""
        self._on_loop(lambda: self.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=message)), message)

    def _on_loop(self, send, message: str) -> None:
        loop = self.loop
        if loop is None or loop.is_closed():
            log.warning(message)
            return
        try:
            if threading.current_thread() is threading.main_thread():
                send()
            else:
                loop.call_soon_threadsafe(send)
        except Exception:  # not connected (a test calling lint_text directly)
            log.warning(message)

    # -- the project index ---------------------------------------------------
    def _seed(self, cfg: Config) -> list:
        """The summaries the last ``devlint check`` stored in the result
        cache for files whose content is still the one summarised (what a
        one-file CLI run seeds its index with); re-read when the cache file
        changes."""
        from devlint.cache import ResultCache, cache_dir

        where = (cache_dir(cfg.root), cfg.cache_key())
        with self._lock:
            known = self._seeds.get(where)
        if known is not None:
            try:
                stamp = os.stat(known[0]).st_mtime_ns
            except OSError:
                stamp = None
            if stamp == known[1]:  # unchanged, or still absent
                return known[2]
        cache = ResultCache(*where)  # reads the results file (and hashes devlint's code for its name)
        try:
            stamp = os.stat(cache.file).st_mtime_ns
        except OSError:
            stamp = None
        # the paths are as the run that stored them named them: relative
        # ones to its current folder, taken to be the project's root
        cache.entries = {p if os.path.isabs(p) else os.path.normpath(os.path.join(cfg.root, p)): e for p, e in cache.entries.items()}
        seed = cache.project_summaries(()) if stamp is not None else []
        with self._lock:
            self._seeds[where] = (cache.file, stamp, seed)
        return seed

    def project_for(self, path: str, text: str, cfg: Config):
        """The file's place in the project, as a one-file CLI run sees it:
        its module name and an index seeded from the cache."""
        from devlint.files import PYTHON_SUFFIXES

        if not path.endswith(PYTHON_SUFFIXES) or not cfg.project:
            return None  # project = false: each file alone, as `check` does
        from devlint.project.imports import read_imports
        from devlint.project.index import ProjectContext, ProjectIndex
        from devlint.project.plan import make_plan

        me = os.path.abspath(path)
        seed = [s for s in self._seed(cfg) if os.path.abspath(s[0]) != me]
        plan = make_plan([path], cfg.source_roots(), seed)
        fp = plan.files.get(path)
        if fp is None:
            return None
        found: List[Tuple[str, str]] = []
        if fp.module is not None:  # the buffer's imports, not the file's on disk
            plan.aliases[fp.module] = read_imports(text, fp.module, fp.is_package).aliases
            found = _add_reexports(plan, fp.module, cfg.source_roots())
        # messages name other files as ``devlint check`` run from the root does
        root = os.path.abspath(cfg.root)
        for name, where in plan.paths.items():
            full = os.path.abspath(where)
            if full.startswith(root.rstrip(os.sep) + os.sep):
                plan.paths[name] = os.path.relpath(full, root)
        index = ProjectIndex(summaries=plan.seed, aliases=plan.aliases, paths=plan.paths)
        # the modules it imports that the cache has no (current) summary of:
        # summarised here, deepest first, as a project run would
        for name, where in reversed(found):
            if name not in index.summaries and where.endswith(PYTHON_SUFFIXES):
                summary = self._summary_of(name, where, index, cfg)
                if summary is not None:
                    index.add(name, summary)
        return ProjectContext(fp.module, fp.is_package, index)

    def _summary_of(self, module: str, path: str, index, cfg: Config) -> Optional[dict]:
        """What ``module`` (the file ``path`` on disk) exports to the files
        importing it, from one check of it against ``index``; remembered
        while its content and the summaries it read are unchanged."""
        from devlint.cache import content_digest
        from devlint.engine import lint_source
        from devlint.project.index import ProjectContext
        from devlint.project.names import is_package_file
        from devlint.source import SourceError, decode_source

        try:
            with open(path, "rb") as fh:
                raw = fh.read(2 * 1024 * 1024 + 1)
        except OSError:
            return None
        digest = content_digest(raw)
        key = (path, cfg.cache_key())
        known = self._summaries.get(key)
        if known is not None and known[0] == digest and all(index.digest_of(m) == d for m, d in known[2].items()):
            return known[1]
        if len(raw) > 2 * 1024 * 1024 or b"\x00" in raw[:8192]:
            return None
        try:
            text = decode_source(raw).text
        except SourceError:
            return None
        ctx = ProjectContext(module, is_package_file(path), index)
        try:
            # no rule runs: the summary only (what `devlint check` reads from
            # a file it follows but does not check)
            result = lint_source(text, path, (), (), project=ctx, summarize=True, exports=("*",))
        except Exception:  # RecursionError, an engine bug: the file stays unknown, as the cache would leave it
            return None
        consulted = dict(index.consulted)
        self._summaries[key] = (digest, result.summary, consulted)
        return result.summary

    # -- linting (on the worker thread) --------------------------------------
    def lint_text(self, uri: str, text: str, fix: bool = False) -> Tuple[FileResult, Settings]:
        """Check (or, ``fix``: fix the safe problems of) one document's text."""
        from devlint.engine import fix_source, lint_source
        from devlint.limits import run_deep

        path = uri_to_path(uri)
        settings = self.settings_for(path)
        name = path or uri
        if settings.excluded:
            return FileResult(path=name, skipped=True, fixed_text=text if fix else None), settings
        project = None
        if path is not None:
            try:
                project = self.project_for(path, text, settings.config)
            except Exception as exc:  # the index is a bonus: never lose the file's own findings
                self._log(f"devlint: project index unavailable for {path}: {type(exc).__name__}: {exc}")
        try:
            if fix:
                result = run_deep(fix_source, text, name, settings.codes, unsafe=False, ignore=settings.ignore, project=project)
            else:
                result = run_deep(lint_source, text, name, settings.codes, settings.ignore, project=project)
        except RecursionError:
            result = FileResult(path=name, error="skipped: too deeply nested to analyse")
        except Exception as exc:
            result = FileResult(path=name, internal_errors=[f"internal error ({type(exc).__name__}: {exc}); please report this as a devlint bug"])
        return result, settings

    def lint_cells(self, notebook_uri: str, cells: Sequence[Tuple[int, str, str]], fix: bool = False):
        """Check the code cells of a notebook as ``devlint check x.ipynb``
        does. ``cells``: (1-based index among all cells, uri, text)."""
        from devlint.engine import fix_source
        from devlint.notebook import Cell, Notebook, _syntax_errors, join_cells, lint_cells, mask_ipython, split_cells, unmask

        path = uri_to_path(notebook_uri)
        settings = self.settings_for(path)
        name = path or notebook_uri
        code_cells = []
        for index, _uri, text in cells:
            masked = mask_ipython(text)
            if masked is not None:
                code_cells.append(Cell(index, text, masked[0], masked[1], False))
        if settings.excluded or not code_cells:
            return FileResult(path=name, skipped=True), settings, {}
        nb = Notebook(data={}, text="", cells=code_cells, style=None, crlf=False)
        if not fix:
            result, _ = lint_cells(nb, name, settings.codes, settings.ignore)
            return result, settings, {}
        joined = join_cells(code_cells)
        fixed = fix_source(joined.text, name, settings.codes, unsafe=False, ignore=settings.ignore)
        if any(d.code == "DL000" for d in fixed.diagnostics):
            # as `devlint fix` does: the cells that parse are fixed, the others left alone
            code_cells, _errors = _syntax_errors(code_cells, name)
            joined = join_cells(code_cells)
            fixed = fix_source(joined.text, name, settings.codes, unsafe=False, ignore=settings.ignore)
        new = split_cells(fixed.fixed_text or joined.text, code_cells) or {}
        out = {}
        for cell in code_cells:
            if cell.index in new and new[cell.index] != cell.masked:
                source = unmask(new[cell.index], cell.masks)
                if source is not None and source != cell.source:
                    out[cell.index] = source
        return fixed, settings, out

    # -- publishing ------------------------------------------------------------
    def to_lsp(self, d: Diagnostic, text: str, root: Optional[str] = None) -> types.Diagnostic:
        lines = _lines(text)
        enc = self.encoding()
        severity = types.DiagnosticSeverity.Error if d.code == "DL000" else types.DiagnosticSeverity.Warning
        message = d.message
        if d.fix is not None and not d.fix.is_safe:
            message += " (unsafe fix available)"
        related = []
        for rpath, rline, what in d.related:
            related.append(
                types.DiagnosticRelatedInformation(
                    location=types.Location(
                        uri=_path_to_uri(rpath if os.path.isabs(rpath) or root is None else os.path.join(root, rpath)),
                        range=types.Range(types.Position(max(rline - 1, 0), 0), types.Position(max(rline - 1, 0), 0)),
                    ),
                    message=what,
                )
            )
        return types.Diagnostic(
            range=_range(lines, d.line, d.col, d.end_line, d.end_col, enc),
            message=message,
            severity=severity,
            code=d.code,
            code_description=(
                types.CodeDescription(href=DOCS_URL.format(anchor=d.code.lower()))
                if d.code != "DL000" and DOCS_URL else None
            ),
            source=SOURCE,
            tags=[types.DiagnosticTag.Unnecessary] if d.code == "DL100" else None,
            related_information=related or None,
            data={"name": d.name, "fixable": d.fix is not None},
        )

    def publish(self, uri: str, lint: LintResult) -> None:
        for problem in ([lint.result.error] if lint.result.error and not lint.result.error.startswith("skipped") else []) + lint.result.internal_errors:
            self._log(f"devlint: {uri}: {problem}")
        root = lint.settings.config.root if lint.settings is not None else None
        if lint.cells:
            by_cell: Dict[int, List[types.Diagnostic]] = {i: [] for i in lint.cells}
            for d in lint.result.diagnostics:
                if d.cell in lint.cells:
                    by_cell[d.cell].append(self.to_lsp(d, lint.cells[d.cell][1], root))
            for index, (cell_uri, _text) in lint.cells.items():
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell_uri, diagnostics=by_cell[index]))
            return
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri, version=lint.version, diagnostics=[self.to_lsp(d, lint.text, root) for d in lint.result.diagnostics]
            )
        )

    def schedule(self, uri: str, delay: float = DEBOUNCE_SECONDS) -> None:
        """Lint ``uri`` ``delay`` seconds from now, unless it changes again
        before (then the later change schedules it)."""
        loop = asyncio.get_running_loop()
        old = self.pending.pop(uri, None)
        if old is not None:
            old.cancel()
        self.pending[uri] = loop.call_later(delay, lambda: asyncio.ensure_future(self._scheduled(uri)))

    async def _scheduled(self, uri: str) -> None:
        """A debounced check: while one of the document is running, at most
        one more waits (for the text as it is when that one ends), rather
        than a queue of checks of texts already out of date."""
        self.pending.pop(uri, None)
        if uri in self.running:
            self.again.add(uri)
            return
        await self.lint_now(uri)

    def recheck_all(self, but: Optional[str] = None) -> None:
        """Check every open document (``but`` one) again, soon."""
        for uri in list(self.workspace.text_documents):
            if uri != but and not uri.endswith("pyproject.toml") and self.notebook_of(uri) is None:
                self.schedule(uri, 0)
        for uri in list(self.workspace.notebook_documents):
            if uri != but:
                self.schedule(uri, 0)

    def _snapshot(self, uri: str):
        """(version, text, notebook cells or None) of an open document now."""
        nb = self.workspace.get_notebook_document(notebook_uri=uri) if uri in self.workspace.notebook_documents else None
        if nb is not None:
            cells = []
            for i, cell in enumerate(nb.cells, start=1):
                if cell.kind != types.NotebookCellKind.Code:
                    continue
                doc = self.workspace.text_documents.get(cell.document)
                if doc is None or (doc.language_id and doc.language_id != "python"):
                    continue
                cells.append((i, cell.document, doc.source))
            return nb.version, "", cells
        doc = self.workspace.text_documents.get(uri)
        if doc is None or not _is_python(uri, doc.language_id):
            return None
        return doc.version, doc.source, None

    async def off_loop(self, fn, *args):
        """``fn(*args)`` on the worker thread (one check at a time)."""

        def run():
            with self._lock:
                self.busy += 1
            try:
                return fn(*args)
            finally:
                with self._lock:
                    self.busy -= 1

        return await asyncio.get_running_loop().run_in_executor(self.executor, run)

    async def lint_now(self, uri: str) -> Optional[LintResult]:
        """Lint the document as it is now, on the worker thread; publish the
        result unless the document changed meanwhile (a newer lint is on its
        way) or was closed."""
        self.pending.pop(uri, None)
        snap = self._snapshot(uri)
        if snap is None:
            return None
        version, text, cells = snap
        self.running[uri] = self.running.get(uri, 0) + 1
        try:
            if cells is not None:
                result, settings, _ = await self.off_loop(self.lint_cells, uri, cells)
                lint = LintResult(version, "", result, settings, {i: (u, t) for i, u, t in cells})
            else:
                result, settings = await self.off_loop(self.lint_text, uri, text)
                lint = LintResult(version, text, result, settings)
        finally:
            self.running[uri] -= 1
            if not self.running[uri]:
                del self.running[uri]
                if uri in self.again:
                    self.again.discard(uri)
                    self.schedule(uri, 0)
        now = self._snapshot(uri)
        if now != snap:
            return None  # stale: the document changed or closed while it was linted
        self.results[uri] = lint
        self.publish(uri, lint)
        return lint

    async def current(self, uri: str) -> Optional[LintResult]:
        """The findings for the document as it is now (linting it when the
        last result is older)."""
        snap = self._snapshot(uri)
        if snap is None:
            return None
        known = self.results.get(uri)
        if known is not None and known.version == snap[0] and known.text == snap[1]:
            return known
        pending = self.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        return await self.lint_now(uri)

    def forget(self, uri: str) -> None:
        pending = self.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self.results.pop(uri, None)
        self._fix_all.pop(uri, None)

    # -- notebooks: a cell uri -> its notebook ----------------------------------
    def notebook_of(self, cell_uri: str) -> Optional[Tuple[str, int]]:
        """(notebook uri, 1-based cell index) of a cell document."""
        for nb_uri, nb in self.workspace.notebook_documents.items():
            for i, cell in enumerate(nb.cells, start=1):
                if cell.document == cell_uri:
                    return nb_uri, i
        return None


#: at most this many modules' imports are read to follow re-exports
_MAX_REEXPORT_FILES = 64


def _add_reexports(plan, module: str, roots: Sequence[str]) -> List[Tuple[str, str]]:
    """The imports (aliases) of the project modules the file imports through,
    transitively, read from their text on disk (no parse), where the cache
    has no summary of them: a package ``__init__.py`` that only re-exports
    (``from .grid import create_grid``) stores none, and without its aliases
    ``from .utils import create_grid`` would not resolve. A whole-project
    ``devlint check`` reads them from every file of the run. Returns the
    (module, path) of every project module the walk met, in the order met."""
    from devlint.project.imports import read_imports
    from devlint.project.names import is_package_file, module_name

    todo = list(plan.aliases.get(module, {}).values())
    tried: set = {module}
    found: List[Tuple[str, str]] = []
    while todo and len(found) < _MAX_REEXPORT_FILES:
        parts = todo.pop().split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name in tried:
                continue
            tried.add(name)
            if name in plan.aliases:  # a module the cache summarised: its imports are known
                todo.extend(plan.aliases[name].values())
                continue
            for root in roots:
                base = os.path.join(root, *name.split("."))
                for candidate in (base + ".py", os.path.join(base, "__init__.py")):
                    if not os.path.isfile(candidate) or module_name(candidate, roots) != name:
                        continue
                    try:
                        with open(candidate, "rb") as fh:
                            source = fh.read(2 * 1024 * 1024).decode("utf-8", errors="replace")
                    except OSError:
                        continue
                    aliases = read_imports(source, name, is_package_file(candidate)).aliases
                    plan.aliases[name] = aliases
                    plan.paths.setdefault(name, candidate)
                    found.append((name, candidate))
                    todo.extend(aliases.values())
                    break
                if name in plan.aliases:
                    break
    return found


def _is_python(uri: str, language_id: Optional[str]) -> bool:
    """Whether to check a text document: Python by its language, or by its
    name when the client gives no language (a client may send every file)."""
    from devlint.files import PYTHON_SUFFIXES

    if language_id:
        return language_id == "python"
    return urlparse(uri).path.endswith(PYTHON_SUFFIXES)


def _path_to_uri(path: str) -> str:
    from pathlib import Path

    try:
        return Path(os.path.abspath(path)).as_uri()
    except ValueError:  # pragma: no cover
        return path


# --------------------------------------------------------------------------
# the features


def _intersects(r: types.Range, start: types.Position, end: types.Position) -> bool:
    def key(p: types.Position) -> Tuple[int, int]:
        return (p.line, p.character)

    return key(r.start) <= key(end) and key(start) <= key(r.end)


def _diagnostics_for(server: DevlintServer, lint: LintResult, uri: str) -> Tuple[List[Diagnostic], str]:
    """The findings of one document (a cell: its own), and its text."""
    if not lint.cells:
        return list(lint.result.diagnostics), lint.text
    where = server.notebook_of(uri)
    if where is None:
        return [], ""
    _nb, index = where
    return [d for d in lint.result.diagnostics if d.cell == index], lint.cells.get(index, ("", ""))[1]


def _fix_actions(server: DevlintServer, uri: str, findings: Sequence[Diagnostic], text: str) -> List[types.CodeAction]:
    enc = server.encoding()
    lines = _lines(text)
    actions = []
    for d in findings:
        if d.fix is None or not d.fix.edits:
            continue
        title = d.fix.description or f"Fix {d.code}"
        if not d.fix.is_safe:
            title += " (unsafe)"
        actions.append(
            types.CodeAction(
                title=f"{d.code}: {title}",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[server.to_lsp(d, text)],
                is_preferred=d.fix.is_safe,
                edit=types.WorkspaceEdit(changes={uri: [_text_edit(lines, e, enc) for e in d.fix.edits]}),
            )
        )
    return actions


def _noqa_actions(server: DevlintServer, uri: str, findings: Sequence[Diagnostic], text: str, masked: Optional[str] = None) -> List[types.CodeAction]:
    """"Disable DLxxx for this line": ``# noqa: DLxxx`` added to the line the
    finding is reported on, or merged into a ``# noqa`` already there
    (:func:`devlint.noqa.add_noqa`, what ``check --add-noqa`` writes)."""
    from devlint.noqa import add_noqa

    actions = []
    seen = set()
    base = masked if masked is not None else text
    for d in findings:
        if d.code in ("DL000", "DL100") or (d.code, d.line) in seen:
            continue
        seen.add((d.code, d.line))
        try:
            added = add_noqa(base, [d])
        except Exception:
            continue
        if not added.added or added.text == base:
            continue
        actions.append(
            types.CodeAction(
                title=f"Disable {d.code} for this line",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[server.to_lsp(d, text)],
                edit=types.WorkspaceEdit(changes={uri: [_minimal_edit(base, added.text, server.encoding())]}),
            )
        )
    return actions


async def _fix_all_edit(server: DevlintServer, uri: str) -> Optional[types.WorkspaceEdit]:
    """The edit applying every safe fix of the document (``devlint fix
    --apply``), None when there is nothing to fix."""
    where = server.notebook_of(uri)
    if where is not None:  # a cell: its notebook is fixed as a whole
        uri = where[0]
    snap = server._snapshot(uri)
    if snap is None:
        return None
    version, text, cells = snap
    stamp = repr(cells) if cells is not None else text
    known = server._fix_all.get(uri)
    if known is not None and known[0] == version and known[1] == stamp:
        return known[2]  # fixing is costly: once per version of the text
    edit: Optional[types.WorkspaceEdit] = None
    if cells is not None:
        _fixed, _settings, new = await server.off_loop(server.lint_cells, uri, cells, True)
        changes = {}
        for index, cell_uri, cell_text in cells:
            if index in new:
                changes[cell_uri] = [_whole_document(_lines(cell_text), new[index], server.encoding())]
        edit = types.WorkspaceEdit(changes=changes) if changes else None
    else:
        result, _settings = await server.off_loop(server.lint_text, uri, text, True)
        if result.fixed_text is not None and result.fixed_text != text and not result.error:
            edit = types.WorkspaceEdit(
                document_changes=[
                    types.TextDocumentEdit(
                        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                        edits=[_whole_document(_lines(text), result.fixed_text, server.encoding())],
                    )
                ]
            )
    server._fix_all[uri] = (version, stamp, edit)
    return edit


def _resolves_edits(server: DevlintServer) -> bool:
    """Whether the client fills in a code action's edit by
    ``codeAction/resolve`` (then fixing everything waits until it asks)."""
    try:
        support = server.client_capabilities.text_document.code_action.resolve_support
    except AttributeError:
        return False
    return support is not None and "edit" in (support.properties or [])


def _wants(only: Optional[Sequence[str]], kind: str) -> bool:
    if not only:
        return True
    return any(kind == o or kind.startswith(o + ".") for o in only)


def _hover_code(server: DevlintServer, lint: Optional[LintResult], uri: str, text: str, pos: types.Position) -> Optional[str]:
    """The rule code under ``pos``: in a ``# noqa: DLxxx`` comment, else of a
    finding whose range holds it."""
    lines = _lines(text)
    if pos.line < len(lines):
        line = lines[pos.line]
        col = from_client_column(line, pos.character, server.encoding())
        for m in _NOQA_CODES.finditer(line):
            for c in re.finditer(r"[A-Za-z]+[0-9]+", m.group("codes")):
                start, end = m.start("codes") + c.start(), m.start("codes") + c.end()
                if start <= col <= end:
                    return c.group(0).upper()
    if lint is None:
        return None
    findings, ftext = _diagnostics_for(server, lint, uri)
    for d in findings:
        r = server.to_lsp(d, ftext).range
        if _intersects(r, pos, pos):
            return d.code
    return None


def _rule_markdown(code: str) -> Optional[str]:
    doc = _rule_doc(code)
    if doc is None:
        for known in _all_codes():
            if known.startswith(code):  # a prefix in a noqa comment (DL00)
                doc = _rule_doc(known)
                code = known
                break
    if doc is None:
        return None
    title, _, body = doc.partition("\n")
    link = f" ([docs]({DOCS_URL.format(anchor=code.lower())}))" if DOCS_URL else ""
    return f"**{title.strip()}**{link}\n\n{body.strip()}"


def _all_codes() -> List[str]:
    from devlint.rule import all_rules

    return list(all_rules())


def build_server() -> DevlintServer:
    server = DevlintServer()

    @server.feature(types.INITIALIZED)
    def initialized(ls: DevlintServer, params: types.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()
        caps = ls.client_capabilities
        watched = caps.workspace.did_change_watched_files if caps.workspace else None
        if watched is not None and watched.dynamic_registration:
            ls.client_register_capability(
                types.RegistrationParams(
                    registrations=[
                        types.Registration(
                            id="devlint-pyproject",
                            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                            register_options=types.DidChangeWatchedFilesRegistrationOptions(
                                watchers=[
                                    types.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                                    # a `devlint check` stored new project summaries
                                    types.FileSystemWatcher(glob_pattern="**/.devlint_cache/results-*.json"),
                                ]
                            ),
                        )
                    ]
                )
            )

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: DevlintServer, params: types.DidOpenTextDocumentParams) -> None:
        if ls.notebook_of(params.text_document.uri) is not None:
            return  # a notebook cell: linted with its notebook
        if params.text_document.uri.endswith("pyproject.toml"):
            return
        await ls.lint_now(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: DevlintServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        where = ls.notebook_of(uri)
        if uri.endswith("pyproject.toml"):
            return
        ls.schedule(where[0] if where else uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: DevlintServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri.endswith("pyproject.toml"):
            ls.reload_settings()
            ls.recheck_all()
            return
        with ls._lock:
            ls._seeds.clear()  # a saved file may change what the cache still vouches for
        await ls.lint_now(uri)
        ls.recheck_all(but=uri)  # files importing it may see it differently now

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DevlintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        if ls.notebook_of(uri) is not None:
            return
        ls.forget(uri)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    async def notebook_open(ls: DevlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        await ls.lint_now(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: DevlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    async def notebook_save(ls: DevlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        await ls.lint_now(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: DevlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.forget(params.notebook_document.uri)
        for cell in params.cell_text_documents:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: DevlintServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(c.uri.endswith("pyproject.toml") for c in params.changes):
            ls.reload_settings()
            ls.recheck_all()
        elif any("/.devlint_cache/" in c.uri for c in params.changes):
            with ls._lock:
                ls._seeds.clear()
            ls.recheck_all()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND],
            resolve_provider=True,
        ),
    )
    async def code_action(ls: DevlintServer, params: types.CodeActionParams) -> List[types.CodeAction]:
        uri = params.text_document.uri
        where = ls.notebook_of(uri)
        lint = await ls.current(where[0] if where else uri)
        if lint is None:
            return []
        only = [str(getattr(k, "value", k)) for k in params.context.only] if params.context.only else None
        findings, text = _diagnostics_for(ls, lint, uri)
        actions: List[types.CodeAction] = []
        if _wants(only, types.CodeActionKind.QuickFix.value):
            here = [d for d in findings if _intersects(ls.to_lsp(d, text).range, params.range.start, params.range.end)]
            masked = None
            if lint.cells and where is not None:
                from devlint.notebook import mask_ipython

                m = mask_ipython(text)
                masked = m[0] if m else None
            actions += _fix_actions(ls, uri, here, text)
            actions += _noqa_actions(ls, uri, here, text, masked)
        if _wants(only, FIX_ALL_KIND) and any(d.fix is not None and d.fix.is_safe for d in lint.result.diagnostics):
            if _resolves_edits(ls):
                actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL_KIND, data={"uri": uri}))
            else:
                edit = await _fix_all_edit(ls, uri)
                if edit is not None:
                    actions.append(types.CodeAction(title=FIX_ALL_TITLE, kind=FIX_ALL_KIND, edit=edit))
        return actions

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve_code_action(ls: DevlintServer, action: types.CodeAction) -> types.CodeAction:
        data = action.data if isinstance(action.data, dict) else {}
        if str(getattr(action.kind, "value", action.kind)) == FIX_ALL_KIND and isinstance(data.get("uri"), str) and action.edit is None:
            action.edit = await _fix_all_edit(ls, data["uri"]) or types.WorkspaceEdit(changes={})
        return action

    @server.command(FIX_ALL_COMMAND)
    async def apply_autofix(ls: DevlintServer, *args: Any) -> None:
        """``devlint.applyAutofix`` with a document uri (or ``{"uri": ...}``):
        the safe fixes, sent back as ``workspace/applyEdit``."""
        uri = args[0] if args else None
        if isinstance(uri, dict):
            uri = uri.get("uri")
        if not isinstance(uri, str):
            raise ValueError(f"{FIX_ALL_COMMAND} takes the uri of a document")
        edit = await _fix_all_edit(ls, uri)
        if edit is not None:
            await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label="devlint: fix all safe problems"))
        return None

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: DevlintServer, params: types.HoverParams) -> Optional[types.Hover]:
        uri = params.text_document.uri
        where = ls.notebook_of(uri)
        lint = await ls.current(where[0] if where else uri)
        doc = ls.workspace.text_documents.get(uri)
        if doc is None:
            return None
        code = _hover_code(ls, lint, uri, doc.source, params.position)
        if code is None:
            return None
        markdown = _rule_markdown(code)
        if markdown is None:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=markdown))

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: DevlintServer, *args) -> None:
        for handle in ls.pending.values():
            handle.cancel()
        ls.pending.clear()
        ls.executor.shutdown(wait=False, cancel_futures=True)

    @server.feature(types.EXIT)
    def exit_(ls: DevlintServer, *args) -> None:
        if ls.busy:
            # a check still running on the worker thread would hold up the
            # interpreter's exit (it joins the thread) until it ends: its
            # result is of no use now, and nothing is left to write
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(0 if ls.protocol._shutdown else 1)

    return server


def serve() -> None:
    """Run the server on stdin / stdout until the client says exit."""
    logging.basicConfig(level=logging.WARNING, format="devlint server: %(levelname)s %(message)s")
    build_server().start_io()
