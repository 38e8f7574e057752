"""DL011 inputs-not-moved

## What it does
Flags a training or evaluation loop over a data loader that feeds batch
tensors to a model moved with `.to(device)`/`.cuda()` without moving the
tensors: inputs passed to the model, and targets that meet the model's output
(`criterion(out, y)`, `pred == y`, `out.eq(y)`). Batch tensors are the names
the loop unpacks (`for x, y in loader`, `for (xs, ys), (xt, _) in zip(a, b)`,
`for i, batch in enumerate(pbar)` with `pbar = tqdm(loader)`,
`for x, y in DataLoader(ds)`, `[model(x) for x, _ in loader]`: a
comprehension's finding is moved where it is read), or that a loop takes
with `next()` from an
iterator over a loader (`it = iter(loader)`; `while True: x, y = next(it)`,
also inside a `try` that restarts the iterator), the fields of a whole batch
read by a constant key (`batch["input_ids"]`, `batch[0]`) or as attributes
(`data.x`, `data.edge_index` of a PyG `Batch`), and names bound to one of
these in the loop without a move (`labels = batch["labels"]`, `masks =
masks.squeeze(1).long()`, `x0 = x0 * 2 - 1`, `noise = torch.randn_like(x0)`).
Any loop (an RL episode, a benchmark) also counts a tensor it builds on the
CPU and feeds to a model moved before it: `torch.as_tensor(obs)`,
`torch.from_numpy(arr)`, `torch.tensor(rows)`, `torch.randn(64, 3, 224, 224)`
without `device=` (not a 0-dim `torch.tensor(0.99)`, not a conversion of a
model output, not a dry run on a model the script moves only later).
The model may be moved in a chain (`teacher.to(device).eval()`,
`model.half().cuda().eval()`), be a copy of a moved model
(`ema = copy.deepcopy(model)`, `torch.compile(model)`), be loaded onto a
device (`torch.load(path, map_location=device)`), or be a module-level model
that a helper function reads as a global.

## Why is this bad?
A `DataLoader` yields CPU tensors (unless its `collate_fn` places them;
`pin_memory=True` / `pin_memory_device=` only pin them in host memory for a
faster copy). A module's `.to(device)` moves its
parameters, never the data, so the first layer raises

```
RuntimeError: Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same
```

and a target left behind makes the loss raise
`RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!`.
Both appear only on a GPU machine; on a laptop the script runs.

## Example
```python
model = Net().to(device)
for x, y in train_loader:
    loss = criterion(model(x), y)
```

## Use instead
```python
model = Net().to(device)
for x, y in train_loader:
    x = x.to(device)
    y = y.to(device)
    loss = criterion(model(x), y)
```

The fix moves the tensor at the top of the loop body (after `x, y = batch`
when the batch is unpacked there) with the device expression the model was
moved with (`.cuda(args.gpu)` stays `.cuda(args.gpu)`); a field is moved in
place (`batch["input_ids"] = batch["input_ids"].to(device)`), except one read
by an index, which is moved where it is read (`model(batch[0].to(device))`:
a tuple batch takes no item assignment); `x.to(device)` written as a
statement, whose moved copy was thrown away, becomes `x = x.to(device)`; a
batch object read by attributes is moved whole (`data = data.to(device)`).
A model that reached
the function as an argument takes its device from the call site (a `device`
argument passed alongside it); when that device has no name in the function
the finding has no fix; so has a finding whose model moves to a literal GPU
only under a condition (`if use_cuda: model.cuda()`), where an unconditional
`.cuda()` would break the runs without one.

Not flagged: a tensor moved anywhere before its use (`x = x.to(device)`,
`model(x.cuda())`, `x.to(device)`, a helper call given the batch and a
device by name (`to_device(batch, device)`, `prepare(batch, device=dev)`),
`batch = {k: v.to(device) ...}`, `batch.to(device)`, `batch[k] = ...`,
`inputs = batch["x"].to(device)`, any re-binding of the name to a new
value; `y = y.long()`, `y = y.view(-1)`, `x = x.to(torch.float32)`,
`x = x.to(memory_format=torch.channels_last)` or `x = x / 255` is none: the
tensor stays where it was), a model never moved or moved to the CPU
(`"cpu"`, or a name every binding of which is `"cpu"` or
`torch.device("cpu")`), a model only cast (`model.to(torch.float16)`,
`model.to(memory_format=torch.channels_last)`), a helper function whose
`model` is its own parameter or local rather than the moved global,
a whole batch moved as a statement (`data.to(device)`: a PyG `Data` and a
`BatchEncoding` move in place),
inputs of a `DataParallel` model or a `DistributedDataParallel` model given
`device_ids` (the wrapper moves its inputs; targets still need moving), a
loader built with `pin_memory_device=` or a `collate_fn=` of its own (a
library collator that stacks on the CPU, `default_collate`,
`default_data_collator` or a `transformers` `DataCollator*`, does not count,
nor does a collate function the script defines before the loader whose body
moves nothing: no `.to()`, `.cuda()`, `.pin_memory()` or `device=`),
from a dataset built with a device or from tensors already moved
(`TensorDataset(X, Y)` with `X = torch.load(p, map_location=device)` or
`X = X.to(device)`), or wrapped by something that places
batches (`accelerator.prepare`, a `DeviceDataLoader(dl, device)`); a loop
variable that is the whole batch passed as it is (`model(batch)`,
`model(**batch)`: it may be a dict or a list, which `.to()` cannot move), a
field read by a computed key (`batch[k]`), sequence lengths (`lengths`,
`src_lens`, `batch["seq_len"]`: `pack_padded_sequence` wants them on the CPU
and `CTCLoss` accepts them there), targets given to `nn.CTCLoss` or
`F.ctc_loss` (CPU targets are accepted beside CUDA log-probabilities), and a
batch item shown or stored next to
the output rather than combined with it (`print(y, out)`, `rows.append(...)`,
`log.info(...)`). Only the batch tensors above count, and only when they
reach the model or meet its output.

Decided case: a loader built with `pin_memory_device=` stays silent, as the
rule's specification asks: it states which device the batches are meant
for. Its batches are still CPU tensors (pinned), so a loop that never moves
them does fail; devlint trusts the stated intent there rather than guess
where the move happens.

Decided case: `x.to(device)` alone on a line is reported for a tensor the
loop unpacked (`Tensor.to` returns a copy), not for a whole batch, which may
be a PyG `Data` or a `BatchEncoding` whose `.to()` moves in place.

Not covered: a `collate_fn` of the script's own defined after the loader
that uses it (it is taken to place the batch), and a tensor built on the CPU
before the loop that uses it.

## Fix safety
Safe: moving a tensor to the device its model already lives on is what the
model's first layer needs; on a CPU-only machine `device` is the CPU and the
move is a no-op; a tensor built in the loop gets `device=` with that
expression (`torch.as_tensor(obs, device=device)`). Unsafe: moving a batch
object read by attributes
(`data = data.to(device)`): a PyG `Batch` or a `BatchEncoding` has a `.to()`,
a namedtuple of tensors does not.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from devlint.diagnostic import FixSafety
from devlint.facts.training import (
    MODULE_SCOPE,
    Placement,
    ScopeStack,
    Training,
    WrapFacts,
    loader_loop,
    looks_like_loader,
    lookup_scoped,
    moved_part,
    next_loader,
    placed_on_cpu,
    placement_of,
)
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import (
    LINES,
    blocks,
    code_of,
    cuda_index,
    dotted_name,
    is_number_literal,
    keyword_arg,
    positional_args,
    ref_of,
    statements,
    with_keyword_arg,
)
from devlint.torch_api import CTC_LOSSES, DATA_LOADERS, ITER_WRAPPERS
from devlint.walk import walk

#: methods whose result is no longer on the device
_TO_HOST = frozenset({"cpu", "numpy", "item", "tolist"})
#: tensor methods that keep a batch item on the device it is on
_KEEPS_DEVICE = frozenset(
    {"view", "view_as", "reshape", "reshape_as", "long", "float", "int", "double", "half", "bool", "squeeze",
     "unsqueeze", "flatten", "contiguous", "t", "permute", "transpose", "clone", "detach", "type"}
)
#: calls whose result may be a model on a device (a copy or a wrapper of a moved
#: one, a whole model loaded with ``map_location``)
_MOVING_CALLS = frozenset({
    "copy.deepcopy", "torch.compile", "torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel", "torch.load",
})
#: factories that build a tensor on the CPU unless given ``device=``
_SHAPE_FACTORIES = frozenset({
    "torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.randint",
    "torch.arange", "torch.linspace", "torch.randperm", "torch.eye",
})
#: conversions of host data (a NumPy array, a list) into a CPU tensor
_HOST_CONVERSIONS = frozenset({"torch.as_tensor", "torch.tensor", "torch.from_numpy", "torch.FloatTensor", "torch.LongTensor"})
_HOST_TENSORS = _SHAPE_FACTORIES | _HOST_CONVERSIONS
#: words in a helper's name or arguments that say it moves a batch
_MOVING_WORDS = ("device", "cuda", "gpu", "move", "to_", "transfer")
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Power, cst.MatrixMultiply)


class _Root:
    """What a batch tensor is, as the fix must move it: a name the loop
    unpacks (``x``), a key of a whole batch (``batch["input_ids"]``), moved
    at the top of the loop body, or an index of one (``batch[0]``: a tuple
    cannot take an item assignment), moved where it is read."""

    def __init__(self, key: str, kind: str, node: cst.CSTNode, base: str) -> None:
        self.key = key
        self.kind = kind  # "name", "key", "index", "attr" (a batch object's field) or "host" (built on the CPU)
        self.node = node
        self.base = base  # the loop's name it comes from


class _Found:
    def __init__(self, root: _Root, node: cst.CSTNode, model: str, placement: Placement, as_input: bool) -> None:
        self.root = root
        self.item = root.key
        self.node = node
        self.model = model
        self.placement = placement
        self.as_input = as_input
        #: ``x.to(device)`` as a statement before the use: its result was thrown away
        self.discarded: Optional[cst.Expr] = None


class InputsNotMoved(Rule):
    code = "DL011"
    requires = (Training,)
    name = "inputs-not-moved"
    message = "`{item}` from `{loader}` is passed to `{model}`, which was moved to {device}, but `{item}` itself is never moved"
    target_message = "`{item}` from `{loader}` meets the output of `{model}` (on {device}) but is never moved there"
    host_message = "`{item}` is built on the CPU (no `device=`) and passed to `{model}`, which was moved to {device}"
    fix_safety = "safe/unsafe"
    tokens = (".to(", ".cuda(")

    VALID = [
        Valid(
            """
import torch
from torch.utils.data import DataLoader

def run(model, dataset, device):
    model = model.to(device)
    loader = DataLoader(dataset, batch_size=8)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
"""
        ),
        Valid(
            """
import torch
from torch.utils.data import DataLoader

def evaluate(model, loader):
    # the model was never moved: CPU inputs are right
    for images, labels in loader:
        correct = (model(images).argmax(1) == labels).sum()
"""
        ),
        Valid(
            """
import torch

def train(model, train_loader, device):
    model.to(device)
    for batch in train_loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        out = model(**batch)
    for step, batch in enumerate(train_loader):
        inputs = batch["x"].to(device)
        out = model(inputs)
"""
        ),
        Valid(
            """
import torch
from torch.utils.data import DataLoader

def train(model, ds, device):
    model.cuda()
    loader = DataLoader(ds, collate_fn=lambda b: [t.cuda() for t in b])
    for x, y in loader:
        out = model(x)
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
from torch.utils.data import DataLoader

def train(model, dataset, device):
    model = model.to(device)
    loader = DataLoader(dataset, batch_size=8)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
""",
            """
import torch
from torch.utils.data import DataLoader

def train(model, dataset, device):
    model = model.to(device)
    loader = DataLoader(dataset, batch_size=8)
    for x, y in loader:
        x = x.to(device)
        y = y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
""",
            count=2,
        ),
        Invalid(
            """
import torch

def evaluate(model, eval_loader, device):
    model.to(device)
    for batch in eval_loader:
        preds = model(batch["input_ids"]).argmax(-1)
        acc = (preds == batch["labels"]).float().mean()
""",
            """
import torch

def evaluate(model, eval_loader, device):
    model.to(device)
    for batch in eval_loader:
        batch["input_ids"] = batch["input_ids"].to(device)
        batch["labels"] = batch["labels"].to(device)
        preds = model(batch["input_ids"]).argmax(-1)
        acc = (preds == batch["labels"]).float().mean()
""",
            count=2,
        ),
        Invalid(
            """
import torch
import torch.nn as nn

class Trainer:
    def __init__(self, model, train_loader, gpu):
        self.gpu = gpu
        self.model = nn.DataParallel(model.cuda(self.gpu))
        self.train_loader = train_loader

    def epoch(self):
        for i, (images, target) in enumerate(self.train_loader):
            output = self.model(images)
            _, pred = output.max(1)
            acc = pred.eq(target).float().mean()
""",
            """
import torch
import torch.nn as nn

class Trainer:
    def __init__(self, model, train_loader, gpu):
        self.gpu = gpu
        self.model = nn.DataParallel(model.cuda(self.gpu))
        self.train_loader = train_loader

    def epoch(self):
        for i, (images, target) in enumerate(self.train_loader):
            target = target.cuda(self.gpu)
            output = self.model(images)
            _, pred = output.max(1)
            acc = pred.eq(target).float().mean()
""",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self.scopes = ScopeStack()
        #: scope -> models (``model``, ``self.net``) seen moved so far, in source order
        self._moved_so_far: Dict[str, Set[str]] = {}
        #: loops around the node being visited
        self._loops = 0
        #: the file imports a DataLoader or tqdm (None: not looked yet)
        self._loader_file: Optional[bool] = None
        #: scope -> names bound in a loop to a tensor built on the CPU
        #: (``state = torch.as_tensor(obs)``) -> the building call
        self._host_names: Dict[str, Dict[str, cst.Call]] = {}
        #: scope -> names bound in a loop -> the value last bound
        self._loop_values: Dict[str, Dict[str, cst.BaseExpression]] = {}

    # -- which loops may iterate a loader (before building the script facts) --
    def _may_be_loader(self, it: cst.BaseExpression) -> bool:
        """Cheap: the file imports a data loader or a progress bar, or the
        iterable names something loader-like (``train_loader``,
        ``DataLoader(...)``). The script facts, a walk of their own, are only
        built for such loops."""
        if self._loader_file is None:
            self._loader_file = any(
                t.rsplit(".", 1)[-1] == "DataLoader" or t.startswith(("torch.utils.data", "tqdm"))
                for targets in self.facts.imports.values()
                for t in targets
            )
        if self._loader_file:
            return True
        while isinstance(it, cst.Call):
            name = dotted_name(it.func) or ""
            if name.rsplit(".", 1)[-1] in ("DataLoader", "DataLoader2"):
                return True
            parts = [a.value for a in it.args if not a.star]
            if name == "zip":
                return any(self._may_be_loader(p) for p in parts)
            if not parts:
                return False
            it = parts[0]  # enumerate(...), iter(...), tqdm(...)
        if isinstance(it, cst.Subscript):
            it = it.value
        name = dotted_name(it)
        return name is not None and looks_like_loader(name)

    # -- models moved so far (a CPU tensor is only a bug after the move) -----
    def _note_moved(self, ref: str) -> None:
        scope = self.scopes.name
        if ref.startswith("self."):
            s = self.training.scopes.get(scope)
            scope = s.class_scope if s is not None and s.class_scope else scope
        self._moved_so_far.setdefault(scope, set()).add(ref)

    def moved_before(self, ref: str) -> bool:
        scope = self.scopes.name
        if ref in self._moved_so_far.get(scope, ()):
            return True
        s = self.training.scopes.get(scope)
        if ref.startswith("self.") and s is not None and s.class_scope:
            return ref in self._moved_so_far.get(s.class_scope, ())
        if s is not None and s.kind == "function" and "." not in ref and ref not in s.params and ref not in s.bound:
            return ref in self._moved_so_far.get(MODULE_SCOPE, ())
        return False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda") and placement_of(self.facts, node) is not None:
            ref = ref_of(func.value, self._self_name())
            if ref is not None:
                self._note_moved(ref)  # model.to(device)
            return
        if self._loops:
            self._host_inputs(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        value = moved_part(self.facts, node.value)
        moves = placement_of(self.facts, value) is not None or (
            isinstance(value, cst.Call) and (self.facts.qualify(value.func) or "") in _MOVING_CALLS
        )
        if moves:
            for t in node.targets:
                ref = ref_of(t.target, self._self_name())
                if ref is not None:
                    self._note_moved(ref)  # model = Net().to(device), ema = copy.deepcopy(model)
        if not self._loops:
            return
        hosts = self._host_names.setdefault(self.scopes.name, {})
        values = self._loop_values.setdefault(self.scopes.name, {})
        built = self._host_call(node.value)
        for t in node.targets:
            for name in _bound_names(t.target):
                hosts.pop(name, None)
                values.pop(name, None)
                if isinstance(t.target, cst.Name):
                    values[name] = node.value
                    if built is not None:
                        hosts[name] = built

    # -- tensors a loop builds on the CPU (torch.as_tensor(obs), torch.randn(...)) --
    def _host_call(self, value: cst.BaseExpression) -> Optional[cst.Call]:
        """The call building ``value`` on the CPU, looking through methods that
        keep the device (``torch.as_tensor(obs).float().unsqueeze(0)``)."""
        value = _strip_keeps_device(value)
        if not isinstance(value, cst.Call):
            return None
        q = self.facts.qualify(value.func)
        if q is None or keyword_arg(value, "device") is not None or any(a.star for a in value.args):
            return None
        if q in _SHAPE_FACTORIES:
            return value if value.args else None
        if q in _HOST_CONVERSIONS:
            args = positional_args(value)
            if not args or is_number_literal(args[0].value):
                return None  # torch.tensor(0.99): a 0-dim number mixes with CUDA tensors
            data = args[0].value
            bound = self._loop_values.get(self.scopes.name, {}).get(data.value) if isinstance(data, cst.Name) else None
            if bound is not None and _calls_a_model(self, bound):
                return None  # a model output is already on the device
            return value
        return None

    def _host_inputs(self, call: cst.Call) -> None:
        """A moved model called in a loop with a tensor the loop built on the CPU."""
        ref = ref_of(call.func, self._self_name())
        if ref is None:
            return
        hosts = self._host_names.get(self.scopes.name, {})
        built_args = []
        for a in call.args:
            if a.star:
                continue
            value = _strip_keeps_device(a.value)
            built = hosts.get(value.value) if isinstance(value, cst.Name) else self._host_call(value)
            if built is not None:
                built_args.append((value, built))
        if not built_args:
            return  # (the facts below are only built when needed)
        p = lookup_scoped(self.training, self.scopes.name, ref, "placements")
        if not isinstance(p, Placement) or placed_on_cpu(self.training, self.scopes.name, p) or not self.moved_before(ref):
            return  # not moved, or not yet: a CPU dry run before the move
        w = lookup_scoped(self.training, self.scopes.name, ref, "wrapped")
        if isinstance(w, WrapFacts) and w.moves_inputs:
            return
        for value, built in built_args:
            self._report(None, "", _Found(_Root(code_of(built), "host", built, ""), value, ref, p, True), -1)

    @classmethod
    def candidate(cls, scan) -> bool:
        # nothing is moved to a device: no model can be on one
        if not any(call.attr in ("to", "cuda") for call in scan.calls):
            return False
        # a for loop over something named like a loader, or any for loop in a
        # file that builds a DataLoader (loaders travel through parameters)
        if any(looks_like_loader(name) for name in scan.loops if name):
            return True
        # pbar = tqdm(train_loader); for batch in pbar
        if any(scan.call_bound.get(name, set()) & ITER_WRAPPERS for name in scan.loops if name):
            return True
        # it = iter(train_loader); while True: x, y = next(it)
        takes_next = any(call.func == "next" for call in scan.calls)
        if takes_next and any("iter" in callees for callees in scan.call_bound.values()):
            return True
        # a script (outside any class) building tensors on the CPU and moving
        # something: an RL loop's torch.as_tensor(obs), a benchmark's torch.randn(...)
        if any(
            call.cls is None and not call.moved and "device" not in call.keywords and scan.refers_to(call.func, _HOST_TENSORS)
            for call in scan.calls
        ) and any(call.attr in ("to", "cuda") and call.cls is None for call in scan.calls):
            return True
        # a file that builds a DataLoader: loops, comprehensions and next() over it
        return any(
            (call.func or "").rsplit(".", 1)[-1] == "DataLoader" or scan.refers_to(call.func, DATA_LOADERS)
            for call in scan.calls
        )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scopes.push(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.push(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def _self_name(self) -> str:
        return self.context.self_name if self.context.current_method is not None else "self"

    def visit_For(self, node: cst.For) -> None:
        self._loops += 1
        loop = loader_loop(self.training, self.scopes.name, node, self._self_name()) if self._may_be_loader(node.iter) else None
        if loop is None:
            self._next_loop(node)  # for step in range(n): x, y = next(it)
            return
        items = [] if loop.whole_batch else list(loop.items)
        self._walk_loop(node, loop.loader, items, list(loop.batches), dict(loop.loader_of), 0)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._comprehension(node, [node.elt])

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._comprehension(node, [node.elt])

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._comprehension(node, [node.elt])

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._comprehension(node, [node.key, node.value])

    def _comprehension(self, node: cst.BaseComp, parts: List[cst.BaseExpression]) -> None:
        """``[model(x).argmax(1) for x, _ in loader]``: batch items fed to the
        model inside one comprehension over a loader."""
        comp = node.for_in
        if comp.inner_for_in is not None or comp.asynchronous is not None:
            return
        if not self._may_be_loader(comp.iter):
            return
        loop = loader_loop(self.training, self.scopes.name, comp, self._self_name())  # type: ignore[arg-type]
        if loop is None:
            return
        walker = _LoopWalker(self, self.scopes.name, set() if loop.whole_batch else set(loop.items), set(loop.batches))
        for cond in comp.ifs:
            walker._expression(cond.test)
        for part in parts:
            walker._expression(part)
        for found in walker.found:
            self._report(None, loop.loader_of.get(found.root.base, loop.loader), found, -1)

    def visit_While(self, node: cst.While) -> None:
        self._loops += 1
        self._next_loop(node)

    def leave_While(self, original_node: cst.While) -> None:
        self._loops -= 1

    def leave_For(self, original_node: cst.For) -> None:
        self._loops -= 1

    def _next_loop(self, node: cst.CSTNode) -> None:
        """A loop that takes its batches with ``next()`` from an iterator over a
        loader (``it = iter(loader)``; ``while True: x, y = next(it)``), near the
        top of its body, possibly in a ``try`` that restarts the iterator."""
        body = list(statements(node))
        for i, stmt in enumerate(body[:4]):
            got = self._next_batch(stmt)
            if got is None:
                continue
            target, loader = got
            if isinstance(target, cst.Name):
                items, batches = [], [target.value]
            else:
                items = _bound_names(target)
                batches = []
            if items or batches:
                self._walk_loop(node, loader, items, batches, {n: loader for n in items + batches}, i + 1)
            return

    def _next_batch(self, stmt: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, str]]:
        """``x, y = next(it)`` with ``it`` iterating a loader: (target, loader)."""
        if isinstance(stmt, cst.Try):
            for inner in statements(stmt)[:2]:
                got = self._next_batch(inner)
                if got is not None:
                    return got
            return None
        if not (isinstance(stmt, LINES) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
            return None
        assign = stmt.body[0]
        value = assign.value
        if len(assign.targets) != 1 or not (
            isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "next"
            and self.facts.qualify_dotted("next") is None and value.args and not value.args[0].star
        ):
            return None
        target = assign.targets[0].target
        if not isinstance(target, (cst.Name, cst.Tuple, cst.List)):
            return None
        if not self._may_be_loader(value.args[0].value):
            return None
        loader = next_loader(self.training, self.scopes.name, value.args[0].value, self._self_name())
        return (target, loader) if loader is not None else None

    def _walk_loop(self, node: cst.CSTNode, loader: str, items: List[str], batches: List[str],
                   loader_of: Dict[str, str], start: int) -> None:
        """Walk the loop body from statement ``start`` (where the batch is
        bound), ``items`` and ``batches`` being what the loop binds."""
        body = list(statements(node))
        unpack_at = start - 1
        unpacks: Set[int] = set()
        # for batch in loader: x, y = batch
        for i in range(start, min(start + 3, len(body))):
            stmt = body[i]
            for batch in list(batches):
                names = _unpacked_from(stmt, batch)
                if names:
                    items.extend(names)
                    batches.remove(batch)
                    loader_of.update({n: loader_of.get(batch, loader) for n in names})
                    unpacks.add(i)
                    unpack_at = i
        if not items and not batches:
            return
        walker = _LoopWalker(self, self.scopes.name, set(items), set(batches))
        for i, stmt in enumerate(body):
            if i < start or i in unpacks:
                continue
            walker.statement(stmt)
        for found in walker.found:
            self._report(node, loader_of.get(found.root.base, loader), found, unpack_at)

    def _report(self, loop_node: Optional[cst.CSTNode], loader: str, found: _Found, unpack_at: int) -> None:
        """Report ``found``; the fix moves it at the top of ``loop_node``'s body,
        or where it is read when there is no body (``loop_node`` None: a
        comprehension)."""
        p = found.placement
        device = f"`{p.device}`" if p.device else "the GPU"
        if found.root.kind == "host":
            template = self.host_message
            item = found.node.value if isinstance(found.node, cst.Name) else found.item
        else:
            template = self.message if found.as_input else self.target_message
            item = found.item
        message = template.format(item=item, loader=loader, model=found.model, device=device)
        if isinstance(found.node, cst.Name) and found.node.value != found.root.key and found.root.kind != "host":
            # noise = torch.randn_like(x0): "`x0` (as `noise`) from `loader` ..."
            message = message.replace(f"`{found.item}` from", f"`{found.item}` (as `{found.node.value}`) from", 1)
        if found.discarded is not None:
            message += f"; `{code_of(found.discarded.value)}` returns a moved copy, and it is thrown away"
        if not p.known:
            self.report(found.node, message, no_fix_reason=f"the device `{found.model}` was moved to has no name in this function")
            return
        if p.conditional and cuda_index(p.device, p.how) is not None:
            # if use_cuda: model.cuda() -- an unconditional .cuda() would break the CPU runs
            self.report(found.node, message, no_fix_reason=f"`{found.model}` moves to the GPU only under a condition; move the batch under the same one")
            return
        call = f"cuda({p.device})" if p.how == "cuda" else f"to({p.device})"
        root = found.root
        if root.kind == "host":
            # torch.as_tensor(obs) -> torch.as_tensor(obs, device=device)
            dev = p.device or '"cuda"'
            built = root.node.with_changes(args=with_keyword_arg(root.node.args, "device", cst.parse_expression(dev)))  # type: ignore[attr-defined]
            self.report(found.node, message, fix=self.replace(root.node, built, f"build `{found.item}` with `device={dev}`"))
            return
        if root.kind == "index" or loop_node is None:
            # an index where the batch is read (a = batch[0] moves every use of a);
            # in a comprehension, the use itself
            at = root.node if root.kind == "index" else found.node
            moved = cst.parse_expression(f"_.{call}")
            moved = moved.with_changes(func=moved.func.with_changes(value=at))  # type: ignore[attr-defined]
            safety = FixSafety.UNSAFE if root.kind == "attr" else FixSafety.SAFE  # a field may be no tensor
            self.report(found.node, message, fix=self.replace(at, moved, f"move `{found.item}` with `.{call}` where it is read", safety))
            return
        if found.discarded is not None:
            # x.to(device) -> x = x.to(device), keeping the user's own call
            bound = cst.Assign(targets=[cst.AssignTarget(target=cst.Name(found.item))], value=found.discarded.value)
            self.report(found.node, message, fix=self.replace(found.discarded, bound, f"keep the moved copy: `{found.item} = {code_of(found.discarded.value)}`"))
            return
        moved_name = root.base if root.kind == "attr" else found.item
        if not isinstance(loop_node.body, cst.IndentedBlock):
            # for x, y in loader: out = model(x) -- no line to insert the move on
            self.report(found.node, message, no_fix_reason=f"the loop's body is on one line; move `{moved_name}` with `.{call}` at its top")
            return
        move = cst.parse_statement(f"{moved_name} = {moved_name}.{call}\n")
        body = list(loop_node.body.body)
        at = unpack_at + 1
        while at < len(body) and _is_leading_move(body[at]):
            at += 1
        body.insert(at, move)
        new_block = loop_node.body.with_changes(body=body)
        if root.kind == "attr":
            # a PyG Data / BatchEncoding moves with .to(); a namedtuple batch has no .to()
            fix = self.replace(
                loop_node.body, new_block, f"move the whole batch `{moved_name}` with `.{call}` at the top of the loop (it must have a `.to()`)", FixSafety.UNSAFE
            )
        else:
            fix = self.replace(loop_node.body, new_block, f"move `{found.item}` with `.{call}` at the top of the loop")
        self.report(found.node, message, fix=fix)


def _unpacked_from(stmt: cst.CSTNode, batch: str) -> List[str]:
    """``x, y = batch`` -> [x, y]."""
    if not (isinstance(stmt, LINES) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return []
    assign = stmt.body[0]
    if len(assign.targets) != 1 or not (isinstance(assign.value, cst.Name) and assign.value.value == batch):
        return []
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return []
    return [e.value.value for e in target.elements if isinstance(e, cst.Element) and isinstance(e.value, cst.Name)]


#: builtins and methods that show or collect values without combining tensors
_REPORTING_CALLS = frozenset({"print", "len", "str", "repr", "format", "isinstance", "id", "type", "zip", "list", "tuple"})
_REPORTING_METHODS = frozenset(
    {"append", "extend", "insert", "info", "debug", "warning", "warn", "error", "write", "set_postfix", "set_description", "format"}
)


def _only_reports(call: cst.Call) -> bool:
    """``print(y, out.shape)``, ``log.info("%s", out, y)``, ``rows.append(...)``:
    the batch item and the output are shown or stored, not combined."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in _REPORTING_CALLS
    return isinstance(func, cst.Attribute) and func.attr.value in _REPORTING_METHODS


def _device_argument(arg: cst.Arg) -> str:
    """The text of an argument that may hand a device to a helper: its
    keyword, a name or attribute (``device``, ``args.gpu``), a string, or a
    ``torch.device(...)`` call; "" for other expressions."""
    value = arg.value
    words = [arg.keyword.value] if arg.keyword is not None else []
    dotted = dotted_name(value)
    if dotted is not None or isinstance(value, cst.SimpleString):
        words.append(code_of(value))
    elif isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("device"):
        words.append(code_of(value))
    return " ".join(words)


_LENGTH_WORDS = frozenset({"len", "lens", "length", "lengths", "seqlen", "seqlens"})


def _is_lengths(key: str) -> bool:
    """``lengths``, ``src_lens``, ``batch["seq_len"]``: sequence lengths, which
    ``pack_padded_sequence`` wants on the CPU (and ``CTCLoss`` accepts there)."""
    words = "".join(c if c.isalnum() else "_" for c in key.lower()).split("_")
    return any(w in _LENGTH_WORDS for w in words)


def _constant_key(node: cst.Subscript) -> str:
    """``"key"`` for ``batch["x"]``, ``"index"`` for ``batch[0]``, else ""."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return ""
    value = node.slice[0].slice.value
    if isinstance(value, cst.SimpleString):
        return "key"
    if isinstance(value, cst.Integer) or (
        isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) and isinstance(value.expression, cst.Integer)
    ):
        return "index"
    return ""


def _calls_a_model(rule: "InputsNotMoved", node: cst.CSTNode) -> bool:
    """``node`` is a moved model's output: ``model(x)``, ``model(x).logits``,
    ``model(x)[0]``, ``model(x).max(1)``, ``model(x) * 0.5``."""
    while True:
        if isinstance(node, cst.BinaryOperation):
            return _calls_a_model(rule, node.left) or _calls_a_model(rule, node.right)
        if isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        elif isinstance(node, cst.Call):
            ref = ref_of(node.func, rule._self_name())
            if ref is not None:
                return isinstance(lookup_scoped(rule.training, rule.scopes.name, ref, "placements"), Placement)
            if not isinstance(node.func, cst.Attribute):
                return False
            node = node.func.value
        else:
            return False


def _strip_keeps_device(value: cst.BaseExpression) -> cst.BaseExpression:
    """``torch.as_tensor(obs).float().unsqueeze(0)`` -> ``torch.as_tensor(obs)``:
    through the methods that keep the device."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _KEEPS_DEVICE:
        value = value.func.value
    return value


#: the count and size fields of a batch object, plain numbers (``data.num_graphs``)
_NUMBER_FIELDS = frozenset({"shape", "device", "dtype", "ndim"})


def _is_field(attr: str) -> bool:
    """A tensor field of a batch object, not a count (``num_graphs``, ``batch_size``)."""
    return attr not in _NUMBER_FIELDS and not attr.startswith(("num_", "n_")) and not attr.endswith(("_size", "_count"))


def _is_like_factory(facts, call: cst.Call) -> bool:
    """``torch.randn_like(x)``, ``torch.zeros_like(x)``: a new tensor where ``x`` is
    (unless given a ``device=``)."""
    q = facts.qualify(call.func) or ""
    return (
        q.startswith("torch.")
        and q.endswith("_like")
        and bool(positional_args(call))
        and keyword_arg(call, "device") is None
        and not any(a.star for a in call.args)
    )


def _is_leading_move(stmt: cst.CSTNode) -> bool:
    """``x = x.to(device)`` / ``x, y = x.cuda(), y.cuda()``."""
    if not (isinstance(stmt, LINES) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return False
    value = stmt.body[0].value
    values = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    return all(
        isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in ("to", "cuda")
        for v in values
    )


class _LoopWalker:
    """Walks a loop body in order: what was moved or re-bound, which names
    hold the model's output, where batch items meet the model or its output."""

    def __init__(self, rule: InputsNotMoved, scope: str, items: Set[str], batches: Set[str]) -> None:
        self.rule = rule
        self.facts = rule.facts
        self.training = rule.training
        self.scope = scope
        self.self_name = rule._self_name()
        self.items = items
        #: whole batches, read by constant keys (``batch["input_ids"]``, ``batch[0]``)
        self.batches = batches
        #: names bound in the body to a batch tensor still where the loader
        #: left it (``x = batch["x"]``, ``y = y.long()``)
        self.aliases: Dict[str, _Root] = {}
        self.moved: Set[str] = set()
        self.outputs: Dict[str, Tuple[str, Placement]] = {}
        self.found: List[_Found] = []
        self._reported: Set[str] = set()
        #: ``x.to(device)`` / ``x.cuda()`` as statements on a batch tensor:
        #: ``Tensor.to`` returns a copy, the name still holds the CPU tensor
        self.discarded: Dict[str, cst.Expr] = {}

    # -- models ----------------------------------------------------------
    def _model(self, call: cst.Call) -> Optional[Tuple[str, Placement, Optional[WrapFacts]]]:
        ref = ref_of(call.func, self.self_name)
        if ref is None:
            return None
        p = lookup_scoped(self.training, self.scope, ref, "placements")
        if not isinstance(p, Placement) or placed_on_cpu(self.training, self.scope, p):
            return None
        w = lookup_scoped(self.training, self.scope, ref, "wrapped")
        return ref, p, w if isinstance(w, WrapFacts) else None

    def _is_ctc(self, call: cst.Call) -> bool:
        """``F.ctc_loss(...)`` or a name bound to ``nn.CTCLoss()``: it takes CPU
        targets and lengths beside CUDA log-probabilities."""
        if self.facts.qualify(call.func) in CTC_LOSSES:
            return True
        ref = ref_of(call.func, self.self_name)
        return ref is not None and bool(lookup_scoped(self.training, self.scope, ref, "ctc_losses"))

    def _device_source(self, node: cst.CSTNode) -> Optional[Tuple[str, Placement]]:
        """The model whose output this expression carries on the device, if any."""
        if isinstance(node, cst.Name):
            return self.outputs.get(node.value)
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _TO_HOST:
                return None
            if isinstance(func, cst.Attribute) and func.attr.value == "to" and node.args:
                if "cpu" in code_of(node.args[0].value):
                    return None
            m = self._model(node)
            if m is not None:
                return m[0], m[1]
        if isinstance(node, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            return None
        for child in node.children:
            src = self._device_source(child)
            if src is not None:
                return src
        return None

    # -- batch items -----------------------------------------------------
    def _item_of(self, node: cst.CSTNode) -> Optional[Tuple[_Root, cst.CSTNode]]:
        """The batch tensor an expression still is (``y``, ``y.view(-1)``,
        ``y[:, 0]``, ``batch["labels"]``), and the node that names it."""
        while True:
            if isinstance(node, cst.Name):
                name = node.value
                if name in self.moved:
                    return None
                if name in self.aliases:
                    return self.aliases[name], node
                return (_Root(name, "name", node, name), node) if name in self.items else None
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "to"
                and not any(a.star for a in node.args)
                and placement_of(self.facts, node) is None
            ):
                node = node.func.value  # x.to(torch.float32), x.to(memory_format=...): no device move
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _KEEPS_DEVICE:
                if node.func.attr.value == "type" and any("cuda" in code_of(a.value) for a in node.args):
                    return None  # y.type(torch.cuda.LongTensor) moves
                node = node.func.value
            elif isinstance(node, cst.Subscript):
                base = node.value
                if isinstance(base, cst.Name) and base.value in self.batches:
                    if base.value in self.moved or base.value in self.aliases:
                        return None
                    kind = _constant_key(node)
                    key = code_of(node)
                    return (_Root(key, kind, node, base.value), node) if kind and key not in self.moved else None
                node = base
            elif isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value in self.batches:
                # data.x, data.edge_index: a field of a whole batch object (PyG Data, BatchEncoding)
                base = node.value.value
                if base in self.moved or base in self.aliases or not _is_field(node.attr.value):
                    return None
                return _Root(code_of(node), "attr", node, base), node
            elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
                # x * 2 - 1, x / 255.0: arithmetic with a number keeps the device
                if is_number_literal(node.right):
                    node = node.left
                elif is_number_literal(node.left):
                    node = node.right
                else:
                    return None
            elif isinstance(node, cst.Call) and _is_like_factory(self.facts, node):
                node = positional_args(node)[0].value  # torch.randn_like(x): where x is
            else:
                return None

    def _flag(self, hit: Tuple[_Root, cst.CSTNode], model: str, placement: Placement, as_input: bool) -> None:
        root, node = hit
        if _is_lengths(root.key) or (isinstance(node, cst.Name) and _is_lengths(node.value)):
            return  # sequence lengths stay on the CPU (pack_padded_sequence, CTCLoss)
        # an index is moved where it is read: each read is its own finding;
        # the fields of a batch object are moved together (data = data.to(device))
        key = f"{root.key}@{id(root.node)}" if root.kind == "index" else (f"{root.base}." if root.kind == "attr" else root.key)
        if key in self._reported:
            return
        self._reported.add(key)
        found = _Found(root, node, model, placement, as_input)
        if root.kind == "name":
            found.discarded = self.discarded.get(root.key)
        self.found.append(found)

    # -- statements ------------------------------------------------------
    def statement(self, stmt: cst.CSTNode) -> None:
        if isinstance(stmt, LINES):
            for small in stmt.body:
                self._simple(small)
            return
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return
        # compound statement: its header expressions, then its blocks in order
        for header in _headers(stmt):
            self._expression(header)
        if isinstance(stmt, (cst.For,)):
            self._rebind(stmt.target)
        if isinstance(stmt, cst.With):
            for item in stmt.items:
                if item.asname is not None:
                    self._rebind(item.asname.name)
        for block in blocks(stmt):
            for inner in block:
                self.statement(inner)

    def _simple(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, cst.Expr) and self._discards_move(small):
            return
        self._note_moves(small)
        self._expression(small)
        if isinstance(small, cst.Assign):
            value = small.value
            targets = [t.target for t in small.targets]
            if (
                len(targets) == 1
                and isinstance(targets[0], (cst.Tuple, cst.List))
                and isinstance(value, (cst.Tuple, cst.List))
                and len(targets[0].elements) == len(value.elements)
            ):
                # x, y = batch["x"], batch["y"]: element by element
                pairs = [(e.value, v.value) for e, v in zip(targets[0].elements, value.elements)]
                hits = [(t, self._device_source(v), self._item_of(v)) for t, v in pairs]
                for t, src, hit in hits:
                    self._assign(t, src, hit)
                return
            src = self._device_source(value)
            hit = self._item_of(value)
            for t in targets:
                self._assign(t, src, hit)
        elif isinstance(small, cst.AnnAssign):
            value = small.value
            self._assign(small.target, self._device_source(value) if value is not None else None, self._item_of(value) if value is not None else None)
        elif isinstance(small, cst.AugAssign):
            self._rebind(small.target)

    def _discards_move(self, stmt: cst.Expr) -> bool:
        """``x.to(device)`` alone on a line, ``x`` a tensor the loop unpacked:
        ``Tensor.to``/``.cuda()`` return a moved copy and leave ``x`` where it
        was. (A whole batch is left alone: a PyG ``Data`` or a ``BatchEncoding``
        moves in place.)"""
        call = stmt.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)):
            return False
        name = call.func.value.value
        if call.func.attr.value not in ("to", "cuda") or name not in self.items or name in self.moved or name in self.aliases:
            return False
        if call.func.attr.value == "to" and placement_of(self.facts, call) is None:
            return False
        self.discarded.setdefault(name, stmt)
        return True

    def _assign(self, target: cst.BaseExpression, src: Optional[Tuple[str, Placement]], hit: Optional[Tuple[_Root, cst.CSTNode]] = None) -> None:
        for name in _bound_names(target):
            if src is not None:
                self.outputs[name] = src
            else:
                self.outputs.pop(name, None)
            if hit is not None and isinstance(target, cst.Name):
                # still the loader's tensor under a new name (x = batch["x"], y = y.long())
                self.aliases[name] = hit[0]
                self.moved.discard(name)
                continue
            self.aliases.pop(name, None)
            if name in self.items or name in self.batches:
                self.moved.add(name)
        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            if target.value.value in self.batches and _constant_key(target):
                self.moved.add(code_of(target))  # batch["x"] = ...: that key replaced
            else:
                self.moved.add(target.value.value)  # batch[k] = ...: moved in place

    def _rebind(self, target: cst.CSTNode) -> None:
        for name in _bound_names(target):
            self.moved.add(name)
            self.aliases.pop(name, None)
            self.outputs.pop(name, None)

    def _note_moves(self, node: cst.CSTNode) -> None:
        walker = self

        class V(cst.CSTVisitor):
            def visit_Call(self, call: cst.Call) -> None:
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda", "pin_memory") and isinstance(func.value, cst.Name):
                    if func.attr.value == "to" and not any(a.star for a in call.args) and placement_of(walker.facts, call) is None:
                        return  # x.to(torch.float32): a dtype, not a device
                    walker.moved.add(func.value.value)
                    return
                tracked = walker.items | walker.batches | set(walker.aliases)
                names = [a.value.value for a in call.args if isinstance(a.value, cst.Name) and a.value.value in tracked]
                if not names:
                    return
                fname = (dotted_name(func) or "").lower()
                # a device handed to the helper (``device``, ``args.gpu``, ``"cuda"``,
                # ``device=...``), not any argument whose code mentions one
                # (``criterion(model(x.to(device)), y)`` moves nothing of ``y``)
                others = " ".join(_device_argument(a) for a in call.args).lower()
                if any(w in fname for w in _MOVING_WORDS) or any(w in others for w in _MOVING_WORDS):
                    walker.moved.update(names)

            def visit_NamedExpr(self, n: cst.NamedExpr) -> None:
                walker._rebind(n.target)

            def visit_Lambda(self, n: cst.Lambda) -> bool:
                return False

        walk(node, V())

    def _expression(self, node: cst.CSTNode) -> None:
        walker = self

        class V(cst.CSTVisitor):
            def visit_Lambda(self, n: cst.Lambda) -> bool:
                return False

            def visit_Call(self, call: cst.Call) -> None:
                m = walker._model(call)
                if m is not None:
                    ref, placement, wrap = m
                    if wrap is None or not wrap.moves_inputs:
                        for a in call.args:
                            if a.star:
                                continue
                            # x, batch["x"], x[:, :-1], x.view(-1, 784), x.half(): still the loader's tensor
                            hit = walker._item_of(a.value)
                            if hit is not None:
                                walker._flag(hit, ref, placement, True)
                    return
                # a call mixing the model's output with a batch item
                if _only_reports(call) or walker._is_ctc(call):
                    return
                src = None
                if isinstance(call.func, cst.Attribute):
                    src = walker._device_source(call.func.value)
                args = [a for a in call.args if not a.star]
                if src is None:
                    for a in args:
                        src = walker._device_source(a.value)
                        if src is not None:
                            break
                if src is None:
                    return
                for a in args:
                    hit = walker._item_of(a.value)
                    if hit is not None:
                        walker._flag(hit, src[0], src[1], False)

            def visit_Comparison(self, comp: cst.Comparison) -> None:
                sides = [comp.left] + [t.comparator for t in comp.comparisons]
                if any(isinstance(t.operator, (cst.In, cst.NotIn, cst.Is, cst.IsNot)) for t in comp.comparisons):
                    return
                walker._mix(sides)

            def visit_BinaryOperation(self, op: cst.BinaryOperation) -> None:
                if isinstance(op.operator, _ARITHMETIC):
                    walker._mix([op.left, op.right])

        walk(node, V())

    def _mix(self, sides: List[cst.BaseExpression]) -> None:
        src = next((s for s in (self._device_source(x) for x in sides) if s is not None), None)
        if src is None:
            return
        for x in sides:
            hit = self._item_of(x)
            if hit is not None:
                self._flag(hit, src[0], src[1], False)


def _bound_names(target: cst.CSTNode) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: List[str] = []
        for e in target.elements:
            out.extend(_bound_names(e.value))
        return out
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return []


def _headers(stmt: cst.CSTNode) -> List[cst.CSTNode]:
    if isinstance(stmt, cst.If):
        return [stmt.test]
    if isinstance(stmt, cst.While):
        return [stmt.test]
    if isinstance(stmt, cst.For):
        return [stmt.iter]
    if isinstance(stmt, cst.With):
        return [item.item for item in stmt.items]
    return []


