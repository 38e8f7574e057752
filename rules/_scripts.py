"""Shared walking support for the rules about wrapping and placing models in
scripts (DL003, DL004, DL005, DL012): it lines the nodes a rule visits up with
the script facts of :mod:`devlint.facts.scripts` and builds the common fixes.

Not a rule (the leading underscore keeps the registry away).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from devlint.facts.classes import ClassFacts
from devlint.facts.scripts import BindEvent, PlaceEvent, ScopeFacts, Scripts, WrapEvent
from devlint.rule import Rule
from devlint.syntax import (
    dotted_name,
    is_cuda_string,
    keyword_arg,
    placement_call,
    positional_args,
    string_value,
)

WRAPPER_SHORT = {
    "torch.nn.DataParallel": "DataParallel",
    "torch.nn.parallel.DistributedDataParallel": "DistributedDataParallel",
}


@dataclass
class _Frame:
    scope: ScopeFacts
    wraps: int = 0
    places: int = 0


@dataclass
class ModuleRead:
    """``<name>.module`` read in a scope, after ``wraps_before`` wrapper calls."""

    name: str
    node: cst.Attribute
    scope: int
    wraps_before: int
    class_name: str = ""


class ScriptRule(Rule):
    """A rule that follows the script facts: ``on_wrap``/``on_place`` are
    called with each wrapper / placement call node and its facts, and
    ``on_scope_end`` when a scope (module or function) has been walked."""

    requires = (Scripts,)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._frames: List[_Frame] = []
        self._scopes_seen = 0
        self.module_reads: List[ModuleRead] = []
        self._lines: List[cst.SimpleStatementLine] = []
        self._blocks: List[cst.BaseSuite] = []
        self._block_owner: Dict[int, cst.CSTNode] = {}
        self._elif: Set[int] = set()
        self._parent_block: Dict[int, cst.BaseSuite] = {}
        self._classes: List[str] = []
        #: wrapper call node id -> (statement line, its block, block owner)
        self.wrap_nodes: Dict[Tuple[int, int], cst.Call] = {}
        self.calls_by_name: Dict[Tuple[int, str], List[cst.Call]] = {}
        self.statement_of: Dict[int, Tuple[Optional[cst.SimpleStatementLine], Optional[cst.BaseSuite]]] = {}

    # -- scopes ------------------------------------------------------------
    @property
    def scope(self) -> ScopeFacts:
        return self._frames[-1].scope

    def _enter(self) -> None:
        scopes = self.scripts.scopes
        self._frames.append(_Frame(scopes[self._scopes_seen]))
        self._scopes_seen += 1

    def visit_Module(self, node: cst.Module) -> None:
        self._enter()

    def leave_Module(self, original_node: cst.Module) -> None:
        self.on_scope_end(self._frames[-1].scope)
        self._frames.pop()
        self.on_file_end()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter()

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.on_scope_end(self._frames[-1].scope)
        self._frames.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node.name.value)
        self._block_owner[id(node.body)] = node

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()
        cls = self.facts.classes.get(original_node.name.value)
        if cls is not None:
            self.on_class_end(cls, original_node)

    # -- statements and blocks (for removing a statement) -------------------
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._lines.append(node)
        if self._blocks:
            self._parent_block[id(node)] = self._blocks[-1]

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        self._lines.pop()

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.append(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._blocks.pop()

    def visit_If(self, node: cst.If) -> None:
        self._block_owner[id(node.body)] = node
        if isinstance(node.orelse, cst.If):
            self._elif.add(id(node.orelse))
        if self._blocks:
            self._parent_block[id(node)] = self._blocks[-1]

    # -- calls -------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call) -> None:
        frame = self._frames[-1]
        if self.facts.is_wrapper(original_node.func):
            ev = frame.scope.wraps[frame.wraps]
            frame.wraps += 1
            self.statement_of[id(original_node)] = (self._lines[-1] if self._lines else None, None)
            self.wrap_nodes[(frame.scope.index, ev.index)] = original_node
            self.on_wrap(original_node, frame.scope, ev)
            return
        callee = dotted_name(original_node.func)
        if callee is not None:
            self.calls_by_name.setdefault((frame.scope.index, callee), []).append(original_node)
        if placement_call(original_node) is not None:
            ev2 = frame.scope.placements[frame.places]
            frame.places += 1
            self.statement_of[id(original_node)] = (self._lines[-1] if self._lines else None, None)
            self.on_place(original_node, frame.scope, ev2)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "module" or not self._frames:
            return
        name = dotted_name(node.value)
        if name is not None:
            frame = self._frames[-1]
            self.module_reads.append(
                ModuleRead(name, node, frame.scope.index, frame.wraps, self._classes[-1] if self._classes else "")
            )

    # -- hooks -------------------------------------------------------------
    def on_wrap(self, node: cst.Call, scope: ScopeFacts, event: WrapEvent) -> None:
        pass

    def on_place(self, node: cst.Call, scope: ScopeFacts, event: PlaceEvent) -> None:
        pass

    def on_scope_end(self, scope: ScopeFacts) -> None:
        pass

    def on_class_end(self, cls: ClassFacts, node: cst.ClassDef) -> None:
        pass

    def on_file_end(self) -> None:
        """Everything has been walked: every node in ``wrap_nodes``,
        ``calls_by_name`` and ``module_reads`` is known."""

    # -- fixes -------------------------------------------------------------
    def remove_statement(self, line: cst.SimpleStatementLine) -> List[Tuple[cst.CSTNode, object]]:
        """Replacements deleting ``line``: the line itself when its block
        keeps other statements (comments above it move to the next
        statement), the enclosing ``if`` when the line was all it guarded,
        else ``pass``."""
        block = self._parent_block.get(id(line))
        body = block.body if isinstance(block, cst.IndentedBlock) else None
        if body is None and block is None:
            body = self.context.module.body  # module level
        if body is not None and len(body) > 1:
            return [(line, cst.RemovalSentinel.REMOVE)] + self._keep_comments(line, body)
        owner = self._block_owner.get(id(block)) if block is not None else None
        parent = self._parent_block.get(id(owner)) if owner is not None else None
        if (
            isinstance(owner, cst.If)
            and owner.orelse is None
            and id(owner) not in self._elif
            and isinstance(parent, cst.IndentedBlock)
            and len(parent.body) > 1
            and not any(l.comment for l in line.leading_lines)
        ):
            return [(owner, cst.RemovalSentinel.REMOVE)] + self._keep_comments(owner, parent.body)
        return [(line, line.with_changes(body=[cst.Pass()]))]

    @staticmethod
    def _keep_comments(stmt: cst.CSTNode, body: Sequence[cst.CSTNode]) -> List[Tuple[cst.CSTNode, object]]:
        leading = list(getattr(stmt, "leading_lines", ()))
        if not any(l.comment for l in leading):
            return []
        index = next((i for i, s in enumerate(body) if s is stmt), -1)
        if index < 0 or index + 1 >= len(body):
            return []
        nxt = body[index + 1]
        if not hasattr(nxt, "leading_lines"):
            return []
        return [(nxt, nxt.with_changes(leading_lines=leading + list(nxt.leading_lines)))]

    def unwrap_replacements(self, node: cst.Call, event: WrapEvent) -> Optional[List[Tuple[cst.CSTNode, object]]]:
        """Replacements that remove the wrapper call ``node``: the statement
        ``model = DP(model)`` goes, else the call becomes its first argument."""
        args = positional_args(node)
        first = args[0].value if args else (keyword_arg(node, "module").value if keyword_arg(node, "module") else None)
        if first is None:
            return None
        line, _ = self.statement_of.get(id(node), (None, None))
        if (
            line is not None
            and event.target
            and event.target == event.wrapped
            and not event.placed_after
            and len(line.body) == 1
            and isinstance(line.body[0], cst.Assign)
            and line.body[0].value is node
        ):
            return self.remove_statement(line)
        return [(node, first)]

    def module_read_fixes(self, name: str, scope: ScopeFacts, after_wraps: int, depth: int = 1) -> List[Tuple[cst.CSTNode, object]]:
        """``name.module`` -> ``name`` (``depth=2``: ``name.module.module`` ->
        ``name.module``) for the reads after the ``after_wraps``-th wrapper
        call of ``scope``; for ``self.x`` also the reads in the other methods
        of the class."""
        read_name = name if depth == 1 else f"{name}.module"
        is_attr = bool(scope.class_name and scope.params and name.startswith(scope.params[0] + "."))
        out: List[Tuple[cst.CSTNode, object]] = []
        for r in self.module_reads:
            if r.name != read_name:
                continue
            if r.scope == scope.index:
                if r.wraps_before <= after_wraps:
                    continue
            elif not (is_attr and r.class_name == scope.class_name):
                continue
            out.append((r.node, r.node.value))
        return out

    def class_read_fixes(self, class_name: str, attr_names: Sequence[str]) -> List[Tuple[cst.CSTNode, object]]:
        """``self.<attr>.module`` -> ``self.<attr>`` everywhere in a class."""
        out: List[Tuple[cst.CSTNode, object]] = []
        for r in self.module_reads:
            head, _, attr = r.name.partition(".")
            if r.class_name == class_name and attr in attr_names and "." not in attr:
                out.append((r.node, r.node.value))
        return out


# --------------------------------------------------------------------------
# what a name holds


def binding_chain(scope: ScopeFacts, name: str, order: int, branch: Sequence[str], limit: int = 8) -> List[BindEvent]:
    """The bindings that made ``name`` what it is at ``order``, following
    aliases and placements (``net = model.cuda()``) back to the origin."""
    chain: List[BindEvent] = []
    while limit > 0:
        limit -= 1
        b = scope.last_binding(name, order, branch)
        if b is None:
            return chain
        chain.append(b)
        if b.kind in ("alias", "place") and b.source:
            name, order, branch = b.source, b.order, b.branch
            continue
        return chain
    return chain


def visible_bindings(scripts, scope: ScopeFacts, name: str, order: int, branch: Sequence[str]) -> List[BindEvent]:
    """Like :func:`binding_chain`, falling back to module-level bindings for
    a name a function never binds."""
    chain = binding_chain(scope, name, order, branch)
    if not chain and scope.index != 0 and "." not in name and name not in scope.params:
        module = scripts.scopes[0]
        chain = binding_chain(module, name, 10 ** 9, [])
    return chain


# --------------------------------------------------------------------------
# devices


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


def calls_a_wrapper(scan) -> bool:
    """Candidate hook: the file calls something that may be DataParallel/DDP."""
    from devlint.torch_api import WRAPPERS

    return any(scan.refers_to(c.func, WRAPPERS) for c in scan.calls)


@dataclass
class Origin:
    """Where a wrapped model comes from: the classes it was built from, the
    dotted names handed to its constructor (with the scope and bindings they
    resolve to), and any ``device_map`` it was loaded with."""

    classes: List[str] = field(default_factory=list)
    args: List[Tuple[str, ScopeFacts, List[BindEvent]]] = field(default_factory=list)
    device_map: str = ""
    #: devices the model was placed on before the wrap
    placed: List[str] = field(default_factory=list)


def resolve_name(scripts, scope: ScopeFacts, name: str, order: int, branch: Sequence[str]) -> Tuple[ScopeFacts, List[BindEvent]]:
    """The bindings of ``name`` at ``order`` in ``scope``, falling back to the
    module level for a name the function never binds."""
    chain = binding_chain(scope, name, order, branch)
    if not chain and scope.index != 0 and "." not in name and name not in scope.params:
        module = scripts.scopes[0]
        return module, binding_chain(module, name, 10 ** 9, [])
    return scope, chain


def wrapped_origin(scripts, scope: ScopeFacts, ev: WrapEvent) -> Origin:
    origin = Origin()
    args: List[str] = []
    if ev.placed_inside:
        origin.placed.append(ev.placed_inside)
    if ev.wrapped_class:
        origin.classes.append(ev.wrapped_class)
        args = list(ev.wrapped_args)
        origin.device_map = ev.wrapped_device_map
        where, order, branch = scope, ev.order, ev.branch
    elif ev.wrapped_name:
        origin.device_map = ev.wrapped_device_map
        where, chain = resolve_name(scripts, scope, ev.wrapped_name, ev.order, ev.branch)
        for b in chain:
            if b.placed:
                origin.placed.append(b.placed)
        if not chain:
            return origin
        last = chain[-1]
        if last.kind == "construct":
            origin.classes.append(last.value_class)
            args = list(last.args)
        if last.kind in ("construct", "call") and last.device_map:
            origin.device_map = last.device_map
        order, branch = last.order, last.branch
    else:
        return origin
    for a in args:
        where_a, chain_a = resolve_name(scripts, where, a, order, branch)
        origin.args.append((a, where_a, chain_a))
    return origin


def contained_classes(facts, roots: Sequence[str]) -> List[str]:
    """``roots`` and the local module classes their submodules are built
    from, transitively (``Seq2Seq`` -> ``Encoder`` -> ``EncoderLayer``)."""
    seen: List[str] = []
    todo = [r for r in roots if r in facts.classes]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        for attr in facts.classes[name].attributes.values():
            for c in (attr.module_class, attr.element_class):
                if c and c in facts.classes and c not in seen:
                    todo.append(c)
    return seen
