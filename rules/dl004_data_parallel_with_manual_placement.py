"""DL004 data-parallel-with-manual-placement

## What it does
Flags `nn.DataParallel(model)` / `DistributedDataParallel(model)` when `model`
already splits itself over devices by hand (model parallelism):

* its class pins submodules or layers to chosen devices in `__init__`:
  `nn.Linear(...).to("cuda:1")`, `.cuda(1)`, `.to(devices[i])`,
  `torch.device("cuda", i)`, a loop that places each block on its own GPU,
  or two different device expressions for two submodules;
* it is built from parts placed on different devices in the script
  (`Seq2Seq(enc.to("cuda:0"), dec.to("cuda:1"))`), or its parts are placed
  one by one before the wrap (`net.body.to("cuda:0")`,
  `net.head.to("cuda:1")`, then `nn.DataParallel(net)`);
* it was loaded with a `device_map` that may split it (`"auto"`,
  `"balanced"`, `"sequential"`, a dict naming several devices, a variable).
  A map onto one device (`device_map={"": local_rank}`, `"cuda:0"`,
  `f"cuda:{rank}"`, `0`) places the whole model like `.to()` and is not
  flagged: one process, one GPU is how QLoRA runs under DDP.

## Why is this bad?
Data parallelism copies the *whole* model onto every GPU and splits the batch;
model parallelism puts *parts* of one model on different GPUs. The two do not
compose. `DataParallel.forward` first checks that every parameter is on
`device_ids[0]` and a manually split model fails that check on every call:

```
RuntimeError: module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of them on device: cuda:1
```

and where a replica runs, its `forward` still sends activations to the
hard-coded devices of the split, mixing replicas:

```
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!
```

DistributedDataParallel over a multi-device module must be built with
`device_ids=None`, and each process must own all the devices of its split;
a split that names `cuda:0`/`cuda:1` in every process puts every rank on the
same two GPUs.

## Example
```python
class TwoGPUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = Features().to("cuda:0")
        self.head = nn.Linear(512, 10).to("cuda:1")

    def forward(self, x):
        return self.head(self.features(x.to("cuda:0")).to("cuda:1"))

model = nn.DataParallel(TwoGPUNet())
```

## Use instead
```python
model = TwoGPUNet()
```

Keep one kind of parallelism: the manual split (what the fix keeps), or
remove the manual placement and let DataParallel/DDP replicate the model.

Not flagged: a model whose parts all go to one device expression
(`Encoder().to(device)` in `__init__`), and a model moved as a whole with
`.to(device)` before wrapping.

## Fix safety
Unsafe: the fix removes the wrapper and keeps the manual placement, and
rewrites `model.module` reads of the removed wrapper in the same function
(and, for `self.model`, in the class) to `model`. The batch is then no longer
split over GPUs, and checkpoints saved from the wrapped model carry a
`module.` prefix the unwrapped model does not expect.
"""

from __future__ import annotations

from typing import List, Tuple

import libcst as cst

from devlint.diagnostic import Fix, FixSafety
from devlint.facts.scripts import ScopeFacts, WrapEvent, wrapped_origin
from devlint.rule import Invalid, ScriptRule, Valid
from devlint.scan import calls_a_wrapper
from devlint.syntax import is_explicit_device, shown_device
from devlint.torch_api import WRAPPER_SHORT


class DataParallelWithManualPlacement(ScriptRule):
    code = "DL004"
    name = "data-parallel-with-manual-placement"
    brief = "DataParallel/DDP over a model that places its own parts on devices"
    message = "{wrapper} over a model that places its parts on devices itself ({why}): data parallelism copies the whole model onto every GPU"
    fix_safety = "unsafe"
    tokens = ("DataParallel",)

    VALID = [
        Valid(
            """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.body = nn.Linear(4, 4).to(device)
        self.head = nn.Linear(4, 2).to(device)

model = nn.DataParallel(Net(torch.device("cuda")))
"""
        ),
        Valid(
            """
import torch
from torch import nn

class Split(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4).to("cuda:0")
        self.b = nn.Linear(4, 4).to("cuda:1")

model = Split()
other = nn.DataParallel(nn.Linear(4, 4).cuda())
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
from torch import nn

class Split(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4).to("cuda:0")
        self.b = nn.Linear(4, 4).to("cuda:1")

def main():
    model = Split()
    model = nn.DataParallel(model)
    torch.save(model.module.state_dict(), "split.pt")
""",
            """
import torch
from torch import nn

class Split(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4).to("cuda:0")
        self.b = nn.Linear(4, 4).to("cuda:1")

def main():
    model = Split()
    torch.save(model.state_dict(), "split.pt")
""",
            unsafe=True,
        ),
        Invalid(
            """
from torch import nn
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")
model = nn.DataParallel(model)
""",
            """
from torch import nn
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")
""",
            unsafe=True,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        return calls_a_wrapper(scan)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._found: List[Tuple[cst.Call, ScopeFacts, WrapEvent, str, List[Tuple[str, int, str]]]] = []
        #: where the class that places its parts is, when another file of the project has it
        self._related: List[Tuple[str, int, str]] = []

    def on_wrap(self, node: cst.Call, scope: ScopeFacts, event: WrapEvent) -> None:
        self._related = []
        why = self._manual_placement(scope, event)
        if why:
            self._found.append((node, scope, event, why, self._related))

    def on_file_end(self) -> None:
        for node, scope, event, why, related in self._found:
            wrapper = WRAPPER_SHORT.get(event.wrapper, event.wrapper)
            message = self.message.format(wrapper=wrapper, why=why)
            replacements = self.unwrap_replacements(node, event)
            if replacements is None:
                self.report(node, message, no_fix_reason="the wrapped model is not a positional argument", related=related)
                continue
            if event.target:
                replacements += self.module_read_fixes(event.target, scope, event.index)
            self.report(node, message, fix=Fix(replacements, FixSafety.UNSAFE, f"remove the {wrapper} wrapper, keep the manual placement"),
                        related=related)

    # -- what makes a model manually placed -------------------------------------
    def _manual_placement(self, scope: ScopeFacts, event: WrapEvent) -> str:
        origin = wrapped_origin(self.scripts, scope, event)
        if origin.device_map:
            return f"loaded with device_map={origin.device_map}"
        for cls in origin.classes:
            why = self._class_split(cls, depth=2)
            if why:
                return why
        placed: List[Tuple[str, str]] = []
        for name, _where, chain in origin.args:
            for b in chain:
                if b.placed:
                    placed.append((name, b.placed))
                    break
            if chain and chain[-1].kind == "construct":
                why = self._class_split(chain[-1].value_class, depth=1)
                if why:
                    return f"`{name}`: {why}"
        if any(is_explicit_device(d) for _, d in placed) or len({d for _, d in placed}) >= 2:
            return ", ".join(f"`{n}` on `{d}`" for n, d in _distinct(placed))
        # net.body.to("cuda:0"); net.head.to("cuda:1"); DataParallel(net):
        # parts of the wrapped model placed one by one before the wrap
        root = event.wrapped_name
        parts = [
            (p.target, p.device)
            for p in scope.placements
            if root and p.order < event.order and p.device and p.target.startswith(root + ".")
            and not scope.binds_between(root, p.order, event.order)
        ]
        if any(is_explicit_device(d) for _, d in parts) or len({d for _, d in parts}) >= 2:
            return ", ".join(f"`{n}` on `{shown_device(d)}`" for n, d in _distinct(parts))
        return ""

    def _class_split(self, name: str, depth: int) -> str:
        cls = self.facts.class_facts(name)
        if cls is None or not cls.is_module:
            return ""
        pinned = cls.pinned_devices()
        if any(is_explicit_device(d) for d in pinned.values()) or len(set(pinned.values())) >= 2:
            parts = ", ".join(f"`{a}` on `{shown_device(d)}`" for a, d in _distinct(list(pinned.items())))
            origin = self.facts.class_origin(name)
            if origin is not None:
                self._related = [(origin[0], origin[1], f"{name.rsplit('.', 1)[-1]} places its parts on devices itself")]
            return f"{self.facts.shown_class(name)} puts {parts}"
        if depth > 1:
            for attr in cls.attributes.values():
                sub = attr.module_class or attr.element_class
                if sub and sub != name and self.facts.class_facts(sub) is not None:
                    why = self._class_split(sub, depth - 1)
                    if why:
                        return why
        return ""


def _distinct(pairs: List[Tuple[str, str]], limit: int = 3) -> List[Tuple[str, str]]:
    """One (name, device) per device, explicit devices first."""
    out: List[Tuple[str, str]] = []
    seen = set()
    for name, dev in sorted(pairs, key=lambda p: not is_explicit_device(p[1])):
        if dev not in seen:
            seen.add(dev)
            out.append((name, dev))
    return out[:limit]
