"""A read-only walk of a libcst tree for ``CSTVisitor``s, about three times
cheaper than ``CSTNode.visit``.

``CSTNode.visit`` is built for transformers: even for a visitor that changes
nothing it rebuilds every node it passes (a dataclass construction with
validation per node) and calls two attribute hooks per field. Measured on
transformers' model files, that was most of the time devlint spent after the
parse. :func:`walk` calls the same ``on_visit`` / ``on_leave`` in the same
order (children in the order each node type's ``_visit_and_replace_children``
visits them, read once per type from libcst's own source), skips children when
``on_visit`` returns False, and calls ``on_visit_attribute`` /
``on_leave_attribute`` only for visitors that define ``visit_<Node>_<field>``
hooks. Where libcst's source cannot be read (a byte-code-only install) the
children of that node type are visited by libcst itself. ``tests/test_walk.py`` checks that both visit
the same nodes in the same order.

Two more savings, each exact for the visitors it applies to:

* **trivia**: whitespace, comments, parentheses, brackets, commas and the
  operator tokens (``libcst._nodes.whitespace``, ``libcst._nodes.op``) are
  more than half the nodes of a tree and no fact reads them as nodes. They
  are skipped, with everything under them, for every visitor that defines no
  ``visit_``/``leave_`` hook for one of their types and does not set
  ``WALKS_TRIVIA = True`` (a visitor with its own ``on_visit`` that wants to
  see them, like a recorder, says so).
* **dispatch**: for a visitor that keeps libcst's ``on_visit``/``on_leave``,
  the hooks are looked up once per node type instead of by name per node,
  and libcst's no-op defaults are not called. A visitor that needs the
  ancestors of the node it is at sets ``TRACKS_PARENTS = True`` instead of
  overriding ``on_visit``: the walk keeps them in its list ``parents`` (a
  node is on it while its children are walked and while its ``leave_``
  hook runs, not during its ``visit_`` hook).
"""

from __future__ import annotations

import inspect
import re
from typing import Callable, Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

_FIELD = re.compile(r"visit_\w+\(\s*self,\s*\"(\w+)\"")
_HOOK = re.compile(r"^(?:visit|leave)_[A-Z]\w*?_[a-z]\w*$")
_ORDER: Dict[type, Optional[Tuple[str, ...]]] = {}
_HOOKS: Dict[type, bool] = {}
_CSTNode = cst.CSTNode


def _trivia_types() -> FrozenSet[type]:
    out = set()
    for name in dir(cst):
        obj = getattr(cst, name)
        if isinstance(obj, type) and issubclass(obj, _CSTNode) and obj.__module__ in (
            "libcst._nodes.whitespace", "libcst._nodes.op"
        ):
            out.add(obj)
    out |= {cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
            cst.LeftCurlyBrace, cst.RightCurlyBrace}
    return frozenset(out)


#: node types no fact reads as nodes (whitespace, comments, brackets, commas,
#: operator tokens); only whitespace and comments lie below them
TRIVIA: FrozenSet[type] = _trivia_types()
_TRIVIA_NAMES = frozenset(t.__name__ for t in TRIVIA)
_SKIPS_TRIVIA: Dict[type, bool] = {}
_DEFAULT_VISIT = cst.CSTVisitor.on_visit
_DEFAULT_LEAVE = cst.CSTVisitor.on_leave
_Hook = Optional[Callable[..., object]]
_DISPATCH: Dict[type, Dict[type, Tuple[_Hook, _Hook]]] = {}


def child_fields(node_type: type) -> Optional[Tuple[str, ...]]:
    """The fields of ``node_type`` that libcst visits, in its order; None
    when that cannot be read from libcst's source."""
    try:
        return _ORDER[node_type]
    except KeyError:
        pass
    try:
        source = inspect.getsource(node_type._visit_and_replace_children)  # type: ignore[attr-defined]
        order: Optional[Tuple[str, ...]] = tuple(dict.fromkeys(_FIELD.findall(source)))
    except (OSError, TypeError, AttributeError):
        order = None
    _ORDER[node_type] = order
    return order


def _has_attribute_hooks(visitor_type: type) -> bool:
    try:
        return _HOOKS[visitor_type]
    except KeyError:
        # libcst's own base classes declare every hook as a no-op
        found = any(
            _HOOK.match(name)
            for klass in visitor_type.__mro__
            if not klass.__module__.startswith("libcst")
            for name in vars(klass)
        )
        _HOOKS[visitor_type] = found
        return found


def skips_trivia(visitor_type: type) -> bool:
    """Whether :func:`walk` leaves trivia out for visitors of this type: no
    hook of the type names a trivia node type, and it does not ask for them."""
    try:
        return _SKIPS_TRIVIA[visitor_type]
    except KeyError:
        wants = getattr(visitor_type, "WALKS_TRIVIA", False) or any(
            name.split("_", 1)[0] in ("visit", "leave") and name.split("_")[1] in _TRIVIA_NAMES
            for klass in visitor_type.__mro__
            if not klass.__module__.startswith("libcst")
            for name in vars(klass)
            if name.count("_") >= 1
        )
        _SKIPS_TRIVIA[visitor_type] = not wants
        return not wants


#: per set of skipped types: whether a child of a type is walked (a libcst
#: node, not skipped). A dict lookup: ``isinstance(child, CSTNode)`` goes
#: through ``ABCMeta.__instancecheck__``, the walk's largest own cost
_WALKED: Dict[FrozenSet[type], Dict[type, bool]] = {}


def _walked_types(skip: FrozenSet[type]) -> Dict[type, bool]:
    table = _WALKED.get(skip)
    if table is None:
        table = _WALKED[skip] = {tuple: False, list: False, type(None): False, str: False}
    return table


def _learn(walked: Dict[type, bool], t: type, skip: FrozenSet[type]) -> bool:
    found = walked[t] = issubclass(t, _CSTNode) and t not in skip
    return found


def _own_hook(visitor_type: type, name: str) -> _Hook:
    fn = getattr(visitor_type, name, None)
    if fn is None or getattr(fn, "__module__", "").startswith("libcst"):
        return None  # libcst's generated no-op
    return fn


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """Visit ``node`` and its descendants with ``visitor`` as
    ``node.visit(visitor)`` would, without rebuilding anything (and, for a
    visitor that does not look at them, without the trivia)."""
    vt = type(visitor)
    hooks = _has_attribute_hooks(vt)
    skip = TRIVIA if skips_trivia(vt) and not getattr(visitor, "WALKS_TRIVIA", False) else frozenset()
    if type(node) in skip:
        return
    if vt.on_visit is _DEFAULT_VISIT and vt.on_leave is _DEFAULT_LEAVE and not hooks:
        table = _DISPATCH.get(vt)
        if table is None:
            table = _DISPATCH[vt] = {}
        parents = visitor.parents if getattr(vt, "TRACKS_PARENTS", False) else None  # type: ignore[attr-defined]
        _fast_walk(node, visitor, table, skip, vt, parents, _walked_types(skip))
    else:
        _walk(node, visitor, hooks, skip, _walked_types(skip))


def _fast_walk(node: cst.CSTNode, visitor: cst.CSTVisitor, table: Dict[type, Tuple[_Hook, _Hook]],
               skip: FrozenSet[type], vt: type, parents: Optional[List[cst.CSTNode]],
               walked: Dict[type, bool]) -> None:
    t = type(node)
    pair = table.get(t)
    if pair is None:
        pair = table[t] = (_own_hook(vt, "visit_" + t.__name__), _own_hook(vt, "leave_" + t.__name__))
    visit, leave = pair
    pushed = False
    if visit is None or visit(visitor, node) is not False:
        if parents is not None:
            parents.append(node)
            pushed = True
        order = _ORDER.get(t) or child_fields(t)
        if order is None:  # libcst's source unreadable: let it visit the children
            node._visit_and_replace_children(visitor)  # type: ignore[attr-defined]
        else:
            for name in order:
                child = getattr(node, name)
                ct = type(child)
                w = walked.get(ct)
                if w is None:
                    w = _learn(walked, ct, skip)
                if w:
                    _fast_walk(child, visitor, table, skip, vt, parents, walked)
                elif ct is tuple or ct is list:
                    for item in child:
                        it = type(item)
                        w = walked.get(it)
                        if w is None:
                            w = _learn(walked, it, skip)
                        if w:
                            _fast_walk(item, visitor, table, skip, vt, parents, walked)
    if leave is not None:
        leave(visitor, node)
    if pushed:
        parents.pop()  # type: ignore[union-attr]


def _walk(node: cst.CSTNode, visitor: cst.CSTVisitor, hooks: bool, skip: FrozenSet[type],
          walked: Dict[type, bool]) -> None:
    if not visitor.on_visit(node):
        visitor.on_leave(node)
        return
    order = _ORDER.get(type(node)) or child_fields(type(node))
    if order is None:  # libcst's source unreadable: let it visit the children
        node._visit_and_replace_children(visitor)  # type: ignore[attr-defined]
        visitor.on_leave(node)
        return
    for name in order:
        if hooks:
            visitor.on_visit_attribute(node, name)
        child = getattr(node, name)
        ct = type(child)
        w = walked.get(ct)
        if w is None:
            w = _learn(walked, ct, skip)
        if w:
            _walk(child, visitor, hooks, skip, walked)
        elif ct is tuple or ct is list:
            for item in child:
                it = type(item)
                w = walked.get(it)
                if w is None:
                    w = _learn(walked, it, skip)
                if w:
                    _walk(item, visitor, hooks, skip, walked)
        if hooks:
            visitor.on_leave_attribute(node, name)
    visitor.on_leave(node)
