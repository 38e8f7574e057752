"""devlint.walk visits what CSTNode.visit visits, in the same order."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from conftest import FIXTURES, ROOT
from devlint.walk import child_fields, walk

SOURCES = sorted(FIXTURES.rglob("*.py")) + sorted((ROOT / "devlint").rglob("*.py")) + sorted((ROOT / "rules").glob("*.py"))

SYNTAX = textwrap.dedent(
    '''
    import a.b as c, d
    from .e import (f as g, h)
    @dec(1)
    @other
    async def fn(a, /, b: int = 1, *args, c, d=2, **kw) -> "T":
        global x
        nonlocal_ = lambda q, *r, s=3, **t: q
        async with ctx() as (u, v), other:
            async for i, j in aiter():
                await thing
        try:
            pass
        except* ValueError as e:
            raise RuntimeError("x") from e
        else:
            pass
        finally:
            del x[1:2:3], y.z
        while (w := next(it)) is not None:
            break
        else:
            continue
        match command.split():
            case [action, *rest] if rest:
                pass
            case {"k": 1, **others}:
                pass
            case Point(x=0, y=0) | None:
                pass
            case _:
                pass
        return [k for k in range(3) if k], {k: v for k, v in d.items()}, {s for s in t}, (g for g in h)
    class K(Base, metaclass=Meta):
        x: int = 1
        y: "str"
        def m(self): return f"{self.x!r:>{width}} {y=}" + b"bytes".decode() + r"raw"
    assert a if b else c, "msg"
    a = b = -c ** +d // e % f @ g << h >> i & j | k ^ ~l and not m or n
    a += 1; b -= 2; c[...] = d[::, 1]
    print(*args, **kwargs, sep="")
    '''
)


class _Recorder(cst.CSTVisitor):
    WALKS_TRIVIA = True  # compared with libcst's visit, which sees everything

    def __init__(self) -> None:
        self.events = []

    def on_visit(self, node):
        self.events.append(("visit", type(node).__name__, id(node)))
        # skip one kind of subtree, as rules do
        return not isinstance(node, cst.Lambda)

    def on_leave(self, original_node):
        self.events.append(("leave", type(original_node).__name__, id(original_node)))


class _HookedRecorder(_Recorder):
    def visit_If_body(self, node):
        self.events.append(("If.body", id(node)))

    def leave_If_orelse(self, node):
        self.events.append(("If.orelse left", id(node)))

    def visit_FunctionDef_decorators(self, node):
        self.events.append(("decorators", id(node)))


def _same(module: cst.Module, recorder) -> None:
    by_libcst, by_walk = recorder(), recorder()
    module.visit(by_libcst)
    walk(module, by_walk)
    assert by_walk.events == by_libcst.events


@pytest.mark.parametrize("recorder", [_Recorder, _HookedRecorder])
def test_walk_visits_like_libcst_on_every_syntax_form(recorder):
    _same(cst.parse_module(SYNTAX), recorder)


def test_walk_visits_like_libcst_on_fixtures_and_devlint_itself():
    assert len(SOURCES) > 150
    for path in SOURCES:
        module = cst.parse_module(path.read_text(encoding="utf-8"))
        _same(module, _Recorder)


def test_child_order_is_read_from_libcst():
    assert child_fields(cst.Call)[:2] == ("lpar", "func")
    assert child_fields(cst.FunctionDef).index("decorators") < child_fields(cst.FunctionDef).index("body")


def test_only_visitors_with_their_own_attribute_hooks_pay_for_them():
    from devlint.walk import _has_attribute_hooks

    assert not _has_attribute_hooks(_Recorder)
    assert _has_attribute_hooks(_HookedRecorder)


def test_rules_with_module_hooks_only_skip_the_traversal(monkeypatch):
    # DL001 asks the device flow once per file: no walk of the tree for it,
    # and what it reports is the same
    import devlint.engine as engine
    from devlint.engine import _module_only, lint_source
    from devlint.rule import all_rules

    rules = all_rules()
    assert _module_only(rules["DL001"]) and not _module_only(rules["DL006"])
    src = "import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x + torch.zeros(3)\n"
    walked = []
    real = engine.walk
    monkeypatch.setattr(engine, "walk", lambda node, visitor: walked.append(node) or real(node, visitor))
    assert [(d.line, d.code) for d in lint_source(src, "t.py", codes=["DL001"]).diagnostics] == [(6, "DL001")]
    assert walked == []
    assert [(d.line, d.code) for d in lint_source(src, "t.py", codes=["DL001", "DL006"], scan=False).diagnostics] == [(6, "DL001")]
    assert len(walked) == 1


class _TypedRecorder(cst.CSTVisitor):
    """Hooks by node type, as the fact collectors have: the fast dispatch."""

    def __init__(self) -> None:
        self.events = []

    def visit_Name(self, node):
        self.events.append(("Name", node.value))

    def visit_Call(self, node):
        self.events.append(("Call", id(node)))

    def leave_Call(self, node):
        self.events.append(("Call left", id(node)))

    def visit_Lambda(self, node):
        self.events.append(("Lambda", id(node)))
        return False  # its body is not visited

    def visit_ClassDef(self, node):
        self.events.append(("ClassDef", node.name.value))


class _CommentRecorder(_TypedRecorder):
    def visit_Comment(self, node):
        self.events.append(("Comment", node.value))


class _Untrivial(_Recorder):
    """What libcst visits, less the trivia and what lies under them."""

    WALKS_TRIVIA = False

    def __init__(self) -> None:
        super().__init__()
        self._inside = 0

    def on_visit(self, node):
        from devlint.walk import TRIVIA

        if type(node) in TRIVIA or self._inside:
            self._inside += 1
            return True
        return super().on_visit(node)

    def on_leave(self, original_node):
        if self._inside:
            self._inside -= 1
            return
        super().on_leave(original_node)


def test_the_walk_leaves_trivia_out_for_visitors_that_do_not_look_at_them():
    from devlint.walk import skips_trivia

    module = cst.parse_module(SYNTAX + "x = (a, b)  # comment\n")
    expected = _Untrivial()
    module.visit(expected)
    class Plain(_Recorder):
        WALKS_TRIVIA = False
    got = Plain()
    walk(module, got)
    assert got.events == expected.events
    assert all(name not in ("SimpleWhitespace", "Comma", "LeftParen", "Add") for _, name, _ in got.events)
    assert skips_trivia(Plain) and not skips_trivia(_Recorder) and not skips_trivia(_CommentRecorder)


def test_typed_hooks_see_what_they_see_under_libcst_with_trivia_hooks_honoured():
    for path in [*SOURCES[:40], None]:
        module = cst.parse_module(SYNTAX + "y = 1  # a comment\n" if path is None else path.read_text(encoding="utf-8"))
        for recorder in (_TypedRecorder, _CommentRecorder):
            by_libcst, by_walk = recorder(), recorder()
            module.visit(by_libcst)
            walk(module, by_walk)
            assert by_walk.events == by_libcst.events
    comments = _CommentRecorder()
    walk(cst.parse_module("x = 1  # a comment\n"), comments)
    assert ("Comment", "# a comment") in comments.events


def test_the_rule_walk_keeps_trivia_when_a_rule_has_a_hook_for_them():
    from devlint.engine import _Dispatcher
    from devlint.rule import all_rules

    rules = all_rules()

    class Commented(rules["DL006"]):
        def visit_Comment(self, node):
            pass

    assert _Dispatcher(None, [Commented.__new__(Commented)]).WALKS_TRIVIA is True
    assert _Dispatcher(None, [rules["DL006"].__new__(rules["DL006"])]).WALKS_TRIVIA is False
