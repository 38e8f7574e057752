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
"""

from __future__ import annotations

import inspect
import re
from typing import Dict, Optional, Tuple

import libcst as cst

_FIELD = re.compile(r"visit_\w+\(\s*self,\s*\"(\w+)\"")
_HOOK = re.compile(r"^(?:visit|leave)_[A-Z]\w*?_[a-z]\w*$")
_ORDER: Dict[type, Optional[Tuple[str, ...]]] = {}
_HOOKS: Dict[type, bool] = {}
_CSTNode = cst.CSTNode


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


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """Visit ``node`` and its descendants with ``visitor`` as
    ``node.visit(visitor)`` would, without rebuilding anything."""
    _walk(node, visitor, _has_attribute_hooks(type(visitor)))


def _walk(node: cst.CSTNode, visitor: cst.CSTVisitor, hooks: bool) -> None:
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
        if isinstance(child, _CSTNode):
            _walk(child, visitor, hooks)
        elif type(child) is tuple or type(child) is list:
            for item in child:
                if isinstance(item, _CSTNode):
                    _walk(item, visitor, hooks)
        if hooks:
            visitor.on_leave_attribute(node, name)
    visitor.on_leave(node)
