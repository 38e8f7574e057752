"""``# noqa`` comments as a baseline: adding them for every current finding
(``devlint check --add-noqa``), and the engine-level rule DL100 that reports
``# noqa: DLxxx`` codes which suppress nothing (documented in
``rules/dl100_unused_noqa.py``).

DL100 is not a visitor: whether a suppression is used depends on what every
other rule found, so the engine computes it in its suppression step. Both
directions edit comments only, as libcst ``Comment`` / whitespace nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from devlint.diagnostic import Diagnostic, Edit, Fix, FixSafety
from devlint.suppress import ALL, Suppressions

#: the engine-level rule (the only code the engine knows)
UNUSED_NOQA = ("DL100", "unused-noqa")

# a `# noqa: CODES` directive inside a comment; codes look like DL001 / E501
_DIRECTIVE = re.compile(r"#\s*noqa\s*:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*)", re.I)
_BARE = re.compile(r"#\s*noqa\b(?!\s*:)", re.I)


# --------------------------------------------------------------------------
# comment nodes by line


class _Comments(cst.CSTVisitor):
    """The whitespace node that ends each physical line (where a trailing
    comment lives), by line: ``TrailingWhitespace`` after code, ``EmptyLine``
    for a line holding only a comment or nothing. A line with none ends
    inside a string or after a backslash: it cannot take a comment."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.by_line: Dict[int, cst.CSTNode] = {}

    def visit_TrailingWhitespace(self, node: cst.TrailingWhitespace) -> None:
        self.by_line.setdefault(self.get_metadata(PositionProvider, node).start.line, node)

    def visit_EmptyLine(self, node: cst.EmptyLine) -> None:
        self.by_line.setdefault(self.get_metadata(PositionProvider, node).start.line, node)


def _line_ends(module: cst.Module) -> Tuple[Dict[int, cst.CSTNode], Dict[cst.CSTNode, object]]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    visitor = _Comments()
    wrapper.visit(visitor)
    return visitor.by_line, wrapper.resolve(PositionProvider)


def _with_comment(node: cst.CSTNode, value: Optional[str]) -> object:
    """``node`` (a line end) with its comment replaced (None: removed)."""
    if isinstance(node, cst.EmptyLine):
        if value is None:
            return cst.RemovalSentinel.REMOVE if node.comment is not None else node
        return node.with_changes(comment=cst.Comment(value))
    assert isinstance(node, cst.TrailingWhitespace)
    if value is None:
        return node.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)
    whitespace = node.whitespace if node.comment is not None else cst.SimpleWhitespace("  ")
    return node.with_changes(whitespace=whitespace, comment=cst.Comment(value))


class _Replace(cst.CSTTransformer):
    def __init__(self, table: Dict[int, object]) -> None:
        super().__init__()
        self.table = table

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.table.get(id(original_node), updated_node)


# --------------------------------------------------------------------------
# --add-noqa


def merged_comment(comment: Optional[str], codes: Iterable[str]) -> str:
    """``comment`` with ``# noqa: codes`` added, merged into a ``# noqa:``
    directive already there."""
    codes = sorted(set(codes))
    if not comment:
        return f"# noqa: {', '.join(codes)}"
    m = _DIRECTIVE.search(comment)
    if m is None:
        return f"{comment.rstrip()}  # noqa: {', '.join(codes)}"
    present = re.split(r"[\s,]+", m.group("codes").strip())
    merged = present + [c for c in codes if c.upper() not in {p.upper() for p in present}]
    return comment[: m.start("codes")] + ", ".join(merged) + comment[m.end("codes"):]


@dataclass
class NoqaAdded:
    text: str
    #: the findings now suppressed, and those that could not be
    added: List[Diagnostic]
    failed: List[Tuple[Diagnostic, str]]


def add_noqa(text: str, diagnostics: Sequence[Diagnostic]) -> NoqaAdded:
    """Add ``# noqa: CODE`` at the end of the line each finding is reported
    on (the first line of a multi-line statement), merging with a ``# noqa``
    comment already there."""
    wanted: Dict[int, Set[str]] = {}
    failed: List[Tuple[Diagnostic, str]] = []
    for d in diagnostics:
        if d.code == "DL000":
            failed.append((d, "a syntax error cannot be suppressed"))
        elif d.code == UNUSED_NOQA[0]:
            failed.append((d, "a stale suppression is removed, not suppressed: devlint fix --apply"))
        else:
            wanted.setdefault(d.line, set()).add(d.code)
    if not wanted:
        return NoqaAdded(text, [], failed)
    module = cst.parse_module(text)
    ends, _ = _line_ends(module)
    table: Dict[int, object] = {}
    done: Set[int] = set()
    for line, codes in wanted.items():
        node = ends.get(line)
        if node is None:
            continue
        comment = node.comment.value if node.comment is not None else None
        table[id(node)] = _with_comment(node, merged_comment(comment, codes))
        done.add(line)
    skip = ("DL000", UNUSED_NOQA[0])
    added = [d for d in diagnostics if d.code not in skip and d.line in done]
    failed += [
        (d, "the line ends inside a string or after a backslash: no comment can go there")
        for d in diagnostics
        if d.code not in skip and d.line not in done
    ]
    new = module.visit(_Replace(table)).code if table else text
    return NoqaAdded(new, added, failed)


# --------------------------------------------------------------------------
# DL100 unused-noqa


def _judged(entry: str, known: Sequence[str], ran: Set[str]) -> Optional[bool]:
    """Whether a noqa code can be judged: True when every rule it names ran
    on the file, False when it names no known rule, None to leave it alone
    (another tool's code, a rule that was not enabled, DL100 itself)."""
    entry = entry.upper()
    if not entry.startswith("DL") or UNUSED_NOQA[0].startswith(entry) or entry == "DL000":
        return None
    named = [c for c in known if c.startswith(entry)]
    if not named:
        return False
    return True if all(c in ran for c in named) else None


def unused_noqa(
    text: str,
    path: str,
    suppressions: Suppressions,
    found: Sequence[Diagnostic],
    known: Sequence[str],
    ran: Set[str],
    module: Optional[cst.Module] = None,
) -> List[Diagnostic]:
    """DL100 findings: ``# noqa: DLxxx`` codes on lines where no finding of
    that code was reported (``found``: every finding before suppression),
    among the rules that ran (``ran``), and codes that name no rule."""
    if not suppressions.lines:
        return []
    reported: Dict[int, List[str]] = {}
    for d in found:
        reported.setdefault(d.line, []).append(d.code)
    lines = text.splitlines()
    ends = _line_ends(module)[0] if module is not None else None
    out: List[Diagnostic] = []
    for line, codes in sorted(suppressions.lines.items()):
        if codes == ALL or _BARE.search(lines[line - 1] if line <= len(lines) else ""):
            continue
        if ends is not None:  # a directive in a real comment, not in a string
            node = ends.get(line)
            if node is None or node.comment is None or not _DIRECTIVE.search(node.comment.value):
                continue
        if UNUSED_NOQA[0] in codes:  # a line may opt out of DL100 itself
            continue
        unused, unknown = [], []
        for entry in sorted(codes):
            verdict = _judged(entry, known, ran)
            if verdict is None:
                continue
            if verdict is False:
                unknown.append(entry)
            elif not any(c.startswith(entry) for c in reported.get(line, ())):
                unused.append(entry)
        if not unused and not unknown:
            continue
        source = lines[line - 1] if line <= len(lines) else ""
        m = _DIRECTIVE.search(source)
        col = (m.start() + 1) if m else 1
        end = (m.end() + 1) if m else len(source) + 1
        parts = ([f"unused: {', '.join(unused)}"] if unused else []) + ([f"unknown: {', '.join(unknown)}"] if unknown else [])
        d = Diagnostic(
            code=UNUSED_NOQA[0],
            name=UNUSED_NOQA[1],
            message=f"`# noqa` suppresses nothing here ({'; '.join(parts)})",
            path=path,
            line=line,
            col=col,
            end_line=line,
            end_col=end,
            source_line=source,
        )
        d.fix, d.no_fix_reason = _removal_fix(ends, line, source, unused + unknown)
        out.append(d)
    return out


def _without(comment: str, drop: Sequence[str]) -> Optional[str]:
    """``comment`` without the ``drop`` codes of its noqa directive (None:
    nothing of the comment is left)."""
    m = _DIRECTIVE.search(comment)
    if m is None:
        return comment
    drop_upper = {c.upper() for c in drop}
    keep = [c for c in re.split(r"[\s,]+", m.group("codes").strip()) if c.upper() not in drop_upper]
    if keep:
        return comment[: m.start("codes")] + ", ".join(keep) + comment[m.end("codes"):]
    before, after = comment[: m.start()].rstrip(), comment[m.end():].strip()
    if before and after:
        return f"{before}  {after}" if after.startswith("#") else f"{before} {after}"
    rest = before or after
    if not rest:
        return None
    return rest if rest.startswith("#") else f"# {rest}"


def _removal_fix(ends: Optional[Dict[int, cst.CSTNode]], line: int, source: str, drop: Sequence[str]) -> Tuple[Optional[Fix], str]:
    if ends is None:
        return None, "the file could not be parsed"
    node = ends.get(line)
    if node is None or node.comment is None or not _DIRECTIVE.search(node.comment.value):
        return None, "the `# noqa` is not in a comment of its own (inside a string?)"
    comment = node.comment.value
    new_value = _without(comment, drop)
    c0 = len(source) - len(comment)  # a comment runs to the end of its line
    if new_value is not None:
        edit = Edit(line, c0 + 1, line, len(source) + 1, new_value)
    elif isinstance(node, cst.EmptyLine):
        edit = Edit(line, 1, line + 1, 1, "")  # the whole comment line
    else:
        edit = Edit(line, c0 - len(node.whitespace.value) + 1, line, len(source) + 1, "")
    codes = ", ".join(drop)
    return Fix(replacements=[], safety=FixSafety.SAFE, description=f"Remove unused `noqa` code{'s' if len(drop) > 1 else ''} {codes}", edits=[edit]), ""


def remove_unused_noqa(text: str, diagnostics: Sequence[Diagnostic]) -> str:
    """``text`` with the DL100 findings ``diagnostics`` fixed (their codes
    dropped from the comments; a comment left empty is removed)."""
    drops: Dict[int, List[str]] = {}
    for d in diagnostics:
        if d.code == UNUSED_NOQA[0] and d.fix is not None:
            drops[d.line] = _codes_in(d.message)
    if not drops:
        return text
    module = cst.parse_module(text)
    ends, _ = _line_ends(module)
    table: Dict[int, object] = {}
    for line, codes in drops.items():
        node = ends.get(line)
        if node is None or node.comment is None:
            continue
        table[id(node)] = _with_comment(node, _without(node.comment.value, codes))
    return module.visit(_Replace(table)).code if table else text


def _codes_in(message: str) -> List[str]:
    inside = message[message.rfind("(") + 1 : message.rfind(")")]
    return [c for part in inside.split(";") for c in re.split(r"[\s,]+", part.split(":", 1)[-1].strip()) if c]
