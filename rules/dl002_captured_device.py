"""DL002 captured-device

## What it does
Flags tensors placed, inside `forward` of an `nn.Module` (or a method it
calls), on a device fixed outside the replica: `self.device` assigned in
`__init__` from an argument (`device`, `config.device`) or a
`torch.device(...)`, a module-level device variable, a `"cuda"` /
`"cuda:0"` / `torch.device("cuda:0")` literal, `.cuda()` with or without
an index, or a GPU index kept in `__init__` (`self.gpu = gpu`) and used as
`f"cuda:{self.gpu}"` or `.cuda(self.gpu)`; as `.to(<device>)`, `.cuda(...)`
or `device=<device>` in a call, also through a local copy (`device =
self.device` or `device = f"cuda:{self.gpu}"`, then `device=device`) when
that assignment is the local's only binding in the method.

Anywhere else (helpers, losses, metrics, generation utilities: any function
or method that does not run while a module is built), it flags a tensor put
on the current GPU (`.cuda()`, `.to("cuda")`, `device="cuda"`,
`torch.device("cuda")`) or on one named in the code (`.cuda(0)`,
`"cuda:1"`) where the device flow shows it meeting a tensor that follows the
inputs: `cost = torch.ones(n, n).cuda(); cost + x`, an index moved to
`"cuda"` that indexes `x`, a kernel on `"cuda:0"` convolved with the signal.
A tensor moved there together with everything it meets
(`x = x.cuda(); w = torch.ones(3).cuda(); x * w`) is not flagged.

Everywhere, `forward` included, it flags `t.type(x.type())` where the flow
shows the result meeting a tensor on the inputs' device: a CUDA type string
(`"torch.cuda.FloatTensor"`) names no index, so `t` lands on the current
GPU, not on x's. The fix is `t.to(x)` (x's dtype and device, index included).

## Why is this bad?
`nn.DataParallel` copies the module onto every GPU and runs each copy on its
own slice of the batch, but a device captured at construction (or written as a
literal) still names the first GPU, so the replica on `cuda:1` mixes its
weights with a tensor on `cuda:0`:

```
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!
```

The same code breaks under DistributedDataParallel on every rank but 0 when
the device was fixed before the rank was known, in model-parallel code when
the block runs on another GPU than `.cuda()`'s current device, and on a CPU-only
machine, where `.cuda()` raises `AssertionError: Torch not compiled with CUDA enabled`.

## Example
```python
class Encoder(nn.Module):
    def __init__(self, vocab, hidden, device):
        super().__init__()
        self.device = device
        self.tok = nn.Embedding(vocab, hidden)

    def forward(self, src):
        pos = torch.arange(src.shape[1], device=self.device)
        return self.tok(src) + pos[:, None]
```

## Use instead
```python
class Encoder(nn.Module):
    def __init__(self, vocab, hidden, device):
        super().__init__()
        self.device = device
        self.tok = nn.Embedding(vocab, hidden)

    def forward(self, src):
        pos = torch.arange(src.shape[1], device=src.device)
        return self.tok(src) + pos[:, None]
```

The device comes from a tensor the method already has (a tensor argument such
as `src`) or, when the tensor being moved is that argument itself or there is
none, from a parameter or buffer the module holds
(`self.tok.weight.device`); `.cuda()` becomes `.to(<that>.device)`. Never
`next(self.parameters())`: inside DataParallel replicas `parameters()` is
empty (PyTorch >= 1.5).

Not flagged: `self.device` used only in `__init__`; a `device` passed as an
argument of `forward` or computed in it (`device = x.device`,
`f"cuda:{x.get_device()}"`); a `device`
property that reads a parameter's device; `.to("cpu")` / `.cpu()` (moving
results off the GPU on purpose); modules that pin their own submodules to
devices (model-parallel code: DL004 and DL008 cover it); and modules whose
`forward` never runs in a replica: a DataParallel/DDP subclass (its forward
scatters and gathers on the main device, so an `output_device` kept in
`__init__` is right there) and a module that holds a DataParallel/DDP as a
submodule (it is the outer model; replicating it would nest wrappers: DL003).

## Fix safety
Safe: on one device the new expression names the same device as before, and
under DataParallel or DistributedDataParallel it names the replica's own one.
When no tensor or held parameter is in reach the finding has no fix.
"""

from __future__ import annotations

import ast

from typing import Dict, Optional, Set, Tuple

import libcst as cst

from devlint.facts.flow import CURRENT, FIXED, Flow, retyped_like
from devlint.facts.scripts import Scripts
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import (
    code_of,
    dotted_name,
    is_cuda_string,
    keyword_arg,
    positional_args,
    self_attribute,
    string_value,
)
from devlint.walk import walk


class CapturedDevice(Rule):
    code = "DL002"
    requires = (Flow, Scripts)
    name = "captured-device"
    message = "{what} is not this replica's device: under DataParallel/DDP a replica on another GPU puts this tensor on the wrong device"
    fix_safety = "safe"
    tokens = ("cuda", "device", ".type(")

    VALID = [
        Valid(
            """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.device = device
        self.tok = nn.Embedding(10, 4).to(self.device)

    def forward(self, src, device):
        pos = torch.arange(src.shape[1], device=device)
        mask = torch.ones(3, device=src.device).cpu()
        return self.tok(src) + pos[:, None] + mask.to("cpu").sum()
"""
        ),
        Valid(
            """
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @property
    def device(self):
        return self.fc.weight.device

    def forward(self, x):
        device = x.device
        return self.fc(x) + torch.zeros(4, device=device) + torch.ones(4, device=self.device)

def evaluate(model, batch):
    return model(batch.to(device))
"""
        ),
        Valid(
            """
import torch
import torch.nn as nn

class TwoGPU(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4).to("cuda:0")
        self.b = nn.Linear(4, 4).to("cuda:1")

    def forward(self, x):
        return self.b(self.a(x.to("cuda:0")).to("cuda:1"))
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self, vocab, hidden, device):
        super().__init__()
        self.device = device
        self.tok = nn.Embedding(vocab, hidden)

    def forward(self, src):
        pos = torch.arange(src.shape[1], device=self.device)
        return self.tok(src) + pos[:, None]
""",
            """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self, vocab, hidden, device):
        super().__init__()
        self.device = device
        self.tok = nn.Embedding(vocab, hidden)

    def forward(self, src):
        pos = torch.arange(src.shape[1], device=src.device)
        return self.tok(src) + pos[:, None]
""",
        ),
        Invalid(
            """
import torch as T
from torch import nn

DEVICE = T.device("cuda:0")

class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 16)
        self.out = nn.Linear(16, 2)

    def forward(self, x):
        x = x.to(DEVICE)
        h = self.init_hidden(x.size(0))
        return self.out(self.cell(x, h)), T.ones(2).cuda()

    def init_hidden(self, batch):
        return T.zeros(batch, 16, device="cuda")
""",
            """
import torch as T
from torch import nn

DEVICE = T.device("cuda:0")

class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 16)
        self.out = nn.Linear(16, 2)

    def forward(self, x):
        x = x.to(self.out.weight.device)
        h = self.init_hidden(x.size(0))
        return self.out(self.cell(x, h)), T.ones(2).to(x.device)

    def init_hidden(self, batch):
        return T.zeros(batch, 16, device=self.out.weight.device)
""",
            count=3,
        ),
        Invalid(
            """
import torch
import torch.nn as nn

class YoloHead(nn.Module):
    def __init__(self, anchors):
        super().__init__()
        self.anchors = anchors
        self.conv = nn.Conv2d(16, 3 * 6, 1)

    def forward(self, feats):
        out = self.conv(feats)
        h, w = out.shape[-2:]
        gy, gx = torch.meshgrid(torch.arange(h, device="cuda:0"), torch.arange(w, device="cuda:0"), indexing="ij")
        anchors = torch.tensor(self.anchors).cuda(0)
        scale = torch.ones(2, device=torch.device("cuda", 0))
        return out, torch.stack([gx, gy], -1), anchors * scale
""",
            """
import torch
import torch.nn as nn

class YoloHead(nn.Module):
    def __init__(self, anchors):
        super().__init__()
        self.anchors = anchors
        self.conv = nn.Conv2d(16, 3 * 6, 1)

    def forward(self, feats):
        out = self.conv(feats)
        h, w = out.shape[-2:]
        gy, gx = torch.meshgrid(torch.arange(h, device=feats.device), torch.arange(w, device=feats.device), indexing="ij")
        anchors = torch.tensor(self.anchors).to(feats.device)
        scale = torch.ones(2, device=feats.device)
        return out, torch.stack([gx, gy], -1), anchors * scale
""",
            count=4,
        ),
        Invalid(
            """
import torch
import torch.nn as nn

class Head(nn.Module):
    def __init__(self, gpu):
        super().__init__()
        self.gpu = gpu
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        device = f"cuda:{self.gpu}"
        bias = torch.zeros(2, device=device)
        return self.fc(x) + bias + torch.ones(2).cuda(self.gpu)
""",
            """
import torch
import torch.nn as nn

class Head(nn.Module):
    def __init__(self, gpu):
        super().__init__()
        self.gpu = gpu
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        device = f"cuda:{self.gpu}"
        bias = torch.zeros(2, device=x.device)
        return self.fc(x) + bias + torch.ones(2).to(x.device)
""",
            count=2,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # a move or a device= argument in a method that may run from forward
        # (what _captured reports: a .cuda() call, or a device that is a cuda
        # string, an index, a call such as torch.device(...), a name assigned
        # outside classes, or self.<attr> for an attribute assigned somewhere)
        for c in scan.calls_in_forward():
            if c.attr == "cuda":
                return True
            if c.device_arg is None:
                continue
            kind, detail = c.device_arg
            if kind == "int":
                return True
            if kind == "call" and scan.refers_to(detail, {"torch.device"}):
                return True
            if kind in ("str", "fstr") and (detail == "cuda" or detail.startswith("cuda:")):
                return True
            if kind == "name" and detail in scan.unclassed_names:
                return True
            if kind == "name":
                # device = self.device, then device=device
                for value in scan.local_values.get((c.cls, c.method), {}).get(detail, ()):
                    if (
                        isinstance(value, ast.Attribute)
                        and isinstance(value.value, ast.Name)
                        and value.attr in scan.attribute_values
                        and value.value.id in scan.method_self.get((c.cls, c.method), ())
                    ):
                        return True
                    if isinstance(value, ast.JoinedStr) and value.values:
                        head = value.values[0]
                        if isinstance(head, ast.Constant) and str(head.value).startswith("cuda"):
                            return True  # device = f"cuda:{self.gpu}", then device=device
            if kind == "attr":
                root, attr = detail.split(".", 1)
                if attr in scan.attribute_values and root in scan.method_self.get((c.cls, c.method), ()):
                    return True
        # anywhere else the device flow decides: a tensor put on the current
        # or a fixed GPU (.cuda(), .cuda(0), "cuda", "cuda:1", torch.device("cuda"))
        # in a file where a tensor can follow the inputs
        for c in scan.calls:
            placed = c.attr == "cuda" and c.n_args <= 1
            if c.device_arg is not None:
                kind, detail = c.device_arg
                placed = placed or kind == "int" or (kind == "str" and detail.startswith("cuda")) or (
                    kind == "call" and scan.refers_to(detail, {"torch.device"})
                ) or (kind == "name" and any(t.startswith("cuda") for t in scan.strings))
            if placed and scan.may_hold_local_tensors():
                return True
        return scan.retypes and scan.may_hold_local_tensors()

    def leave_Module(self, original_node: cst.Module) -> None:
        self._report_flow_meetings()

    def _report_flow_meetings(self) -> None:
        """Outside what ``forward`` runs (helpers, losses, metrics, generation
        utilities): a tensor put on the current or a fixed GPU is a finding
        where the device flow shows it meeting a tensor on the inputs'
        device."""
        flow = self.context.device_flow
        skip: Set[int] = {id(d.node) for d in self.diagnostics}
        for found in flow.origin_meetings((CURRENT, FIXED), skip):
            cls = flow.class_facts(found.home)
            if cls is not None and found.home.name.value in cls.forward_reachable and retyped_like(found.origin) is None:
                continue  # forward is checked above, syntactically (but for .type(x.type()), which syntax does not see)
            origin = found.origin
            target = "the current GPU" if found.meeting.device == CURRENT else "a GPU named in the code"
            code = _origin_code(origin)
            message = (
                f"`{code}` in `{found.where}` puts its tensor on {target}, not on the device of "
                f"{found.partner_text}, which it meets through {found.how_text}"
            )
            source = retyped_like(origin)
            if source is not None:  # t.type(x.type()) -> t.to(x): x's dtype and device, index included
                new = origin.with_changes(func=origin.func.with_changes(attr=cst.Name("to")), args=[cst.Arg(source)])  # type: ignore[attr-defined]
                self.report(origin, message, fix=self.replace(origin, new, f"take `{code_of(source)}`'s dtype and device with `.to({code_of(source)})`"))
                continue
            new = _placed_on(origin, f"{found.anchors[0]}.device") if found.anchors and isinstance(origin, cst.Call) else None
            if new is None:
                self.report(origin, message, no_fix_reason="no tensor on the right device is in scope where it is placed")
            else:
                self.report(origin, message, fix=self.replace(origin, new, f"place it on `{found.anchors[0]}.device`"))

    def __init__(self, context) -> None:
        super().__init__(context)
        self._bound: Dict[int, Set[str]] = {}
        self._aliases: Dict[int, Dict[str, cst.BaseExpression]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.context
        if not ctx.in_forward:
            return
        cls = ctx.current_class
        if cls is None or self.scripts.never_replicated(cls):
            return  # model-parallel code places tensors on purpose; an outer wrapper is no replica
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
            if self._is_module(func.value) or self.facts.qualify(func.value) == "torch":
                return
            self._report_cuda(node, func)
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "to" and not self._is_module(func.value):
            args = positional_args(node)
            dev_arg = keyword_arg(node, "device") or (args[0] if args else None)
            if dev_arg is not None:
                self._check(dev_arg.value, receiver=func.value)
            return
        dev_arg = keyword_arg(node, "device")
        if dev_arg is not None:
            self._check(dev_arg.value, receiver=None)

    # -- what is captured --------------------------------------------------
    def _captured(self, node: cst.BaseExpression) -> Optional[Tuple[str, bool]]:
        """(description, names the current CUDA device rather than a fixed
        index) for a captured device expression, or None."""
        method = self._method()
        s = string_value(node)
        if s is not None:
            if not is_cuda_string(s):
                return None
            return f"the literal `{_code(node)}` in `{method}`", s == "cuda"
        if isinstance(node, cst.Integer):
            return f"the device index `{node.value}` in `{method}`", False
        if isinstance(node, cst.FormattedString):
            index = _cuda_fstring_index(node)
            if index is not None and self._construction_index(index):
                return f"`{_code(node)}` in `{method}`", False
            return None
        if isinstance(node, cst.Call) and self.facts.qualify(node.func) == "torch.device":
            args = positional_args(node)
            if not args:
                return None
            inner = string_value(args[0].value)
            if is_cuda_string(inner):
                return f"`{_code(node)}` in `{method}`", inner == "cuda" and len(args) == 1
            found = self._captured(args[0].value)
            return (f"`{_code(node)}` in `{method}`", found[1]) if found else None
        if isinstance(node, cst.Name):
            value = self.facts.module_devices.get(node.value)
            if value is not None and node.value not in self._bound_names():
                return f"`{node.value}`, a module-level device fixed at import,", _current_only(value)
            alias = self._alias_of(node.value)
            if alias is not None and (
                self_attribute(alias, self.context.self_name) is not None or isinstance(alias, cst.FormattedString)
            ):
                # device = self.device / device = f"cuda:{self.gpu}", then device=device
                found = self._captured(alias)
                if found is not None:
                    return f"`{node.value}`, set from {found[0]}", found[1]
            return None
        cls = self.context.current_class
        attr = self_attribute(node, self.context.self_name)
        if attr is not None and cls is not None and attr not in cls.methods:
            facts = self.facts.class_attribute(cls.name, attr)
            if facts is not None and facts.kind == "device":
                return f"`{_code(node)}`, fixed in `{facts.method}`,", _current_only(facts.value)
        return None

    def _construction_index(self, node: cst.BaseExpression) -> bool:
        """A device index fixed when the module was built: a literal, or
        ``self.<attr>`` assigned in ``__init__`` (``self.gpu = gpu``), also
        through a local copy (``gpu = self.gpu``). Only asked where the value
        can only be a device index (``f"cuda:{...}"``, ``.cuda(...)``)."""
        if isinstance(node, cst.Integer):
            return True
        if isinstance(node, cst.Name):
            alias = self._alias_of(node.value)
            return alias is not None and self_attribute(alias, self.context.self_name) is not None and self._construction_index(alias)
        cls = self.context.current_class
        attr = self_attribute(node, self.context.self_name)
        if attr is None or cls is None or attr in cls.methods:
            return False
        facts = self.facts.class_attribute(cls.name, attr)
        return facts is not None and facts.method == "__init__" and facts.kind in ("device", "other")

    def _message(self, what: str, current: bool) -> str:
        if current:
            return (
                f"{what} means the current CUDA device, not the device of this module's weights "
                "(wrong under model parallelism, DDP without `set_device`, and on CPU)"
            )
        return self.message.format(what=what)

    def _check(self, dev: cst.BaseExpression, receiver: Optional[cst.BaseExpression]) -> None:
        found = self._captured(dev)
        if found is None:
            return
        message = self._message(*found)
        anchor, why = self._anchor(receiver)
        if anchor is None:
            self.report(dev, message, no_fix_reason=why)
            return
        self.report(dev, message, fix=self.replace(dev, cst.parse_expression(anchor), f"use `{anchor}`"))

    def _report_cuda(self, node: cst.Call, func: cst.Attribute) -> None:
        index = keyword_arg(node, "device") or next(iter(positional_args(node)), None)
        if index is None:
            message = self._message(f"`.cuda()` in `{self._method()}`", True)
        elif self._captured(index.value) is not None or self._construction_index(index.value):
            message = self._message(f"`.cuda({_code(index.value)})` in `{self._method()}`", False)
        else:
            return  # .cuda(x.device.index): taken from a tensor
        anchor, why = self._anchor(func.value)
        if anchor is None:
            self.report(node, message, no_fix_reason=why)
            return
        # keep non_blocking= & co; drop the device index
        rest = [a for a in node.args if a.keyword is not None and a.keyword.value != "device"]
        args = [cst.Arg(cst.parse_expression(anchor))]
        if rest:
            args[0] = args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            last = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            args += rest[:-1] + [last]
        new = node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=args)
        self.report(node, message, fix=self.replace(node, new, f"`.to({anchor})`"))

    # -- the replacement device ----------------------------------------------
    def _anchor(self, receiver: Optional[cst.BaseExpression]) -> Tuple[Optional[str], str]:
        """DL001's anchor, unless the tensor being moved is that anchor itself
        (``x.to(self.device)`` -> ``x.to(x.device)`` would do nothing): then a
        tensor the module holds."""
        ctx = self.context
        anchor, why = ctx.device_anchor()
        root = _root_name(receiver) if receiver is not None else None
        if anchor is not None and (root is None or anchor.split(".", 1)[0] != root):
            return anchor, why
        cls = ctx.current_class
        if cls is not None and cls.anchor_tensor:
            return f"{ctx.self_name}.{cls.anchor_tensor}.device", ""
        fn = ctx.current_method_facts
        if fn is not None:
            for p in fn.tensor_params:
                if p != root:
                    return f"{p}.device", ""
        return None, why or "no other tensor or held parameter to take the device from"

    # -- helpers -------------------------------------------------------------
    def _is_module(self, node: cst.BaseExpression) -> bool:
        ctx = self.context
        if isinstance(node, cst.Name) and node.value == ctx.self_name:
            return True
        attr = self_attribute(node, ctx.self_name)
        cls = ctx.current_class
        if attr is None or cls is None:
            return False
        facts = self.facts.class_attribute(cls.name, attr)
        return facts is not None and facts.kind in ("module", "nn_container", "module_container")

    def _method(self) -> str:
        m = self.context.current_method
        return m.name.value if m is not None else "forward"

    def _alias_of(self, name: str) -> Optional[cst.BaseExpression]:
        """The value of ``name = <value>`` when that plain assignment is the
        only binding of ``name`` in the current function (``device =
        self.device``); None otherwise (a parameter, a loop variable, a second
        assignment)."""
        fn = self.context.current_function
        if fn is None:
            return None
        aliases = self._aliases.get(id(fn))
        if aliases is None:
            collector = _SingleAssignments()
            walk(fn.body, collector)
            params = fn.params
            bound = {p.name.value for p in list(params.posonly_params) + list(params.params) + list(params.kwonly_params)}
            aliases = {
                n: v
                for n, v in collector.values.items()
                if collector.counts[n] == 1 and n not in bound and n not in collector.globals
            }
            self._aliases[id(fn)] = aliases
        return aliases.get(name)

    def _bound_names(self) -> Set[str]:
        """Names bound locally in the functions around the current node
        (parameters and assignments), minus those declared ``global``."""
        out: Set[str] = set()
        for fn in self.context.function_stack:
            names = self._bound.get(id(fn))
            if names is None:
                names = _local_names(fn)
                self._bound[id(fn)] = names
            out |= names
        return out


def _cuda_fstring_index(node: cst.FormattedString) -> Optional[cst.BaseExpression]:
    """``E`` in ``f"cuda:{E}"``, else None."""
    parts = node.parts
    if (
        len(parts) == 2
        and isinstance(parts[0], cst.FormattedStringText)
        and parts[0].value == "cuda:"
        and isinstance(parts[1], cst.FormattedStringExpression)
        and parts[1].conversion is None
        and parts[1].format_spec is None
    ):
        return parts[1].expression
    return None


class _LocalNames(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: Set[str] = set()
        self.globals: Set[str] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        pass

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._target(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._target(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._target(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._target(node.target)

    def visit_Global(self, node: cst.Global) -> None:
        self.globals.update(n.name.value for n in node.names)

    def _target(self, node: cst.BaseExpression) -> None:
        if isinstance(node, cst.Name):
            self.names.add(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for e in node.elements:
                self._target(e.value)
        elif isinstance(node, cst.StarredElement):
            self._target(node.value)


class _SingleAssignments(_LocalNames):
    """How often each name is bound in a function body (any binding form),
    and the value of its plain ``name = value`` assignment."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Dict[str, int] = {}
        self.values: Dict[str, cst.BaseExpression] = {}
        self._value: Optional[cst.BaseExpression] = None

    def visit_Assign(self, node: cst.Assign) -> None:
        self._value = node.value if len(node.targets) == 1 else None

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._value = None

    def _target(self, node: cst.BaseExpression) -> None:
        if isinstance(node, cst.Name):
            self.counts[node.value] = self.counts.get(node.value, 0) + 1
            if self._value is not None:
                self.values[node.value] = self._value
            return
        value, self._value = self._value, None  # a, b = ... is no alias
        super()._target(node)
        self._value = value


def _local_names(fn: cst.FunctionDef) -> Set[str]:
    v = _LocalNames()
    walk(fn.body, v)
    params = fn.params
    for p in list(params.posonly_params) + list(params.params) + list(params.kwonly_params):
        v.names.add(p.name.value)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            v.names.add(star.name.value)
    return v.names - v.globals


def _current_only(value: str) -> bool:
    """Whether a device's source (``torch.device("cuda" if ok else "cpu")``)
    can only name the current CUDA device or the CPU, never a fixed index."""
    try:
        node = cst.parse_expression(value)
    except Exception:
        return False
    found = []

    class _Strings(cst.CSTVisitor):
        def visit_SimpleString(self, n: cst.SimpleString) -> None:
            found.append(string_value(n))

        def visit_Integer(self, n: cst.Integer) -> None:
            found.append("index")

        def visit_FormattedString(self, n: cst.FormattedString) -> None:
            found.append("index")

    walk(node, _Strings())
    return bool(found) and all(v in ("cuda", "cpu") for v in found) and "cuda" in found


def _root_name(node: cst.BaseExpression) -> Optional[str]:
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call):
            node = node.func
        else:
            return None


def _code(node: cst.CSTNode) -> str:
    return dotted_name(node) or cst.Module(body=[]).code_for_node(node)


def _origin_code(call: cst.CSTNode) -> str:
    """How a message names a placing call: ``.cuda()``, ``.to("cuda")``,
    ``device="cuda"``, ``.type(x.type())``."""
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in ("cuda", "to", "type"):
        return f".{call.func.attr.value}({', '.join(code_of(a) for a in call.args)})"
    if isinstance(call, cst.Call):
        dev = keyword_arg(call, "device")
        if dev is not None:
            return f"device={code_of(dev.value)}"
    return code_of(call)


def _placed_on(call: cst.Call, anchor: str) -> Optional[cst.Call]:
    """``call`` placing its tensor on ``anchor`` instead: ``t.cuda()`` ->
    ``t.to(anchor)``, ``t.to("cuda")`` -> ``t.to(anchor)``, ``device="cuda"``
    -> ``device=anchor``; None when the call has another shape."""
    new_dev = cst.parse_expression(anchor)
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
        kept = [a for a in call.args if a.keyword is not None and a.keyword.value == "non_blocking"]
        return call.with_changes(func=func.with_changes(attr=cst.Name("to")), args=[cst.Arg(new_dev), *kept])
    dev = keyword_arg(call, "device")
    if dev is None and isinstance(func, cst.Attribute) and func.attr.value == "to":
        dev = next((a for a in call.args if a.keyword is None), None)
    if dev is None:
        return None
    return call.with_changes(args=[a.with_changes(value=new_dev) if a is dev else a for a in call.args])
