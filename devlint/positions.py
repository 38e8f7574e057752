"""Where nodes are in the source, without rendering the whole module.

libcst's ``PositionProvider`` renders every node of a module, recording
where each starts and ends: about four times the cost of the parse, paid by
every file with a finding. :func:`positions_of` renders only the smallest
statements that hold the nodes asked for: a top-level statement, or, inside
a class or a function (whose body holds them all), the statement of the
body that does, and so on down. A statement of a body is rendered inside
``if _:`` blocks indented as the blocks that hold it in the file, so every
line comes out as it is there (a continuation line or a comment at its own
indentation too), and what it finds is shifted by the lines it starts below
the file's. Where a statement starts comes from CPython's ``ast`` (ten
times cheaper than libcst's parse): the first line of its first decorator,
or of the statement, less the blank and comment lines libcst keeps in front
of it (``leading_lines``). When ``ast`` cannot parse the text or its
statements do not line up with libcst's (a ``SimpleStatementLine`` holds as
many ``ast`` statements as it has small statements), the whole module is
rendered as before. ``tests/test_positions.py`` compares both on every node
of the fixtures, and on the nodes inside their bodies.
"""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst.metadata import CodeRange, CodePosition, MetadataWrapper, PositionProvider

from devlint.walk import walk


def full_positions(module: cst.Module) -> Dict[cst.CSTNode, CodeRange]:
    """Every node's range, by rendering the whole module."""
    return dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))


class _Held(cst.CSTVisitor):
    """The ids of ``wanted`` under the subtree walked."""

    def __init__(self, wanted: Dict[int, cst.CSTNode]) -> None:
        self.wanted = wanted
        self.ids: Set[int] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.wanted:
            self.ids.add(id(node))
        return True


def _held(nodes: Iterable[cst.CSTNode], wanted: Dict[int, cst.CSTNode]) -> Set[int]:
    """The ids of ``wanted`` under ``nodes``."""
    held = _Held(wanted)
    for n in nodes:
        walk(n, held)
    return held.ids


def _starts(body: Sequence[cst.BaseStatement], stmts: Sequence[ast.stmt]) -> Optional[List[int]]:
    """The line each statement of ``body`` (libcst) starts on, its leading
    blank and comment lines included, from ``stmts`` (the same statements
    as ``ast`` sees them), or None when the two do not line up."""
    out: List[int] = []
    i = 0
    for s in body:
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


def _start_lines(module: cst.Module, text: str) -> Optional[List[int]]:
    """The line each top-level statement's code starts on (its leading
    blank and comment lines included), or None."""
    tree = _ast(text)
    return _starts(module.body, tree.body) if tree is not None else None


def _ast(text: str) -> Optional[ast.Module]:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


#: compound statements whose body a node is looked for in, one statement at
#: a time (their ``ast`` nodes have the same ``body``)
_DESCEND = (cst.ClassDef, cst.FunctionDef)


class _Renderer:
    """Renders the smallest statements that hold the nodes asked for: a
    top-level statement, or, inside a class or a function, the statement of
    its body that holds them, and so on down. A statement of a body is
    rendered inside ``if _:`` blocks indented as the blocks that hold it are
    (so every line comes out as in the file, continuation lines and
    comments at their own indentation included), and what it finds is
    shifted by the lines it starts below the file's."""

    def __init__(self, module: cst.Module, wanted: Dict[int, cst.CSTNode]) -> None:
        self.module = module
        self.remaining = dict(wanted)
        self.out: Dict[cst.CSTNode, CodeRange] = {}

    def body(self, body: Sequence[cst.BaseStatement], stmts: Sequence[ast.stmt], starts: Sequence[int],
             indents: Tuple[Optional[str], ...]) -> None:
        """``body`` (libcst), ``stmts`` (the same statements as ``ast`` sees
        them), where each starts (:func:`_starts`)."""
        i = 0
        for stmt, start in zip(body, starts):
            if not self.remaining:
                return
            node = stmts[i]
            i += len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
            held = _held([stmt], self.remaining)
            if held:
                self.statement(stmt, node, start, indents, held)

    def statement(self, stmt: cst.BaseStatement, node: ast.stmt, start: int, indents: Tuple[Optional[str], ...],
                  held: Set[int]) -> None:
        """Renders ``stmt``, or the statements of its body when they hold
        all of ``held`` (none is in its header) and line up with ``ast``'s."""
        block = stmt.body if isinstance(stmt, _DESCEND) else None
        if isinstance(block, cst.IndentedBlock) and isinstance(node, _AST_DESCEND) and id(stmt) not in held \
                and _held(block.body, self.remaining) == held:
            starts = _starts(block.body, node.body)
            if starts is not None:
                self.body(block.body, node.body, starts, (*indents, block.indent))
                return
        self.render(stmt, start, indents)

    def render(self, stmt: cst.BaseStatement, start: int, indents: Tuple[Optional[str], ...]) -> None:
        inner: cst.BaseStatement = stmt
        for indent in reversed(indents):
            inner = cst.If(test=cst.Name("_"), body=cst.IndentedBlock(body=[inner], indent=indent))
        alone = cst.Module(body=[inner], header=[], footer=[], encoding=self.module.encoding,
                           default_indent=self.module.default_indent, default_newline=self.module.default_newline,
                           has_trailing_newline=True)
        shift = start - 1 - len(indents)
        for node, r in MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider).items():
            if node is alone:
                continue
            self.out[node] = CodeRange(CodePosition(r.start.line + shift, r.start.column),
                                       CodePosition(r.end.line + shift, r.end.column))
        for k in [k for k in self.remaining if self.remaining[k] in self.out]:
            del self.remaining[k]


_AST_DESCEND = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def positions_of(module: cst.Module, nodes: Iterable[cst.CSTNode], text: str) -> Dict[cst.CSTNode, CodeRange]:
    """The ranges of ``nodes`` (and of every other node of the statements
    rendered to find them)."""
    wanted = {id(n): n for n in nodes if n is not None}
    if not wanted:
        return {}
    tree = _ast(text)
    starts = _starts(module.body, tree.body) if tree is not None else None
    if starts is None or any(id(s) in wanted for s in module.body) or id(module) in wanted:
        return full_positions(module)
    renderer = _Renderer(module, wanted)
    renderer.body(module.body, tree.body, starts, ())  # type: ignore[union-attr]
    return full_positions(module) if renderer.remaining else renderer.out
