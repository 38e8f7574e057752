"""DL002 captured-device

## What it does
Flags a tensor placed on a device that does not follow the inputs, where the
device flow shows it meeting a tensor that does: an operation, a submodule's
weights, an index, a concatenation, or `forward`'s output. The devices it
means:

- a device fixed when the module was built: `self.device` assigned in
  `__init__` from an argument (`device`, `config.device`), a
  `torch.device(...)` or a tensor's device (`inv_freq.device`), or a GPU index kept there (`self.gpu = gpu`) and used
  as `f"cuda:{self.gpu}"` or `.cuda(self.gpu)`;
- a module-level device variable read in a module's method (`DEVICE =
  torch.device("cuda:0")`);
- the current GPU (`.cuda()`, `.to("cuda")`, `device="cuda"`, a legacy
  CUDA constructor such as `torch.cuda.FloatTensor(n)`,
  `torch.device("cuda")`, a local `device = "cuda" if x.is_cuda else
  "cpu"`, whose GPU path names the current device, not x's) and a GPU named
  in the code (`.cuda(0)`, `"cuda:1"`).

Through any local copy (`device = self.device`, then `device=device`), in
`forward` and whatever it calls, in helpers, losses, metrics and generation
utilities: what places the tensor is the trigger, the meeting is the bug. A
tensor moved there together with everything it meets (`x = x.cuda(); w =
torch.ones(3).cuda(); x * w`) is not flagged, nor is one whose every use is
moved again (`pos.to(x.device)`), nor a device the class keeps in step
(assigned in `forward`, or a `to`/`_apply` override).

A `to`/`cuda`/`cpu` override keeps it in step only when the module itself is
moved: a parent's `model.to("cuda")` moves its children through `_apply`,
never through their `to`. So a device attribute that `__init__` sets, that
only those overrides update (directly or through a helper of the class) and
that a method reads once the module is built is flagged where `__init__`
sets it: as a submodule it keeps the device `__init__` gave it. There is no
autofix (the update belongs in an `_apply` override); a class whose
`_apply` or `forward` updates it, or with a base other than `nn.Module`
that devlint cannot read (which may), is not flagged.

Everywhere, `forward` included, it flags `t.type(x.type())` where the flow
shows the result meeting a tensor on the inputs' device: a CUDA type string
(`"torch.cuda.FloatTensor"`) names no index, so `t` lands on the current
GPU, not on x's. The fix is `t.to(x)` (x's dtype and device, index included).

In scripts, it flags a batch moved to the current GPU (`x.cuda()`,
`.to("cuda")`) and fed to a model (or meeting its output: `labels.cuda()`
in the loss) the script moved to a GPU it chose by
index (`model.cuda(args.gpu)`, `.to(f"cuda:{local_rank}")`, `.to(device)`
with `device = torch.device("cuda", 1)`) when the file never calls
`torch.cuda.set_device` (nor enters `torch.cuda.device(i)`), also in a
function handed the model and a device that every call of the file names
by index (`train(model, loader, device)`): the current GPU
is then cuda:0, so every run with another index fails, every DDP rank but 0
included. The fix moves the batch where the model is (`x.cuda(args.gpu)`,
`x.to(device)`) when that device can be written there.

Outside a replica (`sample()`, `generate()`, an export), a device fixed
when the module was built is taken for the model's own, unless this file
shows otherwise: a script that builds the module giving that `__init__`
parameter one device (its default, when it passes none) and then moves the
instance to another (`NoiseGenerator(16, 8).to("cuda:1")` with
`device="cuda"` by default): the captured device then names the wrong GPU
for every run. Reported without a fix (build it with the device it is moved
to, or read the device from the module's parameters where it is used).

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

The device comes from a tensor the function holds on the inputs' device (a
tensor argument such as `src`, parameters first) other than the one being
moved, else a parameter or buffer the module holds
(`self.tok.weight.device`); `.cuda()` becomes `.to(<that>.device)`. Never
`next(self.parameters())`: inside DataParallel replicas `parameters()` is
empty (PyTorch >= 1.5).

Not flagged: `self.device` used only in `__init__`; a `device` passed as an
argument of `forward` or computed in it (`device = x.device`,
`f"cuda:{x.get_device()}"`); a `device` property that reads a parameter's
device; `.to("cpu")` / `.cpu()` (moving results off the GPU on purpose);
code that runs while a module is built; modules that pin their own
submodules to devices (model-parallel code: DL004 and DL008 cover it); and
modules whose `forward` never runs in a replica: a DataParallel/DDP subclass
(its forward scatters and gathers on the main device, so an `output_device`
kept in `__init__` is right there) and a module that holds a DataParallel/DDP
as a submodule (it is the outer model; replicating it would nest wrappers:
DL003).

A function parameter whose default names a GPU (`def one_hot(x, n,
device="cuda")`) and that places a tensor meeting the inputs is reported at
the default: every caller that leaves it out gets the current GPU; so is
the default of a function of the file that hands its own parameter on to it
(`def mixup_target(t, n, device="cuda")` calling `one_hot(t, n,
device=device)`), which is what that function's callers get. It has no fix:
the parameter is the callers' choice, and placing on `x.device` instead
would ignore the callers that pass one.

## Fix safety
Safe: on one device the new expression names the same device as before, and
under DataParallel or DistributedDataParallel it names the replica's own one.
When no tensor or held parameter is in reach the finding has no fix.
"""

from __future__ import annotations

import ast

from typing import Dict, List, Optional, Sequence, Tuple

import libcst as cst

from devlint.facts.classes import MODULE_MOVES
from devlint.facts.flow import CURRENT, FIXED, Flow, OriginMeeting, retyped_like
from devlint.facts.scripts import Scripts
from devlint.facts.training import lookup_scoped
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import bound_parameters, calls_in, code_of, keyword_arg, rebound_names, self_attribute, string_value


class CapturedDevice(Rule):
    code = "DL002"
    requires = (Flow, Scripts)
    name = "captured-device"
    brief = '`forward` puts a tensor on a device fixed outside the replica (`self.device`, `"cuda:0"`)'
    message = "`{code}` in `{where}` puts its tensor on {target}, not on {dest}; it meets {partner} through {how}"
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
        return self.out(self.cell(x, h)), T.ones(2).to(self.out.weight.device)

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
        gy, gx = torch.meshgrid(torch.arange(h, device=out.device), torch.arange(w, device=out.device), indexing="ij")
        anchors = torch.tensor(self.anchors).to(out.device)
        scale = torch.ones(2, device=out.device)
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
        bias = torch.zeros(2, device=self.fc.weight.device)
        return self.fc(x) + bias + torch.ones(2).to(self.fc.weight.device)
""",
            count=2,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # a tensor put on the current or a fixed GPU (.cuda(), an index,
        # "cuda...", torch.device(...), f"cuda:{i}"), or on a device held in
        # self.<attr>, a module-level name read in a method, or a local
        # copy of one of these, in a file where a tensor can follow the
        # inputs: a bound on the flow's CURRENT/FIXED origins
        if any(m in methods for methods in scan.methods.values() for m in MODULE_MOVES):
            return True  # a module's own .to()/.cuda()/.cpu(), which may keep a device attribute
        if not scan.may_hold_local_tensors():
            return False
        if scan.retypes:
            return True
        cuda_strings = any(t.startswith("cuda") for t in scan.strings)
        for c in scan.calls:
            if c.attr == "cuda":
                return True
            if c.func and any(q.startswith("torch.cuda.") and q.endswith("Tensor") for q in scan.resolve(c.func)):
                return True  # torch.cuda.FloatTensor(n): the current GPU
            if c.device_arg is None:
                continue
            kind, detail = c.device_arg
            if kind == "int" or (kind in ("str", "fstr") and detail.startswith("cuda")):
                return True
            if kind == "call" and scan.refers_to(detail, {"torch.device"}):
                return True
            selves = scan.method_self.get((c.cls, c.method), ())
            if kind == "attr" and detail.split(".", 1)[0] in selves:
                return True
            if kind == "name" and (cuda_strings or (c.cls is not None and detail in scan.unclassed_names)):
                return True
            if kind == "name":
                for value in scan.local_values.get((c.cls, c.method), {}).get(detail, ()):
                    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id in selves:
                        return True  # device = self.device, then device=device
        return False

    def __init__(self, context) -> None:
        super().__init__(context)
        #: class -> its device attributes only move overrides update (FileFacts.kept_by_move_overrides)
        self._stale: Dict[str, Dict[str, Tuple[str, ...]]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        ctx = self.context
        cls, method = ctx.current_class, ctx.current_method
        if cls is None or method is None or method.name.value != "__init__" or not ctx.self_name:
            return
        stale = self._stale.get(cls.name)
        if stale is None:
            stale = self._stale[cls.name] = self.facts.kept_by_move_overrides(cls.name)
        for t in node.targets:
            target = t.target
            attr = self_attribute(target, ctx.self_name)
            if attr in stale:
                moves = stale[attr]
                shown = "/".join(f"`{m}`" for m in moves)
                self.report(
                    target,
                    f"`self.{attr}` is kept in step only by {shown} of `{cls.name}`: a parent module's `.to()` "
                    f"moves it through `_apply`, never its {shown}, so as a submodule `self.{attr}` keeps the "
                    f"device `__init__` gave it",
                    no_fix_reason=f"update `self.{attr}` in an `_apply` override, which every move of the module runs",
                )

    def leave_Module(self, original_node: cst.Module) -> None:
        flow = self.context.device_flow
        self._functions = [s for s in original_node.body if isinstance(s, cst.FunctionDef)]
        for found in flow.origin_meetings((CURRENT, FIXED), set()):
            cls = flow.class_facts(found.home)
            if cls is not None and self.scripts.never_replicated(cls):
                continue  # model-parallel code places tensors on purpose; an outer wrapper is no replica
            replica = flow.runs_in_replica(found.home)
            if found.source and not replica:
                stale = self._stale_capture(found)
                if stale is not None:
                    self._report_stale(found, *stale)
                continue  # a device fixed when the module was built is the model's own outside a replica (sample(), export)
            self._report(found, replica)

    def _report_chosen_gpu(self, found: OriginMeeting, code: str, chosen: Tuple[str, str, str, bool]) -> None:
        """``x.cuda()`` fed to a model the script moved to a GPU it chose
        (``model.cuda(args.gpu)``) in a file that never calls
        ``torch.cuda.set_device``."""
        model, device, how, known = chosen
        shown = f".cuda({device})" if how == "cuda" else f".to({device})"
        fails = f"`{model}(...)` fails" if found.meeting.how == "model input" else (
            f"it meets `{model}`'s output through {found.how_text}, which fails"  # labels.cuda() against the logits
        )
        message = (
            f"`{code}` in `{found.where}` puts its tensor on the current GPU (cuda:0, as nothing calls "
            f"`torch.cuda.set_device`), but `{model}` was moved with `{shown}`: {fails} whenever "
            "that is another GPU"
        )
        origin = found.origin
        at = _device_argument(origin) or origin
        if (
            known
            and isinstance(origin, cst.Call)
            and isinstance(origin.func, cst.Attribute)
            and origin.func.attr.value == "cuda"
            and not origin.args
        ):
            new = origin.with_changes(args=[cst.Arg(cst.parse_expression(device))]) if how == "cuda" else origin.with_changes(
                func=origin.func.with_changes(attr=cst.Name("to")), args=[cst.Arg(cst.parse_expression(device))]
            )
            self.report(at, message, fix=self.replace(origin, new, f"put it where `{model}` is: `{shown}`"))
            return
        self.report(at, message, no_fix_reason=f"the device `{model}` was moved to has no name where the tensor is placed")

    def _report(self, found: OriginMeeting, replica: bool) -> None:
        origin, meeting = found.origin, found.meeting
        code = _origin_code(origin)
        related = []
        if found.source:
            held = "fixed when the module was built" if "." in found.source else "a module-level device fixed at import"
            where = self._captured_in(found)
            if where is not None:
                cls_name, path, line = where
                held = f"fixed when the module was built, by `{cls_name}` ({path}:{line})"
                related = [(path, line, f"`{cls_name}` sets `{found.source}` while the module is built")]
            target = f"`{found.source}` ({held})"
        else:
            target = "the current GPU" if meeting.device == CURRENT else "a GPU named in the code"
        partner = found.partner_text
        dest = f"`{meeting.partner}`'s device" if meeting.partner else "the inputs' device"
        chosen = self.context.device_flow.function(found.home).model_gpus.get(origin)
        if chosen is not None and meeting.device == CURRENT:
            self._report_chosen_gpu(found, code, chosen)
            return
        if meeting.how == "output":
            message = (
                f"`{code}` in `{found.where}` puts its tensor on {target} and `forward` returns it: "
                f"a model on another GPU hands its caller a tensor on the wrong device"
            )
        elif meeting.device == CURRENT and not found.source:
            # DataParallel makes each replica's GPU the current one: the
            # current device is wrong for a model moved to another GPU
            message = (
                f"`{code}` in `{found.where}` puts its tensor on the current GPU, not on {dest}; it meets {partner} "
                f"through {found.how_text}, which fails for a model on another GPU "
                f"(`model.to(\"cuda:1\")`, DDP without `torch.cuda.set_device`) and on the CPU"
            )
        elif replica:
            message = (
                f"`{code}` in `{found.where}` puts its tensor on {target}, not on this replica's device; "
                f"it meets {partner} through {found.how_text}, which fails under DataParallel/DDP on another GPU"
            )
        else:
            message = self.message.format(code=code, where=found.where, target=target, dest=dest, partner=partner, how=found.how_text)
        at = _device_argument(origin) or origin
        default = _defaulted_parameter(found.home, at)
        if default is not None:
            # def one_hot(x, n, device="cuda"): the device is the callers'
            # choice, and the bug is what those that pass none get
            param, value = default
            gpu = "the current GPU" if meeting.device == CURRENT else "a GPU named in the code"
            self.report(
                value,
                f"`{param}={code_of(value)}` of `{found.where}` puts its tensors on {gpu} for every caller that "
                f"leaves `{param}` out (`{code}`); they meet {partner} through {found.how_text}, which fails for inputs "
                "on another GPU or on the CPU",
                no_fix_reason=f"`{param}` is the callers' choice: default it to None and follow the inputs there, or pass it",
                related=related,
            )
            # def mixup_target(t, n, device="cuda"): one_hot(t, n, device=device):
            # a caller's own default, handed on, is what its callers get
            for outer, name, passed in _forwarded_defaults(self._functions, found.home, param):
                self.report(
                    passed,
                    f"`{name}={code_of(passed)}` of `{outer.name.value}` is handed on to `{found.where}`'s `{param}`: "
                    f"every caller of `{outer.name.value}` that leaves `{name}` out gets tensors on {gpu}, which meet "
                    f"{partner} there and fail for inputs on another GPU or on the CPU",
                    no_fix_reason=f"`{name}` is the callers' choice: default it to None and follow the inputs there, or pass it",
                )
            return
        source = retyped_like(origin)
        if source is not None:  # t.type(x.type()) -> t.to(x): x's dtype and device, index included
            new = origin.with_changes(func=origin.func.with_changes(attr=cst.Name("to")), args=[cst.Arg(source)])  # type: ignore[attr-defined]
            self.report(at, message, fix=self.replace(origin, new, f"take `{code_of(source)}`'s dtype and device with `.to({code_of(source)})`"),
                        related=related)
            return
        anchor = _anchor_for(origin, found.anchors)
        new = _placed_on(origin, f"{anchor}.device") if anchor is not None and isinstance(origin, cst.Call) else None
        if new is None:
            self.report(at, message, no_fix_reason="no tensor on the right device is in scope where it is placed", related=related)
        else:
            self.report(at, message, fix=self.replace(origin, new, f"place it on `{anchor}.device`"), related=related)

    def _stale_capture(self, found: OriginMeeting) -> Optional[Tuple[str, cst.Call, str, str, str]]:
        """``self.device = device`` set from ``__init__``'s parameter, and a
        script of this file that builds the module giving that parameter one
        device (its default, when it passes none) and moves the instance to
        another (``Generator(z_dim, img_dim).to("cuda:1")`` with ``device="cuda"``
        by default): outside a replica too, the captured device is not the
        model's. (instance, constructor call, device given, device moved to,
        the parameter), or None."""
        owner, dot, attr = found.source.partition(".")
        cls = self.context.device_flow.class_facts(found.home)
        if not dot or "." in attr or cls is None:
            return None
        record = self.facts.class_attribute(cls.name, attr)
        init = self.context.device_flow.method(cls.name, "__init__")
        if record is None or record.kind != "device" or record.method != "__init__" or init is None:
            return None
        param = next((p for p in (*init.params.params, *init.params.kwonly_params) if p.name.value == record.value), None)
        if param is None:
            return None
        for name, scope in self.training.scopes.items():
            def bound(n: str, name: str = name) -> Optional[cst.CSTNode]:
                found = lookup_scoped(self.training, name, n, "values")
                return found if isinstance(found, cst.CSTNode) else None

            for ref, value in scope.values.items():
                placement = scope.placements.get(ref)
                built = _constructed(value, cls.name)
                if built is None or placement is None or placement.conditional or not placement.device:
                    continue
                if any(a.star for a in built.args):
                    continue  # NoiseGen(**cfg): the device it is given is not seen
                pos = bound_parameters(init, built.args, method=True).get(param.name.value)
                given = built.args[pos].value if pos is not None else param.default
                if given is None:
                    continue
                device = placement.device
                was = self._literal_device(given, bound)
                # (the placement keeps its device as written: a name the
                # scope binds, or a string literal)
                now = self._literal_device(bound(device), bound) if device.isidentifier() else _normalised(_quoted(device))
                if was is not None and now is not None and was != now:
                    shown = f"`{param.name.value}={code_of(given)}`" + (" (its default)" if pos is None else "")
                    return ref, built, shown, placement.device, param.name.value
        return None

    def _report_stale(self, found: OriginMeeting, ref: str, built: cst.Call, given: str, moved: str, param: str) -> None:
        origin = found.origin
        at = _device_argument(origin) or origin
        message = (
            f"`{_origin_code(origin)}` in `{found.where}` puts its tensor on `{found.source}`, fixed when the module "
            f"was built: `{code_of(built.func)}(...)` gets {given}, but `{ref}` is then moved to `{moved}`; "
            f"it meets {found.partner_text} through {found.how_text}, which fails there"
        )
        self.report(at, message, no_fix_reason=(
            f"build `{code_of(built.func)}` with `{param}=` the device `{ref}` is moved to, or read the device from "
            "the module's own parameters where it is used"
        ))

    def _literal_device(self, node: Optional[cst.CSTNode], bound, depth: int = 0) -> Optional[str]:
        """The device a literal names (``"cuda:1"``, ``torch.device("cuda",
        1)``, a name bound to one: ``bound(name)`` gives what the scope binds
        it to), normalised; None when it names none."""
        if node is None or depth > 3:
            return None
        if isinstance(node, cst.Name):
            return self._literal_device(bound(node.value), bound, depth + 1)
        if isinstance(node, cst.Call) and self.facts.qualify(node.func) == "torch.device" and node.args:
            first = self._literal_device(node.args[0].value, bound, depth + 1)
            if first is not None and len(node.args) > 1 and isinstance(node.args[1].value, cst.Integer):
                return f"{first.split(':')[0]}:{node.args[1].value.value}"
            return first
        return _normalised(string_value(node))

    def _captured_in(self, found: OriginMeeting) -> Optional[Tuple[str, str, int]]:
        """(class as shown, path, line) of the project class of another file
        that sets ``self.<attr>`` (``found.source``) for the class whose method
        reads it: the base class that captured the device; None when the
        attribute is set in this file."""
        owner, dot, attr = found.source.partition(".")
        cls = self.context.device_flow.class_facts(found.home)
        if not dot or "." in attr or cls is None:
            return None
        for name in self.facts.lineage(cls.name):
            c = self.facts.class_facts(name)
            if c is None or attr not in c.attributes:
                continue
            origin = self.facts.class_origin(name)
            if origin is None:
                return None
            path, _line = origin
            short = self.facts.local_name_for(name) or name.rsplit(".", 1)[-1]
            return short, path, c.attributes[attr].line
        return None


def _constructed(value: cst.CSTNode, cls: str) -> Optional[cst.Call]:
    """``Net(a, b)`` in ``Net(a, b).to(device).eval()`` or ``Net(a, b)``:
    the call that builds class ``cls``, or None."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        value = value.func.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == cls:
        return value
    return None


def _quoted(code: str) -> Optional[str]:
    """The text of ``"cuda:1"`` as a placement writes it, else None."""
    if len(code) >= 2 and code[0] == code[-1] and code[0] in "'\"":
        return code[1:-1]
    return None


def _normalised(text: Optional[str]) -> Optional[str]:
    """A device string, ``cuda`` as ``cuda:0`` (the current device where
    nothing sets another); None for anything that is not one."""
    if text is None or not text.startswith(("cuda", "cpu")):
        return None
    return "cuda:0" if text == "cuda" else text


def _device_argument(call: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """The expression naming the device in a placing call: ``device=...``,
    ``.to(<device>)``, ``.cuda(<index>)``; None for ``.cuda()``."""
    if not isinstance(call, cst.Call):
        return None
    dev = keyword_arg(call, "device")
    if dev is not None:
        return dev.value
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "cuda"):
        first = next((a for a in call.args if a.keyword is None), None)
        return first.value if first is not None else None
    return None


def _defaulted_parameter(fn: cst.FunctionDef, device: cst.CSTNode) -> Optional[Tuple[str, cst.BaseExpression]]:
    """``device=device`` where ``device`` is a parameter of ``fn`` with a
    default that names a GPU (``device="cuda"``) and that the body does not
    rebind: the parameter and its default (the flow placed the tensor on that
    GPU, so the name still holds the default there)."""
    if not isinstance(device, cst.Name):
        return None
    params = (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
    param = next((p for p in params if p.name.value == device.value), None)
    if param is None or param.default is None:
        return None
    if not isinstance(param.default, (cst.SimpleString, cst.Integer, cst.Call)):
        return None
    return None if device.value in rebound_names(fn.body) else (device.value, param.default)


def _forwarded_defaults(
    functions: Sequence[cst.FunctionDef], callee: cst.FunctionDef, param: str
) -> List[Tuple[cst.FunctionDef, str, cst.BaseExpression]]:
    """Module-level functions of the file that call ``callee`` passing its
    ``param`` from a parameter of their own whose default names a GPU
    (``mixup_target(..., device="cuda")`` calling ``one_hot(...,
    device=device)``): each such function, that parameter and its default."""
    out: List[Tuple[cst.FunctionDef, str, cst.BaseExpression]] = []
    for fn in functions:
        if fn is callee:
            continue
        for call in calls_in(fn.body):
            if not (isinstance(call.func, cst.Name) and call.func.value == callee.name.value):
                continue
            position = bound_parameters(callee, call.args).get(param)
            default = _defaulted_parameter(fn, call.args[position].value) if position is not None else None
            if default is not None and all(d is not default[1] for _, _, d in out):
                out.append((fn, default[0], default[1]))
    return out


def _anchor_for(origin: cst.CSTNode, anchors: Sequence[str]) -> Optional[str]:
    """The first anchor that is not the tensor being moved (``x.to(self.device)``
    -> not ``x.to(x.device)``, which keeps x where it is but reads as a
    no-op), else the first."""
    if not anchors:
        return None
    moved = None
    if isinstance(origin, cst.Call) and isinstance(origin.func, cst.Attribute) and origin.func.attr.value in ("to", "cuda"):
        moved = code_of(origin.func.value)
    return next((a for a in anchors if a != moved), anchors[0])


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
