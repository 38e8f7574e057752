"""DL013 parameters-in-replica

## What it does
Flags `next(self.parameters())` (also `next(iter(...))`, `list(...)[0]`,
`tuple(...)[0]`, and the same on a submodule: `next(self.encoder.parameters())`)
inside `forward` of an `nn.Module`, a method `forward` calls, or a property
such code reads (`@property def device(self): return
next(self.parameters()).device`): the idiom for "the device (or dtype) of
this module's weights".

## Why is this bad?
`nn.DataParallel` runs `forward` on replicas made by
`Module._replicate_for_data_parallel`, which empties `_parameters` and sets
the copied weights as plain attributes (PyTorch >= 1.5). In a replica
`parameters()` yields nothing, so `next(...)` raises and DataParallel
re-raises the error from the replica's worker thread:

```
StopIteration: Caught StopIteration in replica 0 on device 0.
```

The same model runs on one GPU and under DistributedDataParallel, so the bug
shows only when someone wraps it in DataParallel on a multi-GPU machine
(pytorch/pytorch#40457, transformers had to patch dozens of models).

## Example
```python
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        x = x.to(next(self.parameters()).device)
        return self.head(self.encoder(x))
```

## Use instead
```python
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        x = x.to(self.encoder.weight.device)
        return self.head(self.encoder(x))
```

The replacement reads a tensor the module holds (`self.encoder.weight`),
found from the class definition: replicas keep those as attributes.

Not flagged: `parameters()` outside `forward` and the methods it calls (a
`generate` or `predict` method, a training script: no replica runs them),
loops over `self.parameters()` (in a replica they run zero times, which is
not a crash), `next(self.parameters(), default)`, a read under `try: ...
except StopIteration:` (the fallback transformers uses), `buffers()`
(replicas keep their buffers), and models passed in as arguments (not
replicated), and models that pin their parts to devices themselves
(model-parallel code cannot run under DataParallel at all: DL004).

## Fix safety
Safe for `.device` (`next(self.parameters()).device` becomes
`self.encoder.weight.device`): on one device every parameter is on it, and in
a replica the held tensor is the replica's own copy. Unsafe otherwise
(`.dtype`, the tensor itself): the tensor devlint names need not be the first
parameter, and a model may keep parameters in several dtypes. With no tensor
devlint can name the finding has no fix.
"""

from __future__ import annotations

from typing import List, Optional, Set

import libcst as cst

from devlint.diagnostic import FixSafety
from devlint.rule import Invalid, Rule, Valid
from devlint.semantic import code_of, module_class_of, positional_args, self_attribute_loads
from devlint.walk import walk

#: ``list(...)``, ``tuple(...)``: the ``[0]`` of them is the first parameter
_SEQUENCES = ("list", "tuple")


class ParametersInReplica(Rule):
    code = "DL013"
    name = "parameters-in-replica"
    message = (
        "`{expr}` in `{method}` raises StopIteration inside DataParallel replicas, "
        "whose `parameters()` is empty"
    )
    fix_safety = "safe/unsafe"
    tokens = ("parameters()",)

    VALID = [
        Valid(
            """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        total = sum(p.numel() for p in self.parameters())
        return self.fc(x.to(self.fc.weight.device)) / total

    @torch.no_grad()
    def predict(self, x):
        return self(x.to(next(self.parameters()).device)).argmax(-1)

def evaluate(model, x):
    return model(x.to(next(model.parameters()).device))
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch.nn as nn

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.encoder(x.to(next(self.parameters()).device)))
""",
            """
import torch
import torch.nn as nn

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.encoder(x.to(self.encoder.weight.device)))
""",
        ),
        Invalid(
            """
import torch
import torch.nn as nn

class LSTMTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.rnn = nn.LSTM(16, 32, batch_first=True)

    def init_hidden(self, batch):
        weight = next(iter(self.parameters()))
        return weight.new_zeros(1, batch, 32), weight.new_zeros(1, batch, 32)

    def forward(self, ids):
        h = self.init_hidden(ids.size(0))
        mask = ids.ne(0).to(list(self.embed.parameters())[0].dtype)
        return self.rnn(self.embed(ids), h)[0] * mask[..., None]
""",
            count=2,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # a ``.parameters()`` call in a method that may run from forward, or
        # in one read as an attribute by such code (a property)
        reads = None
        for c in scan.calls:
            if c.attr != "parameters" or c.cls is None:
                continue
            if scan.in_forward(c.cls, c.method):
                return True
            if reads is None:
                reads = scan.forward_attribute_reads()
            if c.method in reads:
                return True
        return False

    def __init__(self, context) -> None:
        super().__init__(context)
        self._done: Set[int] = set()
        # per class being visited: its properties that forward-reachable code reads
        self._properties: List[Set[str]] = []
        # expressions in the body of a ``try`` whose handler catches StopIteration
        self._guarded: Set[int] = set()

    def visit_Try(self, node: cst.Try) -> None:
        if any(_catches_stop_iteration(h.type) for h in node.handlers):
            collector = _Expressions()
            walk(node.body, collector)
            self._guarded |= collector.ids

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        cls = self.facts.classes.get(node.name.value)
        self._properties.append(_properties_read_by_forward(node, cls) if cls is not None and cls.is_module else set())

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._properties.pop()

    def _in_scope(self, node: cst.CSTNode) -> bool:
        """In ``forward``, a method it calls, or a property such code reads
        (``@property def device(self): return next(self.parameters()).device``),
        and not under ``try: ... except StopIteration:`` (the DataParallel
        fallback transformers uses)."""
        if id(node) in self._guarded:
            return False
        ctx = self.context
        if ctx.in_forward:
            return True
        m = ctx.current_method
        return m is not None and bool(self._properties) and m.name.value in self._properties[-1]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "device" or not self._in_scope(node):
            return
        owner = _first_parameter_of(node.value)
        if owner is None:
            return
        self._done.add(id(node.value))
        self._check(node.value, owner, device=node)

    def visit_Call(self, node: cst.Call) -> None:
        if id(node) in self._done or not self._in_scope(node):
            return
        owner = _first_parameter_of(node)
        if owner is not None:
            self._check(node, owner, device=None)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if id(node) in self._done or not self._in_scope(node):
            return
        owner = _first_parameter_of(node)
        if owner is not None:
            self._check(node, owner, device=None)

    def _check(self, expr: cst.BaseExpression, owner: cst.BaseExpression, device: Optional[cst.Attribute]) -> None:
        ctx = self.context
        cls = ctx.current_class
        if cls is None or not ctx.self_name or cls.pinned_devices():
            return  # a model that pins its parts to devices is never a DataParallel replica (DL004)
        module_class = module_class_of(self.facts, cls, owner, ctx.self_name, {})
        if module_class is None:
            return  # not this module or one of its submodules
        method = ctx.current_method.name.value if ctx.current_method is not None else "forward"
        message = self.message.format(expr=code_of(expr), method=method)
        if not ctx.in_forward:
            message = message.replace(f"in `{method}`", f"in `{method}` (a property `forward` reads)", 1)
        path = self.facts.tensor_path_of_class(module_class)
        if path is None:
            name = module_class.rsplit(".", 1)[-1]
            self.report(expr, message, no_fix_reason=f"`{name}` holds no tensor devlint can name")
            return
        held = f"{code_of(owner)}.{path}"
        if device is not None:
            fix = self.replace(device, cst.parse_expression(f"{held}.device"), f"read `{held}.device`")
            self.report(expr, message, fix=fix)
            return
        fix = self.replace(
            expr, cst.parse_expression(held), f"use `{held}` (may not be the first parameter)", FixSafety.UNSAFE
        )
        self.report(expr, message, fix=fix)


class _Expressions(cst.CSTVisitor):
    """The ids of the calls, subscripts and attributes under a node."""

    def __init__(self) -> None:
        self.ids: Set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        self.ids.add(id(node))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self.ids.add(id(node))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.ids.add(id(node))


def _catches_stop_iteration(kind: Optional[cst.BaseExpression]) -> bool:
    if kind is None:
        return True  # a bare ``except:``
    if isinstance(kind, cst.Tuple):
        return any(_catches_stop_iteration(e.value) for e in kind.elements)
    name = code_of(kind).rsplit(".", 1)[-1]
    return name in ("StopIteration", "Exception", "BaseException")


def _properties_read_by_forward(node: cst.ClassDef, cls) -> Set[str]:
    """The properties of the class that ``forward``-reachable methods read as
    ``self.<name>``, also through other properties."""
    methods = {
        stmt.name.value: stmt
        for stmt in node.body.body
        if isinstance(stmt, cst.FunctionDef) and stmt.params.params
    }
    properties = {name for name, facts in cls.methods.items() if facts.is_property and name in methods}
    if not properties:
        return set()
    found: Set[str] = set()
    todo = [methods[m] for m in cls.forward_reachable if m in methods]
    while todo:
        for name in self_attribute_loads(todo.pop()):
            if name in properties and name not in found:
                found.add(name)
                todo.append(methods[name])
    return found


def _first_parameter_of(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``X`` when ``node`` takes the first of ``X.parameters()``:
    ``next(X.parameters())``, ``next(iter(X.parameters()))``,
    ``list(X.parameters())[0]``, ``tuple(X.parameters())[0]``."""
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
        return _parameters_owner(inner)
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        if not (isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0"):
            return None
        seq = node.value
        if isinstance(seq, cst.Call) and isinstance(seq.func, cst.Name) and seq.func.value in _SEQUENCES:
            args = positional_args(seq)
            if len(args) == 1:
                return _parameters_owner(args[0].value)
    return None


def _parameters_owner(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``X`` in ``X.parameters()`` (no arguments or ``recurse=True``)."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "parameters"
        and not positional_args(node)
    ):
        return node.func.value
    return None
