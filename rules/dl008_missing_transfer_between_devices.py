"""DL008 missing-transfer-between-devices

## What it does
In model-parallel code (a module whose `__init__` pins submodules to devices:
`self.a = A().to("cuda:0")`, `self.b = B().to("cuda:1")`, or blocks placed in
a loop over a device list), flags an activation handed from a submodule on one
device to a submodule on another without `.to(...)`: between stages, into the
blocks of a spread `nn.ModuleList`, into the final head, and into the loss
(logits on the last device, labels where the inputs arrive).

## Why is this bad?
A layer only accepts inputs on the device of its weights; PyTorch does not
move activations between GPUs by itself:

```
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!
```

(or, for convolutions, `Input type (torch.cuda.FloatTensor) and weight type
(torch.cuda.FloatTensor) should be the same` with the two on different GPUs).
It shows only on a machine with the GPUs the model was split over.

## Example
```python
class Pipeline(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = Stage().to("cuda:0")
        self.stage2 = Stage().to("cuda:1")

    def forward(self, x):
        return self.stage2(self.stage1(x))
```

## Use instead
```python
class Pipeline(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = Stage().to("cuda:0")
        self.stage2 = Stage().to("cuda:1")

    def forward(self, x):
        return self.stage2(self.stage1(x).to("cuda:1"))
```

The activation is moved to the device expression `__init__` used for the
receiving submodule when `forward` can see it (a literal, a module-level
`devices` list, `self.<attr>`); otherwise, and for blocks spread over devices
in a loop (`for block in self.blocks: x = block(x)`), to the device of a
parameter the receiving module holds (`x.to(block.ln1.weight.device)`). The
loss moves the labels to the logits: `labels.to(logits.device)`.

Not flagged: code that already moves its activations (`.to(...)`, `.cuda(i)`),
modules with no pinned submodules, activations whose device devlint cannot
tell, parameter-free modules such as `nn.ReLU()`, which follow their input,
and casts (`.to(x.dtype)`, `.to(torch.float16)`, `.to(dtype=...)`), which
keep a tensor on its device.

## Fix safety
Safe: a `.to()` onto the device the receiving layer already requires is a
no-op wherever the original code worked. A value already moved to a fixed
device (`labels.to("cuda:0")`, `labels.cuda()`) has that move redirected
(`labels.to(logits.device)`) rather than a second one chained after it.
"""

from __future__ import annotations

import ast

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from devlint.facts.classes import ClassFacts, is_dtype_expr
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import (
    LINES,
    dotted_name,
    free_names,
    is_cuda_string,
    keyword_arg,
    loop_over_attribute,
    positional_args,
    self_attribute,
    shown_device,
    statements,
    string_value,
)

_LOSSES = frozenset(
    {
        "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "ctc_loss",
        "poisson_nll_loss", "gaussian_nll_loss", "cosine_embedding_loss", "margin_ranking_loss",
        "hinge_embedding_loss", "multi_margin_loss", "multilabel_margin_loss",
        "multilabel_soft_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    }
)
_BUILTINS = frozenset({"len", "int", "min", "max", "abs", "str", "range"})
_NOT_TENSORS = frozenset({"shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "size", "dim", "numel", "item", "tolist"})


@dataclass(frozen=True)
class Dev:
    """Where a tensor lives: ``key`` compares devices, ``expr`` is a device
    expression usable inside ``forward`` (None when there is none)."""

    key: str
    expr: Optional[str]
    #: the tensor is a forward input never moved: its device is inferred
    #: from where the other inputs enter the model
    arrival: bool = False


@dataclass(frozen=True)
class Spread:
    """The output of blocks of ``attr`` spread over several devices."""

    attr: str
    #: moved to the current block's device (``x.to(devices[i])`` in the loop)
    moved: bool = False


Where = Union[Dev, Spread, None]


class MissingTransferBetweenDevices(Rule):
    code = "DL008"
    name = "missing-transfer-between-devices"
    message = "`{arg}` is on {src} but {dst_name} is on {dst}: nothing moves it between the devices"
    fix_safety = "safe"
    tokens = (".to(", ".cuda(")

    VALID = [
        Valid(
            """
import torch.nn as nn

class TwoGPU(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq1 = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).to("cuda:0")
        self.seq2 = nn.Linear(8, 2).to("cuda:1")
        self.act = nn.ReLU()

    def forward(self, x):
        x = self.act(self.seq1(x.to("cuda:0")))
        return self.seq2(x.to("cuda:1"))
"""
        ),
        Valid(
            """
import torch
import torch.nn as nn

devices = [torch.device("cuda:0"), torch.device("cuda:1")]

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)

class Spread(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(n)])
        for i, block in enumerate(self.blocks):
            block.to(devices[i % len(devices)])
        self.head = nn.Linear(8, 2).to(devices[0])

    def forward(self, x, scale: float = 1.0):
        for block in self.blocks:
            x = block(x.to(block.fc.weight.device))
        return self.head(x.to(devices[0])) * scale
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch.nn as nn
import torch.nn.functional as F

class Pipeline(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = nn.Linear(8, 8).to("cuda:0")
        self.stage2 = nn.Linear(8, 3).to("cuda:1")

    def forward(self, x, labels):
        logits = self.stage2(F.relu(self.stage1(x)))
        return F.cross_entropy(logits, labels)
""",
            """
import torch.nn as nn
import torch.nn.functional as F

class Pipeline(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = nn.Linear(8, 8).to("cuda:0")
        self.stage2 = nn.Linear(8, 3).to("cuda:1")

    def forward(self, x, labels):
        logits = self.stage2(F.relu(self.stage1(x)).to("cuda:1"))
        return F.cross_entropy(logits, labels.to(logits.device))
""",
            count=2,
        ),
        Invalid(
            """
import torch
import torch.nn as nn

devices = [torch.device("cuda:0"), torch.device("cuda:1")]

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)

    def forward(self, x):
        return self.ln(x)

class GPT(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.emb = nn.Embedding(10, 8).to(devices[0])
        self.blocks = nn.ModuleList([Block() for _ in range(n)])
        for i, block in enumerate(self.blocks):
            block.to(devices[i % len(devices)])
        self.head = nn.Linear(8, 10).to(devices[0])

    def forward(self, idx):
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)
""",
            """
import torch
import torch.nn as nn

devices = [torch.device("cuda:0"), torch.device("cuda:1")]

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)

    def forward(self, x):
        return self.ln(x)

class GPT(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.emb = nn.Embedding(10, 8).to(devices[0])
        self.blocks = nn.ModuleList([Block() for _ in range(n)])
        for i, block in enumerate(self.blocks):
            block.to(devices[i % len(devices)])
        self.head = nn.Linear(8, 10).to(devices[0])

    def forward(self, idx):
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x.to(block.ln.weight.device))
        return self.head(x.to(devices[0]))
""",
            count=2,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # pinning a submodule takes a .to()/.cuda() call inside a class,
        # outside forward, on what ClassFacts.pinned_devices() is built from:
        # self.x, self.x[i], a loop variable, a freshly built module, or an
        # element written inside a container (nn.Sequential(a.to(d0), ...),
        # [m.to(d) for m in ...])
        # ... and only when code run by forward uses such an attribute
        reads = scan.forward_attribute_reads()
        in_values = False
        for c in scan.calls:
            if c.cls is None or c.attr not in ("to", "cuda") or c.method == "forward":
                continue
            root, shape = c.receiver
            if shape in ("attr", "subscript") and c.receiver_attr in reads:
                return True
            if shape == "name" and reads.intersection(scan.loop_attribute_vars.get(root, ())):
                return True
            # X().to(d) / [m.to(d) ...] count where they are assigned to self.<attr>
            in_values = in_values or c.in_container or shape == "call"
        if not in_values:
            return False
        return any(
            attr in reads and any(type(n) is ast.Call and getattr(n.func, "attr", None) in ("to", "cuda") for n in ast.walk(value))
            for _, _, attr, value in scan.stores_outside_forward()
        )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._reported: Set[int] = set()

    # -- entry -----------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        ctx = self.context
        cls = ctx.current_class
        if cls is None or not cls.is_module or ctx.current_method is not node:
            return True
        if node.name.value not in cls.forward_reachable or not cls.pinned_devices():
            return True
        _Flow(self, cls, node).run()
        return True

    def _report_move(self, arg: cst.BaseExpression, message: str, target: Optional[str]) -> None:
        if id(arg) in self._reported:
            return
        self._reported.add(id(arg))
        if target is None:
            self.report(arg, message, no_fix_reason="devlint cannot name the receiving device in `forward`")
            return
        self.report(arg, message, fix=self.replace(arg, _moved(arg, target), f"add `.to({target})`"))


class _Flow:
    """Follows, statement by statement, on which device each local tensor of
    one ``forward`` lives, and reports the hand-overs that cross devices."""

    def __init__(self, rule: MissingTransferBetweenDevices, cls: ClassFacts, fn: cst.FunctionDef) -> None:
        self.rule = rule
        self.facts = rule.facts
        self.cls = cls
        self.fn = fn
        params = [p.name.value for p in fn.params.params]
        self.self_name = params[0] if params else "self"
        self.params = params[1:] + [p.name.value for p in fn.params.kwonly_params]
        fn_facts = cls.methods.get(fn.name.value)
        self.tensor_params = set(fn_facts.tensor_params if fn_facts else ())
        self.env: Dict[str, Where] = {}
        self.in_loss = False
        self.loop_vars: Dict[str, Tuple[str, Optional[str]]] = {}
        #: loop variable or index -> the spread container the loop walks
        self.loop_names: Dict[str, str] = {}
        self.reporting = True
        #: where un-moved inputs enter the model (first pinned layer fed one)
        self.arrival: Optional[Dev] = None
        self.unmoved: Set[str] = set(self.params)
        self.pinned = cls.pinned_devices()
        init = cls.methods.get("__init__")
        self.init_locals = set(init.params) if init else set()

    def run(self) -> None:
        self.block(statements(self.fn))

    # -- statements -------------------------------------------------------------
    def block(self, stmts: Sequence[cst.CSTNode]) -> None:
        for stmt in stmts:
            self.statement(stmt)

    def statement(self, stmt: cst.CSTNode) -> None:
        if isinstance(stmt, LINES):
            for small in stmt.body:
                self.small(small)
        elif isinstance(stmt, cst.If):
            self.expr(stmt.test)
            before = dict(self.env)
            self.block(statements(stmt))
            after_body = self.env
            self.env = dict(before)
            if stmt.orelse is not None:
                if isinstance(stmt.orelse, cst.If):
                    self.statement(stmt.orelse)
                else:
                    self.block(statements(stmt.orelse))
            self.env = _merge(after_body, self.env)
        elif isinstance(stmt, (cst.For, cst.While)):
            self.loop(stmt)
        elif isinstance(stmt, (cst.With,)):
            self.block(statements(stmt))
        elif isinstance(stmt, (cst.Try,)):
            self.block(statements(stmt))
            for h in stmt.handlers:
                self.block(statements(h))
            if stmt.orelse is not None:
                self.block(statements(stmt.orelse))
            if stmt.finalbody is not None:
                self.block(statements(stmt.finalbody))

    def loop(self, stmt: Union[cst.For, cst.While]) -> None:
        bound: Optional[str] = None
        if isinstance(stmt, cst.For):
            self.expr(stmt.iter)
            found = loop_over_attribute(stmt, self.self_name)
            if found is not None:
                bound = found[0]
                self.loop_vars[bound] = (found[1], found[2])
                self.loop_names[bound] = found[1]
                if found[2]:
                    self.loop_names[found[2]] = found[1]
                self.env.pop(bound, None)
            else:
                for name in _names(stmt.target):
                    self.env[name] = None
                    self.unmoved.discard(name)
        else:
            self.expr(stmt.test)
        # twice: the second pass sees what the first carried round the loop
        outer = self.reporting
        self.reporting = False
        self.block(statements(stmt))
        self.reporting = outer
        self.block(statements(stmt))
        if bound is not None:
            self.loop_vars.pop(bound, None)
            for name, attr in list(self.loop_names.items()):
                if attr == found[1]:
                    del self.loop_names[name]

    def small(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            where = self.expr(node.value)
            for t in node.targets:
                self.bind(t.target, where, node.value)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.bind(node.target, self.expr(node.value), node.value)
        elif isinstance(node, cst.AugAssign):
            left = self.expr(node.target)
            right = self.expr(node.value)
            self.mix([(node.target, left), (node.value, right)])
        elif isinstance(node, cst.Expr):
            self.expr(node.value)
        elif isinstance(node, cst.Return) and node.value is not None:
            self.expr(node.value)

    def bind(self, target: cst.BaseExpression, where: Where, value: cst.BaseExpression) -> None:
        for name in _names(target):
            self.env[name] = where
            if not (isinstance(value, cst.Name) and value.value == name):
                self.unmoved.discard(name)

    # -- expressions -------------------------------------------------------------
    def expr(self, node: cst.BaseExpression) -> Where:
        if isinstance(node, cst.Name):
            if node.value in self.env:
                return self.env[node.value]
            if node.value in self.unmoved and self.in_loss and self.arrival is not None:
                return Dev(self.arrival.key, self.arrival.expr, arrival=True)
            return None
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, cst.BinaryOperation):
            left, right = self.expr(node.left), self.expr(node.right)
            return self.mix([(node.left, left), (node.right, right)])
        if isinstance(node, cst.UnaryOperation):
            return self.expr(node.expression)
        if isinstance(node, cst.Subscript):
            for el in node.slice:
                if isinstance(el.slice, cst.Index):
                    self.expr(el.slice.value)
            return self.expr(node.value)
        if isinstance(node, cst.Attribute):
            if node.attr.value in _NOT_TENSORS:
                self.expr(node.value)
                return None
            if self_attribute(node, self.self_name) is not None:
                return None
            return self.expr(node.value) if node.attr.value in ("T", "mT", "data") else None
        if isinstance(node, (cst.Tuple, cst.List)):
            for e in node.elements:
                self.expr(e.value)
            return None
        if isinstance(node, cst.IfExp):
            self.expr(node.test)
            a, b = self.expr(node.body), self.expr(node.orelse)
            return a if a == b else None
        return None

    def call(self, node: cst.Call) -> Where:
        func = node.func
        attr = self_attribute(func, self.self_name)
        # a submodule of this module
        if attr is not None and attr in self.cls.attributes:
            return self.submodule_call(node, attr)
        if isinstance(func, cst.Name) and func.value in self.loop_vars:
            return self.element_call(node, func.value)
        if isinstance(func, cst.Subscript):
            sub_attr = self_attribute(func.value, self.self_name)
            if sub_attr is not None and self.cls.elements_spread(sub_attr):
                self.args(node)
                return Spread(sub_attr)
        if isinstance(func, cst.Attribute) and not self._is_module_expr(func.value):
            method = func.attr.value
            receiver = self.expr(func.value)
            if method in ("to", "cuda", "cpu"):
                self.args(node)
                moved = self.move_target(node, method, receiver)
                if isinstance(func.value, cst.Name):
                    self.unmoved.discard(func.value.value)
                return moved
            q = self.facts.qualify(func)
            if q is None:
                # a tensor method keeps the tensor's device
                arg_where = self.args(node)
                return receiver if receiver is not None else None if not arg_where else None
        q = self.facts.qualify(func)
        is_loss = q is not None and q.startswith("torch.nn.functional.") and q.rsplit(".", 1)[-1] in _LOSSES
        arg_where = self.args(node, loss=is_loss)
        if q is not None and q.startswith("torch."):
            return self.mix(arg_where, loss=is_loss)
        return None

    def args(self, node: cst.Call, loss: bool = False) -> List[Tuple[cst.BaseExpression, Where]]:
        """The device of each argument; inside a loss every argument is a tensor."""
        outer, self.in_loss = self.in_loss, loss
        try:
            return self._args(node)
        finally:
            self.in_loss = outer

    def _args(self, node: cst.Call) -> List[Tuple[cst.BaseExpression, Where]]:
        out = []
        for a in node.args:
            if isinstance(a.value, (cst.List, cst.Tuple)):
                for e in a.value.elements:
                    out.append((e.value, self.expr(e.value)))
            else:
                out.append((a.value, self.expr(a.value)))
        return out

    def move_target(self, node: cst.Call, method: str, receiver: Where) -> Where:
        if method == "cpu":
            return Dev("cpu", '"cpu"')
        if method == "cuda":
            arg = keyword_arg(node, "device") or next(iter(positional_args(node)), None)
            if arg is None:
                return Dev("cuda:0", None)
            return self.device_of(arg.value, in_forward=True)
        arg = keyword_arg(node, "device") or next(iter(positional_args(node)), None)
        if arg is None:
            return receiver  # .to(dtype=...)
        value = arg.value
        if arg.keyword is None and is_dtype_expr(self.facts, value):
            return receiver  # .to(x.dtype), .to(torch.float16): a cast, not a transfer
        for name in free_names(value):
            if name in self.loop_names and self.cls.elements_spread(self.loop_names[name]):
                return Spread(self.loop_names[name], moved=True)  # x.to(devices[i % n])
        if isinstance(value, cst.Attribute) and value.attr.value == "device":
            if isinstance(value.value, cst.Name) and value.value.value in self.env:
                return self.env[value.value.value]
            return None  # moved somewhere devlint cannot name: trust it
        if self.facts.qualify(value) is not None and self.facts.qualify(value).startswith("torch.") and (
            self.facts.qualify(value) != "torch.device"
        ):
            return receiver  # .to(torch.float16)
        dev = self.device_of(value, in_forward=True)
        if dev is None and isinstance(value, cst.Name) and value.value in self.env:
            return self.env[value.value]  # .to(other_tensor)
        return dev

    # -- module calls --------------------------------------------------------------
    def submodule_call(self, node: cst.Call, attr: str) -> Where:
        a = self.cls.attributes[attr]
        is_loss = a.module_class.startswith("torch.nn.") and a.module_class.endswith("Loss")
        arg_where = self.args(node, loss=is_loss)
        if attr in self.pinned and not self.cls.elements_spread(attr):
            # a pinned layer's arguments are tensors: inputs count as arriving where the first layer is
            arg_where = self.args(node, loss=True) if self.arrival is not None else arg_where
            target = self.pinned_dev(attr)
            if target is None:
                return None
            if self.receiver_moves_inputs(attr, element=False):
                return target
            for arg, where in arg_where:
                if where is None:
                    if self.arrival is None and isinstance(arg, cst.Name) and arg.value in self.unmoved:
                        self.arrival = target
                    continue
                if _differs(where, target):
                    self.flag(arg, where, f"`self.{attr}`", target, self.receiving_expr(attr, target))
            return target
        if attr in self.pinned:
            return Spread(attr)
        # an unpinned module follows (or should follow) its inputs
        return self.mix(arg_where, loss=is_loss)

    def element_call(self, node: cst.Call, var: str) -> Where:
        attr, index = self.loop_vars[var]
        arg_where = self.args(node)
        if self.receiver_moves_inputs(attr, element=True):
            return Spread(attr)
        if not self.cls.elements_spread(attr):
            if attr in self.pinned:
                target = self.pinned_dev(attr)
                for arg, where in arg_where:
                    if where is not None and target is not None and _differs(where, target):
                        self.flag(arg, where, f"`{var}`", target, self.element_expr(attr, var, index) or target.expr)
                return target
            return self.mix(arg_where)
        for arg, where in arg_where:
            if where is not None and where != Spread(attr, moved=True):
                self.flag(arg, where, f"`{var}`", Spread(attr), self.element_expr(attr, var, index))
        return Spread(attr)

    def receiver_moves_inputs(self, attr: str, element: bool) -> bool:
        """The receiving module's own forward moves its inputs."""
        a = self.facts.class_attribute(self.cls.name, attr)
        if a is None:
            return False
        cls = self.facts.classes.get(a.element_class if element else a.module_class)
        return cls is not None and cls.moves_inputs

    def flag(self, arg: cst.BaseExpression, where: Where, dst_name: str, target: Where, expr: Optional[str]) -> None:
        if not self.reporting:
            return
        if isinstance(target, Spread):
            message = (
                f"`{_short(arg)}` is handed to {dst_name} as it is, but the blocks of `self.{target.attr}` "
                "are spread over several devices: move it to each block's device"
            )
        elif isinstance(where, Spread):
            message = (
                f"`{_short(arg)}` comes out of `self.{where.attr}`, whose blocks are spread over several "
                f"devices, but {dst_name} is on {_describe(target)}: nothing moves it back"
            )
        else:
            message = self.rule.message.format(
                arg=_short(arg), src=_describe(where), dst_name=dst_name, dst=_describe(target)
            )
        self.rule._report_move(arg, message, expr)

    def mix(self, operands: Sequence[Tuple[cst.BaseExpression, Where]], loss: bool = False) -> Where:
        """Tensors combined in one operation must share a device; returns it."""
        first: Optional[Tuple[cst.BaseExpression, Where]] = None
        for node, where in operands:
            if where is None:
                continue
            if isinstance(where, Dev) and where.arrival and not loss:
                continue  # an input's device is only a guess; trust it in a loss only
            if first is None:
                first = (node, where)
                continue
            if _differs(first[1], where):
                anchor_node, anchor = first
                if isinstance(anchor, Dev) and anchor.arrival:
                    anchor_node, anchor, node, where = node, where, anchor_node, anchor
                expr = f"{anchor_node.value}.device" if isinstance(anchor_node, cst.Name) else (
                    anchor.expr if isinstance(anchor, Dev) else None
                )
                self.flag(node, where, f"`{_short(anchor_node)}`", anchor, expr)
        return first[1] if first is not None else None

    # -- devices -------------------------------------------------------------------
    def pinned_dev(self, attr: str) -> Optional[Dev]:
        code = self.pinned[attr]
        try:
            node = cst.parse_expression(code)
        except Exception:
            return None
        return self.device_of(node, in_forward=False)

    def receiving_expr(self, attr: str, target: Dev) -> Optional[str]:
        if target.expr is not None:
            return target.expr
        a = self.cls.attributes.get(attr)
        path = self.facts.tensor_path_of_class(a.module_class) if a is not None else None
        return f"{self.self_name}.{attr}.{path}.device" if path else None

    def element_expr(self, attr: str, var: str, index: Optional[str]) -> Optional[str]:
        a = self.facts.class_attribute(self.cls.name, attr)
        path = self.facts.tensor_path_of_class(a.element_class) if a is not None and a.element_class else None
        if path:
            return f"{var}.{path}.device"
        init_index = self.cls.element_index.get(attr)
        placements = self.cls.element_placements.get(attr, [])
        if index and init_index and len(set(placements)) == 1:
            try:
                node = cst.parse_expression(placements[0])
            except Exception:
                return None
            renamed = node.visit(_Rename(init_index, index))
            if self.usable(renamed, extra={index}):
                return cst.Module(body=[]).code_for_node(renamed)
        return None

    def device_of(self, node: cst.BaseExpression, in_forward: bool) -> Optional[Dev]:
        key = self.key(node)
        if key is None:
            return None
        expr = cst.Module(body=[]).code_for_node(node) if (in_forward or self.usable(node)) else None
        return Dev(key, expr)

    def key(self, node: cst.BaseExpression, depth: int = 0) -> Optional[str]:
        if depth > 4:
            return None
        s = string_value(node)
        if s is not None:
            if s == "cuda":
                return "cuda:0"
            return s if is_cuda_string(s) or s == "cpu" else None
        if isinstance(node, cst.Integer):
            return f"cuda:{node.value}"
        if isinstance(node, cst.Call) and self.facts.qualify(node.func) == "torch.device":
            args = positional_args(node)
            if len(args) == 2 and isinstance(args[1].value, cst.Integer):
                base = string_value(args[0].value)
                return f"{base}:{args[1].value.value}" if base else None
            if len(args) == 1:
                return self.key(args[0].value, depth + 1)
            return None
        if isinstance(node, cst.Name):
            if node.value in self.facts.module_devices and node.value not in self.init_locals:
                try:
                    value = cst.parse_expression(self.facts.module_devices[node.value])
                except Exception:
                    value = None
                inner = self.key(value, depth + 1) if value is not None else None
                return inner or f"name:{node.value}"
            return f"name:{node.value}"
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and len(node.slice) == 1:
            idx = node.slice[0].slice
            lst = self.facts.module_device_lists.get(node.value.value)
            if isinstance(idx, cst.Index) and isinstance(idx.value, cst.Integer) and lst is not None:
                i = int(idx.value.value)
                if 0 <= i < len(lst):
                    try:
                        return self.key(cst.parse_expression(lst[i]), depth + 1) or f"{node.value.value}[{i}]"
                    except Exception:
                        return None
        attr = self_attribute(node, self.self_name)
        if attr is not None:
            a = self.facts.class_attribute(self.cls.name, attr)
            if a is not None and a.method == "__init__" and a.value.isidentifier() and a.kind in ("device", "other"):
                # ``self.dev1 = dev1`` in ``__init__``, which also pins
                # ``self.dec = nn.Linear(...).to(dev1)``: the same device
                return self.key(cst.Name(a.value), depth + 1)
            if a is not None and a.kind == "device":
                try:
                    inner = self.key(cst.parse_expression(a.value), depth + 1)
                except Exception:
                    inner = None
                if inner is not None and not inner.startswith("name:"):
                    return inner
            return f"self.{attr}"
        return "expr:" + "".join(cst.Module(body=[]).code_for_node(node).split())

    def usable(self, node: cst.BaseExpression, extra: Set[str] = frozenset()) -> bool:
        """Whether a device expression written in ``__init__`` means the same
        inside ``forward``: its names are module-level, imported or builtins."""
        names = free_names(node)
        known = set(self.facts.module_assigned) | set(self.facts.imports) | _BUILTINS | set(extra)
        known.add(self.self_name)
        return all(n in known for n in names)

    def _is_module_expr(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return node.value == self.self_name or node.value in self.loop_vars
        attr = self_attribute(node, self.self_name)
        return attr is not None and attr in self.cls.attributes and self.cls.attributes[attr].kind != "device"


# --------------------------------------------------------------------------


def _differs(a: Where, b: Where) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, Spread) or isinstance(b, Spread):
        return a != b
    return a.key != b.key


def _describe(where: Where) -> str:
    if isinstance(where, Spread):
        return f"the devices `self.{where.attr}` is spread over"
    if isinstance(where, Dev):
        if where.expr:
            text = where.expr
        elif where.key.startswith(("name:", "expr:")):
            text = where.key.split(":", 1)[1]
        else:
            text = where.key
        return f"`{shown_device(text)}`" + (" (where the inputs enter the model)" if where.arrival else "")
    return "an unknown device"


def _merge(a: Dict[str, Where], b: Dict[str, Where]) -> Dict[str, Where]:
    out = {}
    for k in set(a) | set(b):
        out[k] = a.get(k) if a.get(k) == b.get(k) else None
    return out


def _names(target: cst.BaseExpression) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[str] = []
        for e in target.elements:
            out += _names(e.value)
        return out
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return []


def _short(node: cst.CSTNode) -> str:
    text = dotted_name(node) or " ".join(cst.Module(body=[]).code_for_node(node).split())
    return text if len(text) <= 40 else text[:37] + "..."


class _Rename(cst.CSTTransformer):
    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value=self.new) if updated_node.value == self.old else updated_node


def _moved(arg: cst.BaseExpression, target: str) -> cst.BaseExpression:
    if (
        isinstance(arg, cst.Call)
        and isinstance(arg.func, cst.Attribute)
        and (
            (arg.func.attr.value == "to" and len(arg.args) == 1 and arg.args[0].keyword is None
             and isinstance(arg.args[0].value, (cst.SimpleString, cst.Integer)))
            or (arg.func.attr.value == "cuda" and len(arg.args) <= 1 and all(a.keyword is None for a in arg.args))
        )
    ):
        # labels.to("cuda:0") / labels.cuda(): moved to the wrong device; move it to the right one instead
        return arg.with_changes(
            func=arg.func.with_changes(attr=cst.Name("to")), args=[cst.Arg(cst.parse_expression(target))]
        )
    if not isinstance(arg, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not arg.lpar:
        arg = arg.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=arg, attr=cst.Name("to")), args=[cst.Arg(cst.parse_expression(target))])
