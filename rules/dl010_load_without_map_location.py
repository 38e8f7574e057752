"""DL010 load-without-map-location

## What it does
Flags `torch.load(f)` called without `map_location` (resolved through the
imports: `import torch as T; T.load(f)`, `from torch import load`), and
`torch.hub.load_state_dict_from_url(url)` (`torch.utils.model_zoo.load_url`)
without it: that function downloads a checkpoint and passes its own
`map_location` (the third positional parameter, after `model_dir`) to
`torch.load`.

## Why is this bad?
`torch.load` puts every tensor back on the device it was saved from. Under
DistributedDataParallel every rank then loads the checkpoint onto the GPU
that saved it, usually `cuda:0`: rank 0 runs out of memory, or a later
operation mixes devices. On a machine without that GPU the load fails:

```
RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. If you are running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu') to map your storages to the CPU.
```

`weights_only=True` does not change this: it restricts what may be
unpickled, not where tensors go, so it neither silences nor fixes the finding.

## Example
```python
model.load_state_dict(torch.load(args.checkpoint))
```

## Use instead
```python
model.load_state_dict(torch.load(args.checkpoint, map_location="cpu"))
```

Also flagged: a call that leaves out the `map_location` parameter of a
function that passes it, defaulting to `None`, to `torch.load` (`def
load_checkpoint(path, model, map_location=None)`): a function of the file
or, in a project run, of another module; the finding names where it is.

Not flagged: `map_location` given by keyword or as the second positional
argument, a call with `**kwargs` or `*args` (which may carry it), an
in-process round trip (a file the same function wrote before it loads it:
`torch.save(obj, path)`, `trainer.save(path=out_dir)` or
`save_checkpoint(state, path)` then `torch.load(path)`,
`torch.load(os.path.join(out_dir, "model.pt"))`; the devices are the ones
this process has, unless the file runs distributed and the path is not a
`tempfile` of the process's own, where rank 0 saves and every rank loads
onto rank 0's GPU), a file shipped inside the package
(a path built from `__file__`, `importlib.resources` or `pkg_resources`:
every CPU-only install loads it too, so it holds CPU tensors), and bytes held in
memory (`torch.load(io.BytesIO(data))`, or a name bound to one): that is how
code hands tensors to itself or a peer (pickling a storage, RPC, an export
archive member read by name, `archive.read(name)`), and keeping their
devices is the point. Checkpoints come from files; those are what this rule
is about, including a file read whole into memory first: bytes from
`f.read()`, `Path(p).read_bytes()`, an S3 object's `obj["Body"].read()`,
`blob.download_as_bytes()` or `requests.get(url).content` are flagged.

Also not flagged: a load in test code (a file pytest collects by its
name, `test_*.py` or `*_test.py`, and `conftest.py`), unless the file runs
distributed: a test reads what it or its fixtures wrote on the machine that
runs it (through a trainer's checkpoint callback too, which devlint does not
see), or data shipped with the tests, which a CPU-only test run has to load
as well.

Also not flagged: a load whose value is declared to hold no tensors: returned
at once from a function whose return annotation, or assigned to a name whose
annotation, is made only of Python scalars and text, NumPy arrays and the
containers and unions of those (`def load_meta(root) -> Tuple[Dict[str, str],
List[str]]: return torch.load(path)`, `states: np.ndarray = torch.load(p)`);
there is no device to restore. `Any`, a class or no annotation says nothing.

Also not flagged: a load fed to the `load_state_dict` of an LR scheduler or
a GradScaler (a name containing `scheduler` or `scaler`: their states hold
Python numbers, no tensors), and a loaded object whose every use restores a
random number generator
(`torch.set_rng_state(state["cpu"])`, `torch.cuda.set_rng_state_all(...)`,
`random.setstate(...)`): RNG states are CPU byte tensors wherever they were
saved.

Decided case: devlint cannot see what a file holds, so a load of a file
that happens to contain no tensors (a metadata tuple of dtypes, sizes and
strides) is still reported. Such a file may later hold tensors, and
`map_location="cpu"` costs nothing where it does not; the finding is counted
as arguable, not as a misread, in `docs/precision.md`.

## Fix safety
Adding `map_location="cpu"` is safe where the loaded object only feeds
`load_state_dict` (directly, `model.load_state_dict(torch.load(p)["model"])`,
or through a name whose every use is a `load_state_dict(...)` argument,
a `"key" in ckpt` test or `ckpt = ckpt["state_dict"]`): `load_state_dict`
copies each tensor onto the device of the parameter it fills (optimizers too),
so only the transient copy moves. `load_state_dict(..., assign=True)` keeps
the loaded tensors and is not counted. A state dict re-keyed into the same
name first (`state = {k.replace("module.", ""): v for k, v in state.items()}`)
still only feeds `load_state_dict`. It is safe too where the loaded object is
moved at once (`torch.load(p).to(device)`, `torch.load(p).cuda()`): it ends
on that device either way.

Elsewhere the loaded tensors are used as they are, and where they land is
behaviour: the fix is unsafe. When the function clearly targets a device (a
model moved with `.to(device)`, a `device` variable or parameter, a
`local_rank`, `args.gpu` or the argument of `torch.cuda.set_device`), the
unsafe fix loads onto it (`map_location=device`,
`map_location=f"cuda:{local_rank}"`) instead of the CPU; at module level
only a device the script has bound before the load counts. An index the
function tests against None (`if args.gpu is not None`) names no device
(`f"cuda:{None}"`), and a literal GPU the model moves to only under a
condition (`if use_cuda: model.to("cuda")`) is not where every run can load:
neither is offered. Nor is a name that is not bound on every path to the
load (the scope facts): one bound only after it or on one arm of a condition
names no device chosen yet, and the fix loads onto the CPU. One deleted
before it (`del device`) names a device the code chose and dropped: the
unsafe fix then loads onto the CPU only when the loaded object feeds
`load_state_dict` somewhere (which copies it onto the model's device; other
uses see CPU tensors), and there is no fix otherwise, with that reason.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from devlint.diagnostic import FixSafety
from devlint.facts.classes import annotation_holds_no_tensors
from devlint.facts.scripts import Scripts
from devlint.facts.training import (
    ScopeStack,
    Training,
    device_candidates,
    is_memory_buffer,
    is_torch_load,
    map_location_arg,
    map_location_parameter,
    placement_of,
)
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import code_of, dotted_name, free_names, keyword_arg, positional_args, with_keyword_arg
from devlint.torch_api import TORCH_LOADS


class LoadWithoutMapLocation(Rule):
    code = "DL010"
    requires = (Training, Scripts)
    name = "load-without-map-location"
    brief = "`torch.load` without `map_location`: tensors come back on the device that saved them"
    message = "`torch.load` without `map_location` puts every tensor back on the device that saved it"
    fix_safety = "safe/unsafe"
    tokens = ("load",)
    project_keys = ("loads",)

    VALID = [
        Valid(
            """
import torch

state = torch.load("ckpt.pt", map_location="cpu")
other = torch.load("ckpt.pt", "cpu")

def load(path, **kwargs):
    return torch.load(path, **kwargs)
"""
        ),
        Valid(
            """
import io
import torch

def roundtrip(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)
"""
        ),
        Valid(
            """
import pickle

def load(path):
    with open(path, "rb") as fh:
        return pickle.load(fh)
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch

def load_weights(model, path, map_location=None):
    model.load_state_dict(torch.load(path, map_location=map_location))

def main(model, device):
    model.to(device)
    load_weights(model, "w.pt")
""",
            """
import torch

def load_weights(model, path, map_location=None):
    model.load_state_dict(torch.load(path, map_location=map_location))

def main(model, device):
    model.to(device)
    load_weights(model, "w.pt", map_location=device)
""",
            unsafe=True,
        ),
        Invalid(
            """
import torch

def resume(model, optimizer, path):
    ckpt = torch.load(path)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
""",
            """
import torch

def resume(model, optimizer, path):
    ckpt = torch.load(path, map_location="cpu")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
""",
        ),
        Invalid(
            """
from torch import load

def embeddings(path, device):
    table = load(path)
    return table["weight"] * 2
""",
            """
from torch import load

def embeddings(path, device):
    table = load(path, map_location=device)
    return table["weight"] * 2
""",
            unsafe=True,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # a call that may name torch.load, without map_location= or a second positional argument
        # or a function of the file (or of another module) whose map_location
        # parameter defaults to None
        return any(
            (("map_location" not in call.keywords and call.n_args < 3) or call.cls is None)
            and scan.refers_to(call.func, TORCH_LOADS)
            for call in scan.calls
        ) or bool(scan.load_helpers and any(call.func in scan.load_helpers for call in scan.calls))

    def __init__(self, context) -> None:
        super().__init__(context)
        self.scopes = ScopeStack()
        # torch.load calls that feed load_state_dict directly
        self._feeds_state_dict: Set[int] = set()
        # torch.load calls whose result holds no tensors (scheduler states)
        self._no_tensors: Set[int] = set()
        # torch.load calls bound to a name: id -> name
        self._bound_to: Dict[int, str] = {}
        # torch.load calls whose result is moved at once (torch.load(p).to(device))
        self._moved_at_once: Set[int] = set()

    def visit_Module(self, node: cst.Module) -> None:
        # module-level functions that pass a parameter defaulting to None as
        # torch.load's map_location: name -> (index, parameter, its def)
        self._load_helpers: Dict[str, Tuple[int, str, cst.FunctionDef]] = {}
        for stmt in node.body:
            if isinstance(stmt, cst.FunctionDef) and "map_location" in code_of(stmt.params):
                found = map_location_parameter(self.facts, stmt)
                if found is not None:
                    self._load_helpers[stmt.name.value] = (found[0], found[1], stmt)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.scopes.push(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.push(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_Return(self, node: cst.Return) -> None:
        # ``def load_meta(...) -> Tuple[Dict[str, str], List[str]]: return
        # torch.load(f)``: the declared type holds no tensors to restore
        function = self.context.current_function
        if (
            isinstance(node.value, cst.Call) and function is not None and function.returns is not None
            and annotation_holds_no_tensors(function.returns.annotation, self.facts)
        ):
            self._no_tensors.add(id(node.value))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        # ``states: np.ndarray = torch.load(f)``
        if isinstance(node.value, cst.Call) and annotation_holds_no_tensors(node.annotation.annotation, self.facts):
            self._no_tensors.add(id(node.value))

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        while isinstance(value, cst.Subscript):
            value = value.value
        if isinstance(value, cst.Call) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._bound_to[id(value)] = node.targets[0].target.value

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda") and placement_of(self.facts, node) is not None:
            receiver = func.value
            while isinstance(receiver, cst.Subscript):
                receiver = receiver.value
            if isinstance(receiver, cst.Call):
                self._moved_at_once.add(id(receiver))  # torch.load(p).to(device)
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict":
            owner = (dotted_name(func.value) or "").rsplit(".", 1)[-1].lower()
            if "scheduler" in owner or "scaler" in owner:
                # LR scheduler and GradScaler states hold Python numbers only
                self._no_tensors.update(_loads_inside(node))
                return
            assign = keyword_arg(node, "assign")
            if assign is not None and not (isinstance(assign.value, cst.Name) and assign.value.value == "False"):
                return
            for arg in node.args:
                if arg.star or (arg.keyword is not None and arg.keyword.value != "state_dict"):
                    continue
                value = arg.value
                while isinstance(value, cst.Subscript):
                    value = value.value
                if isinstance(value, cst.Call):
                    self._feeds_state_dict.add(id(value))
            return
        if self.context.in_test_file and not self.training.distributed:
            # a test reads what it or its fixtures wrote on the machine that
            # runs it, or data shipped with the tests, which a CPU-only
            # test run loads too
            return
        if not is_torch_load(self.facts, func):
            if isinstance(func, cst.Name):
                self._helper_call(node, func.value)
            return
        if map_location_arg(self.facts, node) is not None or any(a.star for a in node.args):
            return
        args = positional_args(node)
        if id(node) in self._no_tensors:
            return
        scope = self.training.scopes.get(self.scopes.name)
        file_arg = args[0].value if args else (keyword_arg(node, "f").value if keyword_arg(node, "f") else None)
        if scope is not None and node in scope.round_trips and (not self.training.distributed or node in scope.private_round_trips):
            return  # torch.save(obj, p) ... torch.load(p): an in-process round trip
        if scope is not None and node in scope.package_files:
            return  # a file shipped inside the package loads on CPU-only machines too
        if file_arg is not None and (
            is_memory_buffer(self.facts, file_arg, scope) or (scope is not None and code_of(file_arg) in scope.buffers)
        ):
            return  # bytes handed over in memory (pickling, RPC, archives): their devices are meant
        message = self.message
        if self.facts.qualify(func) not in ("torch.load", "torch.serialization.load"):
            # load_state_dict_from_url(url): downloads, then torch.load(f, map_location=map_location)
            message = (
                f"`{code_of(func)}` without `map_location` loads with `torch.load`, which puts every tensor "
                "back on the device that saved it"
            )
        safe = id(node) in self._feeds_state_dict
        name = self._bound_to.get(id(node))
        if name is not None and scope is not None and name in scope.rng_states:
            return  # RNG states are CPU byte tensors wherever they were saved
        if not safe and name is not None and scope is not None:
            safe = scope.loaded.get(name, False)
        if safe:
            fix = self.replace(node, _with_map_location(node, '"cpu"'), 'add `map_location="cpu"` (the object only feeds `load_state_dict`)')
            self.report(node, message, fix=fix)
            return
        if id(node) in self._moved_at_once:
            fix = self.replace(node, _with_map_location(node, '"cpu"'), 'add `map_location="cpu"` (the object is moved to its device at once)')
            self.report(node, message, fix=fix)
            return
        target, gone = self._device_target(node)
        why = "changes where the loaded tensors live"
        if target is None and gone and name is not None and scope is not None and name in scope.fed_to_state_dict:
            # what load_state_dict takes is copied onto the model's device either way
            target = '"cpu"'
            why = f"{gone}; `load_state_dict` copies the state onto the model's device, other uses get CPU tensors"
        if target is None:
            self.report(node, message, no_fix_reason=gone)
            return
        fix = self.replace(
            node,
            _with_map_location(node, target),
            f"add `map_location={target}` ({why})",
            FixSafety.UNSAFE,
        )
        self.report(node, message, fix=fix)

    def _device_target(self, node: cst.Call) -> Tuple[Optional[str], str]:
        """The device the unsafe fix loads onto: the first of the scope's
        device candidates whose names are all bound where ``node`` runs (the
        scope facts), else ``"cpu"``, as when the scope targets no device: a
        name bound only after the load or under a condition names no device
        chosen yet. None, with the reason, when a candidate's name was
        deleted before the load (``del device``): the code chose a device and
        the fix cannot name it."""
        deleted: List[str] = []
        for cand in device_candidates(self.training, self.scopes.name):
            why = {n: self.scripts.unbound_at(node, n) for n in free_names(cst.parse_expression(cand))}
            if not any(why.values()):
                return cand, ""
            deleted += [f"`{n}` is deleted there" for n in sorted(why) if why[n] == "deleted" and f"`{n}` is deleted there" not in deleted]
        if deleted:
            return None, f"the device this code targets has no name at the load ({'; '.join(deleted)})"
        return '"cpu"', ""

    def _helper_call(self, node: cst.Call, name: str) -> None:
        """``load_checkpoint(path)`` where ``load_checkpoint`` (this file, or
        another module of the project) passes its ``map_location`` parameter,
        which defaults to None, to ``torch.load``: leaving it out is a
        ``torch.load`` without ``map_location``."""
        local = self._load_helpers.get(name)
        related: List[Tuple[str, int, str]] = []
        if local is not None:
            index, param, _ = local
            shown = f"`{name}`"
        else:
            found = self.facts.project_function(self.facts.qualify_dotted(name) or "")
            if found is None or "loads" not in found[2]:
                return
            path, line, record = found
            index, param = int(record["loads"]), str(record.get("loads_param", "map_location"))
            shown = f"`{name}` ({path}:{line})"
            related = [(path, line, f"`{name}` passes `{param}` to `torch.load`")]
        if any(a.star for a in node.args) or keyword_arg(node, param) is not None:
            return
        if 0 <= index < len(positional_args(node)):
            return
        message = (
            f"{shown} passes its `{param}`, None unless given, to `torch.load`: called without it, "
            "every tensor goes back on the device that saved it"
        )
        target, gone = self._device_target(node)
        if target is None:
            self.report(node, message, no_fix_reason=gone, related=related)
            return
        new = node.with_changes(args=with_keyword_arg(node.args, param, cst.parse_expression(target), len(positional_args(node))))
        fix = self.replace(node, new, f"pass `{param}={target}` (changes where the loaded tensors live)", FixSafety.UNSAFE)
        self.report(node, message, fix=fix, related=related)


def _loads_inside(call: cst.Call) -> List[int]:
    """ids of the calls passed (possibly subscripted) as arguments."""
    out = []
    for arg in call.args:
        value = arg.value
        while isinstance(value, cst.Subscript):
            value = value.value
        if isinstance(value, cst.Call):
            out.append(id(value))
    return out


def _with_map_location(call: cst.Call, value: str) -> cst.Call:
    """``torch.load(f, ...)`` -> ``torch.load(f, map_location=value, ...)``:
    after the positional arguments, keeping the layout."""
    at = len(positional_args(call))
    return call.with_changes(args=with_keyword_arg(call.args, "map_location", cst.parse_expression(value), at))
