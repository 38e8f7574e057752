"""The shared syntax helpers (devlint/syntax.py): blocks of every compound
statement, one-line suites included, as in-tree nodes."""

from __future__ import annotations

import textwrap

import libcst as cst

from devlint.engine import lint_source
from devlint.facts.classes import build_facts
from devlint.syntax import LINES, blocks, bound_parameters, statements


def _stmt(src: str) -> cst.CSTNode:
    return cst.parse_module(textwrap.dedent(src)).body[0]


def _code(block) -> list:
    return [cst.Module(body=[]).code_for_node(s).strip() for s in block]


def test_statements_of_an_indented_block_and_of_a_one_line_suite():
    indented = _stmt("if c:\n    a = 1\n    b = 2\n")
    assert _code(statements(indented)) == ["a = 1", "b = 2"]
    one_line = _stmt("if c: a = 1; b = 2\n")
    (suite,) = statements(one_line)
    assert suite is one_line.body  # the node in the tree, not a copy
    assert isinstance(suite, LINES) and [type(s) for s in suite.body] == [cst.Assign, cst.Assign]
    assert statements(None) == ()
    assert statements(_stmt("x = 1\n")) == ()


def test_blocks_of_every_compound_statement():
    chain = _stmt("if a: x = 1\nelif b:\n    y = 2\nelse: z = 3\n")
    assert [_code(b) for b in blocks(chain)] == [["x = 1"], ["y = 2"], ["z = 3"]]
    loop = _stmt("for i in r:\n    x = i\nelse:\n    y = 0\n")
    assert [_code(b) for b in blocks(loop)] == [["x = i"], ["y = 0"]]
    tried = _stmt("try: a()\nexcept E: b()\nelse: c()\nfinally: d()\n")
    assert [_code(b) for b in blocks(tried)] == [["a()"], ["b()"], ["c()"], ["d()"]]
    match = _stmt("match v:\n    case 1: a()\n    case _:\n        b()\n")
    assert [_code(b) for b in blocks(match)] == [["a()"], ["b()"]]
    assert [_code(b) for b in blocks(_stmt("with m: a()\n"))] == [["a()"]]
    assert blocks(_stmt("x = 1\n")) == []


def test_an_import_in_a_one_line_suite_is_seen():
    # a one-line `if` used to hide the import: nn was unknown, M no module
    facts = build_facts(cst.parse_module("import torch\nif True: import torch.nn as nn\nclass M(nn.Module):\n    pass\n"))
    assert facts.classes["M"].is_module
    src = textwrap.dedent(
        """\
        import torch
        try: import torch.nn as nn
        except ImportError: nn = None

        class M(nn.Module):
            def forward(self, x):
                return x + torch.randn(3)
        """
    )
    assert [(d.line, d.code) for d in lint_source(src, "t.py", codes=["DL001"]).diagnostics] == [(7, "DL001")]


def test_a_one_line_loop_gets_no_fix_that_would_break_it():
    src = textwrap.dedent(
        """\
        import torch

        def train(model, loader, opt):
            model.cuda()
            for x, y in loader: loss = model(x).sum()
        """
    )
    found = [d for d in lint_source(src, "t.py", codes=["DL011"]).diagnostics]
    assert [d.code for d in found] == ["DL011"]
    assert found[0].fix is None


def test_rebound_names_reads_every_kind_of_assignment():
    import libcst as cst
    from devlint.syntax import rebound_names

    body = cst.parse_module("a = 1\nif c:\n    b += 2\nd: int = 3\ne: int\nf(x)\n")
    assert rebound_names(body) == {"a", "b", "d"}


def test_bound_parameters_of_a_call():
    fn = cst.parse_module("def f(self, a, b=1, *rest, c, d=2): pass\n").body[0]
    call = cst.parse_expression("f(x, y, d=z)")
    assert bound_parameters(fn, call.args) == {"self": 0, "a": 1, "d": 2}
    assert bound_parameters(fn, call.args, method=True) == {"a": 0, "b": 1, "d": 2}
    starred = cst.parse_expression("f(x, *ys, c=z)")
    assert bound_parameters(fn, starred.args, method=True) == {"a": 0}
    static = cst.parse_module("@staticmethod\ndef g(a, b): pass\n").body[0]
    assert bound_parameters(static, call.args, method=True) == {"a": 0, "b": 1}

