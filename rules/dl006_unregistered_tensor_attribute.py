"""DL006 unregistered-tensor-attribute

## What it does
Flags a tensor stored on an `nn.Module` as a plain attribute (`self.x = <tensor>`
in `__init__` or another method that `forward` does not run) when `forward`,
or a method it calls, reads it. `setattr(self, "x", t)` counts as `self.x = t`,
and `setattr(self, f"scale_{i}", t)` stores the family of attributes that
`getattr(self, f"scale_{j}")` reads (the literal parts of the f-strings match). A tensor here is a torch factory result
(`torch.zeros`, `torch.tensor(...)`, `torch.FloatTensor([d])`), `torch.from_numpy(...)`,
a torch function or a method chain on one (`torch.sqrt(...)`, `torch.arange(n).float()`),
arithmetic on one, a local variable holding one (`pe = torch.zeros(...)`,
then `self.pe = pe.unsqueeze(0)`), an attribute assigned one earlier in the
same method (`self.betas = torch.linspace(...)`, then
`self.alphas_cumprod = torch.cumprod(1 - self.betas, 0)`), the result of a function or method of the
same file whose every `return` gives such a tensor
(`self.window = gaussian_window(11, 1.5)`, `self.kernel = self._make_kernel()`),
an argument of the method annotated as a tensor (`self.bounds = bounds`
with `bounds: Optional[Tensor]`), a plain alias of a buffer
(`self.original = self.inv_freq` after `register_buffer("inv_freq", ...)`:
`.to()` replaces the buffer and leaves the alias behind),
a tensor the class body makes (`class_alpha = torch.tensor([0.1, 0.3])` in
`class FocalLoss(nn.Module):`, read as `self.class_alpha` where no method
assigns it: a class attribute, shared by every instance, that no `.to()`
moves; reported at the class body, with no fix: the buffer belongs in
`__init__`),
or a list, tuple or dict of tensors (also one a helper of the same file
returns: `self.tables = rotary_tables(d, n)` with `return freqs.cos(),
freqs.sin()`). It is reported when the device flow
shows the attribute meeting a tensor on the module's device in a method that
runs once the module is built (arithmetic with an activation, an index by a
device tensor, an argument of a torch computation or a submodule beside
one, or a buffer it was registered as in code forward runs,
`self.register_buffer("inv_freq", self.original)`); a read that meets only
CPU values, Python numbers or moves is not
(`torch.bucketize(probs.cpu(), self.edges)`). A parameter that every call
site in the file passes a device tensor counts as one
(`self.q_sample(x0, t)` from forward). `forward` may be inherited: from a
base class that reads what the subclass's `__init__` sets, or from a mixin
that calls a method the module overrides (`return self.transform(X)`).
Besides `forward`, the module's other public methods count, which its users
call on the model wherever it was moved (`model.compute_loss(logits, labels)`
reading `self.class_weights`, `model.sample(n)`), for a tensor set while the
module is built (`__init__`); the message names the method that reads it.
`self.w, self.b = sample_params(n)` of a helper returning `w, b` stores a
tensor in each target (reported without a fix: register each by hand).

A class that is no `nn.Module` (a diffusion schedule, a running metric, a
sampler) is flagged the same way for a tensor its `__init__` creates and
keeps (`self.alpha_bar = torch.cumprod(1 - betas, 0)`) when the device flow
shows another of its methods meeting it with a tensor on the device of what
that method is given (`self.alpha_bar.gather(0, t)`, `self.counts +=
torch.bincount(idx)`), or indexing it with a tensor put on a device it was
told (`self.obs[torch.randint(..., device=self.device)]`): nothing moves a
plain object's tensors. Not when
another method assigns the attribute (`self.counts =
self.counts.to(preds.device)`; `+=` works in place and does not count), the
class has a move method of its own (`to`, `cuda`), or the tensor is 0-dim.
No fix: such a class has no buffers; give it the device to create the
tensor on, or move it where it is used.

## Why is this bad?
`model.to(device)`, `model.cuda()` and `model.half()` move and cast parameters,
buffers and submodules; a plain tensor attribute stays where it was created,
usually on the CPU. `nn.DataParallel` replicates only parameters, buffers and
submodules: every replica shares the original's other attributes by
reference, so the replica on `cuda:1` reads a tensor on `cuda:0` (or the
CPU). The first operation that mixes it with an activation fails:

```
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!
```

This holds even when the tensor is moved on creation
(`self.anchors = torch.tensor(a).to(device)`): it is on `device`, and only
there, for every replica and after every later `.to()`.

## Example
```python
class Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.scale = torch.sqrt(torch.FloatTensor([hidden]))

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return (q @ k.transpose(-2, -1) / self.scale).softmax(-1) @ v
```

## Use instead
```python
class Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.register_buffer("scale", torch.sqrt(torch.FloatTensor([hidden])), persistent=False)
```

A buffer moves with the module and is broadcast to every DataParallel
replica. `persistent=False` keeps it out of the `state_dict`, so existing
checkpoints load unchanged. A list or dict of tensors cannot be one buffer:
register each tensor under its own name (or `torch.stack` them into one
tensor and register that) and read them back by name; devlint reports those
without a fix.

Not flagged: tensors registered with `register_buffer`, `nn.Parameter` or
`nn.Buffer`; a tensor assigned to a name a base class registered as a
buffer (in another module too: the assignment updates that buffer); a Parameter stored again under another name (`self.w2 =
self.w`: assigning a Parameter registers it); tensors used only outside `forward`; reads that move the tensor
on the spot (`self.pe.to(x.device)`, `.type_as(x)`, `x.new_tensor(self.t)`),
only look at its shape or dtype, only read it as a value (`len()`, `str()`,
`repr()`, `print()`, an f-string), or use it as an index (`x[:, self.perm]`,
also computed from held values and numbers, `x[:, self.midx + self.lmax]`:
indexing accepts a CPU index tensor on any device; a limit: if one of those
held values were a registered buffer, the arithmetic itself would mix
devices, and that is not seen); attributes that `forward` itself assigns
before every read (a cache such as `self.hidden = ...`: the code manages
that tensor's device), or keeps up to date item by item (`self.grids[i] =
...`). An attribute `forward` reassigns on some paths only (a table regrown
for long inputs, a state reset when the batch size changes) is reported:
the paths that skip the reassignment read the tensor from `__init__`;
0-dim tensors such as `torch.tensor(0.07)`, `torch.tensor(K.shape[-1])` or
`torch.tensor(np.radians(alpha))` (PyTorch lets a 0-dim CPU tensor mix with
CUDA tensors); Python numbers.

## Fix safety
Safe: the assignment becomes `self.register_buffer("x", <same expression>,
persistent=False)`. Unsafe when the value is the method's own argument
(`self.offsets = offsets`): a caller may pass an `nn.Parameter` (a tied
weight), which the assignment registers, and a buffer would take it out of
`parameters()` and the optimiser. Unsafe too when the tensor holds complex
numbers (`torch.polar(...)`, `dtype=torch.cfloat`, a `torch.fft` result,
`torch.exp(1j * w)`, the attribute facts say which): as a buffer,
`model.to(torch.bfloat16)` (any dtype given to `Module.to`) casts it to a
real dtype and drops the imaginary part ("Casting complex values to real
discards the imaginary part"; `.half()` casts only floating tensors), where
the plain attribute kept it; moving it where it is
read (`self.x.to(y.device)`) keeps it complex. Reading `self.x` gives the same tensor, the `state_dict`
keys do not change, and the tensor now follows the module. (It also follows
dtype casts such as `model.half()`, as the module's own tensors do.) No fix
when the attribute is also assigned something that is not a tensor, exists
on the class, is assigned before `super().__init__()`, is assigned by tuple
unpacking, or holds a container of tensors.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.diagnostic import FixSafety
from devlint.facts.classes import AttributeFacts
from devlint.facts.flow import LOCAL, Flow
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import code_of, dynamic_self_attribute, self_attribute, statements
from devlint.torch_api import INIT_METHODS

_REGISTERED_KINDS = frozenset({"parameter", "buffer", "module", "nn_container"})
_CONTAINER_WORDS = {"list": "list", "tuple": "tuple", "dict": "dict", "distribution": "`torch.distributions` object"}


class UnregisteredTensorAttribute(Rule):
    code = "DL006"
    requires = (Flow,)
    name = "unregistered-tensor-attribute"
    brief = "A tensor set as `self.x` in `__init__` and read in `forward`, neither buffer nor parameter"
    message = (
        "`self.{name}` is a plain tensor attribute read in `{reader}`: `.to()` and DataParallel replicas "
        "leave it on the device it was created on"
    )
    container_message = (
        "`self.{name}` keeps tensors in a plain {container} read in `{reader}`: `.to()` and DataParallel "
        "replicas leave them on the device they were created on"
    )
    class_message = (
        "`{name}` is a tensor the body of `{cls}` makes: a class attribute, no buffer, so `.to()` leaves it "
        "on the CPU and `{reader}` meets it with the inputs' tensors, which fails when those are on a GPU"
    )
    plain_message = (
        "`self.{name}` is a tensor `{cls}.__init__` creates on the CPU: `{cls}` is no "
        "`nn.Module`, nothing moves it, and `{reader}` {met}"
    )
    fix_safety = "safe/unsafe"
    tokens = ("torch",)

    VALID = [
        Valid(
            """
import torch
import torch.nn as nn

class PositionalEncoding(nn.Module):
    def __init__(self, d=16, n=64, temperature: float = 0.07):
        super().__init__()
        pe = torch.zeros(n, d)
        self.register_buffer("pe", pe)
        self.bias = nn.Parameter(torch.zeros(d))
        self.temperature = torch.tensor(temperature)
        self.scale = d ** -0.5
        self.table = torch.randn(n, d)

    def forward(self, x):
        t = self.table.to(x.device)
        return (x + self.pe[: x.size(1)] + self.bias) * self.scale / self.temperature + t
"""
        ),
        Valid(
            """
import torch
import torch.nn as nn

class Shuffle(nn.Module):
    def __init__(self, n=8):
        super().__init__()
        self.perm = torch.randperm(n)
        self.weight = torch.randn(n, n)
        self.weight = nn.Parameter(self.weight)
        self.steps = torch.arange(n)
        self.register_buffer("steps_buf", self.steps)

    def forward(self, x):
        return x[:, self.perm] @ self.weight + self.steps_buf
"""
        ),
        Valid(
            """
import torch
from torch import nn

class Init(nn.Module):
    def __init__(self):
        super().__init__()
        self.init_weight = torch.randn(4, 4)
        self.fc = nn.Linear(4, 4)
        with torch.no_grad():
            self.fc.weight.copy_(self.init_weight)

    def forward(self, x):
        return self.fc(x)

class Cache(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = None

    def forward(self, x):
        if self.hidden is None or self.hidden.shape[0] != x.shape[0]:
            self.hidden = x.new_zeros(x.shape[0], 4)
        self.hidden = self.hidden + x
        return self.hidden
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
from torch import nn

class Base(nn.Module):
    def __init__(self, n=8, d=4):
        super().__init__()
        table = torch.zeros(n, d)
        table[:, 0] = 1.0
        self.table: torch.Tensor = table * 2

class Lookup(Base):
    def forward(self, idx):
        return self.table[idx]
""",
            """
import torch
from torch import nn

class Base(nn.Module):
    def __init__(self, n=8, d=4):
        super().__init__()
        table = torch.zeros(n, d)
        table[:, 0] = 1.0
        self.register_buffer("table", table * 2, persistent=False)

class Lookup(Base):
    def forward(self, idx):
        return self.table[idx]
""",
        ),
        Invalid(
            """
import torch
import torch.nn as nn

class Mask(nn.Module):
    def __init__(self, n=8):
        super().__init__()
        self.mask = None
        self.mask = torch.ones(n, n).tril().bool()

    def forward(self, x):
        return x.masked_fill(~self.mask, 0.0)
""",
            None,
        ),
        Invalid(
            """
import torch
import torch.nn as nn

class Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.scale = torch.sqrt(torch.FloatTensor([hidden]))

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return (q @ k.transpose(-2, -1) / self.scale).softmax(-1) @ v
""",
            """
import torch
import torch.nn as nn

class Attention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.register_buffer("scale", torch.sqrt(torch.FloatTensor([hidden])), persistent=False)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return (q @ k.transpose(-2, -1) / self.scale).softmax(-1) @ v
""",
        ),
        Invalid(
            """
import torch as T
from torch.nn import Module

class Head(Module):
    def __init__(self, anchors, device="cuda"):
        super().__init__()
        self.anchors = T.tensor(anchors).float().view(-1, 2).to(device)

    def decode(self, wh):
        return wh.exp() * self.anchors

    def forward(self, x):
        return self.decode(x)
""",
            """
import torch as T
from torch.nn import Module

class Head(Module):
    def __init__(self, anchors, device="cuda"):
        super().__init__()
        self.register_buffer("anchors", T.tensor(anchors).float().view(-1, 2).to(device), persistent=False)

    def decode(self, wh):
        return wh.exp() * self.anchors

    def forward(self, x):
        return self.decode(x)
""",
        ),
        Invalid(
            """
import torch
import torch.nn as nn

class Pyramid(nn.Module):
    def __init__(self):
        super().__init__()
        self.strides = [torch.tensor([8.0, 8.0]), torch.tensor([16.0, 16.0])]

    def forward(self, feats):
        return [f * s for f, s in zip(feats, self.strides)]
""",
            None,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # an attribute that code run by forward may read, assigned in
        # another method a value that may be a tensor (every tensor the rule
        # knows starts with a torch call, possibly through a local name)
        reads = scan.forward_attribute_reads()
        return any(
            attr in reads and scan.may_be_tensor(value, cls, method)
            for cls, method, attr, value in scan.stores_outside_forward()
        )

    def __init__(self, context) -> None:
        super().__init__(context)
        # inside __init__: whether super().__init__() has run by this point
        self._module_ready = True

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        # class_alpha = torch.tensor([...]) in the body of a module class:
        # a class attribute no .to() moves (every instance and replica shares it)
        cls = self.facts.classes.get(node.name.value)
        if cls is None or not cls.is_module or not cls.class_tensors:
            return
        held = self.context.device_flow.held_readers(cls.name)
        for stmt in statements(node):
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                target = small.targets[0].target if isinstance(small, cst.Assign) and len(small.targets) == 1 else (
                    small.target if isinstance(small, cst.AnnAssign) else None
                )
                if not isinstance(target, cst.Name) or target.value not in cls.class_tensors or target.value in cls.self_assigned:
                    continue
                found = held.get(target.value)
                if found is None:
                    continue
                self.report(
                    target,
                    self.class_message.format(name=target.value, cls=cls.name, reader=found[0]),
                    no_fix_reason=(
                        f"register it in `__init__` and drop the class attribute (`register_buffer` refuses a name "
                        f"the class already has): `self.register_buffer(\"{target.value}\", <the tensor>, persistent=False)`"
                    ),
                )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node is self.context.current_method:
            self._module_ready = node.name.value != "__init__"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "__init__":
            self._module_ready = True
        if isinstance(func, cst.Name) and func.value == "setattr" and len(node.args) == 3:
            # setattr(self, f"scale_{i}", torch.ones(c)), read back with getattr
            name = dynamic_self_attribute(node, self.context.self_name)
            if name is not None:
                self._check(node, node, node.args[2].value, fixable=True, name=name)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and self_attribute(node.targets[0].target, self.context.self_name):
            self._check(node, node.targets[0].target, node.value, fixable=True)
            return
        for t in node.targets:
            if isinstance(t.target, (cst.Tuple, cst.List)) and isinstance(node.value, (cst.Tuple, cst.List)):
                for te, ve in zip(t.target.elements, node.value.elements):
                    self._check(node, te.value, ve.value, fixable=False)
            elif isinstance(t.target, (cst.Tuple, cst.List)):
                # self.w, self.b = sample_params(n): each target holds a part of what the call returns
                for te in t.target.elements:
                    self._check(node, te.value, node.value, fixable=False)
            else:
                self._check(node, t.target, node.value, fixable=False)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._check(node, node.target, node.value, fixable=True)

    def _record(self, target: cst.BaseExpression, value: cst.BaseExpression,
                name: Optional[str] = None) -> Optional[AttributeFacts]:
        ctx = self.context
        cls, method = ctx.current_class, ctx.current_method
        if cls is None or method is None or ctx.current_function is not method:
            return None
        if not cls.is_module:
            # a class that is no module: what its __init__ keeps
            name = name or self_attribute(target, ctx.self_name)
            if method.name.value != "__init__" or name is None:
                return None
            return cls.assignment_for(method.name.value, name, code_of(value))
        if method.name.value == "forward" or method.name.value in cls.forward_reachable:
            return None
        name = name or self_attribute(target, ctx.self_name)
        if name is None:
            return None
        return cls.assignment_for(method.name.value, name, code_of(value))

    def _check(self, stmt: cst.CSTNode, target: cst.BaseExpression, value: cst.BaseExpression, fixable: bool,
               name: Optional[str] = None) -> None:
        """``name``: for ``setattr(self, <name>, value)`` (``stmt`` and
        ``target`` are the call), the attribute it sets."""
        dynamic = name is not None
        record = self._record(target, value, name)
        if record is None or record.kind not in ("tensor", "tensor_container") or record.scalar:
            return
        cls = self.context.current_class
        assert cls is not None
        name = record.name
        if not cls.is_module:
            if record.kind != "tensor" or dynamic:
                return
            found = self.context.device_flow.held_readers(cls.name).get(name)
            if found is not None:
                reader, meeting = found
                if meeting.against == LOCAL:
                    met = "meets it with the tensors it is given, which fails when those are on a GPU"
                else:  # an index drawn on self.device
                    on = f"`{meeting.partner}`" if meeting.partner else "a GPU the code names"
                    met = f"meets it with a tensor on {on}, which fails when that is a GPU"
                self.report(
                    target, self.plain_message.format(name=name, cls=cls.name, reader=reader, met=met),
                    no_fix_reason=(
                        f"`{cls.name}` is no `nn.Module`, so it has no buffers: give it the device to create "
                        f"`self.{name}` on, or move it where `{reader}` uses it (`.to(<tensor>.device)`)"
                    ),
                )
            return
        if any(
            c is not None and (name in c.buffers or name in c.parameters)
            for c in map(self.facts.class_facts, self.facts.lineage(cls.name))
        ):
            return  # a name a base class registered: assigning a tensor to it updates that buffer
        others = cls.assignments_of(name)
        if any(a.kind in _REGISTERED_KINDS for a in others):
            return
        if name not in cls.forward_reads and name not in cls.entry_reads or name in cls.forward_opaque_writes:
            return  # (a plain reassignment in forward is followed by the flow: on the paths that skip it, the tensor from __init__ is read)
        if name not in cls.forward_reads and any(a.method not in INIT_METHODS for a in others):
            return  # read by a public method only: state set while the module is built, not a cache another method fills
        if (not dynamic or name not in cls.forward_reads) and name not in self.context.device_flow.held_meetings(cls.name):
            # read, but the device flow sees it meet no tensor on the inputs'
            # device (a name set with setattr is followed only into forward)
            return
        # read by forward, or by a public method its users call on the model
        # (``model.compute_loss(logits, labels)``)
        reader = "forward" if name in cls.forward_reads else cls.entry_reads[name]
        if record.kind == "tensor_container":
            container = _CONTAINER_WORDS.get(record.container, "container")
            if record.tensor_keys:  # dict(n_fft=512, window=torch.hann_window(512)): name the tensors
                container += " (" + ", ".join(f"`{k}`" for k in record.tensor_keys) + ")"
            why = (
                "a distribution keeps its parameters as plain tensors: register them as buffers "
                "(`self.register_buffer(name, t, persistent=False)`) and build the distribution from them where it is used"
            ) if record.container == "distribution" else (
                "a container of tensors cannot be one buffer: register each tensor with "
                "`self.register_buffer(name, t, persistent=False)` (or `torch.stack` them into one buffer) "
                "and read them back by name"
            )
            self.report(
                target,
                self.container_message.format(name=name, container=container, reader=reader),
                no_fix_reason=why,
            )
            return
        message = self.message.format(name=name.replace("{}", "<i>") if dynamic else name, reader=reader)
        why = ""
        if not fixable:
            why = "the assignment also binds other names; register it with `self.register_buffer(...)` by hand"
        elif any(a.kind != "tensor" for a in others):
            why = f"`self.{name}` is also assigned a value that is not a tensor, which a buffer cannot hold"
        elif name in cls.class_attributes or name in cls.methods:
            why = f"the class also defines `{name}`, and `register_buffer` refuses a name that already exists"
        elif not self._module_ready:
            why = "assigned before `super().__init__()`, where `register_buffer` is not available yet"
        if why:
            self.report(target, message, no_fix_reason=why)
            return
        call = _register_buffer(self.context.self_name, name, value)
        description = "register it as a non-persistent buffer" if dynamic else f"register `self.{name}` as a non-persistent buffer"
        # a tensor the caller hands in may be an nn.Parameter (a tied
        # weight), which the assignment registers: a buffer would take it
        # out of ``parameters()``, so that fix needs a look
        safety = FixSafety.UNSAFE if record.argument else FixSafety.SAFE
        if record.complex:
            # a complex buffer follows the module's dtype casts to a real dtype
            safety = FixSafety.UNSAFE
            description += (
                " (it holds complex numbers: `model.to(torch.bfloat16)` would cast the buffer "
                "to a real dtype and drop the imaginary part)"
            )
        if dynamic:
            # setattr(self, f"scale_{i}", t) -> self.register_buffer(f"scale_{i}", t, persistent=False)
            assert isinstance(stmt, cst.Call)
            args = list(call.args)
            args[0] = args[0].with_changes(value=stmt.args[1].value)
            self.report(
                target,
                message,
                fix=self.replace(stmt, call.with_changes(args=args), description, safety=safety),
            )
            return
        self.report(
            target,
            message,
            fix=self.replace(
                stmt,
                cst.Expr(value=call, semicolon=stmt.semicolon),
                description,
                safety=safety,
            ),
        )


def _register_buffer(self_name: str, name: str, value: cst.BaseExpression) -> cst.Call:
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    no_space = cst.SimpleWhitespace("")
    return cst.Call(
        func=cst.Attribute(value=cst.Name(self_name), attr=cst.Name("register_buffer")),
        args=[
            cst.Arg(value=cst.SimpleString(f'"{name}"'), comma=comma),
            cst.Arg(value=value.with_changes(lpar=[], rpar=[]) if _redundant_parens(value) else value, comma=comma),
            cst.Arg(
                keyword=cst.Name("persistent"),
                value=cst.Name("False"),
                equal=cst.AssignEqual(whitespace_before=no_space, whitespace_after=no_space),
            ),
        ],
    )


def _redundant_parens(value: cst.BaseExpression) -> bool:
    # ``self.x = (a * b)`` on one line: the parentheses only grouped the
    # right-hand side; an argument needs none (a multi-line value keeps them)
    lpar = getattr(value, "lpar", ())
    return bool(lpar) and "\n" not in code_of(value) and not isinstance(value, cst.Tuple)

