"""DL013 parameters-in-replica

## What it does
Flags `next(self.parameters())` (also `next(iter(...))`, `list(...)[0]`,
`tuple(...)[0]`, and the same on a submodule: `next(self.encoder.parameters())`)
inside `forward` of an `nn.Module`, or a method `forward` calls: the idiom for
"the device (or dtype) of this module's weights".

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
not a crash), and `buffers()` (replicas keep their buffers).

## Fix safety
Safe for `.device` (`next(self.parameters()).device` becomes
`self.encoder.weight.device`): on one device every parameter is on it, and in
a replica the held tensor is the replica's own copy. Unsafe otherwise
(`.dtype`, the tensor itself): the tensor devlint names need not be the first
parameter, and a model may keep parameters in several dtypes. With no tensor
devlint can name the finding has no fix.
"""

from __future__ import annotations

from typing import Optional, Set

import libcst as cst

from devlint.diagnostic import FixSafety
from devlint.rule import Invalid, Rule, Valid
from devlint.semantic import code_of, module_class_of, positional_args

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
        # a ``.parameters()`` call in a method that may run from forward
        return any(c.attr == "parameters" for c in scan.calls_in_forward())

    def __init__(self, context) -> None:
        super().__init__(context)
        self._done: Set[int] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "device" or not self.context.in_forward:
            return
        owner = _first_parameter_of(node.value)
        if owner is None:
            return
        self._done.add(id(node.value))
        self._check(node.value, owner, device=node)

    def visit_Call(self, node: cst.Call) -> None:
        if id(node) in self._done or not self.context.in_forward:
            return
        owner = _first_parameter_of(node)
        if owner is not None:
            self._check(node, owner, device=None)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if id(node) in self._done or not self.context.in_forward:
            return
        owner = _first_parameter_of(node)
        if owner is not None:
            self._check(node, owner, device=None)

    def _check(self, expr: cst.BaseExpression, owner: cst.BaseExpression, device: Optional[cst.Attribute]) -> None:
        ctx = self.context
        cls = ctx.current_class
        if cls is None or not ctx.self_name:
            return
        module_class = module_class_of(self.facts, cls, owner, ctx.self_name, {})
        if module_class is None:
            return  # not this module or one of its submodules
        method = ctx.current_method.name.value if ctx.current_method is not None else "forward"
        message = self.message.format(expr=code_of(expr), method=method)
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
