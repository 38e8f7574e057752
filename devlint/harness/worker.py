"""The harness's child process: runs the cases of one file and writes one JSON
line per event to the parent (``devlint.harness.supervise``).

It imports torch and executes user code; the parent never does either. User
output is sent to stderr so that stdout carries only the protocol.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import sys
import tempfile
import traceback
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from devlint.harness.cases import CaseError, check_case

_counter = itertools.count()
#: seconds per case when the job does not say (the parent's default)
DEFAULT_TIMEOUT = 120.0


#: a project job (:func:`run_file`): {"original": [roots], "fixed": [roots],
#: "tops": [top-level module names of the project]}; None for one file
_PROJECT: Optional[dict] = None


def _load(path: str) -> Any:
    name = f"_devlint_case_module_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CaseError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    roots = _project_roots(path)
    if roots is None:
        spec.loader.exec_module(module)
        return module
    # a case file of a project: its imports of the project resolve in the
    # copy it lies in (the original tree or the fixed one), never in the
    # other copy's modules that an earlier load left in sys.modules
    tops = set(_PROJECT["tops"]) if _PROJECT else set()
    _forget(tops)
    sys.path[:0] = roots
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.path[:len(roots)]
        _forget(tops)
    return module


def _project_roots(path: str) -> Optional[List[str]]:
    """The source roots of the project copy ``path`` lies in, or None."""
    if not _PROJECT:
        return None
    here = os.path.abspath(path)
    for which in ("original", "fixed"):
        roots = _PROJECT.get(which) or []
        if roots and here.startswith(os.path.join(_PROJECT.get(which + "_tree", roots[0]), "")):
            # a script's own folder too: ``from models import Net`` beside it
            return list(roots) + [os.path.dirname(here)]
    return None


def _forget(tops: set) -> None:
    """Drop the project's modules from ``sys.modules`` (the case module and
    what it imported keep their references): those under the project's
    top-level names, and any module whose file lies in one of the copies
    (a package beside a script in a subfolder of the source root, whose
    top-level name is not one of the root's: ``fixtures/projects/x/tree/``
    verified from the repository's root)."""
    trees = tuple(os.path.join(_PROJECT[w + "_tree"], "") for w in ("original", "fixed") if _PROJECT and _PROJECT.get(w + "_tree"))
    for name in list(sys.modules):
        if name.split(".", 1)[0] in tops:
            del sys.modules[name]
            continue
        if trees and not name.startswith("_devlint_case_module_"):
            where = getattr(sys.modules.get(name), "__file__", None) or ""
            if where and os.path.abspath(where).startswith(trees):
                del sys.modules[name]


def _cases(module: Any) -> List[dict]:
    fn = getattr(module, "devlint_cases", None)
    if not callable(fn):
        raise CaseError("the file defines no devlint_cases() function")
    cases = fn()
    if not isinstance(cases, (list, tuple)):
        raise CaseError("devlint_cases() must return a list of dicts")
    return list(cases)


def _case(module: Any, name: str) -> dict:
    for c in _cases(module):
        if isinstance(c, dict) and c.get("name") == name:
            return c
    raise CaseError(f"case {name!r} is not returned by devlint_cases() in this version of the file")


# --------------------------------------------------------------------------
# describing failures and outputs


_SIMULATION_LIMITS = {
    "DataDependentOutputException": "the code reads tensor values (e.g. .item(), data-dependent control flow), which fake tensors do not have",
    "DynamicOutputShapeException": "an output shape depends on tensor values, which fake tensors do not have",
    "UnsupportedOperatorException": "an operator has no fake-tensor implementation",
    "UnsupportedFakeTensorException": "an operation is not supported on fake tensors",
    "NoFakeKernelError": "an operator has no fake-tensor implementation and cannot run on a simulated CUDA device",
}


#: what user code usually wrote to reach an operator that needs values
_OPERATION_HINTS = {
    "_local_scalar_dense": ".item(), int()/float()/bool() of a tensor, or `if tensor`",
    "nonzero": "nonzero(), a boolean mask index or torch.where(cond)",
    "masked_select": "masked_select or a boolean mask index",
    "unique": "torch.unique",
    "_unique2": "torch.unique",
    "repeat_interleave": "repeat_interleave with tensor repeats",
}


def _operation_name(op: Any) -> str:
    """``aten.nonzero.default (nonzero(), a boolean mask index ...)``."""
    text = str(op)
    base = text.split(".")[1] if text.startswith("aten.") and text.count(".") >= 1 else text
    hint = _OPERATION_HINTS.get(base)
    return f"{text} ({hint})" if hint else text


class Failure(Exception):
    def __init__(self, info: dict) -> None:
        super().__init__(info.get("message", ""))
        self.info = info


def _public_type(exc: BaseException) -> str:
    """The type real PyTorch raises: fake-tensor errors subclass RuntimeError."""
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins" or not cls.__module__.startswith("torch._subclasses"):
            return cls.__name__
    return type(exc).__name__


def _core_message(exc: BaseException) -> str:
    msg = str(exc).strip()
    if msg.startswith("Caught ") and "Original Traceback" in msg:
        # the real DataParallel wraps a replica's error; keep the original line
        last = [ln for ln in msg.splitlines() if ln.strip()][-1]
        msg = last.split(": ", 1)[1] if ": " in last else last
    return msg or "(no message)"


def _describe(exc: BaseException, phase: str, files: Dict[str, str]) -> dict:
    raised = type(exc).__name__
    info = {
        "type": _public_type(exc),
        "raised": f"{type(exc).__module__}.{raised}",
        "message": _core_message(exc),
        "phase": phase,
    }
    where = getattr(exc, "_devlint_replica", None)
    if where is None and str(exc).startswith("Caught "):
        first = str(exc).splitlines()[0]
        where = first[len("Caught "):].split(" in ", 1)[-1].rstrip(".")
    if where:
        info["replica"] = where
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename in files:
            info["line"] = f"{files[frame.filename]}:{frame.lineno}"
            info["code"] = (frame.line or "").strip()
            break
    if raised in _SIMULATION_LIMITS:
        info["simulation_limit"] = _SIMULATION_LIMITS[raised]
        op = getattr(exc, "func", None) or getattr(exc, "operation", None)
        if op is not None:
            info["operation"] = _operation_name(op)
    elif "not linked with support for cuda" in info["message"] or "not compiled with CUDA" in info["message"]:
        info["simulation_limit"] = "the code reaches a CUDA-only path the simulation cannot follow"
    return info


def _tensors(obj: Any, torch: Any, out: Optional[list] = None) -> list:
    out = [] if out is None else out
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _tensors(v, torch, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _tensors(v, torch, out)
    elif isinstance(obj, torch.nn.Module):
        _tensors(list(obj.state_dict().values()), torch, out)
    return out


def one_device_failure(errors: Dict[str, dict], reference: Any, key: str) -> Optional[dict]:
    """Step 3's verdict when the original or the fixed code failed on one
    device (``errors``: which -> the failure's info), else None: the fixed
    code failing is an error; the original failing alone makes the
    comparison not applicable (``reference`` is kept under ``key``)."""
    if "fixed" in errors:
        e = errors["fixed"]
        return {"status": "error", "detail": f"the fixed code fails on the CPU ({e['phase']}): {e['type']}: {e['message']}", "error": e}
    if "original" in errors:
        e = errors["original"]
        return {
            "status": "not applicable",
            "detail": f"the original fails on one device too ({e['type']}: {e['message']}); the fixed code runs",
            "error": e,
            key: reference,
        }
    return None


def _summary(tensors: list) -> List[dict]:
    return [{"shape": list(t.shape), "device": str(t.device), "dtype": str(t.dtype).replace("torch.", "")} for t in tensors]


def _call_args(inputs: Any) -> Tuple[tuple, dict]:
    if isinstance(inputs, dict):
        return (), inputs
    if isinstance(inputs, tuple):
        return inputs, {}
    return (inputs,), {}


# --------------------------------------------------------------------------
# which lines of the original ran (a finding on a line the case never
# reached is not one the case can confirm or refute)


class _Lines:
    """Record the lines executed in the files ``keys`` names (filename to
    the key results are reported under), in every thread, for the
    duration. Frames of other files get no local tracer."""

    def __init__(self, keys: Callable[[str], Optional[str]]) -> None:
        self.keys = keys
        self.known: Dict[str, Optional[str]] = {}
        self.hits: Dict[str, set] = {}

    def _global(self, frame: Any, event: str, arg: Any) -> Any:
        name = frame.f_code.co_filename
        key = self.known.get(name, "?")
        if key == "?":
            key = self.known[name] = self.keys(name)
        if key is None:
            return None
        hits = self.hits.setdefault(key, set())
        hits.add(frame.f_lineno)

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                hits.add(frame.f_lineno)
            return local

        return local

    def __enter__(self) -> "_Lines":
        import threading

        self.saved = (sys.gettrace(), threading.gettrace() if hasattr(threading, "gettrace") else None)
        threading.settrace(self._global)
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc: Any) -> None:
        import threading

        sys.settrace(self.saved[0])
        threading.settrace(self.saved[1])  # type: ignore[arg-type]

    def result(self) -> Dict[str, List[int]]:
        return {k: sorted(v) for k, v in self.hits.items()}


def _coverage_keys(job: dict) -> Callable[[str], Optional[str]]:
    """Filename -> key: the case file's display path for one file; for a
    project, the path relative to the original copy's tree."""
    project = job.get("project") or {}
    tree = project.get("original_tree")
    if tree:
        root = os.path.join(os.path.abspath(tree), "")

        def key(name: str) -> Optional[str]:
            here = os.path.abspath(name)
            return os.path.relpath(here, root) if here.startswith(root) else None

        return key
    original = os.path.abspath(job["original"])
    return lambda name: job["display"] if os.path.abspath(name) == original else None


# --------------------------------------------------------------------------
# the three steps


class Step:
    """One run of one version of the file; records the phase it is in."""

    def __init__(self, path: str, display: str) -> None:
        self.path = path
        self.files = {path: display}
        self.phase = "importing the file"

    def fail(self, exc: BaseException) -> Failure:
        return Failure(_describe(exc, self.phase, self.files))


def _run_under_placement(path: str, display: str, name: str, plan: Any, cuda_visible: bool = True) -> dict:
    """Step 1/2: build the case and run it under its placement. Returns the
    output summary and the expected devices; raises Failure."""
    import torch

    from devlint.harness import env as E

    step = Step(path, display)
    environment = E.Environment(plan, cuda_visible=cuda_visible)
    try:
        with E.environment(environment):
            module = _load(path)
            step.phase = "reading the case"
            case = check_case(_case(module, name))
            if case["placement"] == "checkpoint":
                return _run_checkpoint(case, step, torch)
            torch.manual_seed(case["seed"])
            if case["placement"] == "call":
                # the case's own code builds, places and calls; values stay
                # real until they reach a (fake) CUDA device
                step.phase = "running the case"
                with torch.no_grad():
                    tensors = _tensors(case["run"](), torch)
                expected = sorted({str(t.device) for t in tensors})
                if case["output_device"] is not None:
                    expected = [str(environment.resolve(case["output_device"]) or torch.device(case["output_device"]))]
                return {"outputs": _summary(tensors), "expected_devices": expected}
            step.phase = "building the model"
            model = case["model"]()
            step.phase = "building the inputs"
            args, kwargs = _call_args(case["inputs"]())
            if case["placement"] == "data_parallel":
                step.phase = "placing the model"
                if case["model_device"] is not None:
                    model.to(case["model_device"])
                wrapper = torch.nn.DataParallel(model, device_ids=list(range(plan.count)))
                run: Callable[[], Any] = lambda: wrapper(*args, **kwargs)  # noqa: E731
                expected = [str(environment.target(0))]
            else:
                if case["model_device"] is not None:
                    step.phase = "placing the model"
                    model.to(case["model_device"])
                step.phase = "placing the inputs"
                target = _input_device(case, model, environment, torch)
                if target is not None:
                    args, kwargs = _move(args, target, environment, torch), _move(kwargs, target, environment, torch)
                run = lambda: model(*args, **kwargs)  # noqa: E731
                expected = None
                if case["output_device"] is not None:
                    dev = environment.resolve(case["output_device"]) or torch.device(case["output_device"])
                    expected = [str(dev)]
            step.phase = "forward"
            with E.running(environment):
                out = run()
            if expected is None:
                expected = sorted({str(t.device) for t in itertools.chain(model.parameters(), model.buffers())})
            return {"outputs": _summary(_tensors(out, torch)), "expected_devices": expected}
    except (Failure, KeyboardInterrupt):
        raise
    except BaseException as exc:  # user code: anything may come out, sys.exit() included
        raise step.fail(exc) from None


def _input_device(case: dict, model: Any, environment: Any, torch: Any) -> Any:
    wanted = case["input_device"]
    if wanted == "first_parameter":
        for t in itertools.chain(model.parameters(), model.buffers()):
            return t.device
        return None
    if wanted is None:
        return None
    return environment.resolve(wanted) or torch.device(wanted)


def _move(obj: Any, device: Any, environment: Any, torch: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return environment.move(obj, device)
    if isinstance(obj, tuple):
        return tuple(_move(v, device, environment, torch) for v in obj)
    if isinstance(obj, list):
        return [_move(v, device, environment, torch) for v in obj]
    if isinstance(obj, dict):
        return {k: _move(v, device, environment, torch) for k, v in obj.items()}
    return obj


def _tags() -> Dict[str, Any]:
    """Where the storages being saved claim to live: "all" for every
    storage, else by the storage's data pointer (None: where they really
    are). Kept on ``torch.serialization`` itself, where the tagger is
    registered: this module also runs as ``__main__`` (the worker), and a
    tagger reading one copy's globals would not see the other's."""
    import torch.serialization as ser

    tags = getattr(ser, "_devlint_tags", None)
    if tags is None:
        tags = ser._devlint_tags = {"all": None, "by_pointer": {}}  # type: ignore[attr-defined]
        ser.register_package(0, _tag, lambda s, loc: None)
    return tags


def _tag(storage: Any) -> Optional[str]:
    import torch.serialization as ser

    tags = ser._devlint_tags  # type: ignore[attr-defined]
    if tags["all"] is not None:
        return tags["all"]
    return tags["by_pointer"].get(storage.data_ptr()) if tags["by_pointer"] else None


def save_tagged(obj: Any, path: Any, torch: Any, everything: Optional[str] = None, by_pointer: Optional[Dict[int, str]] = None,
                save: Optional[Callable[..., None]] = None) -> None:
    """``torch.save`` with storages tagged as living on another device
    (``everything``: all of them; ``by_pointer``: those whose data pointer
    is listed) while they are on the CPU: the checkpoint a GPU run writes,
    produced without a GPU. ``save``: the real ``torch.save`` when it is
    patched."""
    tags = _tags()
    tags["all"], tags["by_pointer"] = everything, dict(by_pointer or {})
    try:
        (save or torch.save)(obj, path)
    finally:
        tags["all"], tags["by_pointer"] = None, {}


def _save_as_if_from_cuda(obj: Any, path: str, torch: Any, save: Optional[Callable[..., None]] = None) -> None:
    """``torch.save`` with every storage tagged ``cuda:0``: the checkpoint a
    GPU run writes, produced without a GPU."""
    save_tagged(obj, path, torch, everything="cuda:0", save=save)


def _run_checkpoint(case: dict, step: Step, torch: Any) -> dict:
    torch.manual_seed(case["seed"])
    step.phase = "building the checkpoint"
    state = case["state"]()
    with tempfile.TemporaryDirectory(prefix="devlint-ckpt-") as tmp:
        path = os.path.join(tmp, "checkpoint.pt")
        _save_as_if_from_cuda(state, path, torch)
        step.phase = "loading the checkpoint"
        result = case["load"](path)
    tensors = _tensors(result, torch)
    saved = _tensors(state, torch)
    return {
        "outputs": _summary(tensors),
        "expected_devices": ["cpu"],
        "_values": (saved, tensors),
    }


def _equivalence(orig: str, fixed: str, display: str, name: str) -> dict:
    """Step 3: original and fixed on the CPU, same seed, same weights."""
    import torch

    from devlint.harness import env as E

    environment = E.Environment(E.CPU_PLAN, cuda_visible=False)
    which = "original"
    step = Step(orig, display)
    try:
        with E.environment(environment):
            mods = {"original": _load(orig)}
            step.phase = "importing the fixed file"
            mods["fixed"] = _load(fixed)
            cases = {k: check_case(_case(m, name)) for k, m in mods.items()}
            case = cases["original"]
            seed = case["seed"]
            models: Dict[str, Any] = {}
            outputs: Dict[str, Any] = {}
            errors: Dict[str, dict] = {}
            reference: Optional[list] = None
            note = ""
            for which in ("original", "fixed"):
                step = Step(orig if which == "original" else fixed, display)
                try:
                    torch.manual_seed(seed)
                    if case["placement"] == "call":
                        step.phase = "running the case"
                        with torch.no_grad():
                            outputs[which] = _tensors(cases[which]["run"](), torch)
                        reference = _summary(outputs[which])
                        continue
                    step.phase = "building the model"
                    models[which] = cases[which]["model"]()
                    if which == "fixed" and "original" in models:
                        step.phase = "loading the original's state_dict"
                        note = _load_state(models["original"], models["fixed"], torch)
                    torch.manual_seed(seed)
                    step.phase = "building the inputs"
                    args, kwargs = _call_args(case["inputs"]())
                    step.phase = "forward"
                    with torch.no_grad():
                        torch.manual_seed(seed)
                        outputs[which] = _tensors(models[which](*args, **kwargs), torch)
                        if which == "fixed":
                            step.phase = "forward on the batch's DataParallel chunks"
                            reference = _reference_shapes(models[which], args, kwargs, case, outputs[which], torch)
                except Exception as exc:
                    errors[which] = step.fail(exc).info
    except Failure as f:
        return {"status": "error", "detail": f"{which}: {f.info['type']}: {f.info['message']}", "error": f.info}
    except Exception as exc:
        info = step.fail(exc).info
        return {"status": "error", "detail": f"{info['type']}: {info['message']}", "error": info}
    failed = one_device_failure(errors, reference, "_reference")
    if failed is not None:
        return failed
    out = _compare(outputs["original"], outputs["fixed"], note, torch)
    out["_reference"] = reference
    return out


def _chunks(obj: Any, n: int, torch: Any) -> list:
    """The per-replica pieces of ``obj``, split as DataParallel's scatter splits."""
    if isinstance(obj, torch.Tensor):
        return list(obj.chunk(n, 0))
    if isinstance(obj, tuple) and hasattr(obj, "_fields") and len(obj) > 0:
        return [type(obj)(*a) for a in zip(*(_chunks(v, n, torch) for v in obj))]
    if isinstance(obj, tuple) and len(obj) > 0:
        return list(zip(*(_chunks(v, n, torch) for v in obj)))
    if isinstance(obj, list) and len(obj) > 0:
        return [list(i) for i in zip(*(_chunks(v, n, torch) for v in obj))]
    if isinstance(obj, dict) and len(obj) > 0:
        return [type(obj)(i) for i in zip(*(_chunks(v, n, torch) for v in obj.items()))]
    return [obj for _ in range(n)]


def _reference_shapes(model: Any, args: tuple, kwargs: dict, case: dict, whole: list, torch: Any) -> list:
    """The shapes the fixed code must produce under the placement: on one
    device for as_written; for data_parallel, each replica's outputs
    concatenated along dim 0 (0-dim outputs become a vector), as gather does."""
    if case["placement"] != "data_parallel":
        return _summary(whole)
    n = case["devices"]
    pieces = _chunks(args, n, torch) if args else []
    kw_pieces = _chunks(kwargs, n, torch) if kwargs else []
    count = max(len(pieces), len(kw_pieces))
    pieces = list(pieces) + [() for _ in range(count - len(pieces))]
    kw_pieces = list(kw_pieces) + [{} for _ in range(count - len(kw_pieces))]
    per_replica = [_tensors(model(*a, **k), torch) for a, k in zip(pieces, kw_pieces)]
    shapes = []
    for outs in zip(*per_replica):
        if all(t.dim() == 0 for t in outs):
            shape = [len(outs)]
        else:
            shape = [sum(t.shape[0] for t in outs)] + list(outs[0].shape[1:])
        shapes.append({"shape": shape, "device": "cpu", "dtype": str(outs[0].dtype).replace("torch.", "")})
    return shapes


def _load_state(original: Any, fixed: Any, torch: Any) -> str:
    state = original.state_dict()
    try:
        fixed.load_state_dict(state)
        return ""
    except RuntimeError:
        mine = fixed.state_dict()
        if set(state) < set(mine) and all(mine[k].shape == v.shape for k, v in state.items()):
            # the fix registered modules or buffers the original held in plain
            # attributes (DL007): their weights are not in the original's
            # state_dict, and the same seed built them the same in both
            fixed.load_state_dict(state, strict=False)
            added = len(mine) - len(state)
            return f"the fix registered {added} state_dict key{'s' if added != 1 else ''} the original lacks; those keep the weights the same seed gave both"
        if len(mine) != len(state) or any(a.shape != b.shape for a, b in zip(mine.values(), state.values())):
            raise
        fixed.load_state_dict(dict(zip(mine.keys(), state.values())))
        return "state_dict keys renamed by the fix; weights loaded by position"


def _compare(a: list, b: list, note: str, torch: Any) -> dict:
    if not a:
        return {"status": "error", "detail": "the model returned no tensors to compare"}
    if len(a) != len(b):
        return {"status": "differs", "detail": f"{len(a)} output tensors vs {len(b)}"}
    close = False
    worst = 0.0
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return {"status": "differs", "detail": f"output {list(x.shape)} {x.dtype} vs {list(y.shape)} {y.dtype}"}
        if torch.equal(x, y):
            continue
        if x.is_floating_point() and torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True):
            close = True
            worst = max(worst, float((x - y).abs().max()))
            continue
        diff = float((x.double() - y.double()).abs().max()) if x.is_floating_point() else float("nan")
        return {"status": "differs", "detail": f"outputs differ (max abs diff {diff:.3g})"}
    detail = f"{len(a)} output tensor{'s' if len(a) != 1 else ''} " + ("within 1e-5" if close else "bitwise equal")
    if close:
        detail += f" (max abs diff {worst:.3g})"
    if note:
        detail += f"; {note}"
    return {"status": "equal", "detail": detail}


def _checkpoint_equivalence(values: Any, torch: Any) -> dict:
    saved, loaded = values
    out = _compare(saved, loaded, "", torch)
    if out["status"] == "equal":
        out["detail"] = "loaded tensors equal the saved ones: " + out["detail"]
    return out


# --------------------------------------------------------------------------


def outputs_problem(outs: list, expected: set, reference: Optional[list], where: str) -> Optional[str]:
    """What is wrong with the fixed code's outputs: one not on an expected
    device, or (given the ``reference`` run ``where`` it ran) another number
    of tensors or another shape; None when nothing is."""
    for o in outs:
        if o["device"] not in expected:
            return f"an output is on {o['device']}, expected {' or '.join(sorted(expected))}"
    if reference is not None:
        if len(reference) != len(outs):
            return f"{len(outs)} output tensors, {len(reference)} {where}"
        for o, r in zip(outs, reference):
            if o["shape"] != r["shape"]:
                return f"an output has shape {tuple(o['shape'])}, expected {tuple(r['shape'])}"
    return None


def _shape_check(placed: dict, reference: Optional[list], placement: str, n: int) -> Optional[str]:
    outs = placed["outputs"]
    if not outs:
        return "the model returned no tensors"
    return outputs_problem(outs, set(placed["expected_devices"]), reference, "on one device")


def run_case(job: dict, name: str, meta: dict) -> dict:
    from devlint.harness import env as E

    simulate = bool(job.get("simulate"))
    placement = meta["placement"]
    if placement == "ddp":
        from devlint.harness import ddp

        return ddp.run_case(job, name, meta, float(job.get("timeout") or DEFAULT_TIMEOUT))
    if placement == "checkpoint":
        plan = E.CPU_PLAN
        label = "cpu-only (checkpoint saved from cuda:0)"
    else:
        plan = E.make_plan(meta["devices"], simulate)
        label = plan.label
    result: Dict[str, Any] = {"case": name, "placement": placement, "devices": meta["devices"], "device_path": label}
    lines = _Lines(_coverage_keys(job))
    try:
        with lines:
            _run_under_placement(job["original"], job["display"], name, plan, placement != "checkpoint")
        result["original"] = {"status": "not reproduced", "detail": "ran without error under the placement"}
    except Failure as f:
        if "simulation_limit" in f.info:
            result["original"] = {"status": "cannot simulate", "detail": f.info["simulation_limit"], "error": f.info}
        else:
            result["original"] = {"status": "reproduced", "error": f.info}
    result["reached"] = lines.result()
    if job.get("same"):
        # devlint changed nothing the case runs: the "fixed" code is the
        # original, and running it again would only repeat step 1
        result["fixed"] = {"status": "unchanged", "detail": "devlint changed nothing in the files this case runs"}
        return result
    fixed_run: Optional[dict] = None
    try:
        fixed_run = _run_under_placement(job["fixed"], job["fixed_display"], name, plan, placement != "checkpoint")
    except Failure as f:
        status = "cannot simulate" if "simulation_limit" in f.info else "failed"
        result["fixed"] = {"status": status, "error": f.info}
    if placement == "checkpoint":
        import torch

        equivalence = (
            _checkpoint_equivalence(fixed_run.pop("_values"), torch)
            if fixed_run
            else {"status": "not run", "detail": "the fixed code did not load the checkpoint"}
        )
        reference = fixed_run["outputs"] if fixed_run else None
    else:
        equivalence = _equivalence(job["original"], job["fixed"], job["display"], name)
        reference = equivalence.pop("_reference", None)
    if fixed_run is not None:
        problem = _shape_check(fixed_run, reference if placement != "checkpoint" else None, placement, plan.count)
        result["fixed"] = {"status": "ok" if problem is None else "wrong output", "outputs": fixed_run["outputs"]}
        if problem:
            result["fixed"]["detail"] = problem
    result["equivalence"] = equivalence
    return result


def run_file(job: dict, emit: Callable[[dict], None]) -> None:
    """Run one file's cases, emitting ``cases``, ``start`` and ``result``
    events (or ``file_error``)."""
    from devlint.harness import env as E

    global _PROJECT
    _PROJECT = job.get("project")
    for folder in reversed(job.get("search_path", [])):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        with E.environment(E.Environment(E.CPU_PLAN, cuda_visible=False)):
            module = _load(job["original"])
            raw = _cases(module)
    except Exception as exc:
        info = _describe(exc, "listing the cases", {job["original"]: job["display"]})
        emit({"event": "file_error", "message": f"{info['type']}: {info['message']}", "error": info})
        return
    metas = []
    for i, c in enumerate(raw):
        try:
            case = check_case(c)
            metas.append({"name": case["name"], "placement": case["placement"], "devices": case["devices"]})
        except CaseError as exc:
            label = c.get("name") if isinstance(c, dict) and isinstance(c.get("name"), str) else f"#{i + 1}"
            metas.append({"name": label, "error": str(exc)})
    names = [m["name"] for m in metas]
    if len(set(names)) != len(names):
        emit({"event": "file_error", "message": "case names must be unique within a file"})
        return
    emit({"event": "cases", "cases": metas})
    skip = set(job.get("skip", []))
    for meta in metas:
        if meta["name"] in skip:
            continue
        emit({"event": "start", "case": meta["name"]})
        if "error" in meta:
            emit({"event": "result", "case": meta["name"], "result": {"case": meta["name"], "case_error": meta["error"]}})
            continue
        try:
            result = run_case(job, meta["name"], meta)
        except Exception as exc:  # a harness bug: report it for this case, go on
            result = {"case": meta["name"], "harness_error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        emit({"event": "result", "case": meta["name"], "result": result})


def main() -> int:
    """Read one JSON job per line on stdin until EOF; answer on stdout."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin = sys.stdin
    sys.stdin = open(os.devnull)  # user code must not eat the jobs

    def emit(event: dict) -> None:
        proto.write(json.dumps(event) + "\n")
        proto.flush()

    torch_error = None
    warnings.filterwarnings("ignore", message=".*NumPy.*")
    try:
        import torch  # noqa: F401

        try:  # paid once per child, not inside the first case's time
            import torch._subclasses.fake_tensor  # noqa: F401
        except Exception:
            pass
    except Exception as exc:
        torch_error = f"cannot import torch: {exc}"
    for line in stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        if torch_error:
            emit({"event": "file_error", "message": torch_error})
        else:
            run_file(job, emit)
        emit({"event": "done"})
    return 0


if __name__ == "__main__":
    # run the importable module, not this __main__ copy of it: the ddp
    # placement's ranks use devlint.harness.worker, and its state (the
    # project, the checkpoint tagger) must be the one the worker set
    from devlint.harness import worker as _worker

    sys.exit(_worker.main())
