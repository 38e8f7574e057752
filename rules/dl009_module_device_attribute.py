"""DL009 module-device-attribute

## What it does
Flags `.device` read on an `nn.Module` instance whose class has no `device`
attribute or property: `self.device` in a module that never sets it,
`self.encoder.device`, `self.blocks[i].device`, or `block.device` where
`block` iterates an `nn.ModuleList` of such modules; also `model.device` where
`model` was built from such a class in the same function or script.

Also `model.device` where `model` may hold an `nn.DataParallel` wrapper:
bound to one on some path that reaches the read (`if
torch.cuda.device_count() > 1: model = nn.DataParallel(model)`), directly,
through an alias or a helper that wraps its argument, or `self.model` that
`__init__` wraps and no other method rebinds. So is the `model` argument
of a hook that a trainer calls with the model as it wrapped it:
`training_step`, `compute_loss` and `prediction_step` of a
`transformers.Trainer` (or `Seq2SeqTrainer`) subclass, which the Trainer
calls with an `nn.DataParallel` when one process sees several GPUs. The
wrapper has no `device` even when the model inside has one (a pretrained
model's `device` property), so the read fails exactly on a multi-GPU machine.

## Why is this bad?
Tensors have a `.device`; modules do not (a module's parameters can even live
on several devices). Reading it raises as soon as the line runs:

```
AttributeError: 'Block' object has no attribute 'device'
```

It is an easy slip when splitting a model over GPUs ("move the activation to
the block's device") and a reviewer reading the code rarely notices it.

## Example
```python
class GPT(nn.Module):
    def forward(self, x):
        for block in self.blocks:
            x = block(x.to(block.device))
        return x
```

## Use instead
```python
class GPT(nn.Module):
    def forward(self, x):
        for block in self.blocks:
            x = block(x.to(block.ln1.weight.device))
        return x
```

The device is read from a tensor the module holds directly or through its own
submodules (`block.ln1.weight`), found from the class definition. Outside
`forward` (a `generate` method, a training script), where no DataParallel
replica can be involved, `next(model.parameters()).device` is used when the
class holds no known tensor. Inside `forward` it never is: in DataParallel
replicas `parameters()` is empty (PyTorch >= 1.5) and `next(...)` raises
`StopIteration`.

Not flagged: classes that define `device` (an attribute set in `__init__`, a
property, a class attribute), subclasses of classes from other packages (for
example transformers' `PreTrainedModel`, which defines `device`), and
`DistributedDataParallel`, which sets `self.device`; a wrapper's device read
where the function tests whether it is wrapped (`isinstance`, `hasattr(m,
"module")`), or after it is rebound (`model = model.module`).

## Fix safety
Safe: where the original code ran at all it raised, so the replacement cannot
change working behaviour; it reads the device the module's weights are on.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from devlint.facts.classes import module_class_of
from devlint.facts.scripts import Scripts, held_class, held_wrappers, init_wrapper
from devlint.rule import Invalid, Rule, Valid
from devlint.scan import calls_a_wrapper
from devlint.syntax import dotted_name, loop_over_attribute, string_value
from devlint.torch_api import DATA_PARALLEL, WRAPPED_MODEL_HOOKS

class ModuleDeviceAttribute(Rule):
    code = "DL009"
    name = "module-device-attribute"
    brief = "`.device` read on an `nn.Module`, which has no such attribute"
    message = "`{expr}`: `{cls}` is an nn.Module and has no `device` attribute (AttributeError at run time)"
    fix_safety = "safe"
    tokens = (".device",)
    requires = (Scripts,)

    VALID = [
        Valid(
            """
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, d, device):
        super().__init__()
        self.device = device
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return self.fc(x.to(self.device))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(4, "cpu") for _ in range(2)])

    @property
    def dev(self):
        return self.blocks[0].fc.weight.device

    def forward(self, x):
        for block in self.blocks:
            x = block(x.to(block.device))
        return x.to(self.blocks[0].device)
"""
        ),
        Valid(
            """
import torch
from torch import nn
from transformers import PreTrainedModel

class Wrapper(PreTrainedModel):
    def forward(self, ids):
        return torch.zeros(3, device=self.device)

class HasProperty(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(2, 2)

    @property
    def device(self):
        return self.proj.weight.device

    def forward(self, x):
        return x.to(self.device) + x.device.index
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return self.fc(self.ln1(x))

class GPT(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.blocks = nn.ModuleList([Block(8) for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x.to(block.device))
        return x
""",
            """
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return self.fc(self.ln1(x))

class GPT(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.blocks = nn.ModuleList([Block(8) for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x.to(block.ln1.weight.device))
        return x
""",
        ),
        Invalid(
            """
import torch
import torch.nn as nn

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.LSTM(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.zeros(1, x.size(1), 8, device=self.device)
        return self.head(self.encoder(x, (h, h))[0])

    def predict(self, x):
        return self(x.to(self.encoder.device)).argmax(-1)
""",
            """
import torch
import torch.nn as nn

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.LSTM(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.zeros(1, x.size(1), 8, device=self.head.weight.device)
        return self.head(self.encoder(x, (h, h))[0])

    def predict(self, x):
        return self(x.to(self.encoder.weight_ih_l0.device)).argmax(-1)
""",
            count=2,
        ),
        Invalid(
            """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    def forward(self, x):
        return self.body(x)

model = Net().to("cuda").eval()
batch = torch.randn(2, 4).to(model.device)
""",
            """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    def forward(self, x):
        return self.body(x)

model = Net().to("cuda").eval()
batch = torch.randn(2, 4).to(next(model.parameters()).device)
""",
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # `.device` read on: a name bound to a call of a class of this file or
        # of torch.nn (a module built in that scope); in a method, `self`, a loop variable, or `self.x` /
        # `self.x[i]` where x is assigned a call or a container somewhere;
        # or a name (`model`, `self.model`) that may hold a wrapper the file makes
        if calls_a_wrapper(scan) and any(root is not None and shape in ("name", "attr") for _k, _m, root, shape, _a in scan.device_reads):
            return True
        for klass, method, root, shape, attr in scan.device_reads:
            if root is None:
                continue
            if shape == "name" and klass is not None and scan.class_may_derive(
                klass, frozenset(base for base, hooks in WRAPPED_MODEL_HOOKS.items() if method in hooks)
            ):
                return True  # training_step(self, model, ...) of a transformers.Trainer
            if shape == "name" and any(scan.may_build_module(callee) for callee in scan.call_bound.get(root, ())):
                return True
            if klass is None or method is None:
                continue
            if root not in scan.method_self.get((klass, method), ()):
                # a loop variable over self.<container of modules>
                if shape == "name" and any(
                    scan.attribute_may_be_module(a) or "container" in scan.attribute_kinds(a)
                    for a in scan.loop_attribute_vars.get(root, ())
                ):
                    return True
                continue
            if shape == "name":
                if scan.class_may_lack_device(klass):
                    return True
                continue
            if scan.attribute_may_be_module(attr) or (shape == "subscript" and "container" in scan.attribute_kinds(attr)):
                return True
        return False

    def __init__(self, context) -> None:
        super().__init__(context)
        # loop variable -> container attribute it iterates, innermost last
        self._loops: List[Tuple[cst.For, str, str]] = []
        self._targets: Set[int] = set()
        self._tested: Dict[int, Set[str]] = {}

    # -- bookkeeping -------------------------------------------------------
    def visit_For(self, node: cst.For) -> None:
        cls = self.context.current_class
        if cls is None or not cls.is_module:
            return
        found = loop_over_attribute(node, self.context.self_name)
        if found is not None:
            self._loops.append((node, found[0], found[1]))

    def leave_For(self, original_node: cst.For) -> None:
        if self._loops and self._loops[-1][0] is original_node:
            self._loops.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._targets.add(id(t.target))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets.add(id(node.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets.add(id(node.target))

    # -- the check ---------------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "device" or id(node) in self._targets:
            return
        owner = node.value
        if self._dataparallel_read(node, owner):
            return
        class_name = self._class_of(node, owner)
        if class_name is None or self.facts.has_device_attribute(class_name):
            return
        ctx = self.context
        expr = f"{_code(owner)}.device"
        origin = self.facts.class_origin(class_name)
        message = self.message.format(expr=expr, cls=class_name.rsplit(".", 1)[-1])
        related = []
        if origin is not None:  # a class of another file: say where it is
            message = message.replace(f"`{class_name.rsplit('.', 1)[-1]}`", self.facts.shown_class(class_name), 1)
            related = [(origin[0], origin[1], f"`{class_name.rsplit('.', 1)[-1]}` defines no `device`")]
        path = self.facts.tensor_path_of_class(class_name)
        if path is not None:
            new = f"{_code(owner)}.{path}.device"
        elif not ctx.in_forward:
            new = f"next({_code(owner)}.parameters()).device"
        else:
            self.report(
                node,
                message,
                no_fix_reason=f"`{class_name.rsplit('.', 1)[-1]}` holds no tensor devlint can name, and "
                "`next(...parameters())` is empty inside DataParallel replicas",
                related=related,
            )
            return
        self.report(node, message, fix=self.replace(node, cst.parse_expression(new), f"read `{new}`"), related=related)

    def _dataparallel_read(self, node: cst.Attribute, owner: cst.BaseExpression) -> bool:
        """``model.device`` where ``model`` may hold an ``nn.DataParallel``
        (a wrapper that may reach the read, :func:`held_wrappers`, or
        ``self.model`` that ``__init__`` wraps and no other method rebinds,
        holding what it held when the method began), unless the scope tests
        whether it is wrapped (``isinstance``/``hasattr``)."""
        name = dotted_name(owner)
        at = self.scripts.position(node)
        if name is None or at is None:
            return False
        wrappers, entries = held_wrappers(self.scripts, at[0], name, at[1], at[2])
        hook = next((h for h in map(self._hook_model, entries) if h), "")
        wrapped = any(canonical_wrapper(w) == DATA_PARALLEL for w in wrappers) or bool(hook) or any(
            self._wrapped_attribute(e) for e in entries
        )
        if not wrapped or name in self._wrap_tests(self.context.current_function):
            return False
        expr = f"{name}.device"
        what = f"{hook}, an `nn.DataParallel` on several GPUs," if hook else (
            f"`{name}` may be an `nn.DataParallel` wrapper (on several GPUs),"
        )
        message = f"`{expr}`: {what} which has no `device` attribute (AttributeError at run time)"
        if self.context.in_forward:
            self.report(node, message, no_fix_reason="`next(...parameters())` is empty inside DataParallel replicas")
            return True
        new = f"next({name}.parameters()).device"
        self.report(node, message, fix=self.replace(node, cst.parse_expression(new), f"read `{new}`"))
        return True

    def _wrapped_attribute(self, name: str) -> bool:
        """``self.x`` that the class's ``__init__`` binds to a DataParallel
        wrapper, and no other method of the class binds."""
        cls = self.context.current_class
        me = self.context.self_name
        if cls is None or not me or not name.startswith(me + ".") or "." in name[len(me) + 1:]:
            return False
        return canonical_wrapper(init_wrapper(self.scripts, cls.name, name[len(me) + 1:])) == DATA_PARALLEL

    def _hook_model(self, name: str) -> str:
        """For ``model``, the parameter of a trainer hook the trainer calls
        with the model as it wrapped it (``training_step(self, model,
        inputs)`` of a ``transformers.Trainer`` subclass:
        ``WRAPPED_MODEL_HOOKS``), who calls it ("`transformers.Trainer`'s
        `training_step`"); else ""."""
        ctx = self.context
        cls, fn = ctx.current_class, ctx.current_function
        if cls is None or fn is None or fn is not ctx.current_method:
            return ""
        params = fn.params.params
        if len(params) < 2 or params[1].name.value != name:
            return ""
        for base in self.facts.lineage(cls.name):
            q = self.facts.qualify_dotted(base) or base
            if fn.name.value in WRAPPED_MODEL_HOOKS.get(q, ()):
                return f"`{q}` calls `{fn.name.value}` with the model as it wrapped it"
        return ""

    def _wrap_tests(self, fn: Optional[cst.CSTNode]) -> Set[str]:
        """The names ``fn`` (or the module) tests for a wrapper."""
        key = id(fn) if fn is not None else 0
        if key not in self._tested:
            names: Set[str] = set()
            todo: List[cst.CSTNode] = [fn if fn is not None else self.context.module]
            while todo:
                n = todo.pop()
                if (isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in ("isinstance", "hasattr", "getattr")
                        and len(n.args) > 1):
                    arg = dotted_name(n.args[0].value)
                    second = n.args[1].value
                    if arg and (n.func.value == "isinstance" or string_value(second) == "module"):
                        names.add(arg)
                todo.extend(n.children)
            self._tested[key] = names
        return self._tested[key]

    def _class_of(self, node: cst.Attribute, owner: cst.BaseExpression) -> Optional[str]:
        ctx = self.context
        cls = ctx.current_class
        if cls is not None and cls.is_module and ctx.current_method is not None:
            loop_vars = {var: attr for _, var, attr in self._loops}
            found = module_class_of(self.facts, cls, owner, ctx.self_name, loop_vars)
            if found is not None:
                return found
            if isinstance(owner, cst.Name) and (owner.value == ctx.self_name or owner.value in loop_vars):
                return None
        if isinstance(owner, cst.Name) and cls is None:
            at = self.scripts.position(node)
            if at is not None:
                return held_class(at[0], owner.value, at[1], at[2]) or None
        return None


def canonical_wrapper(name: str) -> str:
    return DATA_PARALLEL if name == DATA_PARALLEL or name.endswith(".DataParallel") else name


def _code(node: cst.CSTNode) -> str:
    return dotted_name(node) or cst.Module(body=[]).code_for_node(node)
