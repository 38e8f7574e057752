"""DL012 hardcoded-ddp-device-ids

## What it does
Flags `DistributedDataParallel(model, device_ids=[0])` (any integer literal in
`device_ids`, or `output_device=0`) in a script that knows its process's rank:
a `local_rank` variable, `int(os.environ["LOCAL_RANK"])`, `args.local_rank`,
`dist.get_rank()`, a `rank` parameter, or the first parameter of a function
started by `mp.spawn`.

## Why is this bad?
torchrun / `mp.spawn` start one process per GPU, and each process must drive
its own GPU. With a literal `device_ids=[0]` every process runs its replica on
GPU 0: the other GPUs sit idle, GPU 0 runs out of memory, and when the model
was moved with `.to(local_rank)` DDP moves the inputs to `cuda:0` while the
parameters are on `cuda:<rank>`:

```
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!
```

With the NCCL backend two ranks on one GPU can also fail at the first
collective (`NCCL error ... Duplicate GPU detected`).

## Example
```python
local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("nccl")
model = Net().to(local_rank)
model = DDP(model, device_ids=[0], output_device=0)
```

## Use instead
```python
local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("nccl")
model = Net().to(local_rank)
model = DDP(model, device_ids=[local_rank], output_device=local_rank)
```

Also flagged: `device_ids=[rank]` where `rank` is the global rank
(`dist.get_rank()`, `int(os.environ["RANK"])`, or that position of what a
setup function of the file returns: `rank, world = setup()` with `return
dist.get_rank(), dist.get_world_size()`): it equals the local rank on
one machine only; on the second node rank 8 names a GPU that is not there.
The fix (unsafe) uses the local rank in scope, when there is one.

Also flagged: `device_ids=[gpu]` where `gpu` is a physical GPU id looked up
in `CUDA_VISIBLE_DEVICES` (`int(os.environ["CUDA_VISIBLE_DEVICES"].split(",")[local_rank])`).
Inside the process CUDA numbers the visible GPUs from 0: with
`CUDA_VISIBLE_DEVICES=2,3` they are `cuda:0` and `cuda:1`, and
`device_ids=[3]` raises `invalid device ordinal`. The fix (unsafe) uses the
local rank.

Also flagged: `device_ids=[args.local_rank]` where `--local_rank` is an
`argparse` option with a number as its default (`default=0`) and the file
never reads `LOCAL_RANK` from the environment: torchrun passes the local
rank only in that variable (`torch.distributed.launch` of PyTorch 2 passes
`--local-rank`, which the option does not match), so every process keeps
the default and drives GPU 0. The finding is on the default; the fix
(unsafe, offered where the file imports `os`) makes it
`int(os.environ.get("LOCAL_RANK", 0))`.

In a project run, also a call of a wrap helper of another module that
builds DDP with `device_ids=[0]` (a helper written for one GPU), from a
script that has a rank: the helper's own file has no rank in reach and so no
finding; the call is where the mistake shows (no fix: the literal is in the
helper).

Not flagged: a script with no rank in reach (a single-process example), and a
script that sets `os.environ["CUDA_VISIBLE_DEVICES"]` itself from a value it
computes (`= str(rank)`: each process then sees its own GPU as `cuda:0`, and
`device_ids=[0]` is right). A constant (`= "0,1,2,3"`) gives every process
the same GPUs and does not silence the finding.

## Fix safety
Unsafe: the fix uses the rank variable in scope, preferring a local rank
(`local_rank`, `LOCAL_RANK`, `args.local_rank`) over a global one. A global
rank (`dist.get_rank()`, a `rank` parameter) equals the local rank only on a
single machine; on several nodes use the local rank.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from devlint.diagnostic import Fix, FixSafety
from devlint.facts.scripts import ScopeFacts, WrapEvent, visible_devices_value
from devlint.rule import Invalid, ScriptRule, Valid
from devlint.syntax import code_of, keyword_arg, positional_args
from devlint.torch_api import DISTRIBUTED_DATA_PARALLEL


class HardcodedDdpDeviceIds(ScriptRule):
    code = "DL012"
    name = "hardcoded-ddp-device-ids"
    brief = "DDP `device_ids` fixed (`[0]`) or taken from the global rank in a script that has a rank"
    message = "DistributedDataParallel gets the literal `{what}` although this process's rank is `{rank}`: every rank uses GPU {n}"
    fix_safety = "unsafe"
    tokens = ("DistributedDataParallel",)
    project_keys = ("wraps",)

    VALID = [
        Valid(
            """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    gpu = rank % torch.cuda.device_count()
    model = DDP(torch.nn.Linear(2, 2).cuda(gpu), device_ids=[gpu])
"""
        ),
        Valid(
            """
import os
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    model = torch.nn.Linear(2, 2).to(local_rank)
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
"""
        ),
        Valid(
            """
import torch
import torch.distributed as dist

def single_gpu_demo():
    dist.init_process_group("nccl", rank=0, world_size=1)
    model = torch.nn.Linear(2, 2).cuda()
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
"""
        ),
        Valid(
            """
import os
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

def worker(rank):
    os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)
    model = torch.nn.Linear(2, 2).cuda()
    return DDP(model, device_ids=[0])
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    model = DDP(torch.nn.Linear(2, 2).cuda(local_rank), device_ids=[rank])
""",
            """
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    model = DDP(torch.nn.Linear(2, 2).cuda(local_rank), device_ids=[local_rank])
""",
            unsafe=True,
        ),
        Invalid(
            """
import os
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    model = torch.nn.Linear(2, 2).to(local_rank)
    model = DDP(model, device_ids=[0], output_device=0)
""",
            """
import os
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    model = torch.nn.Linear(2, 2).to(local_rank)
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
""",
            unsafe=True,
        ),
        Invalid(
            """
import torch
import torch.multiprocessing as mp
from torch import nn

def train(gpu, world_size):
    model = nn.Linear(2, 2).cuda(gpu)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[0])

if __name__ == "__main__":
    mp.spawn(train, args=(2,), nprocs=2)
""",
            """
import torch
import torch.multiprocessing as mp
from torch import nn

def train(gpu, world_size):
    model = nn.Linear(2, 2).cuda(gpu)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[gpu])

if __name__ == "__main__":
    mp.spawn(train, args=(2,), nprocs=2)
""",
            unsafe=True,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # a call that may name DistributedDataParallel, with device_ids or
        # output_device given; or of a wrap helper another module defines
        return any(
            (("device_ids" in call.keywords or "output_device" in call.keywords or call.n_args >= 2)
             and scan.refers_to(call.func, {DISTRIBUTED_DATA_PARALLEL}))
            or (call.func and call.func in scan.wrap_helpers)
            for call in scan.calls
        )

    def on_scope_end(self, scope: ScopeFacts) -> None:
        """``model = setup_ddp(model)`` where ``setup_ddp`` (another module,
        which has no rank in reach and so no finding of its own) builds DDP
        with ``device_ids=[0]``, called by a script that has a rank."""
        if self.scripts.sets_visible_devices:
            return
        for ev in scope.helper_wraps:
            if ev.wrapper != DISTRIBUTED_DATA_PARALLEL or ev.helper_conditional or "." in ev.helper:
                continue
            found = self.facts.project_function(self.facts.qualify_dotted(ev.helper) or "")
            if found is None:
                continue  # a helper of this file: its own DDP call is checked where it is
            ids = _single_literal(ev.device_ids)
            if ids is None:
                continue
            rank = self._rank(scope)
            node = self.scripts.call_nodes.get((scope.index, ev.helper, ev.helper_call))
            if rank is None or node is None:
                continue
            path, line, _ = found
            message = (
                f"`{ev.helper}` ({path}:{line}) builds DistributedDataParallel with the literal `device_ids={ev.device_ids}` "
                f"although this process's rank is `{rank}`: every rank uses GPU {ids}"
            )
            self.report(node, message, no_fix_reason=f"the literal is in `{ev.helper}`: give it the rank to use",
                        related=[(path, line, f"`{ev.helper}` wraps its argument with `device_ids={ev.device_ids}`")])

    def on_wrap(self, node: cst.Call, scope: ScopeFacts, event: WrapEvent) -> None:
        if event.wrapper != DISTRIBUTED_DATA_PARALLEL or self.scripts.sets_visible_devices:
            return
        literals = self._literal_args(node)
        if not literals:
            if not self._physical_id(node, scope) and not self._argument_default(node):
                self._global_rank(node, scope)
            return
        rank = self._rank(scope)
        if rank is None:
            return
        what = ", ".join(f"{kw}={cst.Module(body=[]).code_for_node(arg.value)}" for kw, arg, _ in literals)
        numbers = sorted({n for _, _, ns in literals for n in ns})
        message = self.message.format(what=what, rank=rank, n=" and ".join(str(n) for n in numbers))
        rank_node = cst.parse_expression(rank)
        replacements = []
        for kw, arg, _ in literals:
            value = arg.value
            if kw == "device_ids" and isinstance(value, (cst.List, cst.Tuple)):
                new_elements = [
                    el.with_changes(value=rank_node) if isinstance(el.value, cst.Integer) else el
                    for el in value.elements
                ]
                replacements.append((value, value.with_changes(elements=new_elements)))
            else:
                replacements.append((value, rank_node))
        self.report(node, message, fix=Fix(replacements, FixSafety.UNSAFE, f"use `{rank}`"))

    def _physical_id(self, node: cst.Call, scope: ScopeFacts) -> bool:
        """``device_ids=[gpu]`` where ``gpu`` is a physical GPU id read from
        ``CUDA_VISIBLE_DEVICES`` (``int(visible.split(",")[local_rank])``):
        inside the process CUDA numbers the visible GPUs from 0, so with
        ``CUDA_VISIBLE_DEVICES=2,3`` the id 3 is ``invalid device ordinal``
        and the id 2 is the other process's GPU."""
        element = _single_device_id(node)
        if element is None:
            return False
        module = self.scripts.scopes[0]
        name = element.value if isinstance(element, cst.Name) else None
        physical = visible_devices_value(element, scope) == "id" or (
            name is not None and name not in scope.params and not scope.binds_between(name, -1, 10 ** 9)
            and visible_devices_value(element, module) == "id"
        )
        if not physical:
            return False
        code = cst.Module(body=[]).code_for_node(element)
        self._use_local_rank(node, element, scope, (
            f"DistributedDataParallel gets `{code}`, a physical GPU id read from `CUDA_VISIBLE_DEVICES`: inside the "
            "process CUDA numbers the visible GPUs from 0, so this names another process's GPU or none; use the local rank"
        ))
        return True

    def _argument_default(self, node: cst.Call) -> bool:
        """``device_ids=[args.local_rank]`` of a ``--local_rank`` option whose
        default is a number, in a file that never reads ``LOCAL_RANK`` from
        the environment: torchrun passes the local rank only there (and
        ``torch.distributed.launch`` of PyTorch 2 as ``--local-rank``), so
        every process keeps the default and drives the same GPU."""
        element = _single_device_id(node)
        if not isinstance(element, cst.Attribute) or element.attr.value != "local_rank":
            return False
        default = self.scripts.local_rank_option_default
        if self.scripts.reads_local_rank_env or default is None:
            return False
        number = code_of(default.value)
        message = (
            f"DistributedDataParallel gets `{code_of(element)}`, the `--local_rank` option, "
            f"whose default is {number}: torchrun passes the local rank only in the `LOCAL_RANK` environment "
            f"variable (`torch.distributed.launch` as `--local-rank`), so every process keeps {number} and uses GPU {number}"
        )
        if "os" in self.facts.imports and self.facts.imports["os"] == ["os"]:
            new = cst.parse_expression(f'int(os.environ.get("LOCAL_RANK", {number}))')
            self.report(default.value, message, fix=Fix([(default.value, new)], FixSafety.UNSAFE,
                                                         "default to the `LOCAL_RANK` the launcher sets"))
        else:
            self.report(default.value, message, no_fix_reason='default it to `int(os.environ.get("LOCAL_RANK", 0))`')
        return True

    def _global_rank(self, node: cst.Call, scope: ScopeFacts) -> None:
        """``device_ids=[rank]`` where ``rank`` is the global rank
        (``dist.get_rank()``, ``int(os.environ["RANK"])``): a GPU index only
        on the first machine; on the next one rank 8 names a GPU that is not
        there (``CUDA error: invalid device ordinal``)."""
        element = _single_device_id(node)
        if element is None:
            return
        module = self.scripts.scopes[0]
        code = cst.Module(body=[]).code_for_node(element)
        if isinstance(element, cst.Call):
            if self.facts.qualify(element.func) != "torch.distributed.get_rank" or element.args:
                return
        elif not isinstance(element, cst.Name):
            return
        elif code not in scope.global_ranks and not (
            code in module.global_ranks and code not in scope.params and not scope.binds_between(code, -1, 10 ** 9)
        ):
            return
        self._use_local_rank(node, element, scope, (
            f"DistributedDataParallel gets the global rank `{code}` as a GPU index: on a second machine it names "
            "a GPU that does not exist there; use the local rank"
        ))

    def _use_local_rank(self, node: cst.Call, element: cst.BaseExpression, scope: ScopeFacts, message: str) -> None:
        """Report ``node`` with an unsafe fix putting the local rank in scope
        in place of ``element``; no fix when there is none."""
        module = self.scripts.scopes[0]
        local = next(iter(scope.local_ranks), None) or next(
            (n for n in module.local_ranks if n.split(".")[0] not in scope.params), None
        )
        if local is None:
            self.report(node, message, no_fix_reason='no local rank is in scope: read `int(os.environ["LOCAL_RANK"])`')
            return
        fix = Fix([(element, cst.parse_expression(local))], FixSafety.UNSAFE, f"use the local rank `{local}`")
        self.report(node, message, fix=fix)

    def _literal_args(self, node: cst.Call) -> List[Tuple[str, cst.Arg, List[int]]]:
        out: List[Tuple[str, cst.Arg, List[int]]] = []
        args = positional_args(node)
        ids = keyword_arg(node, "device_ids") or (args[1] if len(args) > 1 else None)
        if ids is not None and isinstance(ids.value, (cst.List, cst.Tuple)):
            ints = [int(el.value.value) for el in ids.value.elements if isinstance(el.value, cst.Integer)]
            if ints and len(ids.value.elements) == 1:
                out.append(("device_ids", ids, ints))
        out_dev = keyword_arg(node, "output_device") or (args[2] if len(args) > 2 else None)
        if out_dev is not None and isinstance(out_dev.value, cst.Integer):
            out.append(("output_device", out_dev, [int(out_dev.value.value)]))
        return out

    def _rank(self, scope: ScopeFacts) -> Optional[str]:
        if scope.rank_names:
            return scope.rank_names[0]
        module = self.scripts.scopes[0]
        for name in module.rank_names:
            if name.split(".")[0] not in scope.params:
                return name
        return None


def _single_device_id(node: cst.Call) -> Optional[cst.BaseExpression]:
    """The one element of ``device_ids=[...]`` (keyword or second
    positional argument), None unless it has exactly one."""
    args = positional_args(node)
    ids = keyword_arg(node, "device_ids") or (args[1] if len(args) > 1 else None)
    if ids is None or not isinstance(ids.value, (cst.List, cst.Tuple)) or len(ids.value.elements) != 1:
        return None
    return ids.value.elements[0].value


def _single_literal(code: str) -> Optional[int]:
    """``[0]`` -> 0; None for anything but a one-element list of an int."""
    try:
        node = cst.parse_expression(code) if code and code != "?" else None
    except Exception:
        return None
    if isinstance(node, (cst.List, cst.Tuple)) and len(node.elements) == 1 and isinstance(node.elements[0].value, cst.Integer):
        return int(node.elements[0].value.value)
    return None
