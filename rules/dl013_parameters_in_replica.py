"""DL013 parameters-in-replica

## What it does
Flags `next(self.parameters())` (also `next(iter(...))`, `list(...)[0]`,
`tuple(...)[0]`, `next(p for p in ...)`, and the same on a submodule:
`next(self.encoder.parameters())`) inside `forward` of an `nn.Module`, a
method `forward` calls, or a property such code reads (`@property def
device(self): return next(self.parameters()).device`): the idiom for "the
device (or dtype) of this module's weights". Also flags a method of that kind
that ends with `for p in self.parameters(): return p.device`.

## Why is this bad?
`nn.DataParallel` runs `forward` on replicas made by
`Module._replicate_for_data_parallel`, which empties `_parameters` and sets
the copied weights as plain attributes (PyTorch >= 1.5). In a replica
`parameters()` yields nothing, so `next(...)` raises and DataParallel
re-raises the error from the replica's worker thread:

```
StopIteration: Caught StopIteration in replica 0 on device 0.
```

`list(self.parameters())[0]` raises `IndexError: list index out of range`
instead, and a method ending with `for p in self.parameters(): return
p.device` returns None, so `torch.arange(n, device=self.device)` is built on
the CPU and the next operation fails with "Expected all tensors to be on the
same device".

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
not a crash) unless the method returns from the loop and has no fallback
after it, `next(self.parameters(), default)`, a read under `try: ...
except StopIteration:` (the fallback transformers uses), `buffers()`
(replicas keep their buffers), and models passed in as arguments (not
replicated), models that pin their parts to devices themselves
(model-parallel code cannot run under DataParallel at all: DL004), and the
`forward` of a DataParallel/DDP subclass or of a module that holds one as a
submodule (neither is ever a replica: it runs on the main device with every
parameter), and a fallback a replica never takes: `if device is None:
device = next(self.parameters()).device` in a method that every call from
replica code (`forward` and what it calls) gives a device
(`self.init_hidden(b, device=x.device)`); the fallback serves the other
callers, outside any replica.

## Fix safety
Safe for `.device` (`next(self.parameters()).device` becomes
`self.encoder.weight.device`): on one device every parameter is on it, and in
a replica the held tensor is the replica's own copy. Unsafe otherwise
(`.dtype`, the tensor itself): the parameter devlint names (a parameter, never
a buffer, which may hold integers such as `position_ids`) need not be the
first one, and a model may keep parameters in several dtypes. The loop becomes
`return self.encoder.weight.device` (safe) or `.dtype` (unsafe). A generator
that filters or transforms the parameters (`next(p for p in
self.parameters() if p.requires_grad)`) is flagged without a fix. With no
tensor devlint can name the finding has no fix.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple, Union

import libcst as cst

from devlint.diagnostic import FixSafety
from devlint.facts.classes import module_class_of, self_attribute_loads
from devlint.facts.flow import Flow
from devlint.facts.scripts import Scripts
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import catches_stop_iteration, code_of, first_parameter_of, parameters_owner
from devlint.torch_api import layer_parameter
from devlint.walk import walk


class ParametersInReplica(Rule):
    code = "DL013"
    requires = (Scripts, Flow)
    name = "parameters-in-replica"
    brief = "`next(self.parameters())` in `forward`: empty in DataParallel replicas, raises StopIteration"
    message = (
        "`{expr}` in {where} raises {error} inside DataParallel replicas, "
        "whose `parameters()` is empty"
    )
    fix_safety = "safe/unsafe"
    tokens = ("parameters()",)
    project_keys = ("first_parameter",)

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
        Valid(
            """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @property
    def device(self):
        for p in self.parameters():
            return p.device
        return torch.device("cpu")

    def forward(self, x):
        first = next((p for p in self.parameters()), None)
        return self.fc(x.to(self.device)) if first is not None else x
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
        Invalid(
            """
import torch.nn as nn

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        trainable = next(p for p in self.parameters() if p.requires_grad)
        return self.fc(x.to(trainable.device))
""",
            count=1,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # a ``.parameters()`` call in a method that may run from forward, or
        # in one read as an attribute by such code (a property)
        reads = None
        if scan.parameter_properties and any(
            reads & scan.parameter_properties and scan.in_forward(c, m) for (c, m), reads in scan.self_reads.items()
        ):
            return True  # self.device in forward, a property of a project base class that takes next(self.parameters())
        for c in scan.calls:
            if c.cls is not None and c.func in scan.parameter_helpers and scan.in_forward(c.cls, c.method):
                return True  # to_device(self, x), a project function taking next(m.parameters())
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
        #: (class, property) already reported as an inherited first-parameter property read
        self._inherited_reported: Set[Tuple[str, str]] = set()
        self._lineage_props: Dict[str, Set[str]] = {}
        # per class being visited: its properties that forward-reachable code reads
        self._properties: List[Set[str]] = []
        # expressions in the body of a ``try`` whose handler catches StopIteration
        self._guarded: Set[int] = set()
    def visit_Try(self, node: cst.Try) -> None:
        if any(catches_stop_iteration(h.type) for h in node.handlers):
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
            # (a fallback for callers that pass no device, which no replica takes)
            m = ctx.current_method
            return m is None or not self.context.device_flow.replica_skips(m, node)
        m = ctx.current_method
        return m is not None and bool(self._properties) and m.name.value in self._properties[-1]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.facts.index is not None and isinstance(node.value, cst.Name) and node.value.value == self.context.self_name:
            self._inherited_property(node)
        if node.attr.value != "device" or not self._in_scope(node):
            return
        found = first_parameter_of(node.value)
        if found is None:
            return
        self._done.add(id(node.value))
        owner, exact = found
        self._check(node.value, owner, device=node if exact else None, fixable=exact)

    def visit_Call(self, node: Union[cst.Call, cst.Subscript]) -> None:
        if id(node) in self._done:
            return
        # (the syntactic tests first: the scope test may run the flow)
        found = first_parameter_of(node)
        if found is not None:
            if self._in_scope(node):
                self._check(node, found[0], device=None, fixable=found[1])
        elif isinstance(node, cst.Call) and self.facts.index is not None:
            helper = self._helper(node)
            if helper is not None and self._in_scope(node):
                self._helper_call(node, helper)

    visit_Subscript = visit_Call  # list(self.parameters())[0]

    def _inherited_property(self, node: cst.Attribute) -> None:
        """``self.device`` in forward-reachable code, where ``device`` is a
        property a base class of another file of the project defines by
        taking ``next(self.parameters())`` (transformers' ``ModuleUtilsMixin``);
        the first such read of each class, since one change in the base fixes
        them all."""
        cls = self.context.current_class
        name = node.attr.value
        if cls is None or not cls.is_module or name not in self._lineage_properties(cls.name):
            return
        if not self._in_scope(node) or self.scripts.never_replicated(cls):
            return
        for base in self.facts.lineage(cls.name):
            owner = self.facts.class_facts(base)
            if owner is None:
                continue
            if not owner.origin and (name in owner.methods or name in owner.attributes):
                return  # defined (or assigned) in this file: read there
            if owner.origin and name in owner.first_parameter_properties:
                if (cls.name, name) in self._inherited_reported:
                    return  # one finding per class and property: the fix is in the base class
                self._inherited_reported.add((cls.name, name))
                path, line = self.facts.class_origin(base) or (owner.origin, 0)
                short = base.rsplit(".", 1)[-1]
                message = (
                    f"`{code_of(node)}` in {self._where()} reads `{short}.{name}` ({path}:{line}), a property that takes "
                    f"`next(self.parameters())`, which raises StopIteration inside DataParallel replicas, whose `parameters()` is empty"
                )
                self.report(node, message, no_fix_reason=f"`{short}.{name}` is defined in {path}: make it not read the parameters there",
                            related=[(path, line, f"`{short}.{name}` takes `next(self.parameters())`")])
                return
            if name in owner.methods or name in owner.attributes:
                return

    def _lineage_properties(self, class_name: str) -> Set[str]:
        """The first-parameter properties the project classes of another file
        in ``class_name``'s lineage define (once per class)."""
        found = self._lineage_props.get(class_name)
        if found is None:
            found = set()
            for base in self.facts.lineage(class_name):
                owner = self.facts.class_facts(base)
                if owner is not None and owner.origin:
                    found.update(owner.first_parameter_properties)
            self._lineage_props[class_name] = found
        return found

    def _helper(self, node: cst.Call) -> Optional[Tuple[str, int, dict]]:
        """The project function ``node`` calls, when it takes the first
        parameter of a module it is given."""
        found = self.facts.project_function(self.facts.qualify(node.func) or "")
        if found is None or "first_parameter" not in found[2] or any(a.star for a in node.args):
            return None
        return found

    def _helper_call(self, node: cst.Call, found: Tuple[str, int, dict]) -> None:
        """``to_device(self, mask)``: a function of another file of the
        project (``found``, from :meth:`_helper`) that takes the first
        parameter of the module it is given, given this module (or a
        submodule) where a replica runs."""
        callee = code_of(node.func)
        path, line, record = found
        args = [a for a in node.args if a.keyword is None]
        for i in record["first_parameter"]:
            if not (0 <= i < len(args)):
                continue
            owner = args[i].value
            if self._module_class(owner) is None:
                continue
            message = (
                f"`{callee}({code_of(owner)}, ...)` in {self._where()} takes the first of `{code_of(owner)}.parameters()` "
                f"({path}:{line}), which raises StopIteration inside DataParallel replicas, whose `parameters()` is empty"
            )
            self.report(
                node, message,
                no_fix_reason=f"`{callee}` reads the module's first parameter: give it a tensor's device instead",
                related=[(path, line, f"`{callee.rsplit('.', 1)[-1]}` takes `next(...parameters())`")],
            )
            return

    def visit_For(self, node: cst.For) -> None:
        """``for p in self.parameters(): return p.device`` as the last
        statement of a method: in a replica the loop runs zero times and the
        method returns None (``torch.arange(n, device=None)`` then makes a CPU
        tensor on every replica)."""
        ctx = self.context
        m = ctx.current_method
        if m is None or node.orelse is not None or not self._in_scope(node):
            return
        if not isinstance(m.body, cst.IndentedBlock) or not m.body.body or m.body.body[-1] is not node:
            return  # a fallback follows the loop, or the loop is in a nested block
        owner = parameters_owner(node.iter)
        first = node.body.body[0] if isinstance(node.body, cst.IndentedBlock) and node.body.body else None
        if owner is None or not isinstance(node.target, cst.Name) or not isinstance(first, cst.SimpleStatementLine):
            return
        ret = first.body[0] if len(first.body) == 1 else None
        if not isinstance(ret, cst.Return) or ret.value is None:
            return
        module_class = self._module_class(owner)
        if module_class is None:
            return
        loop = f"for {node.target.value} in {code_of(node.iter)}: return {code_of(ret.value)}"
        message = f"`{loop}` in {self._where()} returns None inside DataParallel replicas, whose `parameters()` is empty"
        value, var = ret.value, node.target.value
        device = isinstance(value, cst.Attribute) and value.attr.value == "device"
        if device or (isinstance(value, cst.Attribute) and value.attr.value == "dtype"):
            base = value.value
        else:
            base = value
        if not (isinstance(base, cst.Name) and base.value == var):
            self.report(node.iter, message, no_fix_reason="the loop returns more than the parameter's device or dtype")
            return
        path = self._held_path(module_class, device)
        if path is None:
            self.report(node.iter, message, no_fix_reason=_no_tensor(module_class))
            return
        held = cst.parse_expression(f"{code_of(owner)}.{path}")
        new_value = value.with_changes(value=held) if base is not value else held
        new = first.with_changes(leading_lines=node.leading_lines, body=[ret.with_changes(value=new_value)])
        text = f"return `{code_of(new_value)}`"
        if device:
            fix = self.replace(node, new, text)
        else:
            fix = self.replace(node, new, f"{text} (may not be the first parameter)", FixSafety.UNSAFE)
        self.report(node.iter, message, fix=fix)

    def _where(self) -> str:
        """How the message names the method: `forward`, or `device` (a
        property `forward` reads)."""
        ctx = self.context
        method = ctx.current_method.name.value if ctx.current_method is not None else "forward"
        return f"`{method}`" if ctx.in_forward else f"`{method}` (a property `forward` reads)"

    def _held_path(self, module_class: str, device: bool) -> Optional[str]:
        """For the device: any tensor the module holds (buffers move with
        it); for the tensor itself or its dtype: a parameter (a buffer may be
        an integer one)."""
        return self.facts.tensor_path_of_class(module_class) if device else _parameter_path(self.facts, module_class)

    def _module_class(self, owner: cst.BaseExpression) -> Optional[str]:
        """The module class ``owner`` (``self``, ``self.encoder``) is, when it
        is this module or one of its submodules in a class that may run as a
        DataParallel replica."""
        ctx = self.context
        cls = ctx.current_class
        if cls is None or not ctx.self_name or self.scripts.never_replicated(cls):
            return None  # model-parallel classes and outer wrappers are never DataParallel replicas
        return module_class_of(self.facts, cls, owner, ctx.self_name, {})

    def _check(
        self, expr: cst.BaseExpression, owner: cst.BaseExpression, device: Optional[cst.Attribute], fixable: bool
    ) -> None:
        module_class = self._module_class(owner)
        if module_class is None:
            return  # not this module or one of its submodules
        error = "IndexError" if isinstance(expr, cst.Subscript) else "StopIteration"
        message = self.message.format(expr=code_of(expr), where=self._where(), error=error)
        if not fixable:
            self.report(expr, message, no_fix_reason="the generator filters or transforms the parameters")
            return
        path = self._held_path(module_class, device is not None)
        if path is None:
            self.report(expr, message, no_fix_reason=_no_tensor(module_class))
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


def _no_tensor(module_class: str) -> str:
    return f"`{module_class.rsplit('.', 1)[-1]}` holds no tensor devlint can name"


def _parameter_path(facts, class_name: str, depth: int = 0) -> Optional[str]:
    """A path from an instance of ``class_name`` to a parameter it holds
    (``weight`` for ``nn.Linear``, ``encoder.weight`` for a local module):
    ``tensor_path_of_class`` without buffers, whose dtype may differ."""
    cls = facts.class_facts(class_name)
    if cls is None:
        return layer_parameter(class_name)
    if not cls.is_module:
        return None
    if cls.origin and not cls.methods and cls.anchor_tensor:
        return cls.anchor_tensor  # a project class summarised from the scan: its anchor is a layer's parameter
    for name in cls.parameters:
        return name
    for name, attr in cls.attributes.items():
        if attr.kind == "parameter":
            return name
    if depth >= 3:
        return None
    for name, attr in cls.attributes.items():
        if attr.kind == "module" and attr.module_class and attr.module_class != class_name:
            inner = _parameter_path(facts, attr.module_class, depth + 1)
            if inner:
                return f"{name}.{inner}"
    return None


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


