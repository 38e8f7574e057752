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

from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from devlint.walk import walk

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


_ATTRIBUTE, _NAME = cst.Attribute, cst.Name


def dotted_name(node: cst.CSTNode) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    # exact type tests: ``isinstance`` with a libcst node class goes through
    # ``ABCMeta.__instancecheck__``, and this runs for every call the facts read
    parts: List[str] = []
    while type(node) is _ATTRIBUTE:
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is _NAME:
        parts.append(node.value)  # type: ignore[attr-defined]
        return ".".join(reversed(parts))
    return None


def code_of(node: cst.CSTNode) -> str:
    """Source text of an expression node (no surrounding whitespace)."""
    return cst.Module(body=[]).code_for_node(node)


def short_code(node: cst.CSTNode, limit: int = 40) -> str:
    """An expression as a message quotes it: dotted, or on one line and
    cut at ``limit`` characters."""
    text = dotted_name(node) or " ".join(code_of(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def string_value(node: cst.CSTNode) -> Optional[str]:
    """The value of a plain (non-f) string literal, else None."""
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # pragma: no cover - malformed literal
            return None
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = string_value(node.left), string_value(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def is_number_literal(node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return is_number_literal(node.expression)
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return True
    if isinstance(node, cst.BinaryOperation):
        return is_number_literal(node.left) and is_number_literal(node.right)
    return False


def keyword_arg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def positional_args(call: cst.Call) -> List[cst.Arg]:
    return [a for a in call.args if a.keyword is None and a.star == ""]


def self_attribute(node: cst.CSTNode, self_name: str = "self") -> Optional[str]:
    """``x`` for ``self.x``, else None."""
    if (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == self_name
    ):
        return node.attr.value
    return None


def dynamic_self_attribute(node: cst.CSTNode, self_name: str = "self") -> Optional[str]:
    """The attribute name that ``setattr(self, <name>, v)`` sets or
    ``getattr(self, <name>[, default])`` reads: the string for a literal
    name, the literal parts with ``{}`` for each replacement of an f-string
    (``f"scale_{i}"`` -> ``scale_{}``: the same family of attributes whatever
    ``i``), else None."""
    if not isinstance(node, cst.Call) or dotted_name(node.func) not in ("setattr", "getattr"):
        return None
    if len(node.args) < 2 or any(a.star or a.keyword is not None for a in node.args):
        return None
    if dotted_name(node.args[0].value) != self_name:
        return None
    name = node.args[1].value
    s = string_value(name)
    if s is not None:
        return s
    if isinstance(name, cst.FormattedString):
        parts = []
        for part in name.parts:
            if isinstance(part, cst.FormattedStringText):
                parts.append(part.value)
            else:
                parts.append("{}")
        return "".join(parts)
    return None


def loop_over_attribute(node: cst.For, self_name: str = "self") -> Optional[Tuple[str, str, Optional[str]]]:
    """(loop variable, attribute, index variable) for ``for b in self.blocks``
    or ``for i, b in enumerate(self.blocks)``, else None."""
    it, target = node.iter, node.target
    index: Optional[str] = None
    if isinstance(it, cst.Call) and dotted_name(it.func) == "enumerate" and it.args:
        if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
            return None
        first = target.elements[0].value
        index = first.value if isinstance(first, cst.Name) else None
        it, target = it.args[0].value, target.elements[1].value
    attr = self_attribute(it, self_name)
    if attr is None or not isinstance(target, cst.Name):
        return None
    return target.value, attr, index


def shown_device(device: str) -> str:
    """A device expression as a message shows it: ``.cuda(1)`` records the
    bare index ``1``, which reads better as ``cuda:1``."""
    return f"cuda:{device}" if device.isdigit() else device


def current_device_only(value: str) -> bool:
    """Whether a device's source text (``torch.device("cuda" if ok else
    "cpu")``) can only name the current CUDA device or the CPU, never a
    fixed index."""
    try:
        node = cst.parse_expression(value)
    except Exception:
        return False
    found: List[Optional[str]] = []

    class _Strings(cst.CSTVisitor):
        def visit_SimpleString(self, n: cst.SimpleString) -> None:
            found.append(string_value(n))

        def visit_Integer(self, n: cst.Integer) -> None:
            found.append("index")

        def visit_FormattedString(self, n: cst.FormattedString) -> None:
            found.append("index")

    node.visit(_Strings())
    return bool(found) and all(v in ("cuda", "cpu") for v in found) and "cuda" in found


def cpu_device_only(value: str) -> bool:
    """Whether a device's source text can only name the CPU (``"cpu"``,
    ``torch.device("cpu")``)."""
    try:
        node = cst.parse_expression(value)
    except Exception:
        return False
    if isinstance(node, cst.Call) and dotted_name(node.func) in ("torch.device", "device") and len(node.args) == 1:
        node = node.args[0].value
    s = string_value(node)
    return s is not None and s.startswith("cpu")


def is_cuda_string(value: Optional[str]) -> bool:
    return value is not None and (value == "cuda" or value.startswith("cuda:"))


def _strip_placement(node: cst.BaseExpression) -> Tuple[cst.BaseExpression, Optional[cst.BaseExpression], bool]:
    """For ``X(...).to(dev)`` / ``X(...).cuda(i)`` return (X(...), device node, is_cuda_call)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        attr = node.func.attr.value
        if attr == "to" and node.args:
            first = node.args[0]
            dev = first.value if first.keyword is None or first.keyword.value == "device" else None
            if dev is not None:
                inner, _, _ = _strip_placement(node.func.value)
                return inner, dev, False
        if attr == "cuda":
            inner, _, _ = _strip_placement(node.func.value)
            return inner, (node.args[0].value if node.args else None), True
    return node, None, False


def _uses_name(node: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` appears as a plain name inside ``node``."""
    finder = _NameFinder(name, attributes=False)
    walk(node, finder)
    return bool(finder.found)


class _NameFinder(cst.CSTVisitor):
    """Finds the plain name ``name``; with ``attributes=False`` not below
    an attribute's name (``x.name``), only in its value."""

    def __init__(self, name: str, attributes: bool = True) -> None:
        self.name = name
        self.attributes = attributes
        self.found: List[cst.Name] = []

    def visit_Name(self, n: cst.Name) -> None:
        if n.value == self.name:
            self.found.append(n)

    def visit_Attribute(self, n: cst.Attribute) -> bool:
        if self.attributes:
            return True
        walk(n.value, self)
        return False


def ref_of(node: cst.CSTNode, self_name: str = "self") -> Optional[str]:
    """``x`` for a name, ``self.x`` for an attribute of the method's self
    (spelt ``self.`` whatever the parameter is called), else None."""
    if isinstance(node, cst.Name):
        return node.value
    attr = self_attribute(node, self_name)
    return f"self.{attr}" if attr is not None else None


def is_device_name(last: str) -> bool:
    """``device``, ``dev``, ``<word>_device`` (``train_device``), not
    ``num_device``/``place_model_on_device`` (a count, a flag)."""
    return last in ("device", "dev") or (
        last.endswith("_device") and last.count("_") == 1 and not last.startswith(("num_", "n_", "is_", "use_", "on_"))
    )


def _mentions_name(node: cst.CSTNode, name: str) -> bool:
    finder = _NameFinder(name)
    walk(node, finder)
    return bool(finder.found)


def placement_call(call: cst.Call) -> Optional[Tuple[cst.BaseExpression, str, Optional[cst.BaseExpression]]]:
    """(owner, method, device node) for ``owner.to(...)`` / ``owner.cuda(...)``."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
        return None
    device: Optional[cst.BaseExpression] = None
    kw = keyword_arg(call, "device")
    if kw is not None:
        device = kw.value
    else:
        args = positional_args(call)
        if args:
            device = args[0].value
    return func.value, func.attr.value, device


def strip_placements(node: cst.BaseExpression) -> Tuple[cst.BaseExpression, str]:
    """``X.to(dev).cuda()`` -> (X, device code of the outermost placement)."""
    device = ""
    first = True
    while isinstance(node, cst.Call):
        p = placement_call(node)
        if p is None:
            break
        owner, method, dev = p
        if first:
            device = code_of(dev) if dev is not None else ("cuda" if method == "cuda" else "")
            first = False
        node = owner
    return node, device


def _is_off(node: cst.BaseExpression) -> bool:
    """``False``, ``None``, ``0``: a switch turned off."""
    return (isinstance(node, cst.Name) and node.value in ("False", "None")) or (
        isinstance(node, cst.Integer) and node.value == "0"
    )


def with_keyword_arg(
    args: Sequence[cst.Arg], name: str, value: cst.BaseExpression, at: Optional[int] = None
) -> List[cst.Arg]:
    """``args`` with ``name=value`` inserted at ``at`` (default: the end),
    keeping the layout: a trailing comma stays trailing."""
    out = list(args)
    at = len(out) if at is None else at
    new = cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if at == 0:
        if out:
            new = new.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    else:
        prev = out[at - 1]
        if isinstance(prev.comma, cst.Comma):
            new = new.with_changes(comma=prev.comma)
        else:
            out[at - 1] = prev.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    out.insert(at, new)
    return out


def free_names(node: cst.CSTNode) -> Set[str]:
    """The plain names an expression reads (or a target binds): ``args`` of
    ``args.gpu``, ``local_rank`` of ``f"cuda:{local_rank}"``; not attribute
    names nor the keywords of call arguments."""
    finder = _FreeNames()
    walk(node, finder)
    return finder.found


class _FreeNames(cst.CSTVisitor):
    """:func:`free_names`' walk (one class for every call: a class made per
    call costs its creation and the walk's per-type caches)."""

    def __init__(self) -> None:
        self.found: Set[str] = set()

    def visit_Name(self, n: cst.Name) -> None:
        self.found.add(n.value)

    def visit_Attribute(self, n: cst.Attribute) -> bool:
        walk(n.value, self)
        return False

    def visit_Arg(self, n: cst.Arg) -> bool:
        walk(n.value, self)
        return False


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    left, right = test.left, test.comparisons[0].comparator
    names = {dotted_name(left), dotted_name(right)}
    return isinstance(test.comparisons[0].operator, cst.Equal) and "__name__" in names and (
        string_value(left) == "__main__" or string_value(right) == "__main__"
    )


def _env_read(node: cst.BaseExpression) -> Optional[str]:
    """``"LOCAL_RANK"`` for ``os.environ["LOCAL_RANK"]``, ``os.environ.get(...)``,
    ``os.getenv(...)``."""
    if isinstance(node, cst.Subscript) and node.slice:
        el = node.slice[0].slice
        if isinstance(el, cst.Index) and (dotted_name(node.value) or "").endswith("environ"):
            return string_value(el.value)
    if isinstance(node, cst.Call) and node.args:
        name = dotted_name(node.func) or ""
        if name.endswith("environ.get") or name.endswith("getenv"):
            return string_value(node.args[0].value)
    return None


def target_names(node: cst.BaseExpression) -> List[str]:
    """The dotted names an assignment target binds: ``a, self.b = ...`` ->
    ``["a", "self.b"]``."""
    if isinstance(node, (cst.Tuple, cst.List)):
        out: List[str] = []
        for el in node.elements:
            out += target_names(el.value)
        return out
    name = dotted_name(node)
    return [name] if name is not None else []


def _arg_names(call: cst.Call) -> List[str]:
    out = []
    for a in call.args:
        inner, _ = strip_placements(a.value)
        name = dotted_name(inner)
        if name is not None:
            out.append(name)
    return out


# --------------------------------------------------------------------------
# devices written as literals


def cuda_index(code: str, method: str = "to", module_devices: Optional[Dict[str, str]] = None) -> Optional[int]:
    """The CUDA index a device expression names when it is a literal:
    ``"cuda:1"`` -> 1, ``"cuda"`` -> 0 (the current device, cuda:0 unless
    ``set_device`` was called), ``torch.device("cuda", 1)`` -> 1, ``1`` -> 1;
    ``.cuda()`` (method ``cuda``, empty code) -> 0. None when unknown or
    not CUDA."""
    if method == "cuda" and code == "":
        return 0
    if not code:
        return None
    try:
        node = cst.parse_expression(code)
    except Exception:
        return None
    return _cuda_index_node(node, module_devices or {}, 3)


def _cuda_index_node(node: cst.BaseExpression, module_devices: Dict[str, str], depth: int) -> Optional[int]:
    if depth <= 0:
        return None
    s = string_value(node)
    if s is not None:
        if not is_cuda_string(s):
            return None
        if s == "cuda":
            return 0
        tail = s.split(":", 1)[1]
        return int(tail) if tail.isdigit() else None
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.Call) and (dotted_name(node.func) or "").endswith("device"):
        args = positional_args(node)
        if len(args) == 1:
            return _cuda_index_node(args[0].value, module_devices, depth - 1)
        if len(args) == 2 and string_value(args[0].value) == "cuda":
            return _cuda_index_node(args[1].value, module_devices, depth - 1)
        return None
    if isinstance(node, cst.Name) and node.value in module_devices:
        try:
            return _cuda_index_node(cst.parse_expression(module_devices[node.value]), module_devices, depth - 1)
        except Exception:
            return None
    return None


def is_explicit_device(code: str) -> bool:
    """A device that places one piece of a model on a chosen GPU:
    ``"cuda:1"``, ``1`` (``.cuda(1)``), ``devices[i]``, ``torch.device("cuda", i)``,
    ``f"cuda:{i}"``. Not: ``"cuda"``, ``"cuda:0"``, ``device`` (a name)."""
    if not code:
        return False
    try:
        node = cst.parse_expression(code)
    except Exception:
        return False
    if isinstance(node, cst.Subscript):
        return True
    if isinstance(node, cst.FormattedString):
        return True
    idx = _cuda_index_node(node, {}, 2)
    if idx is not None:
        return idx >= 1
    if isinstance(node, cst.Call) and (dotted_name(node.func) or "").endswith("device"):
        args = positional_args(node)
        return len(args) == 2 or any(isinstance(a.value, (cst.FormattedString, cst.Subscript)) for a in args)
    return False


def list_first_index(code: str) -> Optional[int]:
    """``[1, 2]`` -> 1; ``None`` for anything not a literal list/tuple of ints."""
    if not code:
        return None
    try:
        node = cst.parse_expression(code)
    except Exception:
        return None
    if isinstance(node, (cst.List, cst.Tuple)) and node.elements:
        first = node.elements[0].value
        if isinstance(first, cst.Integer):
            return int(first.value)
        return _cuda_index_node(first, {}, 2)
    return None


# -- the first parameter of a module -----------------------------------------
def first_parameter_of(node: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, bool]]:
    """``(X, exact)`` when ``node`` takes the first of ``X.parameters()``:
    ``next(X.parameters())``, ``next(iter(X.parameters()))``,
    ``list(X.parameters())[0]``, ``tuple(X.parameters())[0]``,
    ``next(p for p in X.parameters())`` (exact: the parameter itself), or
    ``next(p.device for p in X.parameters() if p.requires_grad)`` (not exact:
    a generator that transforms or filters them, which raises all the same)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "next":
        args = positional_args(node)
        if len(args) != 1 or len(node.args) != 1:
            return None  # next(it, default) does not raise
        inner = args[0].value
        if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Name) and inner.func.value == "iter":
            inner_args = positional_args(inner)
            if len(inner_args) != 1:
                return None
            inner = inner_args[0].value
        if isinstance(inner, cst.GeneratorExp):
            comp = inner.for_in
            if comp.asynchronous is not None or comp.inner_for_in is not None:
                return None
            owner = parameters_owner(comp.iter)
            if owner is None:
                return None
            exact = (
                not comp.ifs
                and isinstance(comp.target, cst.Name)
                and isinstance(inner.elt, cst.Name)
                and inner.elt.value == comp.target.value
            )
            return owner, exact
        owner = parameters_owner(inner)
        return (owner, True) if owner is not None else None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        if not (isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0"):
            return None
        seq = node.value
        if isinstance(seq, cst.Call) and isinstance(seq.func, cst.Name) and seq.func.value in ("list", "tuple"):
            args = positional_args(seq)
            if len(args) == 1:
                owner = parameters_owner(args[0].value)
                return (owner, True) if owner is not None else None
    return None


def parameters_owner(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``X`` in ``X.parameters()`` (no arguments or ``recurse=True``)."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "parameters"
        and not positional_args(node)
    ):
        return node.func.value
    return None


def catches_stop_iteration(kind: Optional[cst.BaseExpression]) -> bool:
    """An ``except`` clause of this type catches StopIteration."""
    if kind is None:
        return True  # a bare ``except:``
    if isinstance(kind, cst.Tuple):
        return any(catches_stop_iteration(e.value) for e in kind.elements)
    name = code_of(kind).rsplit(".", 1)[-1]
    return name in ("StopIteration", "Exception", "BaseException")


class AssignedNames(cst.CSTVisitor):
    """The targets of assignments (``x = ...``, ``x += ...``, ``x: T =
    ...``), each handed to :meth:`_add` (a subclass may count them or take
    more kinds of binding)."""

    def __init__(self) -> None:
        self.names: Set[str] = set()

    def _add(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.names.add(target.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._add(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._add(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._add(node.target)


def rebound_names(body: cst.CSTNode) -> Set[str]:
    """The plain names an assignment anywhere in ``body`` binds (``x = ...``,
    ``x += ...``, ``x: T = ...``)."""
    found = AssignedNames()
    walk(body, found)
    return found.names


def param_names(fn: cst.FunctionDef) -> Set[str]:
    """The names of a function's named parameters (positional-only, plain and
    keyword-only; not ``*args``/``**kwargs``)."""
    params = fn.params
    return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}


def bound_parameters(fn: cst.FunctionDef, args: Sequence[cst.Arg], method: bool = False) -> Dict[str, int]:
    """Parameter name -> the position in ``args`` of the argument a call
    passes to it (positional and keyword arguments; nothing past a
    ``*args``/``**kw``). ``method``: ``fn`` is called through an instance,
    so its first parameter is taken (unless it is a ``staticmethod``)."""
    params = [*fn.params.posonly_params, *fn.params.params]
    if method and params and not any((dotted_name(d.decorator) or "") == "staticmethod" for d in fn.decorators):
        params = params[1:]
    names = {p.name.value for p in (*params, *fn.params.kwonly_params)}
    out: Dict[str, int] = {}
    i = 0
    for pos, a in enumerate(args):
        if a.star:
            break
        if a.keyword is None:
            if i < len(params):
                out[params[i].name.value] = pos
            i += 1
        elif a.keyword.value in names:
            out[a.keyword.value] = pos
    return out


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: List[cst.Call] = []

    def visit_Call(self, n: cst.Call) -> None:
        self.found.append(n)

    def visit_Lambda(self, n: cst.Lambda) -> bool:
        return False


def calls_in(node: cst.CSTNode) -> List[cst.Call]:
    """Every call under ``node`` in source order, nested functions included,
    lambdas left out."""
    finder = _Calls()
    walk(node, finder)
    return finder.found


def optional_inner(node: cst.BaseExpression) -> cst.BaseExpression:
    """``T`` for ``Optional[T]`` and for ``T | None`` (either way round);
    ``node`` itself for any other annotation."""
    if isinstance(node, cst.Subscript) and (dotted_name(node.value) or "").rsplit(".", 1)[-1] == "Optional" and len(node.slice) == 1:
        inner = node.slice[0].slice
        return inner.value if isinstance(inner, cst.Index) else node
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if isinstance(b, cst.Name) and b.value == "None":
                return a
    return node


def annotates_tensor(node: cst.BaseExpression, optional: bool = False) -> bool:
    """``torch.Tensor``, ``Tensor``, ``torch.FloatTensor``: one tensor.
    ``optional``: also ``Optional[torch.FloatTensor]`` and ``Tensor | None``."""
    if optional:
        node = optional_inner(node)
    d = dotted_name(node) or ""
    return d.rsplit(".", 1)[-1] in ("Tensor", "FloatTensor", "LongTensor", "BoolTensor", "IntTensor") and d.split(".", 1)[0] in ("torch", d)


def annotated_name(annotation: cst.BaseExpression) -> Optional[str]:
    """The dotted name an annotation gives, as written or in quotes,
    ``Optional[...]`` / ``... | None`` taken off (``"DetectionOutput"``,
    ``Optional[nn.Module]``); None for anything else."""
    if isinstance(annotation, cst.SimpleString):
        text = string_value(annotation)
        try:
            annotation = cst.parse_expression(text) if text else annotation
        except cst.ParserSyntaxError:
            return None
    return dotted_name(optional_inner(annotation))


def reads_own_weights_device(node: cst.BaseExpression, self_name: str = "self") -> bool:
    """``next(self.parameters()).device``, ``self.fc.weight.device``: the
    device of the module's own weights, as code reads it."""
    if not (isinstance(node, cst.Attribute) and node.attr.value == "device"):
        return False
    inner = node.value
    found = first_parameter_of(inner)
    if found is not None:
        return isinstance(found[0], cst.Name) and found[0].value == self_name
    root = inner
    while isinstance(root, cst.Attribute):
        root = root.value
    return (isinstance(inner, cst.Attribute) and inner.attr.value in ("weight", "bias")
            and isinstance(root, cst.Name) and root.value == self_name)
