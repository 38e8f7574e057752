"""DL011 inputs-not-moved

## What it does
Flags a training or evaluation loop over a data loader that feeds batch
tensors to a model moved with `.to(device)`/`.cuda()` without moving the
tensors: inputs passed to the model, and targets that meet the model's output
(`criterion(out, y)`, `pred == y`, `out.eq(y)`). Batch tensors are the names
the loop unpacks (`for x, y in loader`, `for (xs, ys), (xt, _) in zip(a, b)`,
`for i, batch in enumerate(pbar)` with `pbar = tqdm(loader)`,
`for x, y in DataLoader(ds)`, `for x, y in make_loader(cfg)` with a
function of the file, or in a project run of another module, that returns
a `DataLoader` leaving its batches on the CPU, `[model(x) for x, _ in loader]`: a
comprehension's finding is moved where it is read), or that a loop takes
with `next()` from an
iterator over a loader (`it = iter(loader)`; `while True: x, y = next(it)`,
also inside a `try` that restarts the iterator), the fields of a whole batch
read by a constant key (`batch["input_ids"]`, `batch[0]`) or as attributes
(`data.x`, `data.edge_index` of a PyG `Batch`), and names bound to one of
these in the loop without a move (`labels = batch["labels"]`, `masks =
masks.squeeze(1).long()`, `x0 = x0 * 2 - 1`, `noise = torch.randn_like(x0)`).
A sample read from a dataset of host data, outside any loop, counts as a
batch item too (`pred = model(test_data[0][0])`, `img, label =
test_set[0]; model(img[None])`): a `torchvision`, `torchaudio` or
`torchtext` dataset, read from disk, or a `torch.utils.data.Dataset` class
of the file that puts nothing on a device (its `__getitem__` runs where the
loader's workers do); the fix moves it where it is read.
Any code after the move (an RL episode, a benchmark, a single prediction)
also counts a tensor it builds on the CPU and feeds to the model: `torch.as_tensor(obs)`,
`torch.from_numpy(arr)`, `torch.tensor(rows)`, `torch.randn(64, 3, 224, 224)`
without `device=` (not a 0-dim `torch.tensor(0.99)`, not a conversion of a
model output, not a dry run on a model the script moves only later),
or comes from a function or a method of the model's class in the file that
builds it there (`hidden = model.init_hidden(b)`, fixed with `.to(device)`
at the call), or combines with its output (`criterion(out, torch.zeros(n, dtype=torch.long))`,
`out * torch.ones(n, k)`, `F.cross_entropy(out, y, weight=torch.tensor(w))`,
a loss built with `weight=torch.tensor(w)` or `pos_weight=` and never moved,
called on the output).
The model may be moved in a chain (`teacher.to(device).eval()`,
`model.half().cuda().eval()`), be a copy of a moved model
(`ema = copy.deepcopy(model)`, `torch.compile(model)`), be loaded onto a
device (`torch.load(path, map_location=device)`), or be a module-level model
that a helper function reads as a global.

A script's object of a plain class of the file (`trainer = Trainer(model,
device)`, `evaluator.accuracy(batch)`) has its methods run with what the
script hands them: a batch built on the CPU that a method's helper moves
with `images.to(self.device)` alone on a line (a moved copy thrown away)
is flagged there, and where it meets the model the object moved. An
object built from the model before the script moves it (`ema =
ModelEMA(model)` whose `__init__` keeps `copy.deepcopy(model)`, `{n:
p.detach().clone() for n, p in model.named_parameters()}` or its
`state_dict()`) holds a copy that `model.to(device)` does not move (it moves
the model's own parameters in place, which is why a list of
`model.parameters()` taken before the move is no copy): where a method
mixes the copy with the moved model's weights (`ema_p.mul_(d).add_(p)`),
that meeting is flagged, with no fix (make the copy after the move).

The device flow (`devlint/facts/flow.py`) follows the script: what each name
holds after each statement (a model the script moved, its outputs, a batch
as the loader left it, a moved copy), through locals, unpacking, loops,
comprehensions and helpers of the file; the loaders whose batches stay on the
CPU and the models moved by callers come from the script facts
(`devlint/facts/training.py`). The rule reports the meetings of a batch item
(or a tensor built on the CPU and given to the model) with a moved model.

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
moved with (`.cuda(args.gpu)` stays `.cuda(args.gpu)`); a tensor the code
builds on the CPU is built there instead (`torch.zeros(n, device=device)`),
or moved at once where a legacy constructor takes no device but the CPU
(`torch.FloatTensor(rows).to(device)`); a field is moved in
place (`batch["input_ids"] = batch["input_ids"].to(device)`), except one read
by an index, which is moved where it is read (`model(batch[0].to(device))`:
a tuple batch takes no item assignment); `x.to(device)` written as a
statement, whose moved copy was thrown away, becomes `x = x.to(device)`
(a field of a batch moved by a statement, `batch[k].to(device)`, is a
finding of its own in any function, whatever the model: the fix stores the
copy back, `batch[k] = batch[k].to(device)`, a safe fix where the loop walks
the batch's keys, so the batch is a dict, an unsafe one otherwise); so is
a tensor a helper unpacks from a batch the loop hands it and moves by a
statement (`prepare_batch(batch, device)` doing `images, targets = batch;
images.to(device)`: the fix rebinds the name, `images =
images.to(device)`); a
batch object read by attributes is moved whole (`data = data.to(device)`).
So is any `t.to(device)` or `t.cuda()` written as a statement where `t` is
surely a tensor: a name an enclosing `isinstance(t, torch.Tensor)` test
shows, a parameter annotated as one, a tensor a torch call made there, a
plain tensor attribute (`Tensor.to` returns a copy; `Module.to` moves in
place, so a use that only suggests a tensor is no evidence). The fix keeps
the copy (`t = t.to(device)`); none for a loop's name for an item (`for k,
v in batch.items(): v.to(device)`), whose copy belongs back in the batch.
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

from typing import Optional, Set, Tuple

import libcst as cst

from devlint.diagnostic import FixSafety
from devlint.facts.flow import (
    HOST_DATASET_PACKAGES,
    LOADER_BASES,
    LOSS_WEIGHTS,
    PLACED,
    Flow,
    FunctionFlow,
    LoaderItem,
    Meeting,
    how_text,
    is_placed,
)
from devlint.facts.training import Placement, Training, looks_like_loader, lookup_scoped
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import LINES, code_of, cuda_index, is_number_literal, short_code, statements, with_keyword_arg
from devlint.torch_api import DATA_LOADERS, ITER_WRAPPERS, LEGACY_TENSOR_CONSTRUCTORS
from devlint.walk import walk

#: factories and conversions that build a tensor on the CPU unless given ``device=``
_HOST_TENSORS = frozenset({
    "torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.randint",
    "torch.arange", "torch.linspace", "torch.randperm", "torch.eye",
    "torch.as_tensor", "torch.tensor", "torch.from_numpy",
}) | LEGACY_TENSOR_CONSTRUCTORS
#: methods that keep a batch item a batch item (where the fix's node is found)
_KEEPS = frozenset(
    {"view", "view_as", "reshape", "reshape_as", "long", "float", "int", "double", "half", "bool", "squeeze",
     "unsqueeze", "flatten", "contiguous", "t", "permute", "transpose", "clone", "detach", "type", "to"}
)


class InputsNotMoved(Rule):
    code = "DL011"
    requires = (Flow, Training)
    name = "inputs-not-moved"
    brief = "A loop feeds a model moved to a device batches that were never moved"
    message = "`{item}` from `{loader}` is passed to `{model}`, which was moved to {device}, but `{item}` itself is never moved"
    target_message = "`{item}` from `{loader}` meets the output of `{model}` (on {device}) but is never moved there"
    host_message = "`{item}` is built on the CPU (no `device=`) and passed to `{model}`, which was moved to {device}"
    host_output_message = "`{item}` is built on the CPU (no `device=`) and meets the output of `{model}` (on {device})"
    #: a tensor a helper (``model.init_hidden(b)``) builds on the CPU
    made_message = (
        "`{item}` comes from `{call}()`, which builds it on the CPU (`torch.{factory}` in `{where}`), "
        "and is passed to `{model}`, which was moved to {device}"
    )
    made_output_message = (
        "`{item}` comes from `{call}()`, which builds it on the CPU (`torch.{factory}` in `{where}`), "
        "and meets the output of `{model}` (on {device})"
    )
    discarded_message = (
        "`{call}` returns a moved copy of `{read}` (from `{loader}`) and throws it away: "
        "the batch stays on the CPU"
    )
    tensor_discarded_message = (
        "`{call}` returns a moved copy of the tensor `{read}` and throws it away: `{read}` stays where it was"
    )
    #: a copy of the model's weights made before the script moved the model
    copy_message = (
        "`{copy}` in `{where}` copies the model's weights while the model is still on the CPU (before the "
        "script moves it), and nothing moves the copy: here it meets the moved model's weights through {how}, "
        "which fails when those are on a GPU"
    )
    fix_safety = "safe/unsafe"
    tokens = (".to(", ".cuda(")
    project_keys = ("loader",)

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

    @classmethod
    def candidate(cls, scan) -> bool:
        # nothing is moved to a device: no model can be on one
        if not any(call.attr in ("to", "cuda") for call in scan.calls):
            return False
        # a for loop over something named like a loader, or any for loop in a
        # file that builds a DataLoader (loaders travel through parameters)
        if any(looks_like_loader(name) for name in scan.loops if name):
            return True
        # a loader another module of the project builds: for x, y in make_loader(cfg)
        if scan.loader_helpers and any(call.func in scan.loader_helpers for call in scan.calls):
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
        # a script calling a method of a class of the file that builds a
        # tensor on the CPU (hidden = model.init_hidden(b))
        makers = {
            call.method for call in scan.calls
            if call.cls is not None and call.method and "device" not in call.keywords and scan.refers_to(call.func, _HOST_TENSORS)
        }
        if makers and any(call.cls is None and call.attr in makers for call in scan.calls):
            return True  # (the model is moved by the script, or by the object itself: agent.q_net.to(device))
        # a script that builds a dataset of host data and may index it:
        # model(test_data[0][0]) (the flow's DeviceFlow.host_dataset, bounded)
        if any(
            any(q.startswith(HOST_DATASET_PACKAGES) for q in scan.resolve(call.func))
            or bool(call.func) and scan.class_may_derive(call.func, LOADER_BASES)
            for call in scan.calls
        ):
            return True
        if scan.bare_moves:
            return True  # t.to(device) alone on a line: a tensor's moved copy thrown away
        if any(call.cls is not None and (call.attr in ("clone", "detach", "state_dict") or scan.refers_to(call.func, {"copy.deepcopy"}))
               for call in scan.calls) and any(call.attr in ("to", "cuda") and call.cls is None for call in scan.calls):
            return True  # a plain object (an EMA) copying a model the script moves
        # a file that builds a DataLoader: loops, comprehensions and next() over it
        return any(
            (call.func or "").rsplit(".", 1)[-1] == "DataLoader" or scan.refers_to(call.func, DATA_LOADERS)
            for call in scan.calls
        )

    def leave_Module(self, original_node: cst.Module) -> None:
        flow = self.context.device_flow
        reported: Set[Tuple[int, str]] = set()
        for fn in [flow.module_function(), *flow.all_functions()]:
            if flow.init_time(fn):
                continue
            ff = flow.function(fn)
            for stmt, item in ff.discarded_moves:
                self._discarded(stmt, item, reported)
            for m in ff.meetings:
                if is_placed(m.against):
                    self._consider(flow.scope_name(fn), ff, m, reported)
            for stmt, looped in ff.discarded_tensor_moves:
                self._discarded_tensor(stmt, looped, reported)

    def _discarded_tensor(self, stmt: cst.Expr, looped: bool, reported: Set[Tuple[int, str]]) -> None:
        """``t.to(device)`` alone on a line for a ``t`` known to be a tensor
        (``Tensor.to`` never moves in place, unlike ``Module.to``);
        ``looped``: ``t`` is the name an enclosing ``for`` binds."""
        found = _first_report(stmt, reported)
        if found is None:
            return
        call, read = found
        message = self.tensor_discarded_message.format(call=code_of(call), read=code_of(read))
        if looped and isinstance(read, cst.Name):
            # for key, value in batch.items(): value.to(d) -- rebinding the
            # loop's name moves nothing the loop read from
            self.report(read, message, no_fix_reason=(
                f"`{read.value}` is the loop's name for an item: store the moved copy back where the loop read it"
            ))
            return
        self.report(read, message, fix=self._keep_copy(stmt, call, read))

    def _discarded(self, stmt: cst.Expr, item: LoaderItem, reported: Set[Tuple[int, str]]) -> None:
        """``batch[k].to(device)`` alone on a line: whatever the model, the
        batch was meant to move and does not."""
        found = _first_report(stmt, reported)
        if found is None:
            return
        call, read = found
        # the tensor's own meeting with the model is this finding too
        reported.add((id(item.loop), item.key))
        message = self.discarded_message.format(call=code_of(call), read=code_of(read), loader=item.loader)
        # a dict batch takes the item back (``for k in batch``); a tuple would
        # not; a name unpacked from the batch (``images, targets = batch``)
        # is rebound to the moved copy
        safety = FixSafety.SAFE if isinstance(read, cst.Name) or _keys_of(read, stmt, self.context) else FixSafety.UNSAFE
        self.report(read, message, fix=self._keep_copy(stmt, call, read, safety))

    def _keep_copy(self, stmt: cst.Expr, call: cst.Call, read: cst.BaseExpression, safety: FixSafety = FixSafety.SAFE):
        """The fix of a thrown-away move: ``x = x.to(device)``."""
        bound = cst.Assign(targets=[cst.AssignTarget(target=read)], value=call, semicolon=stmt.semicolon)
        return self.replace(stmt, bound, f"keep the moved copy: `{code_of(read)} = {code_of(call)}`", safety)

    def _consider(self, scope: str, ff: FunctionFlow, m: Meeting, reported: Set[Tuple[int, str]]) -> None:
        """A CPU tensor meets a model the script moved, or its output: a
        batch item the loop never moved, or a tensor built on the CPU and
        fed to the model."""
        where = self.context.device_flow.weight_copies.get(m.origin)
        if where is not None:
            # ema = EMA(model) before model.to(device): its copy stays behind
            if (id(m.origin), "copy") not in reported:
                reported.add((id(m.origin), "copy"))
                self.report(m.at, self.copy_message.format(copy=short_code(m.origin, 60), where=where, how=how_text(m.how)),
                            no_fix_reason="make the copy after the model is moved, or move the copy with it")
            return
        # (an item a helper unpacked from the batch this function handed it)
        item = ff.loader_items.get(m.origin) or self.context.device_flow.loader_items.get(m.origin)
        as_input = m.how == "model input"
        host = item is None and m.origin in ff.origin_names and (self._host_built(m.origin) or m.origin in ff.relayed)
        if item is None and not host:
            return
        if item is not None and (item.kind == "batch" or _is_lengths(item.key)):
            return  # a whole batch passed as it is (a dict or a list .to() cannot move); sequence lengths stay on the CPU
        model = m.partner if as_input else m.against[len(PLACED):]
        if not model:
            return
        if item is None:
            key: Tuple[int, str] = (id(m.origin), "host")
        elif item.kind == "index":
            key = (id(m.origin), item.key)  # each read of batch[0] is moved where it is read
        elif item.kind == "attr":
            key = (id(item.loop), item.base + ".")  # the fields of a batch object move together
        else:
            key = (id(item.loop), item.key)
        if key in reported:
            return
        reported.add(key)
        p = lookup_scoped(self.training, scope, model, "placements")
        placement = p if isinstance(p, Placement) else Placement("", "to", known=False)
        at = _named_at(m.arg, item) if m.arg is not None else m.at
        if item is None:
            # one helper's use of tensors that two callers build (a script's
            # step and a check): one finding where they meet the model
            if (id(at), "at") in reported:
                return
            reported.add((id(at), "at"))
        self._report(m, item, at, model, placement, as_input, ff.relayed.get(m.origin), m.origin in ff.relayed_several)

    def _host_built(self, origin: cst.CSTNode) -> bool:
        """A factory or a conversion of host data (``torch.as_tensor(obs)``,
        ``torch.randn(64, 3, 224, 224)``) with no ``device=``."""
        return isinstance(origin, cst.Call) and (self.facts.qualify(origin.func) or "") in _HOST_TENSORS

    def _report(self, m: Meeting, item: Optional[LoaderItem], at: cst.CSTNode, model: str, p: Placement, as_input: bool,
                made: Optional[Tuple[str, str]] = None, several: bool = False) -> None:
        """The finding; the fix moves the tensor at the top of its loop's
        body, or where it is read (a comprehension, an index of a tuple
        batch), or builds it on the device."""
        device = f"`{p.device}`" if p.device else "the GPU"
        related: list = []
        if item is not None:
            found = self.facts.project_function(self.facts.qualify_dotted(item.loader) or "")
            if found is not None and "loader" in found[2]:
                # a loader another module builds: say where
                path, line, _ = found
                related = [(path, line, f"`{item.loader}` returns a DataLoader whose batches stay on the CPU")]

        def report(*args, **kwargs) -> None:
            self.report(*args, related=related, **kwargs)

        if item is None:
            name = at.value if isinstance(at, cst.Name) else code_of(m.origin)
            if made is not None:
                # hidden = model.init_hidden(b): ``made`` says where the helper builds it
                template = self.made_message if as_input else self.made_output_message
                if not made[1]:  # a tuple of tensors different factories made
                    template = template.replace("`torch.{factory}` in ", "in ")
                message = template.format(item=name, model=model, device=device, call=code_of(m.origin.func),  # type: ignore[attr-defined]
                                          where=made[0], factory=made[1])
            else:
                template = self.host_message if as_input else self.host_output_message
                message = template.format(item=name, model=model, device=device)
            if m.how == LOSS_WEIGHTS:
                message += f" inside `{m.partner}`, a loss that holds it and was never moved"
        else:
            template = self.message if as_input else self.target_message
            message = template.format(item=item.key, loader=item.loader, model=model, device=device)
            if related:
                message = message.replace(f"`{item.loader}`", f"`{item.loader}` ({related[0][0]}:{related[0][1]})", 1)
            if isinstance(at, cst.Name) and at.value != item.key:
                # noise = torch.randn_like(x0): "`x0` (as `noise`) from `loader` ..."
                message = message.replace(f"`{item.key}` from", f"`{item.key}` (as `{at.value}`) from", 1)
        discarded = _discarded_move(item) if item is not None and item.kind == "name" else None
        if discarded is not None:
            message += f"; `{code_of(discarded.value)}` returns a moved copy, and it is thrown away"
        if not p.known:
            report(at, message, no_fix_reason=f"the device `{model}` was moved to has no name in this function")
            return
        if p.conditional and cuda_index(p.device, p.how) is not None:
            # if use_cuda: model.cuda() -- an unconditional .cuda() would break the CPU runs
            report(at, message, no_fix_reason=f"`{model}` moves to the GPU only under a condition; move the batch under the same one")
            return
        call = f"cuda({p.device})" if p.how == "cuda" else f"to({p.device})"
        if item is None and several:
            # (h, c) = model.init_hidden(b): a tuple has no .to()
            report(at, message, no_fix_reason=f"`{code_of(m.origin.func)}()` returns a sequence of tensors; "  # type: ignore[attr-defined]
                   f"move each one with `.{call}`, or create them on the device in `{made[0] if made else code_of(m.origin.func)}`")  # type: ignore[attr-defined]
            return
        if item is None:
            # torch.as_tensor(obs) -> torch.as_tensor(obs, device=device)
            dev = p.device or '"cuda"'
            if made is not None or self.facts.qualify(m.origin.func) in LEGACY_TENSOR_CONSTRUCTORS:  # type: ignore[attr-defined]
                # torch.Tensor(rows), torch.LongTensor(ids): the legacy
                # constructors take no device but the CPU; move what they build
                moved = cst.parse_expression(f"_.to({dev})")
                moved = moved.with_changes(func=moved.func.with_changes(value=m.origin))  # type: ignore[attr-defined]
                report(at, message, fix=self.replace(m.origin, moved, f"move `{code_of(m.origin)}` with `.to({dev})`"))
                return
            built = m.origin.with_changes(args=with_keyword_arg(m.origin.args, "device", cst.parse_expression(dev)))  # type: ignore[attr-defined]
            report(at, message, fix=self.replace(m.origin, built, f"build `{code_of(m.origin)}` with `device={dev}`"))
            return
        loop = item.loop if isinstance(item.loop, (cst.For, cst.While)) else None
        if item.kind == "index" or loop is None:
            # an index where the batch is read (a = batch[0] moves every use of a);
            # in a comprehension, the use itself
            read = m.origin if item.kind == "index" else at
            moved = cst.parse_expression(f"_.{call}")
            moved = moved.with_changes(func=moved.func.with_changes(value=read))  # type: ignore[attr-defined]
            report(at, message, fix=self.replace(read, moved, f"move `{item.key}` with `.{call}` where it is read"))
            return
        if discarded is not None:
            # x.to(device) -> x = x.to(device), keeping the user's own call
            bound = cst.Assign(targets=[cst.AssignTarget(target=cst.Name(item.key))], value=discarded.value)
            report(at, message, fix=self.replace(discarded, bound, f"keep the moved copy: `{item.key} = {code_of(discarded.value)}`"))
            return
        moved_name = item.base if item.kind == "attr" else item.key
        if not isinstance(loop.body, cst.IndentedBlock):
            # for x, y in loader: out = model(x) -- no line to insert the move on
            report(at, message, no_fix_reason=f"the loop's body is on one line; move `{moved_name}` with `.{call}` at its top")
            return
        move = cst.parse_statement(f"{moved_name} = {moved_name}.{call}\n")
        body = list(loop.body.body)
        index = _statement_holding(body, item.bound_at or m.origin) + 1
        while index < len(body) and _is_leading_move(body[index]):
            index += 1
        body.insert(index, move)
        new_block = loop.body.with_changes(body=body)
        if item.kind == "attr":
            # a PyG Data / BatchEncoding moves with .to(); a namedtuple batch has no .to()
            fix = self.replace(
                loop.body, new_block, f"move the whole batch `{moved_name}` with `.{call}` at the top of the loop (it must have a `.to()`)", FixSafety.UNSAFE
            )
        else:
            fix = self.replace(loop.body, new_block, f"move `{item.key}` with `.{call}` at the top of the loop")
        report(at, message, fix=fix)


def _named_at(arg: cst.CSTNode, item: Optional[LoaderItem]) -> cst.CSTNode:
    """Where a finding points inside the expression that carried the tensor:
    the name or key of the batch item (``x`` in ``x.view(-1, 784)``,
    ``batch["x"]``), through the calls and arithmetic that keep it one."""
    node = arg
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _KEEPS:
            node = node.func.value
        elif isinstance(node, cst.Call) and node.args and (code_of(node.func).endswith("_like")):
            node = node.args[0].value  # torch.randn_like(x0)
        elif isinstance(node, cst.BinaryOperation) and (is_number_literal(node.right) or is_number_literal(node.left)):
            node = node.left if is_number_literal(node.right) else node.right
        elif isinstance(node, cst.Subscript) and (item is None or code_of(node) != item.key):
            node = node.value
        else:
            return node


def _statement_holding(body, node: cst.CSTNode) -> int:
    """The index of the statement of ``body`` that holds ``node`` (-1: none,
    a loop target)."""
    for i, stmt in enumerate(body):
        found = []

        class _Find(cst.CSTVisitor):
            def on_visit(self, n: cst.CSTNode) -> bool:
                if n is node:
                    found.append(n)
                return not found

        walk(stmt, _Find())
        if found:
            return i
    return -1


def _discarded_move(item: LoaderItem) -> Optional[cst.Expr]:
    """``x.to(device)`` alone on a line of the loop body: ``Tensor.to``
    returns a moved copy and leaves ``x`` where it was."""
    loop = item.loop
    if not isinstance(loop, (cst.For, cst.While)):
        return None
    for stmt in statements(loop.body):
        if not isinstance(stmt, LINES):
            continue
        for small in stmt.body:
            call = small.value if isinstance(small, cst.Expr) else None
            if (
                isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "cuda")
                and isinstance(call.func.value, cst.Name) and call.func.value.value == item.key and call.args or (
                    isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "cuda"
                    and isinstance(call.func.value, cst.Name) and call.func.value.value == item.key
                )
            ):
                return small  # type: ignore[return-value]
    return None


_LENGTH_WORDS = frozenset({"len", "lens", "length", "lengths", "seqlen", "seqlens"})


def _is_lengths(key: str) -> bool:
    """``lengths``, ``src_lens``, ``batch["seq_len"]``: sequence lengths, which
    ``pack_padded_sequence`` wants on the CPU (and ``CTCLoss`` accepts there)."""
    words = "".join(c if c.isalnum() else "_" for c in key.lower()).split("_")
    return any(w in _LENGTH_WORDS for w in words)


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


class _LoopsOver(cst.CSTVisitor):
    """The ``for`` loops whose target binds ``key`` to the keys of ``base``
    (``for k in batch``, ``for k in batch.keys()``, ``for k, v in
    batch.items()``) and whose body holds ``stmt``."""

    def __init__(self, base: str, key: str, stmt: cst.CSTNode) -> None:
        self.base, self.key, self.stmt = base, key, stmt
        self.found = False
        self._open = 0
        self._stack: list = []

    def visit_For(self, node: cst.For) -> None:
        it, target = node.iter, node.target
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args \
                and it.func.attr.value in ("keys", "items"):
            if it.func.attr.value == "items" and isinstance(target, cst.Tuple) and target.elements:
                target = target.elements[0].value
            it = it.func.value
        match = isinstance(it, cst.Name) and it.value == self.base and isinstance(target, cst.Name) and target.value == self.key
        self._stack.append(match)
        self._open += match

    def leave_For(self, original_node: cst.For) -> None:
        self._open -= self._stack.pop()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is self.stmt and self._open:
            self.found = True
        return not self.found and super().on_visit(node)


def _keys_of(read: cst.BaseExpression, stmt: cst.CSTNode, context) -> bool:
    """``batch[k]`` read in a loop over the keys of ``batch``: a dict, which
    takes the moved copy back under the same key."""
    if not (isinstance(read, cst.Subscript) and isinstance(read.value, cst.Name) and len(read.slice) == 1
            and isinstance(read.slice[0].slice, cst.Index) and isinstance(read.slice[0].slice.value, cst.Name)):
        return False
    finder = _LoopsOver(read.value.value, read.slice[0].slice.value.value, stmt)
    context.module.visit(finder)
    return finder.found


def _first_report(stmt: cst.Expr, reported: Set[Tuple[int, str]]) -> Optional[Tuple[cst.Call, cst.BaseExpression]]:
    """``x.to(d)`` alone on a line, reported once: the call and what it
    reads (its receiver), or None when it was reported already."""
    key = (id(stmt), "discarded")
    if key in reported:
        return None
    reported.add(key)
    call = stmt.value
    assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
    return call, call.func.value

