"""DL001 factory-without-device

## What it does
Flags a torch tensor factory (`torch.arange`, `zeros`, `ones`, `empty`, `full`,
`rand*`, `eye`, `linspace`, `logspace`, `tensor`, `as_tensor`,
`tril_indices`, ...) called without `device=` inside `forward` of an
`nn.Module`, or inside a method that `forward` calls.

## Why is this bad?
A factory without `device=` creates its tensor on the CPU (or the default
device). The model's parameters live on a GPU, so the first operation that
mixes the two fails, and under `nn.DataParallel` every replica but one is on
another GPU than the one the tensor was moved to:

```
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!
```

It only shows on a GPU machine, often after a long set-up.

## Example
```python
class Encoder(nn.Module):
    def forward(self, src):
        pos = torch.arange(0, src.shape[1]).unsqueeze(0)
        return self.tok(src) + self.pos(pos)
```

## Use instead
```python
class Encoder(nn.Module):
    def forward(self, src):
        pos = torch.arange(0, src.shape[1], device=src.device).unsqueeze(0)
        return self.tok(src) + self.pos(pos)
```

The device is taken from a tensor the method already has (a tensor argument
such as `src`); where there is none, from a parameter or buffer the module
holds directly (`self.tok.weight.device`). Never `next(self.parameters())`:
inside DataParallel replicas `parameters()` is empty (PyTorch >= 1.5), so that
"fix" raises `StopIteration` exactly where the bug was.

Not flagged: `device=` given (or `**kwargs`), `torch.zeros_like(x)`,
`x.new_zeros(...)`, a factory whose result is immediately moved with
`.to(...)`, `.cuda()` or `.type_as(...)`, a 0-dim `torch.tensor(2.0)` (a CPU
scalar tensor mixes with CUDA tensors), a factory used as an index
(`x[torch.arange(n)]`, indexing accepts CPU indices), factories in `__init__`
and outside modules.

## Fix safety
Safe: it only adds `device=` pointing at the device the computation already
runs on. When no tensor or held parameter is in reach the finding has no fix.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from devlint.diagnostic import Fix
from devlint.rule import Invalid, Rule, Valid
from devlint.semantic import DEVICE_FACTORIES, has_star_kwargs, is_number_literal, keyword_arg, positional_args

_MOVES = frozenset({"to", "cuda", "type_as", "cpu"})
# tensor methods that keep a chain "the same tensor" for the purpose of a
# later .to(...): torch.arange(n).unsqueeze(0).to(x.device)
_CHAIN = frozenset(
    {"unsqueeze", "squeeze", "view", "reshape", "expand", "expand_as", "repeat", "float", "long", "int",
     "half", "double", "bool", "t", "transpose", "permute", "flatten", "contiguous", "clone", "detach",
     "masked_fill", "fill_", "triu", "tril", "triu_", "tril_", "__getitem__", "unfold", "flip", "roll", "mul", "add",
     "sub", "div", "pow", "exp", "log", "sqrt", "cumsum", "sin", "cos", "requires_grad_"}
)


class FactoryWithoutDevice(Rule):
    code = "DL001"
    name = "factory-without-device"
    message = "`torch.{fn}` in `{method}` creates its tensor on the CPU, not on the model's device"
    fix_safety = "safe"
    tokens = ("torch",)

    VALID = [
        Valid(
            """
import torch
import torch.nn as nn

class M(nn.Module):
    def forward(self, x):
        a = torch.arange(x.size(1), device=x.device)
        b = torch.zeros_like(x)
        c = x.new_zeros(3)
        d = torch.ones(3).to(x.device)
        e = torch.arange(4).unsqueeze(0).type_as(x)
        f = torch.tensor(2.0)
        g = x[:, torch.randperm(x.size(1))]
        return a + b + c + d + e + f + g
"""
        ),
        Valid(
            """
import torch

def make_grid(n, device):
    return torch.arange(n)

class NotAModule:
    def forward(self, x):
        return torch.zeros(3)
"""
        ),
        Valid(
            """
import torch
from torch import nn

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.arange(16))

    def forward(self, x, **kw):
        return x + torch.ones(3, **kw)
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def forward(self, src):
        pos = torch.arange(0, src.shape[1]).unsqueeze(0)
        return src + pos
""",
            """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def forward(self, src):
        pos = torch.arange(0, src.shape[1], device=src.device).unsqueeze(0)
        return src + pos
""",
        ),
        Invalid(
            """
import torch as T
from torch import nn, zeros

class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, steps: int):
        h = self.init_hidden(steps)
        return self.head(h + T.rand(1, 16))

    def init_hidden(self, batch):
        return zeros(batch, 16)
""",
            """
import torch as T
from torch import nn, zeros

class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, steps: int):
        h = self.init_hidden(steps)
        return self.head(h + T.rand(1, 16, device=self.head.weight.device))

    def init_hidden(self, batch):
        return zeros(batch, 16, device=self.head.weight.device)
""",
            count=2,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # a call that may name a torch factory, without device=/out=/**kw,
        # in a method that may run from forward
        for call in scan.calls_in_forward():
            if "device" in call.keywords or "out" in call.keywords or call.has_star_kwargs:
                continue
            if scan.torch_functions(call.func) & DEVICE_FACTORIES:
                return True
        return False

    def __init__(self, context) -> None:
        super().__init__(context)
        # factory calls whose result is moved right away (ids of Call nodes)
        self._moved: Set[int] = set()
        self._method: Optional[_MethodFlow] = None

    # -- per method: findings wait until the whole method has been seen ------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.context.in_forward and self.context.current_method is node:
            self._method = _MethodFlow(node, set(self.facts.imports))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        flow = self._method
        if flow is None or flow.node is not original_node:
            return
        self._method = None
        for call, targets, message, fix, why in flow.pending:
            if not flow.escapes_unmoved(targets):
                continue
            if fix is None:
                self.report(call, message, no_fix_reason=why)
            else:
                self.report(call, message, fix=fix)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._method is not None:
            self._method.assign([t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self._method is not None and node.value is not None:
            self._method.assign([node.target], node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._method is not None:
            self._method.assign([node.target], node.value, augmented=True)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        if self._method is not None:
            self._method.targets = ()

    leave_AnnAssign = leave_Assign  # type: ignore[assignment]
    leave_AugAssign = leave_Assign  # type: ignore[assignment]

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.context
        if not ctx.in_forward:
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _MOVES:
            self._mark_moved(func.value)
            root = _root_name(func.value)
            if root is not None and self._method is not None:
                self._method.moved.add(root)
            return
        fn = self.facts.is_factory(func)
        if fn is None or id(node) in self._moved:
            return
        if keyword_arg(node, "device") is not None or keyword_arg(node, "out") is not None or has_star_kwargs(node):
            return
        if fn in ("tensor", "as_tensor", "scalar_tensor"):
            args = positional_args(node)
            if fn == "scalar_tensor" or (args and is_number_literal(args[0].value)):
                return  # a 0-dim CPU tensor mixes with CUDA tensors
        if fn == "as_tensor" and len(positional_args(node)) >= 3:
            return  # as_tensor(data, dtype, device)
        method = ctx.current_method.name.value if ctx.current_method else "forward"
        message = self.message.format(fn=fn, method=method)
        anchor, why = ctx.device_anchor()
        fix = None
        if anchor is not None:
            fix = self.replace(node, _add_device(node, anchor), f"add `device={anchor}`")
        if self._method is None:
            if fix is None:
                self.report(node, message, no_fix_reason=why)
            else:
                self.report(node, message, fix=fix)
            return
        self._method.pending.append((node, self._method.targets, message, fix, why))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # x[torch.arange(n)]: indexing accepts CPU index tensors on any device
        if not self.context.in_forward:
            return
        for el in node.slice:
            if isinstance(el.slice, cst.Index):
                value = el.slice.value
                if isinstance(value, cst.Call):
                    self._moved.add(id(value))
                elif isinstance(value, cst.Name) and self._method is not None:
                    self._method.index_uses[value.value] = self._method.index_uses.get(value.value, 0) + 1

    def visit_Name(self, node: cst.Name) -> None:
        if self._method is not None:
            self._method.uses[node.value] = self._method.uses.get(node.value, 0) + 1

    def _mark_moved(self, node: cst.BaseExpression) -> None:
        while True:
            if isinstance(node, cst.Call):
                self._moved.add(id(node))
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in _CHAIN:
                    node = node.func.value
                    continue
                return
            if isinstance(node, cst.Subscript):
                node = node.value
                continue
            if isinstance(node, (cst.Attribute,)) and node.attr.value in ("T", "mT"):
                node = node.value
                continue
            return


def _root_name(node: cst.BaseExpression) -> Optional[str]:
    """``x`` for ``x``, ``x.float()``, ``x[0]``, ``x.view(1, -1)``."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            return None


class _MethodFlow:
    """Local data flow in one forward-reachable method, enough to tell a CPU
    tensor that escapes into the computation from one that is assembled on
    the CPU and then moved (``t = torch.zeros(...); t[0] = ...; return t.to(dev)``)
    or only used as an index (``r = torch.randperm(n); x[:, r]``)."""

    def __init__(self, node: cst.FunctionDef, imports: Set[str]) -> None:
        self.node = node
        self.imports = imports
        self.pending: List[Tuple[cst.Call, Tuple[str, ...], str, Optional[Fix], str]] = []
        #: names assigned by the statement being visited
        self.targets: Tuple[str, ...] = ()
        #: name -> values assigned to it (plain and subscript assignments)
        self.sources: Dict[str, List[cst.BaseExpression]] = {}
        self.moved: Set[str] = set()
        self.uses: Dict[str, int] = {}
        self.index_uses: Dict[str, int] = {}
        self.assigned: Dict[str, int] = {}

    def assign(self, targets: Sequence[cst.BaseExpression], value: cst.BaseExpression, augmented: bool = False) -> None:
        names: List[str] = []
        for t in targets:
            base = t.value if isinstance(t, cst.Subscript) else t
            if isinstance(base, cst.Name):
                names.append(base.value)
                self.sources.setdefault(base.value, []).append(value)
                if base is t:
                    self.assigned[base.value] = self.assigned.get(base.value, 0) + 1
            else:
                names.append("")  # an attribute or a tuple: the value escapes
        self.targets = tuple(names)

    def _operands(self, node: cst.BaseExpression) -> Tuple[Set[str], bool, bool]:
        """(names used as tensor operands, contains a torch factory-like call, unknown parts)."""
        if isinstance(node, cst.Name):
            if node.value in self.imports:
                return set(), False, False
            return {node.value}, False, False
        if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
            return set(), False, False
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute):
                recv = func.value
                if isinstance(recv, cst.Name) and recv.value in self.imports:
                    return set(), True, False  # torch.xxx(...): a new CPU tensor or a pure function
                return self._operands(recv)
            return set(), False, True
        if isinstance(node, cst.Attribute):
            if isinstance(node.value, cst.Name) and node.value.value in self.imports:
                return set(), False, False  # torch.float32
            return set(), False, True  # self.x, obj.attr: unknown device
        if isinstance(node, cst.Subscript):
            return self._operands(node.value)
        if isinstance(node, cst.BinaryOperation):
            a, fa, ua = self._operands(node.left)
            b, fb, ub = self._operands(node.right)
            return a | b, fa or fb, ua or ub
        if isinstance(node, cst.UnaryOperation):
            return self._operands(node.expression)
        return set(), False, True

    def _cpu_born(self) -> Set[str]:
        """Names every value of which is built from CPU factories and other
        such names only (greatest fixpoint)."""
        params = {p.name.value for p in self.node.params.params}
        params |= {p.name.value for p in self.node.params.kwonly_params}
        params |= {p.name.value for p in self.node.params.posonly_params}
        born = set(self.sources) - params
        changed = True
        while changed:
            changed = False
            for name in list(born):
                for value in self.sources[name]:
                    names, factory, unknown = self._operands(value)
                    if unknown or not names <= born or not (factory or names):
                        born.discard(name)
                        changed = True
                        break
        return born

    def escapes_unmoved(self, targets: Tuple[str, ...]) -> bool:
        """Whether a factory result assigned to ``targets`` can reach the
        computation on the CPU."""
        if not targets or "" in targets:
            return True
        born = self._cpu_born()
        for t in targets:
            if t not in born:
                return True
            # used only as an index: fine on any device
            loads = self.uses.get(t, 0) - self.assigned.get(t, 0)
            if loads > 0 and loads == self.index_uses.get(t, 0):
                continue
            if not self._reaches_moved(t, born):
                return True
        return False

    def _reaches_moved(self, start: str, born: Set[str]) -> bool:
        seen = {start}
        todo = [start]
        while todo:
            name = todo.pop()
            if name in self.moved:
                return True
            for other in born:
                if other in seen:
                    continue
                if any(name in self._operands(v)[0] for v in self.sources[other]):
                    seen.add(other)
                    todo.append(other)
        return False


def _add_device(call: cst.Call, anchor: str) -> cst.Call:
    value = cst.parse_expression(anchor)
    args = list(call.args)
    new_arg = cst.Arg(
        keyword=cst.Name("device"),
        value=value,
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if args:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):
            # trailing comma: keep the layout, the new argument takes it too
            new_arg = new_arg.with_changes(comma=last.comma)
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(new_arg)
    return call.with_changes(args=args)
