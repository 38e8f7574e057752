"""DL005 placement-after-wrap

## What it does
Flags a model placed on a device after it was wrapped for data parallelism:

* `DistributedDataParallel(model, ...).to(device)` / `.cuda()`, or
  `model.to(device)` after `model = DistributedDataParallel(model, ...)`
  (or after `ddp_model = DistributedDataParallel(model, ...)`: the module
  inside the wrapper, moved under its own name), when the model was not
  already on that device before the wrap;
* `DataParallel(model, ...).to(dev)` / `.cuda()`, or a later `model.to(dev)`,
  when `dev` is a known CUDA device other than `device_ids[0]`
  (`device_ids` defaults to every GPU, so `device_ids[0]` is `cuda:0`):
  `nn.DataParallel(model).to("cuda:1")`,
  `nn.DataParallel(model, device_ids=[1, 2]).cuda()`;
* either of these after a wrap helper (a function of this file or, in a
  project run, of another module that returns its argument wrapped:
  `model = distribute(Net(), rank)` then `model.to(rank)`). Not when the
  helper wraps only under a condition or places the model itself before
  wrapping it (the later move is then a no-op).

## Why is this bad?
Checked against PyTorch's own source (`torch/nn/parallel/data_parallel.py`,
`distributed.py`, torch 2.x):

* `DistributedDataParallel.__init__` reads where the parameters are *when it
  is constructed*: it fixes `device_type`, checks `device_ids` against the
  parameters' devices, broadcasts the parameters from rank 0 and builds the
  gradient reducer (its buckets are allocated on the parameters' device).
  Moving the model afterwards leaves all of that on the old device. With
  `device_ids=[rank]` and a model still on the CPU the constructor itself
  fails:
  ```
  ValueError: DistributedDataParallel device_ids and output_device arguments only work with single-device/multiple-device GPU modules or CPU modules, but got device_ids [1], output_device None, and module parameters {device(type='cpu')}.
  ```
  The PyTorch documentation says it too: "You should never try to change
  your model's parameters after wrapping up your model with
  DistributedDataParallel".
* `DataParallel` checks the devices in `forward`, not in its constructor:
  every call raises unless all parameters and buffers are on `device_ids[0]`:
  ```
  RuntimeError: module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of them on device: cuda:1
  ```
  So for DataParallel *when* the model is moved does not matter, *where* does.
  `nn.DataParallel(model).cuda()` and `.to("cuda")` (the current device,
  `cuda:0`) with the default `device_ids` are correct and not flagged.

Not flagged: a placement whose device is not known statically
(`model.to(device)` with `device = torch.device("cuda" if ... else "cpu")`
after DataParallel), `.cpu()` (moving a model back to save it), `.to(dtype)`,
and a DDP model moved again to the device it was already on (a no-op).

## Example
```python
model = Net()
model = DDP(model, device_ids=[local_rank]).to(local_rank)

model = nn.DataParallel(Net()).to("cuda:1")
```

## Use instead
```python
model = Net()
model = DDP(model.to(local_rank), device_ids=[local_rank])

model = nn.DataParallel(Net().to("cuda:1"), device_ids=list(range(1, torch.cuda.device_count())))
```

## Fix safety
DistributedDataParallel: safe. The placement moves into the wrapper call,
`DDP(model.to(device), ...)`, and a separate later `model.to(device)`
statement is removed; the fix is offered only when the device expression
means the same thing at the wrap.

After a wrap helper: the placement moves onto the helper's argument,
`distribute(Net().to(rank), rank)`, the later placement removed (safe);
for DataParallel with the default `device_ids` there is no fix (the
`device_ids` to change are in the helper).

DataParallel with `device_ids` known only at run time (`device_ids=gpus`
from a flag) and a model placed on a GPU the code names (`.cuda()`, the
current device, cuda:0): unsafe. The model is placed on the ids' first
device inside the wrapper call, `nn.DataParallel(Net().cuda(gpus[0]),
device_ids=gpus)`, and the placement after the wrap is dropped; the ids may
be None (every GPU) or empty at run time, where `gpus[0]` fails. No fix when
the ids are computed in the call (`device_ids=list(range(args.first, n))`)
or re-bound between the wrap and the placement.

DataParallel with a literal `device_ids`: safe. The model is placed on
`device_ids[0]`, the one device `DataParallel.forward` accepts.

DataParallel with the default `device_ids` and a model sent to `cuda:N`
(N > 0): unsafe. The fix keeps `cuda:N` as the main device and passes
`device_ids=list(range(N, torch.cuda.device_count()))`, which drops the GPUs
below N from the data-parallel set; say otherwise if you meant
`model.to("cuda:0")`. A placement called on the wrapper itself
(`m = nn.DataParallel(Net()).cuda()` then `m.to("cuda:1")`) is dropped by the
fix, which would otherwise move the model back to `cuda:0`; a wrapper whose
`device_ids` start at N (`list(range(N, ...))` too) then placed on another
device is reported, and the fix drops that placement when the model is
already on `cuda:N` inside the call.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from devlint.diagnostic import Fix, FixSafety
from devlint.facts.scripts import PlaceEvent, ScopeFacts, WrapEvent, always_before, binding_chain
from devlint.rule import Invalid, ScriptRule, Valid
from devlint.scan import calls_a_wrapper
from devlint.syntax import code_of, cuda_index, free_names, list_first_index, placement_call, positional_args
from devlint.torch_api import DATA_PARALLEL, DISTRIBUTED_DATA_PARALLEL

_DTYPE_HINTS = ("dtype", "float", "half", "bfloat", "int", "double", "bool", "long", "memory_format")


class PlacementAfterWrap(ScriptRule):
    code = "DL005"
    name = "placement-after-wrap"
    brief = "`.to()`/`.cuda()` after DDP was built, or a DataParallel model moved off `device_ids[0]`"
    message = "{wrapper} model placed on a device after wrapping: {why}"
    fix_safety = "safe/unsafe"
    tokens = ("DataParallel",)
    project_keys = ("wraps",)

    VALID = [
        Valid(
            """
import torch
from torch import nn

model = nn.DataParallel(nn.Linear(4, 4)).cuda()
other = nn.DataParallel(nn.Linear(4, 4)).to("cuda")
third = nn.DataParallel(nn.Linear(4, 4), device_ids=[1, 2]).to("cuda:1")
"""
        ),
        Valid(
            """
import os
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    model = torch.nn.Linear(4, 4).to(local_rank)
    model = DDP(model, device_ids=[local_rank])
    model.to(local_rank)
"""
        ),
        Valid(
            """
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 4)
model = nn.DataParallel(model)
model.to(device)
model.half()
model.cpu()
"""
        ),
        Valid(
            """
import os
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

def distribute(model, rank):
    model = model.cuda(rank)
    return DDP(model, device_ids=[rank])

def maybe_parallel(model):
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    return model

def main():
    rank = int(os.environ["LOCAL_RANK"])
    model = distribute(nn.Linear(4, 4), rank)
    model.to(rank)
    other = maybe_parallel(nn.Linear(4, 4))
    other.to("cuda:1")
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import os
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

def distribute(model, rank):
    return DDP(model, device_ids=[rank])

def main():
    rank = int(os.environ["LOCAL_RANK"])
    model = distribute(torch.nn.Linear(4, 4), rank)
    model.to(rank)
""",
            """
import os
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

def distribute(model, rank):
    return DDP(model, device_ids=[rank])

def main():
    rank = int(os.environ["LOCAL_RANK"])
    model = distribute(torch.nn.Linear(4, 4).to(rank), rank)
""",
        ),
        Invalid(
            """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

def setup(model, local_rank):
    model = DDP(model, device_ids=[local_rank]).to(local_rank)
    return model
""",
            """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

def setup(model, local_rank):
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    return model
""",
        ),
        Invalid(
            """
import torch
import torch.nn as nn

def build(device):
    model = nn.Linear(4, 4)
    model = nn.parallel.DistributedDataParallel(model)
    model.to(device)
    return model
""",
            """
import torch
import torch.nn as nn

def build(device):
    model = nn.Linear(4, 4)
    model = nn.parallel.DistributedDataParallel(model.to(device))
    return model
""",
        ),
        Invalid(
            """
import torch
from torch import nn

model = nn.DataParallel(nn.Linear(4, 4), device_ids=[1, 2]).cuda()
""",
            """
import torch
from torch import nn

model = nn.DataParallel(nn.Linear(4, 4).cuda(1), device_ids=[1, 2])
""",
        ),
        Invalid(
            """
import torch
from torch import nn

model = nn.DataParallel(nn.Linear(4, 4)).to("cuda:1")
""",
            """
import torch
from torch import nn

model = nn.DataParallel(nn.Linear(4, 4).to("cuda:1"), device_ids=list(range(1, torch.cuda.device_count())))
""",
            unsafe=True,
        ),
        Invalid(
            """
import torch
from torch import nn

model = nn.DataParallel(nn.Linear(4, 4)).cuda()
model.to("cuda:1")
""",
            """
import torch
from torch import nn

model = nn.DataParallel(nn.Linear(4, 4).to("cuda:1"), device_ids=list(range(1, torch.cuda.device_count())))
""",
            unsafe=True,
        ),
        Invalid(
            """
import torch
from torch import nn

model = nn.DataParallel(nn.Linear(4, 4).to("cuda:1"), device_ids=list(range(1, torch.cuda.device_count()))).cuda()
""",
            """
import torch
from torch import nn

model = nn.DataParallel(nn.Linear(4, 4).to("cuda:1"), device_ids=list(range(1, torch.cuda.device_count())))
""",
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        return calls_a_wrapper(scan)

    def on_place(self, node: cst.Call, scope: ScopeFacts, event: PlaceEvent) -> None:
        if event.method == "to" and not _device_like(event.device):
            return
        if event.on_wrap >= 0:
            # ``DataParallel(model).cuda()``: a fix that later moves the model
            # into the wrapper call must drop this placement too, or it sends
            # the model back where it was (cuda:0)
            self._on_wrapper()[(scope.index, event.on_wrap)] = node
        if event.on_wrap >= 0:
            wrap = scope.wraps[event.on_wrap]
            separate = False
        elif event.target:
            chain = binding_chain(scope, event.target, event.order, event.branch)
            if chain and chain[-1].kind == "wrap":
                wrap = scope.wraps[chain[-1].wrap_index]
            elif chain and chain[-1].kind == "call" and _helper_wrap_of(scope, chain[-1]) is not None:
                self._after_helper(node, scope, event, _helper_wrap_of(scope, chain[-1]))  # type: ignore[arg-type]
                return
            else:
                # ``ddp = DDP(model, ...)`` then ``model.to(rank)``: the
                # module inside the wrapper is moved under another name
                found = _wrap_of_inner(scope, event)
                if found is None:
                    return
                wrap = found
            separate = True
        else:
            return
        wrap_node = self.wrap_nodes.get((scope.index, wrap.index))
        if wrap_node is None:
            return
        if wrap.wrapper == DISTRIBUTED_DATA_PARALLEL:
            self._ddp(node, scope, event, wrap, wrap_node, separate)
        elif wrap.wrapper == DATA_PARALLEL:
            self._dp(node, scope, event, wrap, wrap_node, separate)

    def _on_wrapper(self) -> Dict[Tuple[int, int], cst.Call]:
        """(scope index, wrap index) -> the placement called on the wrapper
        call itself (``DataParallel(model).cuda()``)."""
        found = getattr(self, "_wrapper_placements", None)
        if found is None:
            found = self._wrapper_placements = {}
        return found

    # -- a model a wrap helper returned ------------------------------------
    def _after_helper(self, node: cst.Call, scope: ScopeFacts, event: PlaceEvent, wrap: WrapEvent) -> None:
        """``model = wrap_ddp(Net(), rank)`` (a function of this file or of
        another that returns its argument wrapped), then ``model.to(rank)``.
        Not when the helper wraps only under a condition, or places the model
        itself before wrapping it (the later move is then a no-op or its own
        mistake, which the helper's file shows)."""
        if wrap.helper_conditional or wrap.helper_places:
            return
        call = self.scripts.call_nodes.get((scope.index, wrap.helper, wrap.helper_call))
        if call is None:
            return
        shown, related = self.helper_shown(wrap.helper)
        if wrap.wrapper == DISTRIBUTED_DATA_PARALLEL:
            if self._already_there(scope, wrap, event):
                return
            why = (f"{shown} built the DDP wrapper, which fixed its devices and its gradient reducer then; "
                   "place the model before passing it in")
            message = self.message.format(wrapper="DistributedDataParallel", why=why)
            fix, reason = self._move_into_helper_call(node, scope, event, wrap, call)
            self.report(node, message, fix=fix, no_fix_reason=reason, related=related)
            return
        if wrap.wrapper != DATA_PARALLEL or wrap.device_ids == "?":
            return
        devices = self._dp_devices(scope, event, wrap)
        if devices is None:
            return
        main, target = devices
        why = (
            f"{shown} wrapped it, and DataParallel.forward requires every parameter on device_ids[0] "
            f"(cuda:{main}) but this moves them to cuda:{target}"
        )
        message = self.message.format(wrapper="DataParallel", why=why)
        if wrap.device_ids:
            fix, reason = self._move_into_helper_call(node, scope, event, wrap, call, _retarget(node, event, main))
        else:
            fix, reason = None, f"the wrapper is built in {shown}: give it `device_ids` starting at cuda:{target}, or move the model to cuda:0"
        self.report(node, message, fix=fix, no_fix_reason=reason, related=related)

    def _move_into_helper_call(
        self, node: cst.Call, scope: ScopeFacts, event: PlaceEvent, wrap: WrapEvent, call: cst.Call,
        new_place: Optional[Tuple[str, List[cst.Arg]]] = None,
    ) -> Tuple[Optional[Fix], str]:
        """``wrap_ddp(model, rank)`` ... ``model.to(rank)`` ->
        ``wrap_ddp(model.to(rank), rank)``, the later placement removed."""
        arg = next((a for a in call.args if a.keyword is None and not a.star and code_of(a.value) == wrap.wrapped), None)
        if arg is None:
            arg = next((a for a in call.args if a.keyword is not None and code_of(a.value) == wrap.wrapped), None)
        if arg is None or wrap.placed_inside:
            return None, "the model is not passed to the wrap helper as a plain expression"
        for name in sorted(set().union(*(free_names(a.value) for a in node.args))):
            if scope.binds_between(name, wrap.order, event.order) or name == wrap.target:
                return None, f"`{name}` changes between the wrap and the placement"
        method, place_args = new_place if new_place is not None else (event.method, list(node.args))
        placed = cst.Call(func=cst.Attribute(value=arg.value, attr=cst.Name(method)), args=place_args)
        new_call = call.with_changes(args=[a.with_changes(value=placed) if a is arg else a for a in call.args])
        line, _ = self.statement_of.get(id(node), (None, None))
        if event.statement in ("expr", "assign") and line is not None and always_before(wrap.branch, event.branch):
            return Fix([(call, new_call)] + self.remove_statement(line), FixSafety.SAFE, "place the model before wrapping it"), ""
        return Fix([(call, new_call)], FixSafety.SAFE, "place the model before wrapping it"), ""

    # -- DistributedDataParallel --------------------------------------------
    def _ddp(self, node, scope: ScopeFacts, event: PlaceEvent, wrap: WrapEvent, wrap_node: cst.Call, separate: bool) -> None:
        if self._already_there(scope, wrap, event):
            return
        why = "DDP fixed its devices and built its gradient reducer when it was constructed; place the model before wrapping it"
        message = self.message.format(wrapper="DistributedDataParallel", why=why)
        fix, reason = self._move_into(node, scope, event, wrap, wrap_node, separate, None, FixSafety.SAFE)
        self.report(node, message, fix=fix, no_fix_reason=reason)

    def _already_there(self, scope: ScopeFacts, wrap: WrapEvent, event: PlaceEvent) -> bool:
        """The model was placed on this device before the wrap (a no-op move)."""
        if wrap.placed_inside and (wrap.placed_inside == event.device or (event.method == "cuda" and not event.device)):
            return True
        names = {wrap.wrapped_name} if wrap.wrapped_name else set()
        chain = binding_chain(scope, wrap.wrapped_name, wrap.order, wrap.branch) if wrap.wrapped_name else []
        names.update(b.source for b in chain if b.source)
        for b in chain:
            if b.placed and (b.placed == event.device or (event.method == "cuda" and not event.device)):
                return True
        for p in scope.placements:
            if p.order < wrap.order and p.target in names:
                if p.device == event.device or (event.method == "cuda" and not event.device):
                    return True
        return False

    # -- DataParallel ----------------------------------------------------------
    def _dp(self, node, scope: ScopeFacts, event: PlaceEvent, wrap: WrapEvent, wrap_node: cst.Call, separate: bool) -> None:
        if wrap.device_ids and wrap.device_ids != "?" and _first_device_id(wrap.device_ids) is None:
            self._dp_runtime_ids(node, scope, event, wrap, wrap_node, separate)
            return
        devices = self._dp_devices(scope, event, wrap)
        if devices is None:
            return
        main, target = devices
        why = (
            f"DataParallel.forward requires every parameter on device_ids[0] (cuda:{main}) "
            f"but this moves them to cuda:{target}"
        )
        message = self.message.format(wrapper="DataParallel", why=why)
        if wrap.device_ids:
            new_place = _retarget(node, event, main)
            fix, reason = self._move_into(node, scope, event, wrap, wrap_node, separate, new_place, FixSafety.SAFE, main=main)
        else:
            torch_name = self.facts.local_name_for("torch.cuda.device_count")
            if torch_name is None:
                self.report(node, message, no_fix_reason="`torch` is not imported under a name the fix could use")
                return
            ids = cst.parse_expression(f"list(range({target}, {torch_name}()))")
            fix, reason = self._move_into(node, scope, event, wrap, wrap_node, separate, None, FixSafety.UNSAFE, ids)
        self.report(node, message, fix=fix, no_fix_reason=reason)

    def _dp_runtime_ids(self, node, scope: ScopeFacts, event: PlaceEvent, wrap: WrapEvent, wrap_node: cst.Call, separate: bool) -> None:
        """``DataParallel(Net(), device_ids=gpus).cuda()``: ``device_ids``
        comes from the run (a flag, a config), the placement goes to a GPU
        the code names (``.cuda()``: the current one, cuda:0). Unless the ids
        start there, every ``forward`` raises."""
        if event.method == "cuda" and not event.device and (scope.sets_cuda_device or self.scripts.scopes[0].sets_cuda_device):
            return  # .cuda() after set_device(): the current device is not known
        target = cuda_index(event.device, event.method, self._literal_devices(scope, event))
        if target is None:
            return
        first = _first_id_expression(wrap.device_ids)
        shown = first or f"{wrap.device_ids}[0]"
        why = (
            f"DataParallel.forward requires every parameter on device_ids[0] (`{shown}`, known only at run time) "
            f"but this moves them to cuda:{target}"
        )
        message = self.message.format(wrapper="DataParallel", why=why)
        if first is None:
            self.report(node, message, no_fix_reason="`device_ids` is computed in the call: place the model on its first id before wrapping")
            return
        for name in sorted(free_names(cst.parse_expression(wrap.device_ids))):
            if scope.binds_between(name, wrap.order, event.order):
                self.report(node, message, no_fix_reason=f"`{name}` changes between the wrap and the placement")
                return
        rest = [a for a in node.args if a.keyword is not None and a.keyword.value != "device"]
        new_place = (event.method, [cst.Arg(cst.parse_expression(first))] + rest)
        # unsafe: the ids may be None (every GPU) or empty at run time, and
        # the model now goes to the ids' first GPU, not to cuda:{target}
        fix, reason = self._move_into(node, scope, event, wrap, wrap_node, separate, new_place, FixSafety.UNSAFE)
        self.report(node, message, fix=fix, no_fix_reason=reason)

    def _dp_devices(self, scope: ScopeFacts, event: PlaceEvent, wrap: WrapEvent) -> Optional[Tuple[int, int]]:
        """(``device_ids[0]``, the CUDA index the placement moves the model to)
        when both are known and differ, else None."""
        main = _first_device_id(wrap.device_ids) if wrap.device_ids else 0
        if main is None:
            return None  # device_ids computed at run time
        if event.method == "cuda" and not event.device and (scope.sets_cuda_device or self.scripts.scopes[0].sets_cuda_device):
            return None  # .cuda() after set_device(): the current device is not known
        target = cuda_index(event.device, event.method, self._literal_devices(scope, event))
        if target is None or target == main:
            return None
        return main, target

    def _literal_devices(self, scope: ScopeFacts, event: PlaceEvent) -> Dict[str, str]:
        """Names bound to a literal device where the placement happens."""
        out = dict(self.facts.module_devices)
        if event.device.isidentifier():
            b = scope.last_binding(event.device, event.order, event.branch)
            if b is not None:
                if b.value:
                    out[event.device] = b.value
                else:
                    out.pop(event.device, None)  # re-bound to something else
        return out

    # -- the fix ---------------------------------------------------------------
    def _move_into(
        self,
        node: cst.Call,
        scope: ScopeFacts,
        event: PlaceEvent,
        wrap: WrapEvent,
        wrap_node: cst.Call,
        separate: bool,
        new_place: Optional[Tuple[str, List[cst.Arg]]],
        safety: FixSafety,
        device_ids: Optional[cst.BaseExpression] = None,
        main: Optional[int] = None,
    ) -> Tuple[Optional[Fix], str]:
        args = positional_args(wrap_node)
        if not args:
            return None, "the wrapped model is not a positional argument"
        if not separate and main is not None and wrap.placed_inside and _placed_index(wrap.placed_inside) == main:
            # DataParallel(model.to("cuda:1"), device_ids=[1, 2]).cuda(): the
            # model is already on device_ids[0]; the placement after it is the bug
            return Fix([(node, wrap_node)], safety, "drop the placement that moves the model off device_ids[0]"), ""
        # ``m = DataParallel(model).cuda()`` then ``m.to("cuda:1")``: the fix
        # replaces the wrapper call with its placement, or that placement
        # would still send the model back to cuda:0
        replaced: cst.CSTNode = wrap_node
        trailing = self._on_wrapper().get((scope.index, wrap.index)) if separate else None
        if trailing is not None:
            if any(a.keyword is not None and a.keyword.value not in ("device", "non_blocking") for a in trailing.args) or len(
                [a for a in trailing.args if a.keyword is None]
            ) > 1:
                return None, "the wrapper's own placement also converts the model: move it by hand"
            replaced = trailing
        method, place_args = new_place if new_place is not None else (event.method, list(node.args))
        first = args[0]
        inner = first.value
        if wrap.placed_inside:
            # DDP(model.to(a)).to(b): the inner placement is replaced
            p = placement_call(inner)  # type: ignore[arg-type]
            if p is not None:
                inner = p[0]
        placed = cst.Call(func=cst.Attribute(value=inner, attr=cst.Name(method)), args=place_args)
        new_args = [a.with_changes(value=placed) if a is first else a for a in wrap_node.args]
        if device_ids is not None:
            new_args = _set_keyword(new_args, "device_ids", device_ids)
        new_wrap = wrap_node.with_changes(args=new_args)
        if not separate:
            # DDP(model, ...).to(dev) -> DDP(model.to(dev), ...)
            return Fix([(node, new_wrap)], safety, "place the model before wrapping it"), ""
        for name in sorted(set().union(*(free_names(a.value) for a in node.args))):
            if scope.binds_between(name, wrap.order, event.order):
                return None, f"`{name}` changes between the wrap and the placement"
        line, _ = self.statement_of.get(id(node), (None, None))
        if event.statement in ("expr", "assign") and line is not None and always_before(wrap.branch, event.branch):
            return Fix([(replaced, new_wrap)] + self.remove_statement(line), safety, "place the model before wrapping it"), ""
        # the later placement still serves the paths that do not wrap (and
        # is a no-op on the path that does): keep it
        return Fix([(replaced, new_wrap)], safety, "place the model before wrapping it"), ""


def _helper_wrap_of(scope: ScopeFacts, bind) -> Optional[WrapEvent]:
    """The wrap of the helper call ``bind`` binds (``model = parallelize(m)``)."""
    for ev in reversed(scope.helper_wraps):
        if ev.target == bind.target and ev.helper == bind.call and ev.order <= bind.order and ev.branch == bind.branch:
            return ev
    return None


def _wrap_of_inner(scope: ScopeFacts, event: PlaceEvent) -> Optional[WrapEvent]:
    """The last wrap, before ``event`` on every path to it, of the very
    module ``event`` places (``ddp = DDP(model)`` ... ``model.to(rank)``,
    ``model`` not re-bound in between), or None."""
    for wrap in reversed(scope.wraps):
        if (
            wrap.order < event.order
            and wrap.wrapped_name == event.target
            and wrap.target != event.target
            and always_before(wrap.branch, event.branch)
            and not scope.binds_between(event.target, wrap.order, event.order)
        ):
            return wrap
    return None


def _first_device_id(code: str) -> Optional[int]:
    """``device_ids[0]`` of a literal list, or of the list the DL005 fix
    writes: ``list(range(1, torch.cuda.device_count()))`` -> 1."""
    first = list_first_index(code)
    if first is not None:
        return first
    try:
        node = cst.parse_expression(code)
    except Exception:
        return None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("list", "tuple") and len(node.args) == 1:
        node = node.args[0].value
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "range" and node.args:
        if any(a.keyword is not None or a.star for a in node.args):
            return None
        if len(node.args) == 1:
            return 0
        start = node.args[0].value
        return int(start.value) if isinstance(start, cst.Integer) else None
    return None


def _first_id_expression(code: str) -> Optional[str]:
    """The code of ``device_ids[0]`` for ids known only at run time: the
    first element of a list display (``[args.gpu, 1]``), or ``ids[0]`` for a
    name, attribute or subscript (``gpus``, ``args.gpu_ids``); None for a
    call or anything else the fix would have to evaluate twice."""
    try:
        node = cst.parse_expression(code)
    except Exception:
        return None
    if isinstance(node, (cst.List, cst.Tuple)):
        if not node.elements or not isinstance(node.elements[0], cst.Element):
            return None
        return code_of(node.elements[0].value)
    if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
        return f"{code}[0]"
    return None


def _placed_index(code: str) -> Optional[int]:
    """The CUDA index of the placement inside a wrapper call (the code
    :func:`strip_placements` keeps: ``"cuda:1"``, ``1``, ``cuda`` for
    ``.cuda()``)."""
    return 0 if code == "cuda" else cuda_index(code)


def _device_like(code: str) -> bool:
    """``.to(x)``: is ``x`` a device (not a dtype, a tensor or memory format)?"""
    if not code:
        return False
    lowered = code.lower()
    if any(h in lowered for h in _DTYPE_HINTS) and "device" not in lowered:
        return False
    return True


def _retarget(node: cst.Call, event: PlaceEvent, main: int) -> Tuple[str, List[cst.Arg]]:
    """The same placement, sent to ``cuda:main``."""
    if event.method == "cuda":
        return "cuda", [cst.Arg(cst.Integer(str(main)))] + [a for a in node.args if a.keyword is not None and a.keyword.value != "device"]
    rest = [a for a in node.args if a.keyword is not None and a.keyword.value != "device"]
    return "to", [cst.Arg(cst.SimpleString(f'"cuda:{main}"'))] + rest


def _set_keyword(args: List[cst.Arg], name: str, value: cst.BaseExpression) -> List[cst.Arg]:
    out = []
    done = False
    for a in args:
        if a.keyword is not None and a.keyword.value == name:
            out.append(a.with_changes(value=value))
            done = True
        else:
            out.append(a)
    if not done:
        if out and out[-1].comma is cst.MaybeSentinel.DEFAULT:
            out[-1] = out[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        out.append(
            cst.Arg(
                keyword=cst.Name(name),
                value=value,
                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
            )
        )
    return out
