"""devlint.positions: the ranges of nodes, from the top-level statements
that hold them, are the ranges libcst's PositionProvider gives over the
whole module."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from conftest import FIXTURES
from devlint.positions import _start_lines, full_positions, positions_of

FILES = sorted(FIXTURES.glob("DL*/*.py"))


def _same(text: str, every: int = 1) -> int:
    module = cst.parse_module(text)
    full = full_positions(module)
    nodes = [n for n in full if n is not module][::every]
    found = positions_of(module, nodes, text)
    for n in nodes:
        assert found[n] == full[n], (type(n).__name__, cst.Module(body=[]).code_for_node(n)[:60])
    return len(nodes)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_node_of_a_fixture(path):
    assert _same(path.read_text()) > 0


def test_decorators_comments_and_statements_on_one_line():
    text = textwrap.dedent('''\
        #!/usr/bin/env python
        # a header comment

        import torch; import torch.nn as nn


        # a comment before the decorators
        @torch.no_grad()
        # between decorators

        @staticmethod

        def f(x):
            return torch.zeros(3) + x
        class A(nn.Module):
            @property
            def w(self):  # trailing
                return 1
        if True: y = torch.ones(2)
        x = [
            1,
            2,
        ]; z = x
        ''')
    # the header's comments and blank line belong to the module; the blank
    # and comment lines before the decorators to the def
    assert _start_lines(cst.parse_module(text), text) == [4, 5, 15, 19, 20]
    assert _same(text) > 0


def test_what_ast_cannot_parse_falls_back_to_the_whole_module():
    module = cst.parse_module("x = 1\n")
    assign = module.body[0].body[0]
    # text and tree out of step (ast sees other statements, or none): whole module
    assert _start_lines(module, "x = 1\ny = 2\n") is None
    assert _start_lines(module, "x = (\n") is None
    assert positions_of(module, [assign], "x = (\n")[assign] == full_positions(module)[assign]


class _Inner(cst.CSTVisitor):
    """The nodes of the statements in the bodies of functions and classes
    (not the statements that hold those bodies): what makes positions_of
    render one statement of a body, shifted, instead of the whole def."""

    def __init__(self) -> None:
        self.nodes = []
        self.depth = 0

    def visit_IndentedBlock(self, node):
        self.depth += 1

    def leave_IndentedBlock(self, node):
        self.depth -= 1

    def on_visit(self, node):
        if self.depth and not isinstance(node, (cst.BaseSuite, cst.ClassDef, cst.FunctionDef)):
            self.nodes.append(node)
        return super().on_visit(node)


def _same_inside(text: str, singles: int = 25) -> int:
    """Asked for the nodes inside bodies only (one call), and for each of a
    spread of them alone, positions_of gives what the whole-module render
    gives."""
    module = cst.parse_module(text)
    full = full_positions(module)
    inner = _Inner()
    module.visit(inner)
    nodes = [n for n in inner.nodes if n in full]
    if not nodes:
        return 0
    found = positions_of(module, nodes, text)
    for n in nodes:
        assert found[n] == full[n], (type(n).__name__, cst.Module(body=[]).code_for_node(n)[:60])
    for n in nodes[:: max(1, len(nodes) // singles)]:
        assert positions_of(module, [n], text)[n] == full[n], (type(n).__name__, cst.Module(body=[]).code_for_node(n)[:60])
    return len(nodes)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_nodes_inside_bodies_of_a_fixture(path):
    _same_inside(path.read_text(), singles=3)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_statements_of_bodies_rendered_alone_keep_their_columns(newline):
    text = textwrap.dedent('''\
        import torch


        class A(torch.nn.Module):
            """A docstring
        that spans lines."""

            # a comment at the class's indentation
        # a comment at column 0
            @staticmethod
            def f(x, y=(1,
          2)):
                s = """first
        second""" + str(x)
                t = torch.zeros(3,
                                4) + torch.ones(
            2)
                return s, t  # trailing

            def g(self): return torch.arange(3)

            class B:
                async def h(self):
                    if True:
                        return [torch.tensor(1),
        torch.tensor(2)]
        ''').replace("\n", newline)
    assert _same_inside(text) > 20
    assert _same(text) > 0


def test_a_body_indented_with_tabs():
    text = "class A:\n\tdef f(self):\n\t\treturn (1 +\n\t\t\t2)\n\n\tdef g(self):\n\t\treturn 3\n"
    assert _same_inside(text) > 5


def test_a_form_feed_between_methods():
    text = "class A:\n    def f(self):\n        return 1\n\x0c\n    def g(self):\n        return [1,\n                2]\n"
    assert _same_inside(text) > 5
