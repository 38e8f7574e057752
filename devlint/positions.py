"""Where nodes are in the source, without rendering the whole module.

libcst's ``PositionProvider`` renders every node of a module, recording
where each starts and ends: about four times the cost of the parse, paid by
every file with a finding. :func:`positions_of` renders only the top-level
statements that hold the nodes asked for, each as a module of its own, and
shifts what it finds by the line the statement starts on in the file.
Where a top-level statement starts comes from CPython's ``ast`` (ten times
cheaper than libcst's parse): the first line of its first decorator, or of
the statement, less the blank and comment lines libcst keeps in front of it
(``leading_lines``). A top-level statement starts at column 0, so columns
need no shift. When ``ast`` cannot parse the text or its statements do not
line up with libcst's (a ``SimpleStatementLine`` holds as many ``ast``
statements as it has small statements), the whole module is rendered as
before. ``tests/test_positions.py`` compares both on every node of the
fixtures.
"""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional

import libcst as cst
from libcst.metadata import CodeRange, CodePosition, MetadataWrapper, PositionProvider

from devlint.walk import walk


def full_positions(module: cst.Module) -> Dict[cst.CSTNode, CodeRange]:
    """Every node's range, by rendering the whole module."""
    return dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))


class _Owner(cst.CSTVisitor):
    """Which of ``wanted`` lie under the statement walked."""

    def __init__(self, wanted: Dict[int, cst.CSTNode]) -> None:
        self.wanted = wanted
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.wanted:
            self.found = True
        return not self.found


def _start_lines(module: cst.Module, text: str) -> Optional[List[int]]:
    """The line each top-level statement's code starts on (its leading
    blank and comment lines included), or None."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    stmts = tree.body
    out: List[int] = []
    i = 0
    for s in module.body:
        if i >= len(stmts):
            return None
        first = stmts[i]
        line = first.lineno
        decorators = getattr(first, "decorator_list", None)
        if decorators:
            line = min(d.lineno for d in decorators)
            libcst_decorators = getattr(s, "decorators", ())
            if libcst_decorators:
                line -= len(libcst_decorators[0].leading_lines)
        out.append(line - len(s.leading_lines))
        i += len(s.body) if isinstance(s, cst.SimpleStatementLine) else 1
    return out if i == len(stmts) else None


def positions_of(module: cst.Module, nodes: Iterable[cst.CSTNode], text: str) -> Dict[cst.CSTNode, CodeRange]:
    """The ranges of ``nodes`` (and of every other node of the top-level
    statements that hold them)."""
    wanted = {id(n): n for n in nodes if n is not None}
    if not wanted:
        return {}
    starts = _start_lines(module, text)
    if starts is None or any(id(s) in wanted for s in module.body) or id(module) in wanted:
        return full_positions(module)
    out: Dict[cst.CSTNode, CodeRange] = {}
    remaining = dict(wanted)
    for stmt, start in zip(module.body, starts):
        if not remaining:
            break
        owner = _Owner(remaining)
        walk(stmt, owner)
        if not owner.found:
            continue
        alone = cst.Module(body=[stmt], header=[], footer=[], encoding=module.encoding,
                           default_indent=module.default_indent, default_newline=module.default_newline,
                           has_trailing_newline=True)
        shift = start - 1
        for node, r in MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider).items():
            if node is alone:
                continue
            out[node] = CodeRange(CodePosition(r.start.line + shift, r.start.column),
                                  CodePosition(r.end.line + shift, r.end.column))
        for k in [k for k in remaining if remaining[k] in out]:
            del remaining[k]
    if remaining:
        return full_positions(module)
    return out
