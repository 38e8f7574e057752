"""Applying a codemod's plan: the edits, keyed by the original nodes they
apply to, made in one libcst transform (so everything else survives byte for
byte), then the imports the new code needs and a light formatting of the
calls the codemod wrote."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import RemoveImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from devlint.syntax import dotted_name

#: the longest line the codemod writes before it puts a call's arguments on lines of their own
MAX_LINE = 99


@dataclass
class Edits:
    """Everything a migration changes, keyed by original nodes."""

    #: expression rewrites: original node -> function of the updated node
    replace: Dict[cst.CSTNode, Callable[[cst.CSTNode], cst.CSTNode]] = field(default_factory=dict)
    #: statements added before / after a statement
    before: Dict[cst.CSTNode, List[cst.BaseStatement]] = field(default_factory=dict)
    after: Dict[cst.CSTNode, List[cst.BaseStatement]] = field(default_factory=dict)
    remove: Set[cst.CSTNode] = field(default_factory=set)
    #: statements that run on rank 0 only
    guard: Set[cst.CSTNode] = field(default_factory=set)
    #: ``if`` statements replaced by their body
    unwrap: Set[cst.CSTNode] = field(default_factory=set)
    #: comment lines added above a statement
    comments: Dict[cst.CSTNode, List[str]] = field(default_factory=dict)
    #: statements added at the top of a function's or a loop's body (after a docstring)
    prepend: Dict[cst.CSTNode, List[cst.BaseStatement]] = field(default_factory=dict)
    #: statements added at the end of a function's body
    append: Dict[cst.CSTNode, List[cst.BaseStatement]] = field(default_factory=dict)
    #: module-level statements that become the body of a new ``main()``
    new_main: Optional[List[cst.CSTNode]] = None
    #: the ``if __name__ == "__main__":`` whose body becomes ``main()``
    guard_to_main: Optional[cst.If] = None
    #: statements at the top and at the end of a new ``main()``
    main_head: List[cst.BaseStatement] = field(default_factory=list)
    main_tail: List[cst.BaseStatement] = field(default_factory=list)
    #: comment lines for the top of the file
    header: List[str] = field(default_factory=list)
    #: the name ``torch.distributed`` is imported as
    dist: str = "dist"
    #: ``from MODULE import NAME`` imports to drop when unused afterwards
    drop_imports: List[Tuple[str, str]] = field(default_factory=list)


def apply(module: cst.Module, edits: Edits, imports: Sequence[str]) -> str:
    """The migrated text: ``edits`` made on ``module``, ``imports`` (import
    lines) added, long calls the codemod wrote spread over lines."""
    migrated = module.visit(_Apply(edits, module))
    migrated = _add_imports(migrated, imports)
    if edits.drop_imports:
        context = CodemodContext()
        for mod, name in edits.drop_imports:
            RemoveImportsVisitor.remove_unused_import(context, mod, name)
        migrated = RemoveImportsVisitor(context).transform_module(migrated)
    return _wrap_long_calls(migrated.code)


# ---------------------------------------------------------------- building


def stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def comment_lines(lines: Sequence[str]) -> List[cst.EmptyLine]:
    return [cst.EmptyLine(indent=True, comment=cst.Comment(f"# {line}" if line else "#")) for line in lines]


def with_comment(node: cst.BaseStatement, lines: Sequence[str]) -> cst.BaseStatement:
    return node.with_changes(leading_lines=[*node.leading_lines, *comment_lines(lines)])


def kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def with_args(call: cst.Call, args: Sequence[cst.Arg]) -> cst.Call:
    """``call`` with ``args``, its commas as the call wrote them: the last
    argument takes the call's trailing comma, one that stops being last takes
    the comma of an argument that was never last (so a call written one
    argument per line stays that way)."""
    trailing = call.args[-1].comma if call.args else cst.MaybeSentinel.DEFAULT
    inner = next((a.comma for a in reversed(call.args[:-1]) if isinstance(a.comma, cst.Comma)), None)
    out = []
    for i, arg in enumerate(args):
        if i == len(args) - 1:
            comma = trailing
        elif isinstance(arg.comma, cst.Comma) and arg.comma is not trailing:
            comma = arg.comma
        else:
            comma = inner or cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        out.append(arg.with_changes(comma=comma))
    return call.with_changes(args=out)


def parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` as the left operand of a binary operator."""
    if isinstance(node, (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript)) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def is_docstring(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.SimpleStatementLine)
        and len(node.body) == 1
        and isinstance(node.body[0], cst.Expr)
        and isinstance(node.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


# ---------------------------------------------------------------- applying


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: Edits, module: cst.Module) -> None:
        super().__init__()
        self.e = edits
        #: what each original module-level statement became
        self.top: Dict[cst.CSTNode, List[cst.BaseStatement]] = {s: [] for s in module.body}
        #: the rank-0 ``if`` blocks made so far, by id (the dict keeps them
        #: alive: an id is unique only while its object lives)
        self.guards: Dict[int, cst.If] = {}

    def on_leave(self, original: cst.CSTNode, updated):
        updated = super().on_leave(original, updated)
        rewrite = self.e.replace.get(original)
        if rewrite is not None:
            updated = rewrite(updated)
        if original in self.e.prepend or original in self.e.append:
            updated = _body(updated, self.e.prepend.get(original, []), self.e.append.get(original, []))
        if isinstance(updated, cst.IndentedBlock):
            updated = updated.with_changes(body=self._merge_guards(list(updated.body)))
        if not isinstance(original, cst.BaseStatement):
            return updated
        out = self._statement(original, updated)
        if original in self.top:
            self.top[original] = out
        if not out:
            return cst.RemoveFromParent()
        return out[0] if len(out) == 1 else cst.FlattenSentinel(out)

    def _statement(self, original: cst.BaseStatement, updated: cst.BaseStatement) -> List[cst.BaseStatement]:
        if original in self.e.remove:
            return []
        if original in self.e.comments:
            updated = with_comment(updated, self.e.comments[original])
        if original in self.e.unwrap:
            out = list(updated.body.body)
            out[0] = out[0].with_changes(leading_lines=[*updated.leading_lines, *out[0].leading_lines])
        elif original in self.e.guard:
            out = [self._guard(updated)]
        else:
            out = [updated]
        before = list(self.e.before.get(original, []))
        if before:
            # the statement's comments and blank lines go above what comes before it
            before[0] = before[0].with_changes(leading_lines=[*out[0].leading_lines, *before[0].leading_lines])
            out[0] = out[0].with_changes(leading_lines=())
        return [*before, *out, *self.e.after.get(original, [])]

    def _guard(self, node: cst.BaseStatement) -> cst.If:
        guard = cst.If(
            test=expr(f"{self.e.dist}.get_rank() == 0"),
            body=cst.IndentedBlock(body=[node.with_changes(leading_lines=())]),
            leading_lines=node.leading_lines,
        )
        self.guards[id(guard)] = guard
        return guard

    def _merge_guards(self, body: List[cst.BaseStatement]) -> List[cst.BaseStatement]:
        """Consecutive rank-0 blocks become one."""
        out: List[cst.BaseStatement] = []
        for node in body:
            prev = out[-1] if out else None
            if (prev is not None and self.guards.get(id(node)) is node and self.guards.get(id(prev)) is prev
                    and not any(line.comment for line in node.leading_lines)):
                inner = list(node.body.body)
                inner[0] = inner[0].with_changes(leading_lines=[*node.leading_lines, *inner[0].leading_lines])
                merged = prev.with_changes(body=prev.body.with_changes(body=[*prev.body.body, *inner]))
                self.guards[id(merged)] = merged
                out[-1] = merged
            else:
                out.append(node)
        return out

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body = list(updated.body)
        if self.e.guard_to_main is not None:
            body = self._guard_to_main(original)
        elif self.e.new_main is not None:
            body = self._module_to_main(original)
        ours = [line.with_changes(indent=False) for line in comment_lines(self.e.header)]
        existing = list(updated.header)
        if existing and existing[-1].comment is not None:
            existing.append(cst.EmptyLine(indent=False))
        header = [*existing, *ours, cst.EmptyLine(indent=False)]
        if body and body[0].leading_lines and body[0].leading_lines[0].comment is None:
            header.pop()  # the first statement brings its own blank line
        return updated.with_changes(body=body, header=header)

    def _new_main(self, body: List[cst.BaseStatement], leading: Sequence[cst.EmptyLine]) -> cst.FunctionDef:
        return cst.FunctionDef(
            name=cst.Name("main"),
            params=cst.Parameters(),
            body=cst.IndentedBlock(body=[*self.e.main_head, *_as_block(body), *self.e.main_tail]),
            leading_lines=leading,
        )

    def _guard_to_main(self, original: cst.Module) -> List[cst.BaseStatement]:
        out: List[cst.BaseStatement] = []
        for node in original.body:
            for made in self.top[node]:
                if node is self.e.guard_to_main:
                    out.append(self._new_main(list(made.body.body), [cst.EmptyLine(), cst.EmptyLine()]))
                    out.append(made.with_changes(body=made.body.with_changes(body=[stmt("main()\n")])))
                else:
                    out.append(made)
        return out

    def _module_to_main(self, original: cst.Module) -> List[cst.BaseStatement]:
        moved = set(self.e.new_main or ())
        stays: List[cst.BaseStatement] = []
        moves: List[cst.BaseStatement] = []
        for node in original.body:
            (moves if node in moved else stays).extend(self.top[node])
        guard = stmt('if __name__ == "__main__":\n    main()\n').with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
        return [*stays, self._new_main(moves, [cst.EmptyLine(), cst.EmptyLine()]), guard]


def _body(node, head: List[cst.BaseStatement], tail: List[cst.BaseStatement]):
    """``node`` (a function or a loop) with ``head`` at the top of its body,
    after a docstring, and ``tail`` at its end."""
    block = node.body
    body = list(block.body)
    at = 1 if isinstance(node, cst.FunctionDef) and body and is_docstring(body[0]) else 0
    body[at:at] = head
    body.extend(tail)
    return node.with_changes(body=block.with_changes(body=body))


def _as_block(stmts: List[cst.BaseStatement]) -> List[cst.BaseStatement]:
    """Module-level statements as the body of a function: blank lines carry
    no indentation, two in a row become one, none before the first."""
    out = []
    for i, node in enumerate(stmts):
        lines: List[cst.EmptyLine] = []
        for line in node.leading_lines:
            if line.comment is None:
                if (i == 0 and not lines) or (lines and lines[-1].comment is None):
                    continue
                line = line.with_changes(indent=False, whitespace=cst.SimpleWhitespace(""))
            lines.append(line)
        out.append(node.with_changes(leading_lines=lines))
    return out


# ---------------------------------------------------------------- imports

_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) or frozenset(
    {"argparse", "collections", "copy", "json", "logging", "math", "os", "random", "shutil", "sys", "time"})


def _add_imports(module: cst.Module, imports: Sequence[str]) -> cst.Module:
    """Add each import line that binds something the module lacks where a
    tidy import block has it: the standard library's after the last of the
    module's standard-library imports, the others after its torch imports."""
    body = list(module.body)
    block = [i for i, s in enumerate(body) if _imported(s)]
    have = {m for i in block for m in _imported(body[i])}
    stdlib = [i for i in block if _imported(body[i])[0].split(".")[0] in _STDLIB]
    torch = [i for i in block if _imported(body[i])[0].split(".")[0] == "torch"]
    std_new, other_new = [], []
    for line in imports:
        node = stmt(line + "\n")
        names = _imported(node)
        if isinstance(node.body[0], cst.Import) and node.body[0].names[0].asname is None and names[0] in have:
            continue
        (std_new if names[0].split(".")[0] in _STDLIB else other_new).append(node)
    end = block[-1] + 1 if block else 0
    for at, new in sorted([((torch[-1] + 1) if torch else end, other_new),
                           ((stdlib[-1] + 1) if stdlib else (block[0] if block else 0), std_new)], key=lambda x: -x[0]):
        body[at:at] = new
    return module.with_changes(body=body)


def _imported(node: cst.CSTNode) -> List[str]:
    """The modules a top-level import line imports (empty for anything else)."""
    if not isinstance(node, cst.SimpleStatementLine):
        return []
    out: List[str] = []
    for small in node.body:
        if isinstance(small, cst.Import):
            out.extend(dotted_name(a.name) or "" for a in small.names)
        elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
            out.append(dotted_name(small.module) or "")
        else:
            return []
    return out


# ---------------------------------------------------------------- formatting


def _wrap_long_calls(text: str, names: Sequence[str] = ("DistributedDataParallel", "init_process_group")) -> str:
    """Put the arguments of the calls a migration writes (the DDP wrap, the
    process group, a loader given a ``DistributedSampler``, a load given the
    rank's device) one per line,
    as black would, when their line is longer than :data:`MAX_LINE`."""
    lines = text.splitlines()
    if all(len(line) <= MAX_LINE for line in lines):
        return text
    wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)

    def ours(call: cst.Call) -> bool:
        if (dotted_name(call.func) or "").rsplit(".", 1)[-1] in names:
            return True
        for a in call.args:
            keyword = a.keyword.value if a.keyword is not None else None
            if keyword == "sampler" and isinstance(a.value, cst.Call) and dotted_name(a.value.func) == "DistributedSampler":
                return True
            if keyword == "map_location" and any(n.value == "local_rank" for n in _names(a.value)):
                return True
        return False

    def newline(indent: str) -> cst.ParenthesizedWhitespace:
        return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
                                           last_line=cst.SimpleWhitespace(indent))

    class _Explode(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
            pos = positions.get(original)
            if (pos is None or pos.start.line != pos.end.line or not updated.args or not ours(original)
                    or len(lines[pos.start.line - 1]) <= MAX_LINE):
                return updated
            last = len(updated.args) - 1
            args = [a.with_changes(
                whitespace_after_arg=cst.SimpleWhitespace(""),
                comma=cst.Comma(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=newline("" if i == last else "    ")),
            ) for i, a in enumerate(updated.args)]
            return updated.with_changes(whitespace_before_args=newline("    "), args=args)

    return wrapper.module.visit(_Explode()).code


def _names(node: cst.CSTNode) -> List[cst.Name]:
    out: List[cst.Name] = []

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n)

    node.visit(_V())
    return out
