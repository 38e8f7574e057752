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
