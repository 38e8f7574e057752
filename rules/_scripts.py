"""Shared walking support for the rules about wrapping and placing models in
scripts (DL003, DL004, DL005, DL012): it lines the nodes a rule visits up with
the script facts of :mod:`devlint.semantic` and builds the common fixes.

Not a rule (the leading underscore keeps the registry away).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from devlint.rule import Rule
from devlint.semantic import (
    BindEvent,
    ClassFacts,
    PlaceEvent,
    ScopeFacts,
    WrapEvent,
    dotted_name,
    is_cuda_string,
    placement_call,
    positional_args,
    keyword_arg,
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
        self.statement_of: Dict[int, Tuple[Optional[cst.SimpleStatementLine], Optional[cst.BaseSuite]]] = {}

    # -- scopes ------------------------------------------------------------
    @property
    def scope(self) -> ScopeFacts:
        return self._frames[-1].scope

    def _enter(self) -> None:
        scopes = self.facts.scopes
        self._frames.append(_Frame(scopes[self._scopes_seen]))
        self._scopes_seen += 1

    def visit_Module(self, node: cst.Module) -> None:
        self._enter()

    def leave_Module(self, original_node: cst.Module) -> None:
        self.on_scope_end(self._frames[-1].scope)
        self._frames.pop()

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
            self.on_wrap(original_node, frame.scope, ev)
            return
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

    # -- fixes -------------------------------------------------------------
    def remove_statement(self, line: cst.SimpleStatementLine) -> Tuple[cst.CSTNode, object]:
        """A (node, replacement) pair deleting ``line``: the line itself when
        its block keeps other statements, the enclosing ``if`` when the line
        was all it guarded, else ``pass``."""
        block = self._parent_block.get(id(line))
        if isinstance(block, cst.IndentedBlock) and len(block.body) > 1:
            return line, cst.RemovalSentinel.REMOVE
        owner = self._block_owner.get(id(block)) if block is not None else None
        if (
            isinstance(owner, cst.If)
            and owner.orelse is None
            and id(owner) not in self._elif
            and isinstance(self._parent_block.get(id(owner)), cst.IndentedBlock)
            and len(self._parent_block[id(owner)].body) > 1  # type: ignore[union-attr]
        ):
            return owner, cst.RemovalSentinel.REMOVE
        if block is None:
            # module level: the module keeps its other statements
            return line, cst.RemovalSentinel.REMOVE
        return line, line.with_changes(body=[cst.Pass()])

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
            return [self.remove_statement(line)]
        return [(node, first)]

    def module_read_fixes(
        self, name: str, scope_index: int, after_wraps: int, depth: int = 1, class_name: str = ""
    ) -> List[Tuple[cst.CSTNode, object]]:
        """``name.module`` -> ``name`` (``depth=2``: ``name.module.module`` ->
        ``name.module``) for the reads after the wrapper call."""
        out: List[Tuple[cst.CSTNode, object]] = []
        for r in self.module_reads:
            if class_name:
                if r.class_name != class_name or r.name != name:
                    continue
            elif r.scope != scope_index or r.name != name or r.wraps_before <= after_wraps:
                continue
            if depth == 1:
                out.append((r.node, r.node.value))
        if depth == 2:
            for r in self.module_reads:
                if r.scope == scope_index and r.wraps_before > after_wraps and r.name == f"{name}.module":
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


def visible_bindings(facts, scope: ScopeFacts, name: str, order: int, branch: Sequence[str]) -> List[BindEvent]:
    """Like :func:`binding_chain`, falling back to module-level bindings for
    a name a function never binds."""
    chain = binding_chain(scope, name, order, branch)
    if not chain and scope.index != 0 and "." not in name and name not in scope.params:
        module = facts.scopes[0]
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
