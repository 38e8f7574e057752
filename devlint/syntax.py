"""Syntax helpers every provider and rule shares: one version of each.

Blocks. A compound statement's body is an indented block (its statements)
or a one-line suite (``if c: import torch.nn as nn``, ``else: t = t.cuda()``):
small statements on the header's line. :func:`statements` gives both as
in-tree nodes, a one-line suite as itself: like a ``SimpleStatementLine`` it
has a ``body`` of small statements, so ``isinstance(stmt, LINES)`` covers
both (nothing is synthesised, so metadata and node-keyed facts work on
every statement returned). :func:`blocks` gives every block of a compound
statement.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import libcst as cst

#: statements that are a line of small statements
LINES = (cst.SimpleStatementLine, cst.SimpleStatementSuite)


def statements(node: Optional[cst.CSTNode]) -> Sequence[cst.CSTNode]:
    """The statements of ``node``'s body (``node`` a compound statement, an
    ``else``/``except``/``finally`` clause, a ``case``, or a suite itself):
    an indented block's statements, a one-line suite as one statement."""
    if node is None:
        return ()
    body = node if isinstance(node, cst.BaseSuite) else getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock):
        return body.body
    if isinstance(body, cst.SimpleStatementSuite):
        return (body,)
    return ()


def blocks(stmt: cst.CSTNode) -> List[Sequence[cst.CSTNode]]:
    """Every block of a compound statement, in source order: the body, each
    ``elif``'s and the ``else``'s (if), the ``else`` of a loop, the handlers,
    ``else`` and ``finally`` of a try, the cases of a match. Empty for a
    statement without blocks."""
    if isinstance(stmt, cst.If):
        out = [statements(stmt)]
        orelse = stmt.orelse
        while isinstance(orelse, cst.If):
            out.append(statements(orelse))
            orelse = orelse.orelse
        if orelse is not None:
            out.append(statements(orelse))
        return out
    if isinstance(stmt, (cst.For, cst.While)):
        return [statements(stmt)] + ([statements(stmt.orelse)] if stmt.orelse is not None else [])
    if isinstance(stmt, (cst.Try, cst.TryStar)):
        out = [statements(stmt)] + [statements(h) for h in stmt.handlers]
        if stmt.orelse is not None:
            out.append(statements(stmt.orelse))
        if stmt.finalbody is not None:
            out.append(statements(stmt.finalbody))
        return out
    if isinstance(stmt, cst.Match):
        return [statements(case) for case in stmt.cases]
    if isinstance(stmt, (cst.With, cst.FunctionDef, cst.ClassDef)):
        return [statements(stmt)]
    return []
