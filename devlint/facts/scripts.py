"""The ``Scripts`` provider: how models are built, wrapped and placed in
each function of a file (:class:`ScopeFacts`: wrap, placement and binding
events in order, with the branch each sits in), the helpers that wrap their
argument (:class:`WrapHelper`), the functions ``mp.spawn`` starts, and which
module classes hold a DataParallel/DDP wrapper as a submodule.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Container, Dict, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from devlint.facts.classes import ClassFacts, Classes, FileFacts
from devlint.facts.store import FactStore, Provider
from devlint.facts.training import RANK_NAMES
from devlint.syntax import (
    _arg_names,
    _env_read,
    is_device_name,
    _is_main_guard,
    _is_off,
    target_names,
    code_of,
    dotted_name,
    free_names,
    is_number_literal,
    list_first_index,
    keyword_arg,
    placement_call,
    positional_args,
    string_value,
    strip_placements,
)
from devlint.torch_api import _KEEPS_PLACEMENT, UNWRAPPING_CALLS, WRAPPERS, _SPREADING_DEVICE_MAPS, canonical
from devlint.walk import walk


@dataclass
class WrapEvent:
    """``DataParallel(...)`` / ``DistributedDataParallel(...)`` called."""

    index: int
    order: int
    wrapper: str
    #: dotted name the result is bound to (``model``, ``self.net``), else ""
    target: str = ""
    #: dotted target of the statement the call sits in, at any depth
    statement_target: str = ""
    #: source of the wrapped expression (first argument)
    wrapped: str = ""
    #: dotted name under the wrapped expression, placements stripped
    wrapped_name: str = ""
    #: class constructed when the wrapped expression is a constructor call
    wrapped_class: str = ""
    #: dotted names passed to that constructor (``Seq2Seq(enc, dec)``)
    wrapped_args: List[str] = field(default_factory=list)
    #: the wrapped expression is itself a wrapper call (``DP(DP(m))``)
    wrapped_is_wrap: bool = False
    #: the callee as written when the wrapped expression is a call of
    #: something else than a wrapper (``DP(build_model(args))``), else ""
    wrapped_call: str = ""
    #: ``device_map=`` of a call wrapped directly (``DP(from_pretrained(..., device_map="auto"))``)
    wrapped_device_map: str = ""
    #: device of a placement inside: ``DP(m.to(dev))`` ("" none; ``.cuda()``: "cuda")
    placed_inside: str = ""
    #: device of a placement chained on the result: ``DP(m).to(dev)``
    placed_after: str = ""
    device_ids: str = ""
    output_device: str = ""
    branch: List[str] = field(default_factory=list)
    in_loop: bool = False
    #: for a call of a wrap helper (``ScopeFacts.helper_wraps``): the callee
    #: as written (``maybe_parallel``, ``self.wrap``) and which call of that
    #: callee in the scope it is (0-based, in the order calls are left)
    helper: str = ""
    helper_call: int = -1
    #: the helper wraps only under a condition / places its argument on a
    #: device itself before wrapping it (``model.cuda(gpu)``, then ``DDP(model)``)
    helper_conditional: bool = False
    helper_places: bool = False


@dataclass
class WrapHelper:
    """A function that returns its parameter ``param`` (``param_name``)
    wrapped in ``wrapper``, on every path or only under a condition
    (``if torch.cuda.device_count() > 1: model = nn.DataParallel(model)`` /
    ``return model``). Functions that test whether the parameter is already
    wrapped (``isinstance``, ``hasattr``, ``.module``) are not helpers:
    calling them twice wraps once."""

    param: int
    param_name: str
    wrapper: str
    conditional: bool = False
    #: (index, name) of the other parameters the wrap's condition reads: a
    #: call passing ``False``/``None``/``0`` for one of them does not wrap
    condition_params: List[Tuple[int, str]] = field(default_factory=list)
    #: the helper places the parameter on a device before wrapping it
    places: bool = False
    #: ``device_ids=`` of the wrap as written when it names no variable
    #: (``[1, 2]``; "" for the default); "?" when it does (``[gpu]``)
    device_ids: str = ""


@dataclass
class PlaceEvent:
    """``X.to(...)`` / ``X.cuda(...)`` called (on anything: models, tensors)."""

    index: int
    order: int
    method: str
    #: dotted name placed, or "" when it is not a plain name
    target: str = ""
    #: index of the wrap event when placed directly on a wrapper call
    on_wrap: int = -1
    #: source of the device argument ("" for ``.cuda()`` / ``.to(dtype=...)``)
    device: str = ""
    #: ``expr``: the whole statement is the call; ``assign``: ``X = <call>``
    #: rebinding the placed name; else ""
    statement: str = ""
    branch: List[str] = field(default_factory=list)
    in_loop: bool = False


@dataclass
class BindEvent:
    """A name (or ``self.x``) bound in the scope.

    kind: ``param``, ``wrap`` (to a wrapper call, ``wrap_index``), ``place``
    (to ``source.to(...)``), ``unwrap`` (``source.module``), ``construct``
    (an nn.Module constructor, ``value_class``), ``call`` (another call,
    ``call``), ``alias`` (``= source``), ``delete`` (``del name``: unbound
    from here), ``import``, ``def`` (a ``def``/``class`` statement), ``other``.
    """

    order: int
    target: str
    kind: str
    source: str = ""
    wrap_index: int = -1
    value_class: str = ""
    call: str = ""
    #: dotted names passed to the constructor or call
    args: List[str] = field(default_factory=list)
    #: device the value was placed on (``Encoder().to("cuda:1")``)
    placed: str = ""
    #: ``device_map=`` given to the call (``from_pretrained(..., device_map="auto")``)
    device_map: str = ""
    #: source of a ``torch.device(...)`` or string value (``device = torch.device("cuda:1")``)
    value: str = ""
    branch: List[str] = field(default_factory=list)
    in_loop: bool = False


@dataclass
class ScopeFacts:
    index: int
    #: qualified name: ``<module>``, ``main``, ``Trainer.setup``
    name: str
    #: the class when the scope is a method, else ""
    class_name: str = ""
    params: List[str] = field(default_factory=list)
    wraps: List[WrapEvent] = field(default_factory=list)
    placements: List[PlaceEvent] = field(default_factory=list)
    binds: List[BindEvent] = field(default_factory=list)
    #: expressions holding this process's rank usable as a CUDA index, best
    #: first (``local_rank``, ``args.local_rank``, a ``rank`` parameter, ...)
    rank_names: List[str] = field(default_factory=list)
    #: names bound to the global rank (``dist.get_rank()``,
    #: ``int(os.environ["RANK"])``): a GPU index only on the first node
    global_ranks: List[str] = field(default_factory=list)
    #: names bound to a local rank (``int(os.environ["LOCAL_RANK"])``,
    #: ``args.local_rank``, ``mp.spawn``'s process index)
    local_ranks: List[str] = field(default_factory=list)
    #: names bound to a physical GPU id read from ``CUDA_VISIBLE_DEVICES``
    #: (``int(os.environ["CUDA_VISIBLE_DEVICES"].split(",")[local_rank])``):
    #: inside the process CUDA numbers the visible GPUs from 0, so this is
    #: not a device index
    physical_ids: List[str] = field(default_factory=list)
    #: names bound to the ``CUDA_VISIBLE_DEVICES`` string or its split list
    visible_lists: List[str] = field(default_factory=list)
    #: the function returns a wrapper around this parameter (index), else -1
    wraps_param: int = -1
    #: wrapper the function returns around its parameter
    wraps_param_with: str = ""
    #: the function calls ``torch.cuda.set_device``
    sets_cuda_device: bool = False
    #: the function (may) return a model it wrapped (wrapper qualified name)
    returns_wrapper: str = ""
    #: calls of this file's wrap helpers (``FileFacts.wrap_helpers``), as
    #: wrap events of the argument the helper wraps (``index`` counts these)
    helper_wraps: List[WrapEvent] = field(default_factory=list)
    #: ``if`` tests of whether a name holds a wrapper already
    #: (``isinstance(m, nn.DataParallel)``, ``hasattr(self.model, "module")``):
    #: branch point -> the names tested
    wrap_tests: Dict[str, List[str]] = field(default_factory=dict)
    #: such tests whose body leaves the scope (``return``/``raise``): the
    #: code after them runs only when the name is not wrapped (order, name)
    wrap_guards: List[Tuple[int, str]] = field(default_factory=list)
    #: the function tests whether a parameter is wrapped or reads its
    #: ``.module`` (``unwrap(model)``): what it returns need not be its argument
    tests_param_wrapped: bool = False
    #: the parameters (indices) the function may return unwrapped: it
    #: returns their ``.module`` (``return m.module``, ``getattr(m, "module",
    #: m)``, ``m.module if isinstance(m, nn.DataParallel) else m``, or a name
    #: bound to it on a path that reaches the ``return``)
    unwraps_params: List[int] = field(default_factory=list)
    #: names the scope declares ``global`` or ``nonlocal`` (bound elsewhere)
    declared: List[str] = field(default_factory=list)
    #: branch points that are loop bodies (a ``del`` later in one reaches
    #: its top again)
    loop_points: List[str] = field(default_factory=list)

    def last_binding(self, name: str, before: int, branch: Sequence[str]) -> Optional[BindEvent]:
        """The latest binding of ``name`` before order ``before`` on a path
        that can reach an event on ``branch``; placements that rebind a name
        to itself (``model = model.to(dev)``) are skipped."""
        for b in reversed(self.binds):
            if b.order >= before or b.target != name:
                continue
            if not branches_compatible(b.branch, branch):
                continue
            if b.kind == "place" and b.source == name:
                continue
            return b
        return None

    def binds_between(self, name: str, start: int, end: int) -> List[BindEvent]:
        return [b for b in self.binds if b.target == name and start < b.order < end]


def branches_compatible(a: Sequence[str], b: Sequence[str]) -> bool:
    """Can one run pass through both branch positions?"""
    arms = {}
    for item in a:
        point, _, arm = item.partition(":")
        arms[point] = arm
    for item in b:
        point, _, arm = item.partition(":")
        if point in arms and arms[point] != arm:
            return False
    return True


def always_before(first: Sequence[str], then: Sequence[str]) -> bool:
    """Does every path through ``then`` pass through ``first`` (given
    ``first`` comes earlier)?"""
    return set(first) <= set(then)


_RANK_ATTRS = ("local_rank", "LOCAL_RANK")


def visible_devices_value(value: cst.BaseExpression, scope: "ScopeFacts") -> Optional[str]:
    """What an expression holds of ``CUDA_VISIBLE_DEVICES``: ``"id"``
    for one physical GPU id taken from it (an element: ``...split(",")[i]``,
    ``int(gpus[i])`` of a name holding the list), ``"list"`` for the string
    or its split list, None when it does not come from it."""
    inner = value
    while isinstance(inner, cst.Call) and dotted_name(inner.func) in ("int", "str") and len(inner.args) == 1:
        inner = inner.args[0].value
    if isinstance(inner, cst.Subscript) and _env_read(inner) is None:
        if visible_devices_value(inner.value, scope) == "list":
            slice_ = inner.slice[0].slice if len(inner.slice) == 1 else None
            return "id" if isinstance(slice_, cst.Index) else "list"
        return None
    if _env_read(inner) == "CUDA_VISIBLE_DEVICES":
        return "list"
    if isinstance(inner, cst.Name):
        if inner.value in scope.physical_ids:
            return "id"
        return "list" if inner.value in scope.visible_lists else None
    if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value in ("split", "strip"):
        return visible_devices_value(inner.func.value, scope)
    return None


class _ScriptCollector(cst.CSTVisitor):
    def __init__(self, facts: FileFacts) -> None:
        self.facts = facts
        self.out = ScriptFacts(facts)
        self.scopes: List[ScopeFacts] = []
        self.stack: List[ScopeFacts] = []
        self.names: List[str] = []
        self.class_names: List[Optional[str]] = []
        # per-scope walking state, saved on entering a nested def
        self.branch: List[str] = []
        self.loops = 0
        self.points = 0
        self.order = 0
        self.saved: List[Tuple[List[str], int, int, int]] = []
        self.try_ids: List[int] = []
        self.assign_target: Dict[int, str] = {}
        self.statement_targets: List[str] = []
        self.pending_after: Dict[int, str] = {}
        self.wrap_index_of: Dict[int, int] = {}
        self.statement_kind: Dict[int, str] = {}
        # for wrap helpers (filled into facts by ``_finish_wrap_helpers``):
        # returns (scope, returned name, order, branch, wrap index or -1),
        # ``if`` tests by (scope, branch point), scopes that test whether a
        # parameter is already wrapped, calls that may be helper calls
        self.returns: List[Tuple[int, str, int, List[str], int]] = []
        self.if_tests: Dict[Tuple[int, int], cst.BaseExpression] = {}
        self.guarded: Set[int] = set()
        self.call_counts: Dict[Tuple[int, str], int] = {}
        self.maybe_helper_calls: List[Tuple[int, str, int, cst.Call, WrapEvent]] = []
        #: classes whose ``__init__`` wraps a parameter, among ``wrap_helpers``
        self.constructors: Set[str] = set()
        #: ``a, b = f(...)``: (scope, name, position, callee as written)
        self.unpacked: List[Tuple[int, str, int, str]] = []
        #: scope -> the names each ``return a, b`` gives, by position ("" for
        #: anything but a name)
        self.returned_tuples: Dict[int, List[List[str]]] = {}

    # -- scopes ------------------------------------------------------------
    def _open(self, node: cst.CSTNode, name: str, class_name: str, params: List[str]) -> ScopeFacts:
        scope = ScopeFacts(index=len(self.scopes), name=name, class_name=class_name, params=params)
        self.out.scope_at[node] = scope
        self.scopes.append(scope)
        self.stack.append(scope)
        self.saved.append((self.branch, self.loops, self.points, self.order))
        self.branch, self.loops, self.points, self.order = [], 0, 0, 0
        return scope

    def _close(self) -> None:
        self.stack.pop()
        self.branch, self.loops, self.points, self.order = self.saved.pop()

    @property
    def scope(self) -> ScopeFacts:
        return self.stack[-1]

    def _next(self) -> int:
        self.order += 1
        return self.order

    def visit_Module(self, node: cst.Module) -> None:
        self._open(node, "<module>", "", [])

    def leave_Module(self, node: cst.Module) -> None:
        self._close()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scope.binds.append(self._bind(node.name.value, "def"))
        self.names.append(node.name.value)
        self.class_names.append(node.name.value)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.names.pop()
        self.class_names.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # a method: the def sits directly in a class body
        class_name = self.class_names[-1] if self.class_names and self.class_names[-1] is not None else ""
        if not class_name:
            self.scope.binds.append(self._bind(node.name.value, "def"))
        self.names.append(node.name.value)
        params = [p.name.value for p in list(node.params.posonly_params) + list(node.params.params) + list(node.params.kwonly_params)]
        scope = self._open(node, ".".join(self.names), class_name, params)
        self.class_names.append(None)
        for p in params:
            scope.binds.append(BindEvent(order=self._next(), target=p, kind="param"))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.names.pop()
        self.class_names.pop()
        self._close()

    # -- branches ----------------------------------------------------------
    def _branch(self) -> List[str]:
        return [b for b in self.branch if b]

    def _point(self) -> int:
        self.points += 1
        return self.points

    def visit_If(self, node: cst.If) -> None:
        self.try_ids.append(self._point())
        self.if_tests[(self.scope.index, self.try_ids[-1])] = node.test
        tested = self._wrap_tested(node.test)
        if tested:
            self.scope.wrap_tests[str(self.try_ids[-1])] = tested
            body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
            last = body[-1] if body else None
            if isinstance(last, cst.SimpleStatementLine) and last.body and isinstance(last.body[-1], (cst.Return, cst.Raise)):
                self.scope.wrap_guards.extend((self.order, name) for name in tested)

    def _wrap_tested(self, test: cst.BaseExpression) -> List[str]:
        """The names ``test`` checks for holding a wrapper."""
        out: List[str] = []
        todo: List[cst.CSTNode] = [test]
        while todo:
            node = todo.pop()
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("isinstance", "hasattr") and len(node.args) > 1:
                name = dotted_name(node.args[0].value)
                if name and self._tests_wrapped(node.func.value, node.args[1].value):
                    out.append(name)
                continue
            todo.extend(node.children)
        return out

    def leave_If(self, node: cst.If) -> None:
        self.try_ids.pop()

    def visit_If_body(self, node: cst.If) -> None:
        # ``if __name__ == "__main__":`` always runs when the script runs
        self.branch.append("" if _is_main_guard(node.test) else f"{self.try_ids[-1]}:0")

    def leave_If_body(self, node: cst.If) -> None:
        self.branch.pop()

    def visit_If_orelse(self, node: cst.If) -> None:
        self.branch.append(f"{self.try_ids[-1]}:1")

    def leave_If_orelse(self, node: cst.If) -> None:
        self.branch.pop()

    def visit_Try(self, node: cst.Try) -> None:
        self.try_ids.append(self._point())

    def leave_Try(self, node: cst.Try) -> None:
        self.try_ids.pop()

    def visit_Try_body(self, node: cst.Try) -> None:
        self.branch.append(f"{self.try_ids[-1]}:0")

    def leave_Try_body(self, node: cst.Try) -> None:
        self.branch.pop()

    def visit_Try_orelse(self, node: cst.Try) -> None:
        self.branch.append(f"{self.try_ids[-1]}:0")

    def leave_Try_orelse(self, node: cst.Try) -> None:
        self.branch.pop()

    def visit_Try_handlers(self, node: cst.Try) -> None:
        self.branch.append(f"{self.try_ids[-1]}:1")

    def leave_Try_handlers(self, node: cst.Try) -> None:
        self.branch.pop()

    def _loop_body(self, node: Union[cst.For, cst.While]) -> None:
        self.try_ids.append(self._point())
        self.branch.append(f"{self.try_ids[-1]}:0")
        self.scope.loop_points.append(self.branch[-1])
        self.loops += 1

    def _loop_body_end(self) -> None:
        self.loops -= 1
        self.branch.pop()
        self.try_ids.pop()

    def visit_For_body(self, node: cst.For) -> None:
        self._loop_body(node)
        # the loop's target is bound anew at the start of every round
        # (``for model in models: model = DDP(model)`` wraps a fresh module
        # each round, not the last round's wrapper)
        for name in target_names(node.target):
            self.scope.binds.append(self._bind(name, "other"))

    def leave_For_body(self, node: cst.For) -> None:
        self._loop_body_end()

    def visit_While_body(self, node: cst.While) -> None:
        self._loop_body(node)

    def leave_While_body(self, node: cst.While) -> None:
        self._loop_body_end()

    # -- statements --------------------------------------------------------
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) != 1:
            return
        small = node.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            self.statement_kind[id(small.value)] = "expr"
        elif isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call):
            target = dotted_name(small.targets[0].target)
            p = placement_call(small.value)
            if target is not None and p is not None and dotted_name(p[0]) == target:
                self.statement_kind[id(small.value)] = "assign"

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if _env_read(t.target) == "CUDA_VISIBLE_DEVICES" and not (
                string_value(node.value) is not None or isinstance(node.value, cst.Integer)
            ):
                # ``= str(rank)``: each process sees its own GPU as cuda:0; a
                # constant (``= "0,1,2,3"``) gives every process the same GPUs
                self.out.sets_visible_devices = True
        target = dotted_name(node.targets[0].target) if len(node.targets) == 1 else None
        self.statement_targets.append(target or "")
        if target is not None:
            self._mark_value(node.value, target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        target = dotted_name(node.target)
        self.statement_targets.append(target or "")
        if target is not None and node.value is not None:
            self._mark_value(node.value, target)

    def _mark_value(self, value: cst.BaseExpression, target: str) -> None:
        node = value
        self.assign_target[id(node)] = target
        while isinstance(node, cst.Call) and (placement_call(node) is not None or _returns_receiver(node)):
            node = node.func.value  # type: ignore[attr-defined]
            self.assign_target[id(node)] = target

    def leave_Assign(self, node: cst.Assign) -> None:
        self.statement_targets.pop()
        for t in node.targets:
            if isinstance(t.target, (cst.Tuple, cst.List)):
                call = node.value if isinstance(node.value, cst.Call) else None
                if call is not None and dotted_name(call.func):
                    for pos, e in enumerate(t.target.elements):
                        if isinstance(e.value, cst.Name):  # rank, world = setup(): what setup returns there
                            self.unpacked.append((self.scope.index, e.value.value, pos, dotted_name(call.func) or ""))
                for name in target_names(t.target):
                    if call is not None:
                        self.scope.binds.append(self._bind(name, "other", call=dotted_name(call.func) or "", args=_arg_names(call)))
                    else:
                        self.scope.binds.append(self._bind(name, "other"))
                continue
            target = dotted_name(t.target)
            if target is not None:
                self.scope.binds.append(self._bind_value(target, node.value))

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.statement_targets.pop()
        target = dotted_name(node.target)
        if target is not None and node.value is not None:
            self.scope.binds.append(self._bind_value(target, node.value))

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        target = dotted_name(node.target)
        if target is not None:
            self.scope.binds.append(self._bind(target, "other"))

    def visit_Del(self, node: cst.Del) -> None:
        for name in target_names(node.target):
            self.scope.binds.append(self._bind(name, "delete"))

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            while isinstance(bound, cst.Attribute):
                bound = bound.value
            if isinstance(bound, cst.Name):
                self.scope.binds.append(self._bind(bound.value, "import"))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            self.out.star_import = True
            return
        for alias in node.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            if isinstance(bound, cst.Name):
                self.scope.binds.append(self._bind(bound.value, "import"))

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None and isinstance(node.name.name, cst.Name):
            self.scope.binds.append(self._bind(node.name.name.value, "other"))

    def leave_NamedExpr(self, node: cst.NamedExpr) -> None:
        if isinstance(node.target, cst.Name):
            self.scope.binds.append(self._bind(node.target.value, "other"))

    def visit_Global(self, node: cst.Global) -> None:
        self.scope.declared.extend(n.name.value for n in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.scope.declared.extend(n.name.value for n in node.names)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            for name in target_names(node.asname.name):
                self.scope.binds.append(self._bind(name, "other"))

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is None or len(self.stack) < 2:
            return
        if isinstance(node.value, cst.Tuple):
            self.returned_tuples.setdefault(self.scope.index, []).append(
                [e.value.value if isinstance(e.value, cst.Name) else "" for e in node.value.elements]
            )
        inner, _ = strip_placements(node.value)
        name = dotted_name(inner)
        if name is not None:
            for b in reversed(self.scope.binds):
                if b.target == name and not (b.kind == "place" and b.source == name):
                    if b.kind == "wrap":
                        self.scope.returns_wrapper = self.scope.wraps[b.wrap_index].wrapper
                    break
        if isinstance(inner, cst.Call):
            wrapper = self.facts.is_wrapper(inner.func)
            args = positional_args(inner)
            if wrapper:
                self.scope.returns_wrapper = wrapper
            if wrapper and args:
                wrapped, _ = strip_placements(args[0].value)
                name = dotted_name(wrapped)
                if name in self.scope.params:
                    self.scope.wraps_param = self.scope.params.index(name)
                    self.scope.wraps_param_with = wrapper

    def leave_Return(self, original_node: cst.Return) -> None:
        if original_node.value is None or len(self.stack) < 2:
            return
        inner, _ = strip_placements(original_node.value)
        if isinstance(inner, cst.IfExp):
            # ``return DataParallel(m) if multi_gpu else m``: each arm is a
            # return under the expression's test
            point = self._point()
            self.if_tests[(self.scope.index, point)] = inner.test
            for arm, value in ((0, inner.body), (1, inner.orelse)):
                self._note_return(value, self._branch() + [f"{point}:{arm}"])
            return
        self._note_return(inner, self._branch())

    def _note_return(self, value: cst.BaseExpression, branch: List[str]) -> None:
        for p in self._unwrapped_params(self.scope, value, self.order + 1, branch):
            if p not in self.scope.unwraps_params:
                self.scope.unwraps_params.append(p)
        inner, _ = strip_placements(value)
        wrap_index = self.wrap_index_of.get(id(inner), -1)
        name = dotted_name(inner) if wrap_index < 0 else ""
        if wrap_index >= 0 or name:
            self.returns.append((self.scope.index, name or "", self.order, branch, wrap_index))

    def _unwrapped_params(self, scope: ScopeFacts, value: cst.BaseExpression, order: int, branch: Sequence[str]) -> List[int]:
        """The parameters whose ``.module`` ``value`` (returned at ``order``)
        may be: ``m.module``, ``getattr(m, "module", m)``, either arm of a
        conditional expression, or a name a reaching binding set to one of
        those (through aliases and moves)."""
        inner, _ = strip_receiver_calls(value)
        if isinstance(inner, cst.IfExp):
            return self._unwrapped_params(scope, inner.body, order, branch) + self._unwrapped_params(scope, inner.orelse, order, branch)
        source: Optional[cst.BaseExpression] = None
        if isinstance(inner, cst.Attribute) and inner.attr.value == "module":
            source = inner.value
        elif isinstance(inner, cst.Call) and dotted_name(inner.func) == "getattr" and len(inner.args) >= 2 \
                and string_value(inner.args[1].value) == "module":
            source = inner.args[0].value
        if source is not None:
            name = dotted_name(strip_receiver_calls(source)[0])
            p = _param_of(scope, name, order, branch) if name else -1
            return [p] if p >= 0 else []
        name = dotted_name(inner)
        if name is None:
            return []
        out: List[int] = []
        todo = [(name, order, list(branch))]
        for _ in range(16):
            if not todo:
                break
            n, o, br = todo.pop()
            for b in reaching_bindings(scope, n, o, br)[0]:
                if b.kind == "unwrap" and b.source:
                    p = _param_of(scope, b.source, b.order, b.branch)
                    if p >= 0 and p not in out:
                        out.append(p)
                elif b.kind in ("alias", "place") and b.source:
                    todo.append((b.source, b.order, b.branch))
        return out

    def _bind(self, target: str, kind: str, **kw) -> BindEvent:
        return BindEvent(order=self._next(), target=target, kind=kind, branch=self._branch(), in_loop=self.loops > 0, **kw)

    def _bind_value(self, target: str, value: cst.BaseExpression) -> BindEvent:
        inner, placed = strip_receiver_calls(value)
        visible = visible_devices_value(value, self.scope)
        if visible is not None and "." not in target:
            names = self.scope.physical_ids if visible == "id" else self.scope.visible_lists
            if target not in names:
                names.append(target)
        rank = self._rank_value(value)
        if rank is None and "." not in target and "rank" in target.lower() and not is_number_literal(value):
            rank = 0 if "local" in target.lower() else 1
        if rank is not None and "." not in target:
            self._add_rank(target, rank)
        if isinstance(inner, cst.Call):
            if id(inner) in self.wrap_index_of:
                return self._bind(target, "wrap", wrap_index=self.wrap_index_of[id(inner)], placed=placed)
            args = _arg_names(inner)
            device_map = _device_map(inner)
            cls = self.facts.class_of_call(inner.func)
            if cls is not None and self.facts.is_module_class(cls):
                return self._bind(target, "construct", value_class=cls, args=args, placed=placed, device_map=device_map)
            value = code_of(inner) if cls == "torch.device" and not placed else ""
            return self._bind(target, "call", call=dotted_name(inner.func) or "", args=args, placed=placed, device_map=device_map, value=value)
        if string_value(value) is not None:
            return self._bind(target, "other", value=code_of(value))
        name = dotted_name(inner)
        if placed and name is not None:
            return self._bind(target, "place", source=name, placed=placed)
        if isinstance(inner, cst.Attribute) and inner.attr.value == "module":
            src = dotted_name(inner.value)
            if src is not None:
                return self._bind(target, "unwrap", source=src)
        if name is not None:
            return self._bind(target, "alias", source=name)
        return self._bind(target, "other")

    # -- calls -------------------------------------------------------------
    def visit_Subscript(self, node: cst.Subscript) -> None:
        if _env_read(node) == "LOCAL_RANK":
            self.out.reads_local_rank_env = True  # os.environ["LOCAL_RANK"]

    def visit_Call(self, node: cst.Call) -> None:
        # where the call runs: after every event so far (``unbound_at``)
        self.out.call_points[node] = (self.scope.index, self.order + 1, tuple(self._branch()))
        if _env_read(node) == "LOCAL_RANK":
            self.out.reads_local_rank_env = True
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument" and any(
            string_value(a.value) in ("--local_rank", "--local-rank") for a in node.args if a.keyword is None
        ):
            default = keyword_arg(node, "default")
            if default is not None and isinstance(default.value, cst.Integer):
                self.out.local_rank_option_default = default  # parser.add_argument("--local_rank", default=0)
        p = placement_call(node)
        if p is not None and isinstance(p[0], cst.Call):
            dev = p[2]
            self.pending_after[id(p[0])] = code_of(dev) if dev is not None else ("cuda" if p[1] == "cuda" else "")
        if self.facts.qualify(node.func) == "torch.cuda.set_device":
            self.scope.sets_cuda_device = True
        if len(self.stack) > 1 and isinstance(node.func, cst.Name) and node.func.value in ("isinstance", "hasattr") and node.args:
            if dotted_name(node.args[0].value) in self.scope.params:
                self.guarded.add(self.scope.index)
        if self.facts.qualify(node.func) in ("torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"):
            args = positional_args(node)
            name = dotted_name(args[0].value) if args else None
            if name and name not in self.out.spawn_targets:
                self.out.spawn_targets.append(name)

    def _tests_wrapped(self, test: str, arg: cst.BaseExpression) -> bool:
        """``isinstance(_, nn.DataParallel)`` (or a tuple naming a wrapper),
        ``hasattr(_, "module")``."""
        if test == "hasattr":
            return string_value(arg) == "module"
        items = [e.value for e in arg.elements] if isinstance(arg, (cst.Tuple, cst.List)) else [arg]
        return any(self.facts.is_wrapper(e) for e in items)

    def leave_Call(self, node: cst.Call) -> None:
        scope = self.scope
        wrapper = self.facts.is_wrapper(node.func)
        if wrapper:
            ev = WrapEvent(
                index=len(scope.wraps), order=self._next(), wrapper=wrapper,
                target=self.assign_target.get(id(node), ""),
                statement_target=self.statement_targets[-1] if self.statement_targets else "",
                branch=self._branch(), in_loop=self.loops > 0,
                placed_after=self.pending_after.pop(id(node), ""),
            )
            args = positional_args(node)
            first = args[0].value if args else (keyword_arg(node, "module").value if keyword_arg(node, "module") else None)
            if first is not None:
                ev.wrapped = code_of(first)
                inner, ev.placed_inside = strip_placements(first)
                ev.wrapped_name = dotted_name(inner) or ""
                if isinstance(inner, cst.Call):
                    if self.facts.is_wrapper(inner.func):
                        ev.wrapped_is_wrap = True
                    else:
                        ev.wrapped_call = dotted_name(inner.func) or ""
                        cls = self.facts.class_of_call(inner.func)
                        if cls is not None and self.facts.is_module_class(cls):
                            ev.wrapped_class = cls
                            ev.wrapped_args = _arg_names(inner)
                        ev.wrapped_device_map = _device_map(inner)
            ids = keyword_arg(node, "device_ids")
            if ids is None and len(args) > 1:
                ids = args[1]
            ev.device_ids = code_of(ids.value) if ids is not None else ""
            out = keyword_arg(node, "output_device")
            if out is None and len(args) > 2:
                out = args[2]
            ev.output_device = code_of(out.value) if out is not None else ""
            self.wrap_index_of[id(node)] = ev.index
            scope.wraps.append(ev)
            self.out.wrap_at[node] = ev
            self.out.wrap_nodes[(scope.index, ev.index)] = node
            return
        self._count_call(node)
        p = placement_call(node)
        if p is not None:
            owner, method, dev = p
            ev2 = PlaceEvent(
                index=len(scope.placements), order=self._next(), method=method,
                target=dotted_name(owner) or "",
                on_wrap=self.wrap_index_of.get(id(owner), -1),
                device=code_of(dev) if dev is not None else "",
                statement=self.statement_kind.get(id(node), ""),
                branch=self._branch(), in_loop=self.loops > 0,
            )
            scope.placements.append(ev2)
            self.out.place_at[node] = ev2

    def _count_call(self, node: cst.Call) -> None:
        """Number the call per (scope, callee) (``ScriptFacts.call_nodes``), and keep a call that may be one of a wrap helper (a plain
        function, or a method through ``self``) for ``_finish_wrap_helpers``."""
        callee = dotted_name(node.func)
        if callee is None:
            return
        scope = self.scope
        k = self.call_counts.get((scope.index, callee), 0)
        self.call_counts[(scope.index, callee)] = k + 1
        self.out.call_nodes[(scope.index, callee, k)] = node
        if self.loops > 0:
            self.out.calls_in_loops.add((scope.index, callee, k))
        head, dot, rest = callee.partition(".")
        if not node.args or (dot and ("." in rest or not (scope.class_name and scope.params and head == scope.params[0]))):
            return
        ev = WrapEvent(
            index=-1, order=self._next(), wrapper="",
            target=self.assign_target.get(id(node), ""),
            statement_target=self.statement_targets[-1] if self.statement_targets else "",
            branch=self._branch(), in_loop=self.loops > 0, helper=callee, helper_call=k,
        )
        self.maybe_helper_calls.append((scope.index, callee, k, node, ev))

    def _param_wrapped(self, scope: ScopeFacts, ev: WrapEvent) -> Tuple[int, bool]:
        """Index of the parameter whose value ``ev`` wraps (through aliases
        and placements), else -1; and whether the value was placed on a
        device on the way (``model = model.cuda(gpu)``, ``DDP(model.to(d))``)."""
        name, order, branch = ev.wrapped_name, ev.order, ev.branch
        placed = bool(ev.placed_inside)
        for _ in range(8):
            if not name:
                return -1, placed
            b = scope.last_binding(name, order, branch)
            if b is None:
                return -1, placed
            # ``model = model.cuda(gpu)`` rebinds the name to itself (last_binding skips it)
            placed = placed or any(
                x.kind == "place" and x.target == name and x.source == name and b.order < x.order < order for x in scope.binds
            )
            if b.kind == "param":
                index = scope.params.index(b.target)
                placed = placed or any(
                    p.target == b.target and p.statement == "expr" and p.order < ev.order for p in scope.placements
                )
                return (-1 if index == 0 and scope.class_name else index), placed
            if b.kind not in ("alias", "place") or not b.source:
                return -1, placed
            placed = placed or b.kind == "place"
            name, order, branch = b.source, b.order, b.branch
        return -1, placed

    def _condition_params(self, scope: ScopeFacts, branch: Sequence[str], keep: str) -> List[Tuple[int, str]]:
        names: Set[str] = set()
        for item in branch:
            test = self.if_tests.get((scope.index, int(item.partition(":")[0])))
            if test is not None:
                names.update(free_names(test))
        first = 1 if scope.class_name else 0  # ``self.multi_gpu`` is no switch of the caller's
        return [(i, p) for i, p in enumerate(scope.params) if i >= first and p != keep and p in names]

    def _finish_wrap_helpers(self) -> None:
        """Fill ``facts.wrap_helpers`` and every scope's ``helper_wraps``."""
        helpers = self.out.wrap_helpers
        for si, name, order, branch, wrap_index in self.returns:
            scope = self.scopes[si]
            if si in self.guarded or not scope.params:
                continue
            if wrap_index < 0:
                b = scope.last_binding(name, order + 1, branch)
                for _ in range(8):
                    if b is None or b.kind != "alias" or not b.source:
                        break
                    b = scope.last_binding(b.source, b.order, b.branch)
                if b is None or b.kind != "wrap":
                    continue
                wrap_index = b.wrap_index
            ev = scope.wraps[wrap_index]
            param, places = self._param_wrapped(scope, ev)
            if param < 0:
                continue
            conditional = bool(ev.branch or branch)
            old = helpers.get(scope.name)
            if old is None or (old.conditional and not conditional):
                helpers[scope.name] = self._wrap_helper(scope, ev, param, places, list(branch))
        # a class whose ``__init__`` wraps a parameter (``self.model =
        # nn.DataParallel(model)``): building one wraps what it is given
        for scope in self.scopes:
            if not scope.class_name or scope.name != f"{scope.class_name}.__init__" or scope.index in self.guarded \
                    or scope.class_name in helpers:
                continue
            for ev in scope.wraps:
                param, places = self._param_wrapped(scope, ev)
                if param < 1:
                    continue
                helpers[scope.class_name] = self._wrap_helper(scope, ev, param, places, [])
                self.constructors.add(scope.class_name)
                break
        if not helpers and self.facts.index is None:
            return
        done: Set[int] = set()
        self._helper_calls(done)
        # a function that returns what a wrap helper made of its argument
        # (``model = setup(model)``, ..., ``return model``) wraps it too
        for _round in range(3):
            if not self._relayed_helpers():
                break
            self._helper_calls(done)

    def _wrap_helper(self, scope: ScopeFacts, ev: WrapEvent, param: int, places: bool, branch: List[str]) -> WrapHelper:
        """The helper record of ``scope`` wrapping its parameter ``param`` with
        ``ev`` (under ``branch`` as well as the wrap's own conditions)."""
        tests = list(ev.branch) + branch
        cond = self._condition_params(scope, tests, scope.params[param])
        ids = ev.device_ids if not ev.device_ids or list_first_index(ev.device_ids) is not None else "?"
        return WrapHelper(param, scope.params[param], ev.wrapper, bool(tests), cond, places, ids)

    def _relayed_helpers(self) -> bool:
        """Add to ``wrap_helpers`` the functions that return a wrap helper's
        result on their parameter; True when one was added."""
        helpers = self.out.wrap_helpers
        added = False
        for si, name, order, branch, wrap_index in self.returns:
            scope = self.scopes[si]
            if wrap_index >= 0 or si in self.guarded or not scope.params or scope.name in helpers:
                continue
            b = scope.last_binding(name, order + 1, branch)
            for _ in range(8):
                if b is None or b.kind not in ("alias", "place") or not b.source:
                    break
                b = scope.last_binding(b.source, b.order, b.branch)
            if b is None or b.kind != "call":
                continue
            ev = next((h for h in reversed(scope.helper_wraps)
                       if h.target == b.target and h.helper == b.call and h.order < b.order), None)
            if ev is None:
                continue
            param, places = self._param_wrapped(scope, ev)
            if param < 0:
                continue
            helpers[scope.name] = WrapHelper(param, scope.params[param], ev.wrapper, ev.helper_conditional or bool(branch),
                                             [], places or ev.helper_places, ev.device_ids)
            added = True
        return added

    def _helper_calls(self, done: Set[int]) -> None:
        """Record the calls of wrap helpers as wrap events of their scopes
        (``ScopeFacts.helper_wraps``), each call once."""
        helpers = self.out.wrap_helpers
        for si, callee, _k, node, ev in self.maybe_helper_calls:
            if id(node) in done:
                continue
            scope = self.scopes[si]
            # ``self.wrap(m)``, ``Trainer(m)``: ``self`` is the first parameter
            shift = 1 if "." in callee or callee in self.constructors else 0
            helper = helpers.get(callee_name(scope, callee, helpers))
            if helper is None and "." not in callee and callee in self.facts.imports:
                helper = self._imported_helper(callee)
            if helper is None or any(a.star for a in node.args):
                continue
            args = positional_args(node)
            index = helper.param - shift
            arg = args[index] if 0 <= index < len(args) else keyword_arg(node, helper.param_name)
            if arg is None:
                continue
            done.add(id(node))
            switches = [
                args[i - shift] if 0 <= i - shift < len(args) else keyword_arg(node, p)
                for i, p in helper.condition_params
            ]
            if any(a is not None and _is_off(a.value) for a in switches):
                continue  # ``maybe_wrap(m, parallel=False)``
            ev.index = len(scope.helper_wraps)
            ev.wrapper = helper.wrapper
            ev.device_ids = helper.device_ids
            ev.helper_conditional = helper.conditional
            ev.helper_places = helper.places
            ev.wrapped = code_of(arg.value)
            inner, ev.placed_inside = strip_placements(arg.value)
            ev.wrapped_name = dotted_name(inner) or ""
            if isinstance(inner, cst.Call) and self.facts.is_wrapper(inner.func):
                ev.wrapped_is_wrap = True  # Trainer(nn.DataParallel(net)) of a class that wraps it again
            if isinstance(inner, cst.Call) and not self.facts.is_wrapper(inner.func):
                ev.wrapped_call = dotted_name(inner.func) or ""
                cls = self.facts.class_of_call(inner.func)
                if cls is not None and self.facts.is_module_class(cls):
                    ev.wrapped_class = cls
                    ev.wrapped_args = _arg_names(inner)
                ev.wrapped_device_map = _device_map(inner)
            scope.helper_wraps.append(ev)

    def _imported_helper(self, name: str) -> Optional[WrapHelper]:
        """A wrap helper another file of the project defines (its summary
        says it returns a parameter wrapped), called here by ``name``."""
        found = self.facts.project_function(self.facts.qualify_dotted(name) or "")
        if found is None or "wraps" not in found[2]:
            return None
        r = found[2]
        return WrapHelper(int(r["wraps"]), str(r.get("param", "")), str(r.get("wrapper", "")), bool(r.get("conditional")),
                          [(int(i), str(p)) for i, p in r.get("condition_params", [])],
                          bool(r.get("places")), str(r.get("device_ids", "")))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        owner = dotted_name(node.value)
        if owner is not None:
            self.out.read_at[node] = (self.scope.index, self.order + 1, tuple(self._branch()))
        if node.attr.value == "module" and len(self.stack) > 1 and owner in self.scope.params:
            self.guarded.add(self.scope.index)
        # ``args.local_rank`` read in the scope: usable as the rank
        if node.attr.value in _RANK_ATTRS and dotted_name(node.value) is not None:
            self._add_rank(code_of(node), 0)

    # -- ranks -------------------------------------------------------------
    def _rank_value(self, value: cst.BaseExpression) -> Optional[int]:
        """0: a local rank; 2: a global rank; None: not a rank."""
        if isinstance(value, cst.Call):
            q = self.facts.qualify(value.func)
            if q in ("torch.distributed.get_node_local_rank",):
                return 0
            if q in ("torch.distributed.get_rank",):
                return 2
            if dotted_name(value.func) == "int" and value.args:
                env = _env_read(value.args[0].value)
                if env == "LOCAL_RANK":
                    return 0
                if env == "RANK":
                    return 2
        if isinstance(value, cst.Attribute) and value.attr.value in _RANK_ATTRS:
            return 0
        return None

    def _add_rank(self, name: str, priority: int) -> None:
        ranks = self.scope.rank_names
        if name not in ranks:
            ranks.append(name)
            self._rank_priority[(self.scope.index, name)] = priority

    _rank_priority: Dict[Tuple[int, str], float]

    def finish(self) -> None:
        for scope in self.scopes:
            for p in scope.params:
                if "local_rank" in p.lower():
                    self._rank_priority[(scope.index, p)] = 0
                elif "rank" in p.lower():
                    self._rank_priority[(scope.index, p)] = 1
                else:
                    continue
                if p not in scope.rank_names:
                    scope.rank_names.append(p)
            if scope.name in self.out.spawn_targets and scope.params and scope.params[0] not in scope.rank_names:
                scope.rank_names.append(scope.params[0])
            if scope.name in self.out.spawn_targets and scope.params:
                # mp.spawn passes the process index on this node: a local rank
                self._rank_priority[(scope.index, scope.params[0])] = 0
        # ``rank, world = setup()`` of a function returning ``dist.get_rank()``
        # there: the same rank
        for si, name, pos, callee in self.unpacked:
            scope = self.scopes[si]
            helper = self.out.callee_scope(scope, callee)
            if helper is None or helper.index not in self.returned_tuples:
                continue
            kinds = {
                self._rank_priority.get((helper.index, r[pos])) if pos < len(r) and r[pos] else None
                for r in self.returned_tuples[helper.index]
            }
            if len(kinds) == 1 and next(iter(kinds)) in (0, 2):
                self._rank_priority[(si, name)] = next(iter(kinds))  # type: ignore[assignment]
                if name not in scope.rank_names:
                    scope.rank_names.append(name)
        # ``self.local_rank = ...`` in one method is the rank in the others
        class_ranks: Dict[str, List[Tuple[str, int]]] = {}
        for scope in self.scopes:
            if not scope.class_name or not scope.params:
                continue
            me = scope.params[0] + "."
            for b in scope.binds:
                attr = b.target[len(me):] if b.target.startswith(me) else ""
                if attr and "." not in attr and "rank" in attr.lower() and b.kind != "param":
                    entry = (attr, 0 if "local" in attr.lower() else 1)
                    if entry not in class_ranks.setdefault(scope.class_name, []):
                        class_ranks[scope.class_name].append(entry)
        for scope in self.scopes:
            for attr, priority in class_ranks.get(scope.class_name, []) if scope.params else []:
                name = f"{scope.params[0]}.{attr}"
                if name not in scope.rank_names:
                    scope.rank_names.append(name)
                    self._rank_priority[(scope.index, name)] = priority + 0.5
            scope.rank_names.sort(key=lambda n: self._rank_priority.get((scope.index, n), 3))
            scope.global_ranks = [n for n in scope.rank_names if self._rank_priority.get((scope.index, n)) == 2]
            scope.local_ranks = [n for n in scope.rank_names if self._rank_priority.get((scope.index, n)) == 0]
        for index in self.guarded:
            self.scopes[index].tests_param_wrapped = True
        self._finish_wrap_helpers()
        # which module classes hold wrappers (set in a method or a helper)
        for scope in self.scopes:
            cls = self.facts.classes.get(scope.class_name)
            if cls is None or not cls.is_module or not scope.params:
                continue
            me = scope.params[0] + "."
            for w in scope.wraps:
                t = w.statement_target
                if t.startswith(me) and "." not in t[len(me):]:
                    self.out.inner_wrappers.setdefault(cls.name, {}).setdefault(t[len(me):], w.wrapper)
            for b in scope.binds:
                if b.kind == "call" and b.call.startswith(me) and b.target.startswith(me):
                    helper = self.out.scope_named(f"{scope.class_name}.{b.call[len(me):]}")
                    if helper is not None and helper.wraps_param >= 0:
                        self.out.inner_wrappers.setdefault(cls.name, {}).setdefault(b.target[len(me):], helper.wraps_param_with)
            # ``self.x = wrap(X())`` through a wrap helper of the file
            for ev in scope.helper_wraps:
                t = ev.statement_target
                if t.startswith(me) and "." not in t[len(me):]:
                    self.out.inner_wrappers.setdefault(cls.name, {}).setdefault(t[len(me):], ev.wrapper)


def _returns_receiver(call: cst.Call) -> bool:
    """``m.eval()``, ``m.train(False)``, ``m.half()``, ``m.requires_grad_(False)``:
    ``nn.Module`` methods that return the module itself (on a tensor, a
    dtype cast returns a tensor on the same device)."""
    return (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value in _KEEPS_PLACEMENT
        and not any(a.star for a in call.args)
    )


def strip_receiver_calls(node: cst.BaseExpression) -> Tuple[cst.BaseExpression, str]:
    """Like :func:`strip_placements`, also through the methods that return
    their receiver (:func:`_returns_receiver`): ``Net().to(dev).eval()`` ->
    (``Net()``, ``dev``)."""
    device = ""
    first = True
    while isinstance(node, cst.Call):
        p = placement_call(node)
        if p is not None:
            owner, method, dev = p
            if first:
                device = code_of(dev) if dev is not None else ("cuda" if method == "cuda" else "")
                first = False
            node = owner
        elif _returns_receiver(node):
            node = node.func.value  # type: ignore[attr-defined]
        else:
            break
    return node, device


def callee_name(scope: "ScopeFacts", call: str, defined: Container[str]) -> str:
    """The scope name of the function a call in ``scope`` runs: a method
    through the instance (``self.wrap(...)`` in ``Trainer.fit``:
    ``Trainer.wrap``), a function defined inside the calling one (``wrap(m)``
    in ``main``, with ``main.wrap`` in ``defined``), else the callee as
    written."""
    if "." in call:
        if scope.class_name and scope.params and call.startswith(scope.params[0] + "."):
            return f"{scope.class_name}.{call.split('.', 1)[1]}"
        return call
    if scope.name != "<module>" and f"{scope.name}.{call}" in defined:
        return f"{scope.name}.{call}"
    return call


def _device_map(call: cst.Call) -> str:
    """The ``device_map=`` of a call when it may split the model over
    devices, else "". A map onto one device (``"cuda:0"``, ``0``,
    ``torch.device(...)``, ``{"": local_rank}``, a dict whose values are all
    the same, a ``device``/``local_rank`` variable) places the whole model
    like ``.to()``: the QLoRA-under-DDP recipe
    (``device_map={"": PartialState().process_index}``) is one process, one GPU."""
    dm = keyword_arg(call, "device_map")
    if dm is None or (isinstance(dm.value, cst.Name) and dm.value.value == "None"):
        return ""
    value = dm.value
    text = string_value(value)
    if text is not None:
        return code_of(value) if text in _SPREADING_DEVICE_MAPS else ""
    if isinstance(value, cst.Integer) or (isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("device")):
        return ""
    if isinstance(value, cst.FormattedString):
        head = value.parts[0] if value.parts else None
        text = head.value if isinstance(head, cst.FormattedStringText) else ""
        return "" if text.startswith(("cuda", "cpu", "mps", "xpu", "npu")) else code_of(value)
    if isinstance(value, cst.Dict):
        targets = {code_of(e.value) for e in value.elements if isinstance(e, cst.DictElement)}
        keys = [string_value(e.key) for e in value.elements if isinstance(e, cst.DictElement)]
        if len(targets) == 1 and len(keys) == len(value.elements) and (keys == [""] or None not in keys):
            return ""
        return code_of(value)
    last = (dotted_name(value) or "").rsplit(".", 1)[-1].lower()
    if last and (is_device_name(last) or last in RANK_NAMES or last in ("process_index", "local_process_index")):
        return ""
    return code_of(value)


def collect_script_facts(module: cst.Module, facts: FileFacts) -> "ScriptFacts":
    """The script facts of one file (see :class:`ScriptFacts`)."""
    collector = _ScriptCollector(facts)
    collector._rank_priority = {}
    walk(module, collector)
    collector.out.scopes = collector.scopes
    collector.finish()
    return collector.out


@dataclass
class ScriptFacts:
    """How models are built, wrapped and placed in each function of a file."""

    facts: FileFacts
    #: script facts per function scope (index 0: module level), in the order
    #: a pre-order walk meets the ``def`` statements (see :class:`ScopeFacts`)
    scopes: List[ScopeFacts] = field(default_factory=list)
    #: functions started once per process by ``mp.spawn(fn, ...)`` (their
    #: first parameter is the process index)
    spawn_targets: List[str] = field(default_factory=list)
    #: the file assigns ``os.environ["CUDA_VISIBLE_DEVICES"]`` a value that is
    #: not a constant (``str(rank)``: each process its own GPU)
    sets_visible_devices: bool = False
    #: the file reads ``LOCAL_RANK`` from the environment somewhere
    #: (``os.environ["LOCAL_RANK"]``, ``os.environ.get(...)``, ``getenv``)
    reads_local_rank_env: bool = False
    #: functions of this file that return one of their parameters wrapped in
    #: DataParallel/DDP, possibly under a condition (scope name, e.g.
    #: ``maybe_parallel`` or ``Trainer.wrap`` -> :class:`WrapHelper`)
    wrap_helpers: Dict[str, WrapHelper] = field(default_factory=dict)
    #: module class -> its submodule attributes that hold a DataParallel/DDP
    #: wrapper, set in ``__init__`` or a helper method (attribute -> wrapper)
    inner_wrappers: Dict[str, Dict[str, str]] = field(default_factory=dict)
    # -- the nodes the facts are about (not part of the plain record) --------
    #: the module and each ``def`` -> its scope
    scope_at: Dict[cst.CSTNode, ScopeFacts] = field(default_factory=dict, repr=False)
    #: each DataParallel/DDP call -> its wrap event, and (scope index, wrap
    #: index) -> the call
    wrap_at: Dict[cst.Call, WrapEvent] = field(default_factory=dict, repr=False)
    wrap_nodes: Dict[Tuple[int, int], cst.Call] = field(default_factory=dict, repr=False)
    #: each ``.to(...)``/``.cuda(...)`` call -> its placement event
    place_at: Dict[cst.Call, PlaceEvent] = field(default_factory=dict, repr=False)
    #: (scope index, callee as written, k) -> the k-th call of that callee in
    #: that scope (``WrapEvent.helper_call`` is k)
    call_nodes: Dict[Tuple[int, str, int], cst.Call] = field(default_factory=dict, repr=False)
    #: the keys of ``call_nodes`` whose call sits in a loop body
    calls_in_loops: Set[Tuple[int, str, int]] = field(default_factory=set, repr=False)
    #: each attribute read on a dotted name (``model.device``) -> (scope
    #: index, the order an event after it would have, its branch): where to
    #: ask what the name holds (:meth:`position`)
    read_at: Dict[cst.Attribute, Tuple[int, int, Tuple[str, ...]]] = field(default_factory=dict, repr=False)
    #: the ``default=`` of ``parser.add_argument("--local_rank", ...)`` when
    #: it is a number (``default=0``)
    local_rank_option_default: Optional[cst.Arg] = field(default=None, repr=False)

    def position(self, node: cst.Attribute) -> Optional[Tuple[ScopeFacts, int, List[str]]]:
        """The scope an attribute read on a dotted name sits in, the order and
        the branch to ask :func:`reaching_bindings` with there, else None."""
        found = self.read_at.get(node)
        if found is None:
            return None
        index, order, branch = found
        return self.scopes[index], order, list(branch)
    #: each call -> (scope index, its order among the scope's events, its branch)
    call_points: Dict[cst.Call, Tuple[int, int, Tuple[str, ...]]] = field(default_factory=dict, repr=False)
    #: the module does ``from x import *`` (any name may be bound by it)
    star_import: bool = False

    def unbound_at(self, node: cst.Call, name: str) -> str:
        """Why the plain ``name`` may be unbound where the call ``node``
        runs: ``"deleted"`` (a ``del name`` reaches the call, also through a
        loop's back edge), ``"unbound"`` (some path reaches it before any
        binding: bound later, or only under a condition), else "" (bound on
        every path, or not known: a call the walk did not see). A name the
        function never binds is looked up in the enclosing functions, then
        the module, where any binding counts (the function runs after the
        module's code) unless the module deletes it."""
        point = self.call_points.get(node)
        if point is None:
            return ""
        index, order, branch = point
        scope = self.scopes[index]
        while True:
            if name not in scope.declared and any(b.target == name for b in scope.binds):
                if scope.index == index:
                    return _unbound_in(scope, name, order, branch)
                # an enclosing function or the module: its code ran before this one
                return "deleted" if any(b.target == name and b.kind == "delete" for b in scope.binds) else ""
            if scope.index == 0:
                return "" if self.star_import else "unbound"
            outer = scope.name.rpartition(".")[0]
            found = None
            while outer and found is None:
                found = self.scope_named(outer)  # ``Class.method``: a class body encloses no function
                outer = outer.rpartition(".")[0]
            scope = found or self.scopes[0]

    def scope_named(self, name: str) -> Optional[ScopeFacts]:
        for scope in self.scopes:
            if scope.name == name:
                return scope
        return None

    def callee_scope(self, scope: ScopeFacts, call: str) -> Optional[ScopeFacts]:
        """The function of this file that ``call`` (a callee as written) runs
        when called from ``scope``, or None: see :func:`callee_name`."""
        return self.scope_named(callee_name(scope, call, {s.name for s in self.scopes}))

    def never_replicated(self, cls: ClassFacts) -> bool:
        """Whether ``cls``'s own ``forward`` can never run inside a
        DataParallel replica, where ``parameters()`` is empty and a device
        fixed outside the call is not the replica's: it pins its parts to
        devices (model parallelism: wrapping it is DL004's bug), it is a
        DataParallel/DDP subclass (its ``forward`` scatters and gathers on the
        main device), or it holds a DataParallel/DDP wrapper as a submodule
        (it is the outer model: replicating it would nest wrappers, DL003)."""
        if cls.pinned_devices():
            return True
        facts = self.facts
        if any(n not in facts.classes and canonical(n) in WRAPPERS for n in facts.lineage(cls.name)):
            return True
        return bool(self.inner_wrappers.get(cls.name))

    def to_dict(self) -> dict:
        """The plain record: events and names, no nodes."""
        plain = ("scopes", "spawn_targets", "sets_visible_devices", "wrap_helpers", "inner_wrappers")
        return {k: _plain(getattr(self, k)) for k in plain}


class Scripts(Provider):
    """:class:`ScriptFacts`: one walk of the whole file."""

    requires = (Classes,)

    @classmethod
    def build(cls, store: FactStore) -> ScriptFacts:
        return collect_script_facts(store.module, store[Classes])


def _plain(value):
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------
# what a name holds, where a wrapped model comes from


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


def reaching_bindings(scope: ScopeFacts, name: str, order: int, branch: Sequence[str]) -> Tuple[List[BindEvent], bool]:
    """The bindings of ``name`` that may reach ``order`` on ``branch``
    (latest first), and whether the value ``name`` held when the scope began
    may reach it too (no binding before it on every path)."""
    found: List[BindEvent] = []
    for b in reversed(scope.binds):
        if b.order >= order or b.target != name or not branches_compatible(b.branch, branch):
            continue
        if b.kind == "place" and b.source == name:
            continue
        found.append(b)
        if always_before(b.branch, branch):
            return found, False
    return found, True


def held_class(scope: ScopeFacts, name: str, order: int, branch: Sequence[str], depth: int = 8) -> str:
    """The ``nn.Module`` class ``name`` holds at ``order`` on every path that
    reaches it: each binding that may reach it builds that class (``model =
    Net().to(dev).eval()``) or aliases or places a name that holds it; ""
    when one binds anything else, or none does. The value a name held when
    the scope began is none: a name bound in a function is local to all of
    it (unbound before its first binding), and at module level it is unbound."""
    if depth <= 0:
        return ""
    found = ""
    for b in reaching_bindings(scope, name, order, branch)[0]:
        if b.kind == "construct":
            cls = b.value_class
        elif b.kind in ("alias", "place") and b.source:
            cls = held_class(scope, b.source, b.order, b.branch, depth - 1)
        else:
            return ""
        if not cls or (found and cls != found):
            return ""
        found = cls
    return found


def held_wrappers(
    scripts, scope: ScopeFacts, name: str, order: int, branch: Sequence[str], depth: int = 8
) -> Tuple[List[str], List[str]]:
    """The wrappers (DataParallel/DDP qualified names) ``name`` may hold at
    ``order`` on some path: a wrap bound to it (``model = nn.DataParallel(m)``,
    ``.eval()`` chained or not), a call of a wrap helper (``model =
    maybe_parallel(model)``), through aliases, placements and calls that may
    return the value they are given (:func:`_passes_through`); not through an
    unwrap (``model = model.module``) or any other binding. Also the names
    whose value at the scope's start may reach ``order`` that way, and the
    parameters that may (the caller knows what an attribute holds across
    methods, and what a hook's argument is)."""
    wrappers: List[str] = []
    entries: List[str] = []
    if depth <= 0:
        return wrappers, entries
    binds, entry = reaching_bindings(scope, name, order, branch)
    if entry:
        entries.append(name)
    for b in binds:
        found: Tuple[List[str], List[str]] = ([], [])
        if b.kind == "wrap":
            found = ([scope.wraps[b.wrap_index].wrapper], [])
        elif b.kind == "param":
            found = ([], [b.target])  # what the caller passes
        elif b.kind in ("alias", "place") and b.source:
            found = held_wrappers(scripts, scope, b.source, b.order, b.branch, depth - 1)
        elif b.kind in ("call", "other") and b.call:
            helper = _helper_wrap_bound(scope, b)
            if helper is not None:
                found = ([helper.wrapper], [])
            elif _passes_through(scripts, scope, b):
                found = held_wrappers(scripts, scope, b.target, b.order, b.branch, depth - 1)
        for w in found[0]:
            if w not in wrappers:
                wrappers.append(w)
        for e in found[1]:
            if e not in entries:
                entries.append(e)
    return wrappers, entries


def _param_of(scope: ScopeFacts, name: str, order: int, branch: Sequence[str]) -> int:
    """The index of the parameter ``name`` holds at ``order`` (through
    aliases and moves), else -1."""
    chain = binding_chain(scope, name, order, branch)
    last = chain[-1] if chain else None
    if last is None or last.kind != "param" or last.target not in scope.params:
        return -1
    return scope.params.index(last.target)


def init_wrapper(scripts, class_name: str, attr: str) -> str:
    """The wrapper an attribute of the instance holds in every method but
    ``__init__``: ``__init__`` binds it to that wrapper (``self.model =
    nn.DataParallel(model)``, possibly moved in place after), binds it to
    nothing else, and no other method of the class binds it; else ""."""
    found: Set[str] = set()
    for scope in scripts.scopes:
        if scope.class_name != class_name or not scope.params:
            continue
        target = f"{scope.params[0]}.{attr}"
        for b in scope.binds:
            if b.target != target:
                continue
            if not scope.name.endswith(".__init__"):
                return ""
            if b.kind == "wrap":
                found.add(scope.wraps[b.wrap_index].wrapper)
            elif not (b.kind == "place" and b.source == target):
                return ""
    return found.pop() if len(found) == 1 else ""


def _helper_wrap_bound(scope: ScopeFacts, b: BindEvent) -> Optional[WrapEvent]:
    """The call of a wrap helper whose result ``b`` binds (``model =
    maybe_parallel(model)``), else None."""
    best: Optional[WrapEvent] = None
    for ev in scope.helper_wraps:
        if ev.helper == b.call and ev.target == b.target and ev.order < b.order and (best is None or ev.order > best.order):
            best = ev
    if best is None or any(x.target == b.target and best.order < x.order < b.order for x in scope.binds):
        return None
    return best
def _covered(binds: Sequence[BindEvent], branch: Sequence[str], depth: int = 6) -> bool:
    """Does every path to a point on ``branch`` pass one of ``binds``: one
    on every such path, or both arms of an ``if``/``try`` binding."""
    if any(always_before(b.branch, branch) for b in binds):
        return True
    if depth <= 0:
        return False
    points = {item.partition(":")[0] for b in binds for item in b.branch} - {item.partition(":")[0] for item in branch}
    for point in points:
        if all(
            _covered([b for b in binds if branches_compatible(b.branch, [f"{point}:{arm}"])], list(branch) + [f"{point}:{arm}"], depth - 1)
            for arm in ("0", "1")
        ):
            return True
    return False


def _unbound_in(scope: ScopeFacts, name: str, order: int, branch: Sequence[str]) -> str:
    """``ScriptFacts.unbound_at`` for a name ``scope`` binds itself."""
    binds, _ = reaching_bindings(scope, name, order, branch)
    if any(b.kind == "delete" for b in binds):
        return "deleted"
    for b in scope.binds:
        # ``del name`` later in a loop body around the call: the next round reaches the call deleted
        if b.target == name and b.kind == "delete" and b.order >= order and any(
            p in b.branch and p in branch for p in scope.loop_points
        ):
            return "deleted"
    before = [b for b in scope.binds if b.target == name and b.order < order and b.kind != "delete" and branches_compatible(b.branch, branch)]
    return "" if _covered(before, branch) else "unbound"


def _entry_attribute(scripts, scope: ScopeFacts, name: str, order: int, branch: Sequence[str], me: str, depth: int = 8) -> str:
    """The attribute of the instance (``self.model``) whose value at the
    method's start ``name`` may hold at ``order``, through aliases and
    placements (never through a wrap or any other call), else ""."""
    if depth <= 0:
        return ""
    binds, entry = reaching_bindings(scope, name, order, branch)
    if entry and name.startswith(me) and "." not in name[len(me):]:
        return name
    for b in binds:
        source = b.source if b.kind in ("alias", "place") else name if _passes_through(scripts, scope, b) else ""
        if source:
            found = _entry_attribute(scripts, scope, source, b.order, b.branch, me, depth - 1)
            if found:
                return found
    return ""


def _passes_through(scripts, scope: ScopeFacts, b: BindEvent) -> bool:
    """``model = f(model)`` / ``model, opt = f(model=model, ...)``: a call
    given the value it rebinds, which may return it (``amp.initialize``,
    ``convert_sync_batchnorm``, a helper that moves and returns its model,
    any other callee devlint cannot see); not a library's unwrapping call
    (``accelerator.unwrap_model(model)``, ``UNWRAPPING_CALLS``), nor one that returns a parameter's
    ``.module`` (:attr:`ScopeFacts.unwraps_params`: a function of the file,
    or through the project index one of another file, ``"unwraps"``)."""
    if b.kind not in ("call", "other") or not b.call or b.target not in b.args:
        return False
    callee = scripts.callee_scope(scope, b.call)
    if callee is not None:
        return not callee.unwraps_params
    found = scripts.facts.project_function(scripts.facts.qualify_dotted(b.call) or "")
    if found is not None and found[2].get("unwraps"):
        return False
    # a library's unwrapping call (the vocabulary of torch_api)
    return b.call.rsplit(".", 1)[-1] not in UNWRAPPING_CALLS


def _holds_wrap(scope: ScopeFacts, name: str, order: int, branch: Sequence[str], made: WrapEvent, depth: int = 8) -> bool:
    """May ``name`` hold at ``order`` the wrapper ``made`` returned (a wrap,
    or a call of a wrap helper), through aliases, placements and further
    wraps around it?"""
    if depth <= 0:
        return False
    for b in reaching_bindings(scope, name, order, branch)[0]:
        if b.kind == "wrap":
            if not made.helper and b.wrap_index == made.index:
                return True
            ev = scope.wraps[b.wrap_index]
            if ev.wrapped_name and _holds_wrap(scope, ev.wrapped_name, ev.order, ev.branch, made, depth - 1):
                return True
        elif b.kind == "call" and made.helper and b.call == made.helper and b.target == made.target and b.order > made.order:
            return True
        elif b.kind in ("alias", "place") and b.source:
            if _holds_wrap(scope, b.source, b.order, b.branch, made, depth - 1):
                return True
    return False


def rewraps_in_loop(scope: ScopeFacts) -> List[WrapEvent]:
    """The wraps in a loop body that wrap what a name held when the round
    began and leave the wrapper in that name for the next round (``for stage
    in stages: model = DP(model)``, or ``model = setup(model)`` with a wrap
    helper): every round after the first wraps the wrapper. Only a wrap that
    runs on every round (not under an ``if`` inside the loop, which may hold
    on the first round only), and not where the round tests whether the
    name holds a wrapper already."""
    out: List[WrapEvent] = []
    for ev in list(scope.wraps) + list(scope.helper_wraps):
        name = ev.wrapped_name
        if not name or not ev.in_loop or _tested_wrapped(scope, ev, {name}):
            continue
        loops = [p for p in ev.branch if p in scope.loop_points]
        if not loops or ev.branch[-1] != loops[-1]:
            continue  # conditional inside the round
        loop = loops[-1]
        # at the wrap, the name holds what the round began with: nothing in
        # this round bound it before (placements of itself keep the value)
        binds, _entry = reaching_bindings(scope, name, ev.order, ev.branch)
        if any(loop in b.branch for b in binds):
            continue
        in_round = [b.order for b in scope.binds if loop in b.branch]
        end = max(in_round + [ev.order]) + 1
        round_branch = ev.branch[: ev.branch.index(loop) + 1]
        if _holds_wrap(scope, name, end, round_branch, ev):
            out.append(ev)
    return out


def rewraps_own_attribute(scripts, scope: ScopeFacts) -> List[Tuple[WrapEvent, str]]:
    """The wraps of a method that wrap what an attribute of the instance held
    when the method began and store the wrapper back into that attribute
    (``self.model = DP(self.model)``; ``model = self.model_wrapped``, ``model
    = DDP(model)``, ``self.model_wrapped = model``), each with the attribute:
    a call after one that stored it wraps the wrapper again (see
    :func:`runs_repeatedly`). Not in ``__init__``, nor where the method
    tests whether the value is wrapped already (``isinstance(m,
    nn.DataParallel)``, ``hasattr(m, "module")``) before wrapping it. The
    value may reach the wrap through aliases, placements and calls given it
    (``self.model, opt = prepare(self.model)``)."""
    if not scope.class_name or not scope.params or scope.name.endswith(".__init__"):
        return []
    me = scope.params[0] + "."
    out: List[Tuple[WrapEvent, str]] = []
    for ev in list(scope.wraps) + list(scope.helper_wraps):
        if not ev.wrapped_name:
            continue
        attr = _entry_attribute(scripts, scope, ev.wrapped_name, ev.order, ev.branch, me)
        if not attr or _tested_wrapped(scope, ev, {attr, ev.wrapped_name}):
            continue
        stored = any(
            b.target == attr and b.order > ev.order and branches_compatible(b.branch, ev.branch)
            and _holds_wrap(scope, attr, b.order + 1, b.branch, ev)
            for b in scope.binds
        )
        if stored:
            out.append((ev, attr))
    return out


def _tested_wrapped(scope: ScopeFacts, ev: WrapEvent, names: Set[str]) -> bool:
    """Does the wrap run only after a test of whether one of ``names`` holds
    a wrapper (inside that ``if``, or after one that returns)?"""
    for item in ev.branch:
        if names & set(scope.wrap_tests.get(item.partition(":")[0], ())):
            return True
    return any(order < ev.order and name in names for order, name in scope.wrap_guards)


def method_callers(scripts, scope: ScopeFacts) -> List[Tuple[ScopeFacts, str, bool]]:
    """The calls of method ``scope`` this file shows, each as (the calling
    scope, the instance it is called on, whether the call sits in a loop):
    through the instance in the class's own methods (``self.setup()``:
    ``"self"``), or on a name bound to an instance of the class (``trainer =
    Trainer(...)``, ``trainer.fit()``: ``"trainer"``)."""
    short = scope.name.rsplit(".", 1)[-1]
    out: List[Tuple[ScopeFacts, str, bool]] = []
    for key in scripts.call_nodes:
        index, callee, _k = key
        owner, dot, method = callee.rpartition(".")
        if method != short or not dot:
            continue
        caller = scripts.scopes[index]
        if scripts.callee_scope(caller, callee) is scope:
            owner = "self"
        else:
            _where, chain = resolve_name(scripts, caller, owner, 10 ** 9, [])
            made = chain[-1] if chain else None
            if made is None or made.kind not in ("call", "construct") or (made.call or made.value_class).rsplit(".", 1)[-1] != scope.class_name:
                continue
        out.append((caller, owner, key in scripts.calls_in_loops))
    return out


def runs_repeatedly(scripts, scope: ScopeFacts, depth: int = 4) -> bool:
    """May a method run more than once on one instance? Not ``__init__``;
    yes when the file calls it in a loop, twice on one instance (twice
    through ``self``, or twice on one name), or from a method that may run
    more than once. A method the file never calls is called by its users,
    as often as they like."""
    if not scope.class_name:
        return False
    if scope.name.endswith(".__init__") or depth <= 0:
        return False
    callers = method_callers(scripts, scope)
    if not callers:
        return True
    seen: Set[Tuple[int, str]] = set()
    for caller, owner, in_loop in callers:
        key = (-1 if owner == "self" else caller.index, owner)
        if in_loop or key in seen:
            return True
        seen.add(key)
    return any(owner == "self" and runs_repeatedly(scripts, caller, depth - 1) for caller, owner, _loop in callers)


def visible_bindings(scripts, scope: ScopeFacts, name: str, order: int, branch: Sequence[str]) -> List[BindEvent]:
    """Like :func:`binding_chain`, falling back to module-level bindings for
    a name a function never binds."""
    chain = binding_chain(scope, name, order, branch)
    if not chain and scope.index != 0 and "." not in name and name not in scope.params:
        module = scripts.scopes[0]
        chain = binding_chain(module, name, 10 ** 9, [])
    return chain


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
    todo = [r for r in roots if facts.class_facts(r) is not None]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        for attr in facts.class_facts(name).attributes.values():
            for c in (attr.module_class, attr.element_class):
                if c and c not in seen and facts.class_facts(c) is not None:
                    todo.append(c)
    return seen
