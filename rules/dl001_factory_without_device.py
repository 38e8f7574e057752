"""DL001 factory-without-device

## What it does
Flags a tensor created on the CPU (a torch factory without `device=`:
`torch.arange`, `zeros`, `ones`, `empty`, `full`, `rand*`, `eye`,
`linspace`, `tensor`, `as_tensor`, ...; `torch.from_numpy`; a legacy
constructor such as `torch.FloatTensor(...)`) where the device flow
(`devlint/facts/flow.py`, see `docs/architecture.md`) shows it reaching a
place that fails when the model runs on a GPU:

- an operation, torch function or tensor method that mixes it with a tensor
  on the inputs' or the module's device (`x + torch.arange(n)`,
  `torch.cat([x, torch.zeros(n, d)])`, `torch.bucketize(x, bins)`, a CPU
  kernel in `F.conv1d(signal, kernel)`);
- a submodule's weights (`self.rnn(x, (h0, c0))` with a CPU state, CPU ids
  into an embedding, a CPU mask passed as a keyword);
- an index (a CPU table read at a device index, CPU values put into a
  device tensor through a mask; writing into a CPU table at device indices
  is fine: the write takes its indices to the table's device);
- the value a module's `forward` returns (a model on a GPU hands its caller
  a CPU tensor, and `DataParallel` cannot gather it);
- a collective (`dist.all_reduce(t)`: NCCL takes CUDA tensors only);
- a draw on another device given a CPU generator: `torch.Generator()`
  (made in the function, or kept by a module from its `__init__`, which no
  `.to()` moves) passed as `generator=` to `torch.rand(..., device=x.device)`,
  directly or through a helper it is handed to with the device (PyTorch:
  "Expected a 'cuda' device type for generator but found 'cpu'"); the fix
  creates a generator made in the function on the drawing device
  (`torch.Generator(device=x.device)`), an unsafe one where the function
  also draws on the CPU with a generator (which must not get this one);
  one from `__init__` has none;
- autograd's seed gradients: `grad_outputs=torch.ones(scores.size())` of
  `torch.autograd.grad` (a WGAN-GP gradient penalty), `scores.backward(g)`,
  `torch.autograd.backward(ts, grad_tensors=...)`, which must be on each
  output's device (`Mismatch in device`).

A torch.nn layer with weights built in code that runs on the inputs
(`head = nn.Linear(d, k)` in `forward`, `nn.Conv2d(...)` in a functional
helper) and called on them is flagged too: it is no submodule, so nothing
moves its weights with the model (fix: `.to(<tensor>.device)`; a layer of
the model belongs in `__init__`, where it is also trained). So is a module
class of the file that holds weights (a parameter, a buffer or a submodule,
itself or through a base class) built there: a functional metric that builds
its feature network per call (`net = FeatureNet()`) and runs it on the
caller's images, directly or through a helper it hands the network to
(`_update(img1, img2, net)`); a module class without weights needs no move.
One built while the module is built (`__init__` and what only it calls),
with `device=`, or moved where it is built is not.

A tensor created on the CPU and fed to a model the function is handed, its
parameter annotated as a module (`def complexity(model: nn.Module, shape):
model(torch.randn(1, *shape))`), meets the model's weights wherever the
caller put them: flagged. An argument that is only called, with no
annotation, may be any callable and is not taken for a model.

It follows the tensor through locals, branches, loops, containers, returns,
`self.<attr>` state set in the same call, and calls to the file's functions,
methods (also as `ClassName.helper(...)`), properties and submodules'
`forward`: a helper's CPU result added to an argument by its caller, a CPU
tensor passed to a method that multiplies it into the activations. The
call of such a helper of the file (`mask = keep_mask(b, n)`, one helper
relaying another included) is reported too, beside the factory: it is where
the caller holds a tensor to name a device (fix: `.to(<tensor>.device)`);
not when the helper returns a tuple or list of them, which no `.to()`
moves whole. The elements of such a tuple are followed into the calls they
are spread over (`rotation(*angles, x)`), a loop over a container of the
module's submodules (`for layer in self.layers: x = layer(x, edge_index)`)
runs that class's `forward`, and a `torch.autograd.Function`'s `backward`
takes its gradients on the inputs' device. A
function the flow cannot see (of another library) given only CPU-born
tensors and no device computes on the CPU: its result, used where only a
tensor can be (`torch.einsum(eq, rotation_from_angles(torch.rand(3)), x)`),
meets the inputs, and the factory is the finding. A
callable attribute that holds a torch factory by default
(`self.window_fn = window_fn` with `window_fn=torch.hann_window`) is that
factory when it is called without `device=`. A
default built for a missing argument (`if mask is None: mask =
torch.ones(n)`) is a finding: on the path where the caller passes no mask,
it meets the GPU input. So is a factory given `device=self.device` where
`__init__` read `self.device` off the module's own weights
(`next(self.parameters()).device`, `self.fc.weight.device`): a module is
built on the CPU and a plain attribute does not follow `.to()`, so that is
the CPU for good (not when `__init__` moves the module first, or the class
keeps the attribute in step); the fix names a weight's device instead. A
tensor the module makes at import (`MEAN = torch.tensor([...])`, bound once)
is reported where it is made, with no fix, when a function meets it with
the inputs' device. In a script's function, a tensor it puts on the GPU it
chose (`device=DEVICE`) is met by a CPU one (`torch.cat([tokens,
torch.tensor([[tok]])])`, fix: `device=tokens.device`), and a CPU
`torch.Generator()` the script hands an object that draws with it on a
moved batch's device is reported where it is made.

An argument counts as a tensor on the inputs' device when it is annotated as
one, used the way only a tensor is (`.device`, `.size()`, `.view()`, the
input of a torch computation), passed a tensor by every caller of the
class (or by some, the others passing on their own inputs), or is the first
input of a module's `forward`. Values that came in with the inputs and were
combined before anything showed their kind (`log_p - log_q`, a sum started
at `0`) are tensors on the inputs' device once a torch function takes them
(`torch.argsort(log_p - log_q)`).

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

The device is taken from a tensor in scope where the tensor is created: a
parameter that still holds its tensor there (not rebound, not tested
`is None`), else a parameter or buffer the module holds
(`self.tok.weight.device`). Never `next(self.parameters())`: inside
DataParallel replicas `parameters()` is empty (PyTorch >= 1.5), so that
"fix" raises `StopIteration` exactly where the bug was. Where no such tensor
is in scope (a static helper called with sizes only) the finding has no fix.

Not flagged: `device=` given (or `**kwargs`), `torch.zeros_like(x)`,
`x.new_zeros(...)`, a tensor moved before it meets anything (`.to(x.device)`,
`.cuda()`, `.type_as(x)`, also under a condition: `if t.device != x.device:
t = t.to(x.device)`, `t.to(d) if c else t`), a 0-dim tensor
(`torch.tensor(2.0)`, `t.sum()`: a CPU scalar tensor mixes with CUDA
tensors), a CPU tensor used as an index into a device tensor
(`x[torch.arange(n)]`), turned into a Python value (`.item()`, `.tolist()`,
`int(...)`), handed to NumPy, or kept on the CPU for an API that wants it
there (`pack_padded_sequence` lengths, CTC targets); tensors created while a
module is built (`__init__`, `reset_parameters` and what only they call),
in the methods of `torch.utils.data` datasets and samplers (they run in the
data loader, on the CPU), and in functions that hand their tensor inputs to
NumPy (their inputs are on the CPU).

Decided cases: a factory with a literal size of 0 (`torch.empty(0)`) holds no
data and is not flagged; iterating a CPU tensor gives rows that are 0-dim
(which mix with any device) unless the tensor is known to have two
dimensions (`torch.eye(n)`, `torch.zeros(a, b)`): `for row in
torch.eye(n): x + row` is flagged, `for v in torch.arange(n): x + v` is not.

## Fix safety
Safe: it only adds `device=<tensor>.device` (or `.to(<tensor>.device)` for
`torch.from_numpy` and legacy constructors), naming a tensor the flow shows
on the inputs' or the module's device where the tensor is created. When no
such tensor is in scope, or the model splits its stages over several
devices, the finding has no fix.

Unsafe: a tensor fed to a model the function is handed (`model:
nn.Module`) with no tensor of the caller's in scope (`dummy =
torch.randn(1, *shape); model(dummy)`) is created on
`next(model.parameters()).device`, where the model's weights are: a model
without parameters raises `StopIteration` there.
"""

from __future__ import annotations

import builtins
from dataclasses import replace

import libcst as cst

from devlint.diagnostic import FixSafety
from devlint.facts.flow import CPU, CURRENT, Flow, INIT_METHODS as _INIT_METHODS
from devlint.facts.training import MODULE_SCOPE
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import calls_in, code_of, keyword_arg, with_keyword_arg
from devlint.torch_api import DEVICE_FACTORIES, LEGACY_TENSOR_CONSTRUCTORS, layer_parameter


class FactoryWithoutDevice(Rule):
    code = "DL001"
    requires = (Flow,)
    name = "factory-without-device"
    brief = "A tensor factory without `device=` whose CPU tensor meets tensors on the model's device"
    message = "`torch.{fn}` in `{method}` creates its tensor on the CPU, not on the model's device"
    fix_safety = "safe/unsafe"
    tokens = ("torch",)
    project_keys = ("returns",)

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
        h = self.init_hidden(steps).to(self.head.weight.device)
        return self.head(h + T.rand(1, 16, device=self.head.weight.device))

    def init_hidden(self, batch):
        return zeros(batch, 16, device=self.head.weight.device)
""",
            count=3,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # a CPU-born tensor outside module construction, not moved or used
        # as an index on the spot, in a file where some value can be a
        # tensor on the inputs' device (a bound on DeviceFlow's meetings)
        local: "bool | None" = None
        collective: "bool | None" = None
        factory_attributes: "set[str] | None" = None
        # torch.Generator() (a CPU generator) and a draw given both a device
        # and a generator: it may draw on a GPU with a CPU generator
        if any(c.n_args == 0 and "Generator" in scan.torch_functions(c.func) for c in scan.calls) and any(
            "generator" in c.keywords and "device" in c.keywords for c in scan.calls
        ):
            return True
        for call in scan.calls:
            default_cpu = call.device_arg is not None and (
                call.device_arg[0] == "name" and call.device_arg[1] in scan.cpu_default_params
                # device=self.device of self.device = next(self.parameters()).device in __init__: the CPU
                or call.device_arg[0] == "attr" and call.device_arg[1].startswith("self.")
                and call.device_arg[1][len("self."):] in scan.weights_device_attrs
            )
            if ("device" in call.keywords and not default_cpu) or "out" in call.keywords or call.has_star_kwargs or call.moved:
                continue
            if call.cls is not None and call.method in _INIT_METHODS and scan.class_may_be_module(call.cls):
                continue  # built before the module is moved
            if not scan.may_hold_local_tensors_in(call.cls, call.function):
                if collective is None:  # a collective meets no tensor: it needs none in scope
                    collective = any(q.startswith("torch.distributed.") for c in scan.calls for q in scan.resolve(c.func))
                if not collective:
                    continue  # a function that holds no tensor following the inputs, and returns to no caller here
            fns = scan.torch_functions(call.func)
            if not (fns & (DEVICE_FACTORIES | {"from_numpy"}) or scan.refers_to(call.func, LEGACY_TENSOR_CONSTRUCTORS)
                    or call.func in scan.cpu_helpers or _layer_called_in_scope(scan, call)):
                if call.cls is None or not call.func or call.func.count(".") != 1:
                    continue
                if factory_attributes is None:
                    factory_attributes = scan.factory_attributes()
                if call.func.split(".")[1] not in factory_attributes:
                    continue  # self.window_fn(n) holding torch.hann_window by default is a factory too
            if fns <= {"tensor", "as_tensor"} and call.first_arg == "attribute" and not scan.may_hold_sequence(call.cls, call.first_name):
                continue  # torch.tensor(self.scale): the flow cannot tell it holds data
            if local is None:
                local = scan.may_hold_local_tensors()
            if local:
                return True
        return False

    def leave_Module(self, original_node: cst.Module) -> None:
        for found in self.context.device_flow.origin_meetings((CPU,), set()):
            origin, meeting = found.origin, found.meeting
            shown = self._shown(found.name, found.where, origin)
            if meeting.how == "generator":
                self._report_generator(found)
                continue
            if meeting.how == "output":
                message = (
                    f"{shown} in `{found.where}` creates its tensor on the CPU and `forward` returns it: "
                    f"a model on a GPU hands its caller a CPU tensor (and DataParallel cannot gather it)"
                )
            elif meeting.how == "collective":
                message = (
                    f"{shown} in `{found.where}` creates its tensor on the CPU and a collective sends it: "
                    f"NCCL, the backend of multi-GPU training, takes CUDA tensors only"
                )
            elif self._builds_layer(origin) and isinstance(origin.func, cst.Name) and origin.func.value in self.facts.classes:  # type: ignore[attr-defined]
                message = (
                    f"`{code_of(origin.func)}(...)` in `{found.where}` builds a module whose weights are on the CPU: "  # type: ignore[attr-defined]
                    f"no submodule, nothing moves it, and it is called on {found.partner_text}, "
                    f"which fails when that is on a GPU"
                )
            elif self._builds_layer(origin):
                message = (
                    f"`{code_of(origin.func)}(...)` in `{found.where}` builds a layer whose weights are on the CPU: "  # type: ignore[attr-defined]
                    f"no submodule, nothing moves it with the model, and it is called on {found.partner_text}, "
                    f"which fails when that is on a GPU (built on every call, its weights are new on every call: "
                    f"a layer of the model belongs in `__init__`)"
                )
            elif found.where == MODULE_SCOPE and found.met_in and found.met_in != MODULE_SCOPE:
                # a module-level constant: made at import, before any device
                message = (
                    f"{shown} at module level creates its tensor on the CPU, once, at import (moving a model "
                    f"does not move it); it meets {found.partner_text} in `{found.met_in}` through {found.how_text}, "
                    f"which fails when that is on a GPU"
                )
                self.report(origin, message, no_fix_reason="a module-level tensor is made before any device is known: "
                            "move it where it is read (`.to(x.device)`), or keep it as a buffer of the module")
                continue
            elif found.met_in:
                # made here, met in another function (a caller, or a
                # method reading the attribute it is kept in): say where
                there = "the module's own code" if found.met_in == MODULE_SCOPE else f"`{found.met_in}`"
                message = (
                    f"{shown} in `{found.where}` creates its tensor on the CPU; it meets "
                    f"{found.partner_text} in {there} through {found.how_text}, which fails when that is on a GPU"
                )
            else:
                message = (
                    f"{shown} in `{found.where}` creates its tensor on the CPU; it meets "
                    f"{found.partner_text} through {found.how_text}, which fails when that is on a GPU"
                )
            if found.source and isinstance(origin, cst.Call) and keyword_arg(origin, "device") is not None:
                # device=self.device of self.device = next(self.parameters()).device in __init__
                message = message.replace(
                    "creates its tensor on the CPU",
                    f"creates its tensor on `{found.source}`, which `__init__` read off the module's weights "
                    f"while they were on the CPU (moving the module does not update it)", 1,
                )
            related = []
            if found.relay is not None:
                # a function of this file made it: the call is where the
                # caller can name a device (the factory is reported too)
                helper, made_by = found.relay
                made = f"`torch.{made_by}` in `{helper}`" if made_by and made_by not in ("to", "cuda") else f"`{helper}`"
                tail = {
                    "output": "`forward` returns it: a model on a GPU hands its caller a CPU tensor",
                    "collective": "a collective sends it: NCCL takes CUDA tensors only",
                }.get(meeting.how, f"it meets {found.partner_text} through {found.how_text}, which fails when that is on a GPU")
                message = f"`{found.name}()` in `{found.where}` returns a tensor created on the CPU ({made}); {tail}"
                if found.relay_several:
                    # (h, c) = self.init_hidden(b): no `.to()` moves a tuple
                    # whole; the factories in the helper are the findings
                    continue
            if found.helper is not None:
                # a project function of another file made it: say where
                path, line, made_by, sequence = found.helper
                made = f" with `torch.{made_by}`" if made_by else ""
                what = "tensors" if sequence else "a tensor"
                message = (
                    f"`{found.name}()` in `{found.where}` returns {what} it creates on the CPU{made} ({path}:{line}); "
                    f"it meets {found.partner_text} through {found.how_text}, which fails when that is on a GPU"
                )
                related = [(path, line, f"`{found.name.rsplit('.', 1)[-1]}` creates {'them' if sequence else 'its tensor'} on the CPU")]
                if sequence:  # a tuple or a list of tensors: no `.to()` moves it whole
                    self.report(origin, message, no_fix_reason=f"`{found.name}()` returns a sequence of tensors; "
                                f"give `{found.name.rsplit('.', 1)[-1]}` a `device` to create them on", related=related)
                    continue
            if not found.anchors and isinstance(origin, cst.Call) and meeting.how == "model argument" and not meeting.within and meeting.partner in {
                p.name.value for p in found.home.params.params
            }:
                # dummy = torch.randn(1, *shape); model(dummy): where the model's weights are
                anchor = f"next({meeting.partner}.parameters()).device"
                new = _add_device(origin, anchor) if found.name in ("tensor", "as_tensor", "scalar_tensor") or self.facts.is_factory(
                    origin.func
                ) else cst.Call(func=cst.Attribute(value=origin, attr=cst.Name("to")), args=[cst.Arg(cst.parse_expression(anchor))])
                description = f"create it on `{anchor}` (a model without parameters raises StopIteration there)"
                self.report(origin, message, fix=self.replace(origin, new, description, FixSafety.UNSAFE), related=related)
                continue
            if not found.anchors and meeting.against == CURRENT and meeting.partner.isidentifier() and not found.met_in:
                # a script's function: the tensor it put on its GPU is the anchor
                found = replace(found, anchors=(meeting.partner,))
            if not found.anchors or not isinstance(origin, cst.Call):
                self.report(origin, message, no_fix_reason="no tensor on the right device is in scope where it is created",
                            related=related)
                continue
            anchor = f"{found.anchors[0]}.device"
            if found.helper is None and (found.name in ("tensor", "as_tensor", "scalar_tensor") or self.facts.is_factory(origin.func)):
                new = _add_device(origin, anchor)
            else:  # torch.from_numpy(a), torch.FloatTensor(xs), a helper: no device argument
                new = cst.Call(func=cst.Attribute(value=origin, attr=cst.Name("to")), args=[cst.Arg(cst.parse_expression(anchor))])
            moved = isinstance(new.func, cst.Attribute) and new.func.value is origin
            description = f"move it to `{anchor}`" if moved else f"create it on `{anchor}`"
            self.report(origin, message, fix=self.replace(origin, new, description), related=related)

    def _report_generator(self, found) -> None:
        """A CPU generator (``torch.Generator()``) a draw on another device
        is given: ``torch.rand(n, device=x.device, generator=g)`` raises
        "Expected a 'cuda' device type for generator"."""
        origin, meeting = found.origin, found.meeting
        made = f"`{code_of(origin)}`"
        if isinstance(origin, cst.Attribute):
            made += " (a `torch.Generator()` made while the module is built)"
        draw = code_of(meeting.at.func) if isinstance(meeting.at, cst.Call) else "a draw"  # type: ignore[attr-defined]
        partner = meeting.partner
        where = f"`{partner[:-len('.device')]}`'s device" if partner.endswith(".device") else f"`{partner}`"
        message = (
            f"{made} in `{found.where}` is a CPU generator, and `{draw}` draws with it on {where}: "
            "a generator must be on the device it draws on (\"Expected a 'cuda' device type for generator\"), "
            "which fails when that is a GPU"
        )
        if isinstance(origin, cst.Call) and found.anchors and not origin.args:
            anchor = f"{found.anchors[0]}.device"
            new = _add_device(origin, anchor)
            # a draw of the function given a generator and no device draws
            # on the CPU: one given this generator would then fail
            cpu_draws = [
                c for c in calls_in(found.home.body)
                if keyword_arg(c, "generator") is not None and keyword_arg(c, "device") is None
            ]
            safety = FixSafety.UNSAFE if cpu_draws else FixSafety.SAFE
            description = f"create the generator on `{anchor}`" + (
                f" (`{code_of(cpu_draws[0].func)}` here draws with a generator on the CPU: it must not take this one)"
                if cpu_draws else ""
            )
            self.report(origin, message, fix=self.replace(origin, new, description, safety))
            return
        self.report(origin, message, no_fix_reason=(
            "the generator is made where no tensor on the drawing device is in scope (a module's `__init__` runs "
            "before the module is moved): create it on the device it draws on when it first draws "
            "(`torch.Generator(device=x.device)`, seeded there), or draw on the CPU and move the result"
        ))

    def _builds_layer(self, origin: cst.CSTNode) -> bool:
        """``nn.Linear(8, 4)``: a torch.nn layer with weights; ``Scorer()``:
        a module class of the file that holds weights."""
        return isinstance(origin, cst.Call) and self.facts.builds_weights(origin.func)

    def _shown(self, name: str, where: str, origin: cst.CSTNode) -> str:
        """How a message names the call that made the tensor: ``torch.<name>``
        as PyTorch spells it, or the call as written when it calls an
        attribute set from an argument whose default is the factory
        (``self.window_fn(...)``, ``torch.hann_window`` by default)."""
        func = origin.func if isinstance(origin, cst.Call) else None
        if isinstance(func, cst.Attribute) and "." in where:
            attr = self.facts.class_attribute(where.split(".", 1)[0], func.attr.value)
            if attr is not None and attr.factory == name:
                return f"`{code_of(func)}(...)` (`torch.{name}` by default)"
        return f"`torch.{name}`"


def _layer_called_in_scope(scan, call) -> bool:
    """``nn.Linear(d, k)`` (or a module class of the file) in a function
    that also calls a plain name (a
    bound on the flow's fact: the function calls the name it binds the
    layer to, ``head = nn.Linear(d, k); head(x)``; builders that return or
    collect layers for a model call none)."""
    if not any(layer_parameter(q) for q in scan.resolve(call.func)) and not (
        call.func and "." not in call.func and scan.class_may_be_module(call.func)
    ):
        return False  # (``Scorer()``, a module class of the file, may hold weights)
    return any(
        c.func is not None and "." not in c.func and not hasattr(builtins, c.func) and not scan.resolve(c.func)
        and (c.cls, c.method, c.function) == (call.cls, call.method, call.function)
        for c in scan.calls
    )


def _add_device(call: cst.Call, anchor: str) -> cst.Call:
    """``call`` with ``device=<anchor>``: added, or in place of the device
    it names (``device=self.device`` read off the weights at construction)."""
    value = cst.parse_expression(anchor)
    if keyword_arg(call, "device") is not None:
        return call.with_changes(args=[
            a.with_changes(value=value) if a.keyword is not None and a.keyword.value == "device" else a for a in call.args
        ])
    return call.with_changes(args=with_keyword_arg(call.args, "device", value))
