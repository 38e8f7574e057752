"""DL006 / DL007 fixtures at run time, on the CPU: the meta device stands in
for a GPU, since moving a model to it moves exactly what `.to()` moves. In
the original some tensor is left behind on the CPU; in devlint's fixed file
nothing is and forward runs on the meta device; and on one device both
compute the same thing. The full check under DataParallel is `devlint
verify` (the harness)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from conftest import FIXTURES
from devlint.engine import fix_source

torch = pytest.importorskip("torch")

CASES = sorted(
    p for code in ("DL006", "DL007") for p in (FIXTURES / code).glob("bad_*.py")
    if p.name.count(".") == 1 and "def devlint_cases" in p.read_text()
)


def _load(path: Path, text: str) -> types.ModuleType:
    mod = types.ModuleType(path.stem)
    mod.__file__ = str(path)
    exec(compile(text, str(path), "exec"), mod.__dict__)
    return mod


def _build(case: dict, device: str):
    torch.manual_seed(0)
    return case["model"]().to(device)


def _run(case: dict, device: str):
    model = _build(case, device)
    torch.manual_seed(1)
    inputs = [t.to(device) for t in case["inputs"]()]
    with torch.no_grad():
        return model(*inputs)


def _left_behind(model, device: str) -> list:
    """Tensors reachable from the model's modules (attributes, and lists,
    tuples and dicts of them) that are not on ``device``."""
    found, seen, todo = [], set(), [model]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            if obj.device.type != device:
                found.append(tuple(obj.shape))
        elif isinstance(obj, torch.nn.Module):
            todo.extend(vars(obj).values())
            todo.extend(obj._parameters.values())
            todo.extend(obj._buffers.values())
            todo.extend(obj._modules.values())
        elif isinstance(obj, (list, tuple)):
            todo.extend(obj)
        elif isinstance(obj, dict):
            todo.extend(obj.values())
    return found


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in _flat(out[k])]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flat(o)]
    return []


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
def test_fix_makes_the_model_movable(path):
    src = path.read_text()
    fixed = fix_source(src, path.name, unsafe=True).fixed_text
    assert fixed != src
    original, repaired = _load(path, src), _load(path, fixed)
    for case, fixed_case in zip(original.devlint_cases(), repaired.devlint_cases()):
        assert case["placement"] == "data_parallel"
        assert _left_behind(_build(case, "meta"), "meta"), "the original should leave a tensor behind"
        assert _left_behind(_build(fixed_case, "meta"), "meta") == []
        _run(fixed_case, "meta")
        before, after = _flat(_run(case, "cpu")), _flat(_run(fixed_case, "cpu"))
        assert before and len(before) == len(after)
        for a, b in zip(before, after):
            assert torch.equal(a, b)
