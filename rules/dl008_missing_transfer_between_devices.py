"""DL008 missing-transfer-between-devices

## What it does
In model-parallel code (a module whose `__init__` pins submodules to devices:
`self.a = A().to("cuda:0")`, `self.b = B().to("cuda:1")`, or blocks placed in
a loop over a device list), flags an activation handed from a submodule on one
device to a submodule on another without `.to(...)`: between stages, into the
blocks of a spread `nn.ModuleList`, into the final head, and into the loss
(logits on the last device, labels where the inputs arrive). The device flow
keeps the stage of every tensor of the module's methods (`forward` and what
it runs), through locals, loops, helpers and moves
(`devlint/facts/stages.py`); the rule reports what it finds handed over.
A method of the module that `forward` hands tensors on different stages
(`return self._gated_skip(skip, decoded)`, the skip from the encoder's GPU,
the decoded from the decoder's) is run with those stages, and what meets in
it is flagged there, once, however many calls hand it the same tensors.

The code that runs such a model is checked the same way: a script or a
helper the script hands the model to (`logits = model(tokens)` of
`model = TwoDeviceLM(...)`, not moved or wrapped whole) gets the model's
outputs on the stages its `forward` returns them from, and a device the
model names (`model.dev0`, `model.devices[1]`) or one written out that its
class pins a part to (`"cuda:0"`, `.cuda()`) is that stage: the labels moved
to the first stage and given to the loss with the last stage's logits
(`F.cross_entropy(logits, y.to(model.dev0))`) are flagged, and the fix moves
them to the logits' device.

The same holds outside `forward` for the weights of a model a method is
handed: a module that pins a copy to a device of its own (an exponential
moving average kept on the CPU: `self.shadow.to(device=device)`) and
combines the copy's `parameters()`, `buffers()` or `state_dict()` with those
of the live model passed to `update(self, model)` (`avg.lerp_(live, w)`)
mixes its device with wherever the caller put the model. `copy_` crosses
devices and is not flagged; the fix moves the live tensor to the copy's
(`live.to(avg.device)`).

A model written to be split by a `device_map` (`from_pretrained(...,
device_map="auto")`, accelerate's `dispatch_model`) names no device in its
code, but lists in `_no_split_modules` the blocks a map must keep whole. The
map fills the GPUs in the order the model registers its parts, and
accelerate moves each part's inputs to it; so what comes out of the blocks
(`self.layers`, or a part that holds them, `self.model`), or out of a part
registered after them (`self.norm`, `self.lm_head`), may be on the last GPU
they fill, and every piece of a second part holding blocks on a GPU past
that one (the text embedding
`self.model.embed_tokens` of a language model registered after a vision
encoder, or a whole pretrained model an auto class builds,
`AutoModelForCausalLM.from_config(...)`), while the model's inputs, its own
parameters and the parts registered before the blocks are on the first,
except what comes after a token table the inputs are looked up in: the map
goes on to the next GPU wherever a part no longer fits, and a vocabulary
table may fill the first (a position table after `self.wte`). The rule
flags two of those meeting in an operation, a tensor method
(`x.masked_scatter(mask, src)`), an index, an index write (`x[mask] = v`)
or a loss in `forward` or in a method that runs the model's parts
(`generate`): the labels against the logits, a padding mask built from
`input_ids` indexing them, the model's own bias added to them, image
features written into the text embeddings.
Calling a part is never flagged: its hook moves what it is given.

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

In a model split by a device_map, the value from before the blocks is moved
to the other one's device (`labels.to(logits.device)`).

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
from typing import Set

import libcst as cst

from devlint.facts.flow import Flow
from devlint.facts.stages import Handover
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import short_code


class MissingTransferBetweenDevices(Rule):
    code = "DL008"
    requires = (Flow,)
    name = "missing-transfer-between-devices"
    brief = "A model-parallel `forward` hands an activation to a submodule on another device without `.to()`"
    message = "`{arg}` is on {src} but {dst_name} is on {dst}: nothing moves it between the devices"
    fix_safety = "safe"
    tokens = (".to(", ".cuda(", "_no_split_modules")

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
        # a model a device_map may split names its unsplittable blocks in a
        # class attribute ``_no_split_modules`` (ClassFacts.dispatched)
        if "_no_split_modules" in scan.class_body_names:
            return True
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

    def leave_Module(self, original_node: cst.Module) -> None:
        flow = self.context.device_flow
        # a helper's handover is its own and, when a caller hands it tensors
        # on stages, the caller's too: one finding
        seen: Set[int] = set()
        for fn in (*flow.all_functions(), flow.module_function()):
            cls = flow.class_facts(fn)
            if cls is None or not cls.is_module:
                # code that runs a model-parallel model of the file
                # (``loss = F.cross_entropy(logits, y.to(model.dev0))``):
                # its outputs are on the model's stages too
                for handover in flow.function(fn).handovers:
                    if id(handover.arg) not in seen:
                        seen.add(id(handover.arg))
                        self._report(handover)
                continue
            if not (cls.pinned_devices() or cls.dispatched):
                continue
            # forward's code, and in a model a device_map splits, a method
            # that runs its parts (``generate``); elsewhere (not while the
            # module is built), only what meets the weights of a model the
            # method is handed (``update(self, model)`` of an EMA copy
            # pinned to its device)
            if flow.init_time(fn) and fn.name.value not in cls.forward_reachable:
                continue
            reachable = fn.name.value in cls.forward_reachable or flow.function(fn).runs_parts
            for handover in flow.function(fn).handovers:
                if not reachable and not handover.handed_model:
                    continue
                if id(handover.arg) not in seen:
                    seen.add(id(handover.arg))
                    self._report(handover)

    def _report(self, h: Handover) -> None:
        arg = short_code(h.arg)
        if h.kind == "into":
            message = (
                f"`{arg}` is handed to {h.receiver} as it is, but the blocks of `self.{h.container}` "
                "are spread over several devices: move it to each block's device"
            )
        elif h.kind == "out of":
            message = (
                f"`{arg}` comes out of `self.{h.container}`, whose blocks are spread over several "
                f"devices, but {h.receiver} is on {h.target}: nothing moves it back"
            )
        else:
            src = h.source + (" (where the inputs enter the model)" if h.arrival else "")
            message = self.message.format(arg=arg, src=src, dst_name=h.receiver, dst=h.target)
            if h.dispatched:
                src = "the inputs' device (the first)" if h.arrival else h.source
                message = (
                    f"`{arg}` is on {src} but {h.receiver} may be on {h.target}: a device_map fills the GPUs "
                    "in order, keeping whole the blocks `_no_split_modules` names, and nothing moves it"
                )
        if h.expression is None:
            self.report(h.arg, message, no_fix_reason="devlint cannot name the receiving device here")
            return
        self.report(h.arg, message, fix=self.replace(h.arg, _moved(h.arg, h.expression), f"add `.to({h.expression})`"))



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
