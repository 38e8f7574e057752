"""The engine: source text -> one parse -> shared facts -> every enabled rule in
one traversal -> diagnostics with positions, suppressions applied; and the
fixer that applies non-overlapping fixes in rounds until nothing changes."""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple, Type

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from devlint.diagnostic import Diagnostic, Edit, FileResult
from devlint.facts.classes import Classes
from devlint.facts.store import FactStore
from devlint.limits import SCAN_FIRST_BYTES, hostile
from devlint.noqa import UNUSED_NOQA, remove_unused_noqa, unused_noqa
from devlint.positions import positions_of
from devlint.rule import Context, Rule, all_rules
from devlint.source import SourceError, decode_source
from devlint.suppress import Suppressions, parse_suppressions
from devlint.walk import skips_trivia, walk

MAX_FIX_ROUNDS = 20
SYNTAX_ERROR = ("DL000", "syntax-error")


class InternalError(Exception):
    """A bug in devlint (a rule that crashed, a fix that does not parse)."""


def select_rules(codes: Optional[Sequence[str]] = None) -> List[Type[Rule]]:
    rules = all_rules()
    if codes is None:
        return [r for r in rules.values() if r.enabled_by_default]
    return [rules[c] for c in codes if c in rules]


class _Dispatcher(cst.CSTVisitor):
    """Runs every rule's visit/leave methods in one traversal, keeping the
    shared :class:`Context` (class and function stacks) up to date around
    them. A rule that raises is switched off for the rest of the file and
    reported as an internal error; the other rules go on."""

    def __init__(self, context: Context, rules: List[Rule]) -> None:
        self.context = context
        self.rules = rules
        self.errors: List[str] = []
        self._visit: Dict[str, List[Tuple[Rule, Callable]]] = {}
        self._leave: Dict[str, List[Tuple[Rule, Callable]]] = {}
        self._dead: Set[int] = set()
        # the walk leaves whitespace, brackets and operator tokens out unless
        # some rule has a hook for one of them
        self.WALKS_TRIVIA = not all(skips_trivia(type(r)) for r in rules)

    def _methods(self, table: Dict[str, List[Tuple[Rule, Callable]]], prefix: str, node_type: str):
        methods = table.get(node_type)
        if methods is None:
            methods = []
            for rule in self.rules:
                m = getattr(rule, f"{prefix}_{node_type}", None)
                if m is not None and getattr(type(rule), f"{prefix}_{node_type}", None) is not getattr(
                    cst.CSTVisitor, f"{prefix}_{node_type}", None
                ):
                    methods.append((rule, m))
            table[node_type] = methods
        return methods

    def _call(self, rule: Rule, method: Callable, node: cst.CSTNode) -> None:
        if id(rule) in self._dead:
            return
        try:
            method(node)
        except Exception as exc:  # a rule bug must not stop the other rules
            self._dead.add(id(rule))
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.errors.append(
                f"internal error in {rule.code} ({type(exc).__name__}: {exc}) at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}; "
                "please report this as a devlint bug"
            )

    def on_visit(self, node: cst.CSTNode) -> bool:
        ctx = self.context
        t = type(node)  # exact type tests: isinstance on libcst nodes is an ABC check
        if t is cst.ClassDef:
            # facts exist for classes at module level (or under if/try there)
            top = not ctx.function_stack and not ctx.class_stack
            ctx.class_stack.append(ctx.facts.classes.get(node.name.value) if top else None)
            ctx._class_depths.append(len(ctx.function_stack))
        elif t is cst.FunctionDef:
            ctx.function_stack.append(node)
        for rule, method in self._methods(self._visit, "visit", type(node).__name__):
            self._call(rule, method, node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        for rule, method in self._methods(self._leave, "leave", type(original_node).__name__):
            self._call(rule, method, original_node)
        ctx = self.context
        t = type(original_node)
        if t is cst.ClassDef:
            ctx.class_stack.pop()
            ctx._class_depths.pop()
        elif t is cst.FunctionDef:
            ctx.function_stack.pop()


_MODULE_ONLY: Dict[type, bool] = {}


def _module_only(rule_type: type) -> bool:
    """Whether a rule has no visit/leave hooks but the module's."""
    found = _MODULE_ONLY.get(rule_type)
    if found is None:
        found = not any(
            (name.startswith(("visit_", "leave_")) and name not in ("visit_Module", "leave_Module"))
            for klass in rule_type.__mro__
            if not klass.__module__.startswith("libcst")
            for name in vars(klass)
        )
        _MODULE_ONLY[rule_type] = found
    return found


def _token_filter(text: str, rules: Sequence[Type[Rule]], project=None) -> List[Type[Rule]]:
    """The rules one of whose tokens the text holds; in a project run also
    those with ``project_keys`` when the file imports from the project (a
    helper or a base class of another module may be what the rule needs)."""
    out = []
    for r in rules:
        if any(tok in text for tok in r.tokens):
            out.append(r)
        elif project is not None and r.project_keys and project.index.imports_project(project.module):
            out.append(r)  # the scan's candidate hook decides, with the index
    return out


def _scan_filter(text: str, rules: List[Type[Rule]], project=None, keep: Optional[list] = None) -> List[Type[Rule]]:
    """The rules that may fire according to the ``ast`` candidate scan
    (:mod:`devlint.scan`); all of them when no rule has a hook or CPython
    cannot parse the file. A hook that raises counts as a candidate.
    ``project``: the file's place in a project run; the names it imports
    from the project's modules may be modules (the scan cannot see them)."""
    if not any(r.candidate.__func__ is not Rule.candidate.__func__ for r in rules):  # type: ignore[attr-defined]
        return rules
    from devlint.scan import scan_source

    summary = scan_source(text)
    if summary is None:
        return rules
    if keep is not None:
        keep.append(summary)  # the project summary reuses it
    if project is not None:
        summary.project_names = project.index.project_names(summary.imports, project.module, project.is_package)
        found = project.index.helpers_by_key(summary.imports, project.module, project.is_package,
                                             ("returns", "first_parameter", "wraps", "loader", "loads"))
        summary.cpu_helpers = found["returns"]
        summary.parameter_helpers = found["first_parameter"]
        summary.wrap_helpers = found["wraps"]
        summary.loader_helpers = found["loader"]
        summary.load_helpers = found["loads"]
        summary.parameter_properties = project.index.parameter_properties(summary.imports, project.module, project.is_package)
        summary.record_classes |= project.index.record_classes(summary.imports, project.module, project.is_package)
    out = []
    for r in rules:
        try:
            if r.candidate(summary):
                out.append(r)
        except Exception:  # a hook bug must never drop a finding
            out.append(r)
    return out


@dataclass
class Analysis:
    """One parse of one file with its facts and raw diagnostics (nodes kept)."""

    module: cst.Module
    store: FactStore
    diagnostics: List[Diagnostic]
    errors: List[str]


def analyse(module: cst.Module, path: str, rules: Sequence[Type[Rule]], project=None, exports: Sequence[str] = ()) -> Analysis:
    # the engine reads the classes itself (the class stack); everything
    # else is built only if a rule that declared it asks (or, for the
    # functions other files import, the project summary)
    store = FactStore(module, [Classes, *(p for r in rules for p in r.requires), *_summary_providers(exports)], project)
    context = Context(store, path)
    instances = [r(context) for r in rules]
    dispatcher = _Dispatcher(context, instances)
    if all(_module_only(type(r)) for r in instances):
        # rules that ask the facts once for the whole file (DL001 asks the
        # device flow): no traversal, only their module hooks
        dispatcher.on_visit(module)
        dispatcher.on_leave(module)
    else:
        walk(module, dispatcher)
    diagnostics = [d for r in instances for d in r.diagnostics]
    return Analysis(module, store, diagnostics, dispatcher.errors)


def _positions(module: cst.Module, diagnostics: List[Diagnostic], lines: List[str], text: str) -> None:
    if not diagnostics:
        return
    wanted = [d.node for d in diagnostics if d.node is not None]
    wanted += [old for d in diagnostics if d.fix is not None for old, _ in d.fix.replacements]
    positions = positions_of(module, wanted, text)
    for d in diagnostics:
        pos = positions.get(d.node) if d.node is not None else None
        if pos is not None:
            d.line, d.col = pos.start.line, pos.start.column + 1
            d.end_line, d.end_col = pos.end.line, pos.end.column + 1
        if 0 < d.line <= len(lines):
            d.source_line = lines[d.line - 1]
        if d.fix is not None:
            edits = []
            for old, new in d.fix.replacements:
                p = positions.get(old)
                if p is None:
                    continue
                if isinstance(new, cst.RemovalSentinel):
                    content = ""
                elif isinstance(new, cst.FlattenSentinel):  # one statement becomes several
                    content = "".join(module.code_for_node(n) for n in new.nodes)
                    # the range of a statement stops before its line break
                    if content.endswith("\n") and module.code_for_node(old).endswith("\n"):
                        content = content[:-1]
                else:
                    content = module.code_for_node(new)
                edits.append(Edit(p.start.line, p.start.column + 1, p.end.line, p.end.column + 1, content))
            d.fix.edits = edits


def parse(text: str) -> cst.Module:
    return cst.parse_module(text)


def _python_syntax_error(text: str, path: str) -> Optional[Tuple[int, int, str]]:
    """(line, column, message) of the syntax error the running Python finds
    in ``text``, or None if it finds none. Compiles to an AST only: nothing
    is executed."""
    import ast

    try:
        _compile_quietly(text, path, ast.PyCF_ONLY_AST)
    except SyntaxError as exc:
        return max(exc.lineno or 1, 1), max(exc.offset or 1, 1), f"{type(exc).__name__}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError, OverflowError):
        return None
    return None


def _syntax_error(path: str, exc: cst.ParserSyntaxError, lines: List[str], text: Optional[str] = None) -> Diagnostic:
    # libcst's native parser reports positions a token or a line late and
    # lists every token it expected; the interpreter's own message is the
    # one users know (and the line is right).
    python = _python_syntax_error(text, path) if text is not None else None
    if python is not None:
        line, col, message = python
    else:
        line, col = max(exc.raw_line, 1), exc.raw_column + 1
        message = "SyntaxError: " + " ".join(str(exc.message).split())
        if text is not None:  # Python accepts it: newer syntax than libcst knows
            message = f"devlint's parser cannot read this (Python {sys.version_info[0]}.{sys.version_info[1]} can): {message}"
    d = Diagnostic(
        code=SYNTAX_ERROR[0],
        name=SYNTAX_ERROR[1],
        message=message,
        path=path,
        line=line,
        col=col,
        end_line=line,
        end_col=col,
    )
    if line <= len(lines):
        d.source_line = lines[line - 1]
    return d


def lint_source(
    source: "str | bytes",
    path: str = "<stdin>",
    codes: Optional[Sequence[str]] = None,
    ignore: Sequence[str] = (),
    scan: bool = True,
    suppress: bool = True,
    project=None,
    summarize: bool = False,
    exports: Sequence[str] = (),
) -> FileResult:
    """Check one file's source. ``codes``: the enabled rule codes (default:
    the rules enabled by default); ``ignore``: codes or prefixes ignored for
    this file; ``scan``: skip rules the ``ast`` candidate scan rules out
    (off only to test that the scan drops nothing); ``suppress``: apply
    ``# noqa`` comments (off for a caller with its own, like flake8).
    ``project``: the file's :class:`~devlint.project.index.ProjectContext`
    in a project run (its imports resolve through the index; the result
    carries what it consulted); ``summarize``: also export the file's
    summary (other files of the project import it), parsing it for that
    alone when no rule needs it; ``exports``: the names other files import
    from it, whose function summaries it exports ("*": any function)."""
    result = FileResult(path=path)
    try:
        text = decode_source(source).text if isinstance(source, bytes) else source
    except SourceError as exc:
        result.error = str(exc)
        return result
    rules = [r for r in select_rules(codes) if not any(r.code.startswith(i) for i in ignore)]
    ran = {r.code for r in rules}  # rules filtered out below ran too: they cannot fire
    if project is not None:
        project.index.consulted = {}
    rules = _token_filter(text, rules, project)
    # the hostile-input pre-scan runs before libcst's parse; before CPython's
    # too, unless the file is small enough for CPython's own limits
    early = bool(rules) and (not scan or len(text) > SCAN_FIRST_BYTES)
    reason = hostile(text) if early else None
    if reason is not None:
        result.error = f"skipped: {reason}"
        return result
    scanned: list = []
    if rules and scan:
        rules = _scan_filter(text, rules, project, scanned)
    if not rules:
        result.skipped = True
        if summarize and project is not None and project.module and ("class" in text or exports) and not hostile(text):
            _summary_only(result, text, project, exports, scanned[0] if scanned else None)
        return result
    reason = hostile(text) if not early else None
    if reason is not None:
        result.error = f"skipped: {reason}"
        return result
    lines = _source_lines(text)
    try:
        module = parse(text)
    except cst.ParserSyntaxError as exc:
        result.diagnostics.append(_syntax_error(path, exc, lines, text))
        return result
    except (RecursionError, MemoryError) as exc:
        result.error = f"skipped: too deeply nested or too large to parse ({type(exc).__name__})"
        return result
    try:
        analysis = analyse(module, path, rules, project, exports)
        if project is not None:
            _export(result, analysis.store, project, summarize, text, exports, scanned[0] if scanned else None)
    except RecursionError:
        result.error = "skipped: too deeply nested to analyse"
        return result
    _report(result, text, path, module, analysis, ran, lines, suppress)
    return result


def _absolute(name: str, project) -> Optional[str]:
    from devlint.project.names import absolute

    return absolute(name, project.module, project.is_package)


def _summary_providers(exports: Sequence[str]) -> list:
    if not exports:
        return []
    from devlint.facts.flow import Flow
    from devlint.facts.scripts import Scripts
    from devlint.facts.training import Training

    return [Flow, Scripts, Training]


def _export(result: FileResult, store: FactStore, project, summarize: bool, text: str, exports: Sequence[str] = (),
            scan=None) -> None:
    """A project run: the file's summary (when others import it) and what
    its check read of other files' summaries."""
    from devlint.project.summary import export, function_summaries

    facts = store[Classes]
    if summarize and project.module:
        result.summary = export(facts, project.module, lambda n: project.index.absolute_name(n, project.module), text,
                                store.module)
        if exports:
            result.summary["functions"] = function_summaries(store, exports, text, scan)
        _keep_aliases(result, project)
    result.consulted = dict(sorted(project.index.consulted.items()))


def _keep_aliases(result: FileResult, project) -> None:
    """The module's import aliases travel with its summary: a later run on a
    few files seeds them from the cache without reading the file's imports
    again (re-exports resolve through them)."""
    if result.summary is not None:
        result.summary["aliases"] = dict(sorted(project.index.aliases.get(project.module, {}).items()))


def _summary_only(result: FileResult, text: str, project, exports: Sequence[str] = (), scan=None) -> None:
    """The summary of a file no rule needs to check (a models module other
    files import), only when some class of it may be an ``nn.Module`` or it
    has functions others import: from the scan alone when that says all an
    importer may ask (``summary.needs_parse``), else one parse and the facts
    the summary reads, nothing else."""
    from devlint.project.summary import export_light, needs_parse
    from devlint.scan import scan_source

    if scan is None:
        scan = scan_source(text)
    if scan is not None:
        scan.project_names = project.index.project_names(scan.imports, project.module, project.is_package)
        if not any(scan.class_may_be_module(c) for c in scan.bases) and not (exports and scan.function_names) and not scan.record_classes:
            return  # (a class of tensor fields: an importer's annotation may name it)
        if not needs_parse(scan, exports):
            # only which classes are modules: the scan says, no parse
            def absolute(name: str) -> str:
                return project.index.absolute_name(_absolute(name, project) or name, project.module)

            result.summary = export_light(scan, project.module, absolute, text)
            _keep_aliases(result, project)
            result.consulted = dict(sorted(project.index.consulted.items()))
            return
    try:
        module = parse(text)
    except (cst.ParserSyntaxError, RecursionError, MemoryError):
        return
    try:
        _export(result, FactStore(module, [Classes, *_summary_providers(exports)], project), project, True, text, exports, scan)
    except RecursionError:
        return


def _report(
    result: FileResult,
    text: str,
    path: str,
    module: cst.Module,
    analysis: "Analysis",
    ran: Set[str],
    lines: List[str],
    suppress: bool = True,
) -> None:
    """What ``lint_source`` reports from one analysis of ``text``: positions,
    suppressions, the engine-level unused-noqa rule, sorted findings."""
    result.internal_errors.extend(analysis.errors)
    diagnostics = analysis.diagnostics
    _positions(module, diagnostics, lines, text)
    # suppress=False: the caller applies its own (flake8's noqa)
    suppressions = parse_suppressions(text) if suppress else Suppressions()
    kept = []
    for d in diagnostics:
        d.path = path
        d.node = None
        if d.fix is not None:
            d.fix.replacements = []
        if not suppressions.suppresses(d.code, d.line):
            kept.append(d)
    if UNUSED_NOQA[0] in ran:  # the engine-level rule: needs every other rule's findings
        stale = unused_noqa(text, path, suppressions, diagnostics, list(all_rules()), ran, module)
        kept.extend(d for d in stale if not suppressions.suppresses(d.code, d.line))
    kept.sort(key=Diagnostic.sort_key)
    result.diagnostics = kept


# --------------------------------------------------------------------------
# fixing


class _Replacer(cst.CSTTransformer):
    def __init__(self, replacements: Dict[int, object]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        new = self.replacements.get(id(original_node))
        if new is not None:
            return new
        return updated_node


def _apply_round(
    module: cst.Module, diagnostics: List[Diagnostic], positions
) -> Tuple[cst.Module, List[Diagnostic]]:
    """Apply the fixes whose replaced ranges overlap no fix applied before."""
    taken: List[Tuple[Tuple[int, int], Tuple[int, int]]] = []
    table: Dict[int, object] = {}
    applied: List[Diagnostic] = []
    for d in diagnostics:
        fix = d.fix
        assert fix is not None
        ranges = []
        for old, _ in fix.replacements:
            p = positions.get(old)
            if p is None:
                break
            ranges.append(((p.start.line, p.start.column), (p.end.line, p.end.column)))
        else:
            if any(not (r[1] <= t[0] or t[1] <= r[0]) for r in ranges for t in taken):
                continue
            taken.extend(ranges)
            for old, new in fix.replacements:
                table[id(old)] = new
            applied.append(d)
    if not table:
        return module, []
    return module.visit(_Replacer(table)), applied


def fix_source(
    source: str,
    path: str = "<stdin>",
    codes: Optional[Sequence[str]] = None,
    unsafe: bool = False,
    ignore: Sequence[str] = (),
    scan: bool = True,
    project=None,
    summarize: bool = False,
    exports: Sequence[str] = (),
) -> FileResult:
    """Fix one file's (decoded) source in rounds until nothing changes.

    The result carries ``fixed_text`` (equal to ``source`` when nothing was
    fixed), the fixes ``applied``, and the ``diagnostics`` that remain.
    Raises nothing for bad input: problems land in the result.
    """
    result = FileResult(path=path)
    rules = [r for r in select_rules(codes) if not any(r.code.startswith(i) for i in ignore)]
    text = source
    rounds: List[Tuple[List[str], str]] = []  # (codes applied, text after) per round
    for _round in range(MAX_FIX_ROUNDS):
        active = _token_filter(text, rules, project)
        early = _round == 0 and bool(active) and (not scan or len(text) > SCAN_FIRST_BYTES)
        if early and hostile(text) is not None:
            return lint_source(source, path, codes, ignore, scan=scan, project=project, summarize=summarize, exports=exports)  # the same "skipped" message
        if active and scan:
            active = _scan_filter(text, active, project)
        if _round == 0 and active and not early and hostile(text) is not None:
            return lint_source(source, path, codes, ignore, scan=scan, project=project, summarize=summarize, exports=exports)
        if not active:
            if _round == 0:  # no rule can fire: nothing to fix, nothing to report
                if summarize and project is not None:
                    return lint_source(source, path, codes, ignore, scan=scan, project=project, summarize=True, exports=exports)
                result.fixed_text = source
                result.skipped = True
                return result
            break
        try:
            module = parse(text)
        except cst.ParserSyntaxError:
            if _round == 0:
                return lint_source(source, path, codes, ignore, scan=scan, project=project, summarize=summarize, exports=exports)
            result.internal_errors.append(
                f"internal error: fixes by {', '.join(sorted({d.code for d in result.applied}))} produced code that does not parse; "
                "the file was not changed; please report this as a devlint bug"
            )
            result.fixed_text = source
            result.applied = []
            return result
        except (RecursionError, MemoryError) as exc:
            result.error = f"skipped: too deeply nested or too large to parse ({type(exc).__name__})"
            result.fixed_text = source
            return result
        try:
            analysis = analyse(module, path, active, project, exports if _round == 0 else ())
            if _round == 0 and project is not None:
                _export(result, analysis.store, project, summarize, text, exports)
        except RecursionError:
            result.error = "skipped: too deeply nested to analyse"
            result.fixed_text = source
            return result
        if analysis.errors:
            result.internal_errors.extend(e for e in analysis.errors if e not in result.internal_errors)
        if _round == 0 and not any(d.fix is not None and (d.fix.is_safe or unsafe) for d in analysis.diagnostics):
            # nothing to fix: report from this analysis rather than a second one
            result.fixed_text = source
            if UNUSED_NOQA[0] not in {r.code for r in rules}:
                _report(result, text, path, module, analysis, {r.code for r in rules}, _source_lines(text))
                return result
            break
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        fixable = []
        for d in analysis.diagnostics:
            pos = positions.get(d.node) if d.node is not None else None
            line = pos.start.line if pos is not None else 0
            # suppressions are read from the text as it is now (fixes keep comments)
            if line and parse_suppressions(text).suppresses(d.code, line):
                continue
            if d.fix is not None and (d.fix.is_safe or unsafe):
                fixable.append((line, pos.start.column if pos else 0, d))
        fixable.sort(key=lambda t: (t[0], t[1]))
        if fixable and _round == 0 and module.code != text:
            # libcst would not write the untouched parts back byte for byte
            result.error = "not fixed: devlint's parser does not reproduce this file byte for byte (unusual line endings?)"
            result.fixed_text = source
            result.diagnostics = lint_source(source, path, codes, ignore, project=project, summarize=False).diagnostics
            return result
        try:
            new_module, applied = _apply_round(module, [d for _, _, d in fixable], positions)
            new_text = new_module.code if applied else text
            broken = _broken_fixes(module, applied, new_text)
        except Exception as exc:  # a fix that libcst cannot even lay out
            broken = sorted({d.code for _, _, d in fixable})
            broken_why = f"{type(exc).__name__}: {exc}"
        else:
            broken_why = "code that does not parse"
        if broken:
            result.internal_errors.append(
                f"internal error: the fix of {', '.join(broken)} produced {broken_why}; "
                "the file was not changed; please report this as a devlint bug"
            )
            result.fixed_text = source
            result.applied = []
            result.diagnostics = lint_source(source, path, codes, ignore, project=project, summarize=False).diagnostics
            return result
        if not applied:
            break
        if new_text == text:
            break
        text = new_text
        result.applied.extend(applied)
        rounds.append((sorted({d.code for d in applied}), text))
    # a fixed file must still parse (and compile, when the original did)
    if text != source:
        problem = _fixed_code_problem(source, text, path)
        if problem is not None:
            # name the rules of the first round that broke it
            culprits = sorted({d.code for d in result.applied})
            for round_codes, round_text in rounds:
                if _fixed_code_problem(source, round_text, path) is not None:
                    culprits = round_codes
                    break
            codes_applied = ", ".join(culprits) or "?"
            result.internal_errors.append(
                f"internal error: the fixes of {codes_applied} produced {problem}; the file was not changed; "
                "please report this as a devlint bug"
            )
            text = source
            result.applied = []
    if UNUSED_NOQA[0] in {r.code for r in rules}:
        stale = [d for d in lint_source(text, path, codes, ignore, scan=scan, project=project, summarize=False).diagnostics if d.code == UNUSED_NOQA[0] and d.fix]
        if stale:
            text = remove_unused_noqa(text, stale)
            result.applied.extend(stale)
    result.fixed_text = text
    remaining = lint_source(text, path, codes, ignore, scan=scan, project=project, summarize=False)
    result.diagnostics = remaining.diagnostics
    result.error = remaining.error
    for e in remaining.internal_errors:
        if e not in result.internal_errors:
            result.internal_errors.append(e)
    return result


def _source_lines(text: str) -> List[str]:
    """The lines as Python counts them (``str.splitlines`` also splits at
    form feeds and Unicode separators, which Python does not)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _broken_fixes(module: cst.Module, applied: List[Diagnostic], new_text: str) -> List[str]:
    """The codes of the rules whose fixes in this round make the code
    unparseable (empty when the new code parses)."""
    if not applied:
        return []
    try:
        parse(new_text)
        return []
    except cst.ParserSyntaxError:
        pass
    except (RecursionError, MemoryError):
        return []  # not the fixes' fault; the final check decides
    culprits = set()
    for d in applied:
        assert d.fix is not None
        table = {id(old): new for old, new in d.fix.replacements}
        try:
            parse(module.visit(_Replacer(table)).code)
        except Exception:
            culprits.add(d.code)
    return sorted(culprits or {d.code for d in applied})


def _compile_quietly(text: str, path: str, flags: int = 0) -> None:
    """``compile`` (never run) without the interpreter's SyntaxWarnings
    ("is" with a literal, invalid escape sequences...): they are about the
    user's code, not ours, and would be printed on stderr, twice per fix."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(text, path, "exec", flags, dont_inherit=True)


def _fixed_code_problem(source: str, fixed: str, path: str) -> Optional[str]:
    """Why ``fixed`` must not replace ``source``, or None."""
    try:
        parse(fixed)
    except Exception as exc:
        return f"code that does not parse ({type(exc).__name__})"
    # the interpreter is stricter than libcst (a repeated keyword argument,
    # ``return`` outside a function...): compile, never run, both versions
    try:
        _compile_quietly(source, path)
    except Exception:
        return None  # newer syntax than this Python, or already broken: libcst's word is all we have
    try:
        _compile_quietly(fixed, path)
    except SyntaxError as exc:
        return f"code that does not compile (line {exc.lineno}: {exc.msg})"
    except Exception as exc:
        return f"code that does not compile ({type(exc).__name__})"
    return None
