"""The device-flow provider (devlint/facts/flow.py): kinds, devices, joins,
summaries and meetings, asked directly rather than through a rule."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from typing import Dict, List, Tuple

import libcst as cst
import pytest

from devlint.facts.classes import build_facts
from devlint.facts.flow import ANY, CPU, DEVICE, FIXED, DeviceFlow, LOCAL, NONE_VALUE, NUMBER, OTHER, SEQ, TENSOR, Value, join


def _flow(src: str) -> Tuple[DeviceFlow, cst.Module, Dict[cst.CSTNode, int]]:
    module = cst.parse_module(textwrap.dedent(src))
    wrapper = cst.metadata.MetadataWrapper(module, unsafe_skip_copy=True)
    pos = wrapper.resolve(cst.metadata.PositionProvider)
    return DeviceFlow(build_facts(module), module), module, {n: p.start.line for n, p in pos.items()}


def meetings(src: str) -> List[Tuple[str, int, int, str]]:
    """(function, line of the CPU tensor's birth, line of the meeting, how)."""
    flow, _, line = _flow("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n" + textwrap.dedent(src))
    out = []
    for fn in flow.all_functions():
        for m in flow.function(fn).meetings:
            out.append((fn.name.value, line[m.origin] - 3, line[m.at] - 3, m.how))
    return out


def returns(src: str, name: str) -> Value:
    flow, _, _ = _flow("import torch\n" + textwrap.dedent(src))
    fn = next(f for f in flow.all_functions() if f.name.value == name)
    return flow.function(fn).returns



def test_join_keeps_a_tensor_moved_past_the_blocks_of_a_split_model():
    from devlint.facts.flow import UNKNOWN
    from devlint.facts.stages import FIRST, LAST, stage_device

    last = Value(TENSOR, stage_device(LAST))
    # moved to the last stage on one path, with the inputs on the other:
    # the path that moved it is the one that meets the inputs on another GPU
    assert join(last, Value(TENSOR, LOCAL)).device == stage_device(LAST)
    assert join(Value(TENSOR, LOCAL), last).device == stage_device(LAST)
    # the first stage and the inputs' device are one; two stages join to none
    assert join(Value(TENSOR, stage_device(FIRST)), last).device == ANY
    assert join(Value(UNKNOWN, LOCAL), last).device == ANY


# -- the domain -----------------------------------------------------------------


def test_join_keeps_what_both_sides_agree_on():
    a = Value(TENSOR, CPU, frozenset({"x"}))  # type: ignore[arg-type]
    b = Value(TENSOR, LOCAL)
    assert join(a, a) == a
    # put on the CPU on one path, on the inputs' device on the other: the
    # birth stays (a default built for a missing argument)
    j = join(a, b)
    assert (j.kind, j.device, j.born) == (TENSOR, CPU, frozenset({"x"}))
    # unless the other path moved that very tensor: a conditional move
    moved = Value(TENSOR, LOCAL, moved=frozenset({"x"}))  # type: ignore[arg-type]
    j = join(a, moved)
    assert (j.kind, j.device, j.born) == (TENSOR, ANY, frozenset())
    assert join(a, Value(TENSOR, ANY)).born == frozenset()
    # a number on one path, a tensor on the other (``lengths = -1`` or a
    # count): a number mixes with a tensor on any device, so the tensor's
    # path is the one that can fail, and the join is that tensor
    t = Value(TENSOR, CPU, frozenset({"y"}))  # type: ignore[arg-type]
    assert join(Value(NUMBER), t) == replace(t, maybe_number=True) == join(t, Value(NUMBER))
    assert join(Value(NUMBER), Value(OTHER)).kind not in (NUMBER, OTHER)
    assert join(None, b) is b
    # None on one path: the other path's value, which a fix may not name
    assert join(NONE_VALUE, a) == join(a, NONE_VALUE) == replace(a, maybe_none=True)


@pytest.mark.parametrize(
    "body, kind, device",
    [
        ("return torch.zeros(3)", TENSOR, CPU),
        ("return torch.zeros(3, device=x.device)", TENSOR, LOCAL),
        ("return x.new_zeros(3)", TENSOR, LOCAL),
        ("return torch.zeros_like(x)", TENSOR, LOCAL),
        ("return torch.arange(3).to(x.device)", TENSOR, LOCAL),
        ("return torch.arange(3).to(x)", TENSOR, LOCAL),
        ("return torch.arange(3).type_as(x)", TENSOR, LOCAL),
        ("return torch.arange(3).to(torch.float32)", TENSOR, CPU),
        ("return torch.arange(3).cuda()", TENSOR, "current"),
        ("return x.size(0)", NUMBER, ANY),
        ("return x.sum().item()", NUMBER, ANY),
        ("return [x, x]", SEQ, ANY),
        ("return x.shape[0]", NUMBER, ANY),
        ("t = torch.ones(2)\n    t = t.to(x.device) if x.is_cuda else t\n    return t", TENSOR, ANY),
    ],
)
def test_kinds_and_devices(body, kind, device):
    v = returns(f"def f(x: torch.Tensor):\n    {body}\n", "f")
    assert (v.kind, v.device) == (kind, device)


def test_a_0dim_tensor_with_a_value_of_unknown_kind_is_where_that_value_is():
    # e3nn's soft_one_hot_linspace: 1.14 * torch.exp(torch.tensor(2.0)) * step(diff)
    v = returns("def f(x: torch.Tensor):\n    return torch.exp(torch.tensor(2.0)) * unseen(x)\n", "f")
    assert v.kind != TENSOR or v.device != CPU
    assert not meetings("def f(x: torch.Tensor):\n    return x + torch.tensor(2.0) * unseen(x)\n")
    # a tensor on the inputs' device that may be 0-dim (a row of an input) stays there (timm's convit)
    assert returns("def f(x: torch.Tensor, scale):\n    q = x[0]\n    return q * scale\n", "f").device == LOCAL
    # a non-0-dim CPU tensor keeps its birth whatever it meets
    assert returns("def f(x: torch.Tensor):\n    return torch.ones(3) * unseen(x)\n", "f").device == CPU


def test_parameters_are_tensors_only_on_evidence():
    # no annotation and no tensor-only use: the flow does not guess
    assert returns("def f(x):\n    return x + 1\n", "f").kind != TENSOR
    assert returns("def f(x):\n    n = x.size(0)\n    return x + 1\n", "f").device == LOCAL
    assert returns("def f(x: int):\n    return x\n", "f").kind == NUMBER


def test_inputs_combined_stay_on_the_inputs_side_until_a_torch_function_shows_a_tensor():
    """``log_p - log_q`` of two inputs of unknown kind, or a sum started at
    ``0``, is still what came in: ``torch.argsort`` of it is a tensor on the
    inputs' device (and the name is one from there on: a fix may name it)."""
    diff = "def f(a, b, n):\n    d = a - b\n    return torch.argsort(d) + torch.ones(n)\n"
    assert [m[3] for m in meetings(diff)] == ["operator"]
    loop = (
        "def f(traces, n):\n    s = 0\n    for t in traces:\n        s = s + t['lp'].sum(-1)\n"
        "    return torch.index_select(torch.arange(n), 0, torch.argsort(s))\n"
    )
    assert [m[3] for m in meetings(loop)] == ["torch.index_select"]
    # no torch function shows a tensor: a number or an array stays possible
    assert not meetings("def f(a, b, n):\n    d = a - b\n    return d + torch.ones(n)\n")
    assert returns("def f(a, b):\n    d = a - b\n    torch.argsort(d)\n    return d\n", "f").kind == TENSOR


def test_a_parameter_some_caller_passes_a_tensor_and_others_pass_their_inputs_is_a_tensor():
    """``_tukey(x)`` from forward and ``_tukey(features)`` from another
    method: ``torch.tensor(x)`` copies the tensor on its device."""
    src = """
class C(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3, 3))

    def forward(self, x):
        return torch.matmul(self._t(x), self.w)

    def apply(self, features):
        return self._t(features)

    def _t(self, x):
        x = torch.tensor(x)
        return torch.pow(x, 0.5)
"""
    assert not meetings(src)


def test_an_attribute_holding_a_torch_factory_by_default_is_called_as_that_factory():
    src = """
class C(nn.Module):
    def __init__(self, n=8, window_fn=torch.hann_window):
        super().__init__()
        self.n = n
        self.window_fn = window_fn

    def forward(self, x):
        a = x * self.window_fn(self.n)
        b = x * self.window_fn(self.n, device=x.device)
        return a + b
"""
    assert [(m[0], m[1], m[3]) for m in meetings(src)] == [("forward", 9, "operator")]


def test_evidence_of_a_parameter_ends_where_it_is_converted_from_data():
    """``x = torch.Tensor(x).long()`` then ``pad(x)``: the caller passed a
    list (phi4's chunk indices), so the CPU ``arange`` meets CPU tensors only;
    a use after a rebinding computed from the parameter itself, or after one
    under a branch, still tells what the caller passed."""
    converted = (
        "def f(n, idx):\n    idx = torch.Tensor(idx).long()\n    end = F.pad(idx, (0, 1), value=n)\n"
        "    r = torch.arange(0, n).unsqueeze(-1)\n    return r < end\n"
    )
    assert not meetings(converted)
    transformed = "def f(x):\n    x = x * 2\n    n = x.size(-1)\n    return x + torch.arange(n)\n"
    assert [m[3] for m in meetings(transformed)] == ["operator"]
    branch = "def f(x, e: torch.Tensor = None):\n    if x is None:\n        x = e * 2\n    n = x.size(-1)\n    return x + torch.arange(n)\n"
    assert [m[3] for m in meetings(branch)] == ["operator"]


def test_a_module_method_sees_its_own_weights_and_submodules():
    src = """
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(2, 2)
            self.register_buffer("scale", torch.ones(2))

        def run(self, ids):
            return self.proj(ids) * self.scale
    """
    assert returns(src, "run").device == LOCAL


def test_summaries_carry_a_helpers_cpu_result_to_the_caller():
    src = """
    def grid(n):
        return torch.linspace(0, 1, n)

    def use(x: torch.Tensor):
        return x + grid(4)
    """
    # the factory in the helper, and the call, where the caller can name a device
    assert sorted(meetings(src)) == [("use", 3, 6, "operator"), ("use", 6, 6, "operator")]


def test_a_helpers_cpu_result_is_born_at_the_call_too():
    src = """
    def ramp(n):
        return torch.linspace(0, 1, n)

    def scaled(t):
        return t * 2

    class Head(nn.Module):
        def bias(self, n):
            return ramp(n).clamp(0, 1)

        def forward(self, x):
            a = x + self.bias(x.size(-1))
            b = x + scaled(torch.ones(4))
            return a + b
    """
    flow, _, line = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src))
    fwd = next(f for f in flow.all_functions() if f.name.value == "forward")
    found = sorted((line[m.origin] - 2, line[m.at] - 2) for m in flow.function(fwd).meetings)
    # ramp's factory and the outermost call (self.bias(...)); bias's own
    # call of ramp only relays it; scaled() hands back the caller's own
    # CPU tensor, which stays the caller's birth (no relay at scaled(...))
    assert found == [(3, 13), (13, 13), (14, 14)]
    relayed = flow.function(fwd).relayed
    assert [(line[c] - 2, r) for c, r in relayed.items()] == [(13, ("ramp", "linspace"))]


# -- meetings ---------------------------------------------------------------------


def test_operator_and_concat_meetings():
    src = """
    def f(x: torch.Tensor):
        a = x * torch.rand(x.size(0))
        b = torch.cat([x, torch.zeros(1, 2)])
        return a, b
    """
    assert sorted(m[1:] for m in meetings(src)) == [(3, 3, "operator"), (4, 4, "torch.cat")]


def test_zero_dim_cpu_tensors_mix_except_in_concatenation():
    src = """
    def f(x: torch.Tensor, t: float):
        a = x * torch.tensor(t)
        b = x + torch.zeros(())
        c = torch.stack([x.sum(), torch.tensor(0.0)])
        return a, b, c
    """
    assert [m[1:] for m in meetings(src)] == [(5, 5, "torch.stack")]


def test_cpu_indices_into_device_tensors_are_fine_but_not_the_reverse():
    src = """
    def f(x: torch.Tensor, idx: torch.Tensor):
        a = x[torch.arange(3)]
        table = torch.arange(10)
        b = table[idx]
        c = x[torch.arange(3), idx]
        return a, b, c
    """
    assert sorted(m[1:] for m in meetings(src)) == [(4, 5, "index")]  # c: mixed indices into x are fine


def test_a_write_takes_its_indices_to_the_written_tensor_but_a_read_does_not():
    # index_put_ moves its indices to the written tensor's device (seen on a
    # real H200: a CPU table written at CUDA indices runs); the values written
    # must be there already, and x[i] += v reads x[i] first
    src = """
    def f(x: torch.Tensor, idx: torch.Tensor):
        hits = torch.zeros(10, dtype=torch.bool)
        hits[idx] = True
        sums = torch.zeros(10)
        sums[idx] += 1.0
        out = torch.zeros(10)
        out[idx] = x
        row = torch.zeros(10)
        row[0] = x  # a copy_: crosses devices
        rows = torch.zeros(4, 10)
        for i in torch.arange(4):
            rows[i] = x  # a 0-dim index: PyTorch selects, then copies
        return hits, sums, out, row, rows
    """
    assert sorted(m[1:] for m in meetings(src)) == [(5, 6, "index"), (7, 8, "index")]


def test_the_tensor_fields_of_an_annotated_output_class_follow_the_inputs():
    # a parameter annotated with a class whose body declares tensor fields
    # (a model-output dataclass): its fields are tensors on the inputs'
    # device; rebound, it says nothing more; other fields are no tensors
    src = """
    class Output:
        boxes: Optional[torch.FloatTensor] = None
        name: str = ""

    def f(out: Output, n: int):
        return out.boxes * torch.ones(n, 4)

    def g(out: "Output", n: int):
        out = out.to_tuple()
        return out.boxes * torch.ones(n, 4)

    def h(out: Output, n: int):
        return out.name, torch.ones(n, 4)
    """
    assert sorted(m for m in meetings(src) if m[0] in "fgh") == [("f", 7, 7, "operator")]


def test_isinstance_of_a_list_makes_a_python_sequence_in_that_branch():
    src = """
    def f(x: torch.Tensor, sizes):
        if isinstance(sizes, (list, tuple)):
            sizes = torch.tensor(sizes)
        return x * sizes

    def g(x: torch.Tensor, sizes):
        if not isinstance(sizes, list):
            return x * sizes
        return x * torch.tensor(sizes)
    """
    found = sorted(m for m in meetings(src))
    assert [m[0] for m in found] == ["f", "g"] and all(m[3] == "operator" for m in found)


def test_value_only_uses_and_moves_are_no_meeting():
    src = """
    def f(x: torch.Tensor, n: int):
        k = torch.arange(n).sum().item()
        m = torch.ones(n)
        if m.device != x.device:
            m = m.to(x.device)
        lens = torch.tensor([len(r) for r in x.tolist()])
        out = torch.empty(n, 2)
        out[:, 0] = x[:, 0]
        return x * k + m, len(lens), out.to(x.device)
    """
    assert meetings(src) == []


def test_submodule_weights_meet_their_input():
    src = """
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(3, 4)
            self.act = nn.ReLU()

        def ok(self, x: torch.Tensor):
            return self.act(torch.ones(3))

        def bad(self, i: int):
            return self.embed(torch.tensor([i]))
    """
    assert [m[0] for m in meetings(src)] == ["bad"]


def test_branches_that_leave_do_not_reach_the_join():
    src = """
    def f(x: torch.Tensor):
        t = torch.ones(3)
        if x.is_cuda:
            return x
        return x + t
    """
    assert [m[1:] for m in meetings(src)] == [(3, 6, "operator")]


def test_a_bare_container_argument_holds_what_the_callers_pass():
    src = """
    def smooth(per_image: list, sizes: List[int], name: str):
        scores = torch.cat([e["scores"] for e in per_image])
        return torch.cat((scores, torch.zeros((1,))))
    """
    # per_image's items follow the inputs, as an unannotated argument's do;
    # List[int] and str say what they hold: nothing on the inputs' device
    assert meetings(src) == [("smooth", 4, 4, "torch.cat")]
    for ann in ("per_image: List[int]", "per_image: str"):
        assert meetings(src.replace("per_image: list", ann)) == []


def test_rows_taken_to_the_cpu_stay_there_through_helpers():
    src = """
    def embed(model, batches):
        rows = []
        for b in batches:
            rows.append(model(b).cpu())
        return torch.cat(rows)

    def sim(a: torch.Tensor, b: torch.Tensor):
        return a @ b.T

    def rescale(s: torch.Tensor, base: torch.Tensor):
        return s - base

    def score(model, xs, ys):
        base = torch.ones(3)
        s = sim(embed(model, xs), embed(model, ys))
        return rescale(s, base)
    """
    # .cpu() of a value of unknown kind, where a tensor must be, is a CPU
    # tensor; a function given only CPU tensors computes on the CPU: the
    # CPU-born base meets CPU scores in rescale
    assert returns(src, "embed").device == CPU
    assert meetings(src) == []
    # given a tensor on the inputs' device, the helper's result is there
    assert meetings(src.replace("sim(embed(model, xs), embed(model, ys))", "sim(xs.float(), ys.float())")) == [
        ("score", 15, 12, "operator")
    ]


def test_a_fallback_return_on_the_cpu_meets_on_its_path():
    src = """
    def f(iou):
        if iou.numel() == 0:
            return torch.zeros(1)
        return iou.mean(0)

    def g(x: torch.Tensor):
        return torch.cat([f(x), x])
    """
    # f returns the CPU tensor on one path (an empty CUDA input) and the
    # input's device on the other: on that path torch.cat fails (reported
    # at the factory and at the call)
    assert sorted(m[1:] for m in meetings(src)) == [(4, 8, "torch.cat"), (8, 8, "torch.cat")]
    moved_back = """
    def f(iou):
        t = torch.zeros(1)
        if iou.numel() > 0:
            t = t.to(iou.device)
        return t

    def g(x: torch.Tensor):
        return torch.cat([f(x), x])
    """
    # a conditional move of the tensor itself is no birth on one path
    assert meetings(moved_back) == []


def test_loops_carry_values_and_appends():
    src = """
    def f(x: torch.Tensor, n: int):
        parts = []
        for i in range(n):
            parts.append(torch.zeros(2))
        return torch.cat([x, *parts])
    """
    assert [m[1:] for m in meetings(src)] == [(5, 6, "torch.cat")]


def test_anchors_follow_rebinding():
    flow, module, line = _flow(
        "import torch\n"
        "def f(x, y):\n"
        "    n = y.size(0)\n"
        "    a = torch.zeros(n)\n"
        "    x = x.size(0)\n"
        "    b = torch.zeros(n)\n"
        "    return y + a + b\n"
    )
    fn = flow.all_functions()[0]
    result = flow.function(fn)
    by_line = {line[o]: names for o, names in result.anchors.items()}
    assert by_line == {4: ["x", "y"], 6: ["y"]}  # once x is rebound to a number it names no device


def test_anchors_skip_parameters_tested_against_other_types():
    """A parameter tested with isinstance against another type than a tensor
    (a PIL image, a list) may hold that: no fix reads its ``.device``; one
    tested against torch.Tensor only stays an anchor."""
    flow, module, line = _flow(
        "import torch\n"
        "from PIL import Image\n"
        "def f(img, x, y):\n"
        "    a = torch.zeros(img.size(0) + x.size(0) + y.size(0))\n"
        "    if isinstance(img, Image.Image):\n"
        "        return img\n"
        "    if not isinstance(x, torch.Tensor):\n"
        "        raise TypeError(x)\n"
        "    if isinstance(y, (list, torch.Tensor)):\n"
        "        pass\n"
        "    return img + a + x + y\n"
    )
    fn = flow.all_functions()[0]
    result = flow.function(fn)
    by_line = {line[o]: names for o, names in result.anchors.items()}
    assert by_line == {4: ["x"]}
    [body] = [flow.body_facts(fn)]
    assert body.maybe_other == {"img", "y"}


def test_may_meet_bounds_the_meetings():
    """The cheap bound is never False where the analysis finds a meeting."""
    src = """
    import torch

    def grid(n):
        return torch.arange(n)

    def far(x: torch.Tensor):
        return x + grid(3)

    def none(x: torch.Tensor):
        return x * 2
    """
    flow, _, _ = _flow(src)
    for fn in flow.all_functions():
        if flow.function(fn).meetings:
            assert flow.may_meet(fn)
    by_name = {f.name.value: f for f in flow.all_functions()}
    assert not flow.may_meet(by_name["none"])
    assert flow.may_meet(by_name["far"])


def test_recursion_terminates():
    src = """
    def f(x: torch.Tensor):
        return g(x) + torch.ones(2)

    def g(x: torch.Tensor):
        return f(x)
    """
    assert meetings(src) is not None


def test_a_cpu_argument_meets_inside_the_callee():
    src = """
    def gamma_pdf(x, concentration):
        return x.float() ** (concentration - 1)

    def features(positions: torch.Tensor, n: int):
        mean = torch.linspace(0, 1, n)
        return gamma_pdf(positions.abs(), mean)
    """
    assert meetings(src) == [("features", 6, 3, "operator")]


def test_inputs_of_unknown_kind_become_tensors_where_only_a_tensor_can_be():
    src = """
    def post_process(outputs, num_classes: int):
        scores = outputs.logits.softmax(-1)
        labels = torch.arange(num_classes)
        top = scores.topk(5).indices
        return labels[top]

    def scaled(x, scale):
        return torch.arange(3) * scale  # scale may be a number
    """
    assert [m[:2] for m in meetings(src)] == [("post_process", 4)]


def test_a_function_that_hands_its_inputs_to_numpy_runs_on_the_cpu():
    src = """
    import numpy as np

    def fit(x: torch.Tensor, y: torch.Tensor):
        design = torch.cat([x, torch.ones(x.size(0), 1)], dim=-1)
        return np.linalg.lstsq(design, y.numpy(), rcond=None)
    """
    assert meetings(src) == []


def test_current_and_fixed_gpus_meet_the_inputs_device():
    src = """
    def f(x: torch.Tensor, n: int):
        a = torch.ones(n).cuda()
        b = torch.zeros(n, device="cuda:1")
        c = torch.arange(n).to(torch.device("cuda"))
        d = torch.zeros(n).cuda() * torch.ones(n).cuda()  # both on the current GPU: no meeting here
        return x + a, x * b, x[c], d
    """
    found = {(m[1], m[3]) for m in meetings(src)}
    assert found == {(3, "operator"), (4, "operator"), (5, "index")}
    flow, _, line = _flow("import torch\n" + textwrap.dedent(src))
    devices = {line[m.origin]: m.device for m in flow.function(flow.all_functions()[0]).meetings}
    assert devices == {4: "current", 5: "fixed", 6: "current"}


def test_dataset_methods_run_in_the_loader():
    src = """
    import torch
    from torch.utils.data import Dataset

    class Packed(Dataset):
        def pad(self, tokens: torch.Tensor, n: int):
            return torch.cat([tokens, torch.zeros(n, dtype=tokens.dtype)])

    def pad(tokens: torch.Tensor, n: int):
        return torch.cat([tokens, torch.zeros(n, dtype=tokens.dtype)])
    """
    flow, _, _ = _flow(src)
    found = [m.home.name.value + ("@" + (flow.owner[m.home] or "")) for m in flow.origin_meetings(("cpu",), set())]
    assert found == ["pad@"]


def test_a_zero_dim_fallback_return_is_no_meeting():
    src = """
    def mean_or_zero(x: torch.Tensor):
        if x.numel() == 0:
            return torch.tensor(0.0)
        return x.mean()

    def rows_or_empty(x: torch.Tensor):
        if x.numel() == 0:
            return torch.zeros(0, 4) if False else torch.zeros(1, 4)
        return x
    """
    assert meetings(src) == []


def test_tensors_built_from_tensors_follow_them():
    src = """
    def f(x: torch.Tensor, i: torch.Tensor, dims):
        sp = torch.sparse_coo_tensor(i, x)
        total = torch.prod(torch.tensor(dims))  # a 0-dim CPU tensor
        return sp * x, total - x
    """
    assert meetings(src) == []


def test_a_parameter_tested_for_none_is_no_anchor_there():
    src = """
    def reset_value(x: torch.Tensor, n: int):
        if x is None:
            return torch.ones(n)
        return x * torch.rand(x.size(0))
    """
    flow, _, line = _flow("import torch\n" + textwrap.dedent(src))
    result = flow.function(flow.all_functions()[0])
    by_line = {line[o]: names for o, names in result.anchors.items()}
    assert by_line == {5: [], 6: ["x"]}  # on the None path x names no device
    assert [line[m.origin] for m in result.meetings] == [6]


def test_a_mover_returning_cuda_or_its_input_is_no_meeting():
    src = """
    def to_cuda(x):
        if isinstance(x, torch.Tensor):
            return x.cuda()
        return x.float()
    """
    assert meetings(src) == []


def test_plain_tensor_attributes_are_held_where_they_were_built():
    src = """
    class Diffusion(nn.Module):
        def __init__(self, n: int = 10):
            super().__init__()
            self.net = nn.Linear(4, 4)
            self.betas = torch.linspace(0.0, 1.0, n)
            self.register_buffer("alphas", 1 - torch.linspace(0.0, 1.0, n))

        def q_sample(self, x0, t):
            return self.betas[t] * x0 + self.alphas[t] * x0

        def forward(self, x):
            t = torch.randint(0, 10, (x.size(0),), device=x.device)
            return self.net(self.q_sample(x, t))
    """
    flow, _, _ = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src))
    # q_sample's x0 and t are tensors on the inputs' device at its only call site
    q = flow.methods["Diffusion"]["q_sample"]
    assert set(flow.parameter_hints(q)) == {"x0", "t"}
    assert flow.held_meetings("Diffusion") == {"betas"}  # alphas is a buffer


def test_held_tensors_reach_forward_through_arguments_aliases_and_registered_buffers():
    src = """
    from typing import Optional
    from torch import Tensor

    class Mixin:
        def forward(self, X: Tensor) -> Tensor:
            return self.transform(X)

    class Shift(Mixin, nn.Module):
        def __init__(self, offsets: Tensor, limits: Optional[Tensor] = None, steps: int = 3):
            super().__init__()
            self.offsets = offsets
            self.limits = limits
            self.steps = steps

        def transform(self, X: Tensor) -> Tensor:
            return torch.minimum(X - self.offsets, self.limits)

    class Rotary(nn.Module):
        def __init__(self, dim: int = 8):
            super().__init__()
            self.register_buffer("freq", torch.arange(dim).float(), persistent=False)
            self.saved = self.freq

        def _reset(self, n: int) -> None:
            if n < 4:
                self.register_buffer("freq", self.saved, persistent=False)

        def forward(self, x, positions):
            self._reset(positions.shape[-1])
            return x * (positions[..., None].float() * self.freq)

    class Posterior(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.w = torch.randn(3)

        def forward(self, X: Tensor) -> Tensor:
            post = self.model(X)
            return post.mean + post.variance.sqrt() * self.w
    """
    flow, _, _ = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src))
    # an argument annotated as a tensor, read by the mixin's forward through
    # the module's own transform
    assert flow.held_meetings("Shift") == {"offsets", "limits"}
    # the alias of a buffer, registered back as the buffer forward reads
    assert flow.held_meetings("Rotary") == {"saved"}
    # .sqrt() is a tensor's method: the posterior's variance is a tensor there
    assert flow.held_meetings("Posterior") == {"w"}


def test_a_base_class_method_runs_for_its_subclass():
    src = """
    class Head(nn.Module):
        def forward(self, h):
            return self.fc(h) * self.weights

    class Balanced(Head):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.weights = torch.ones(3) / 3
    """
    flow, _, _ = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src))
    forward = flow.methods["Head"]["forward"]
    assert flow.function(forward).meetings == []  # Head alone has no weights attribute
    assert [m.device for m in flow.function_as(forward, "Balanced").meetings] == ["held"]
    assert flow.held_meetings("Balanced") == {"weights"}


def test_parameter_hints_need_every_call_site_to_agree():
    src = """
    class M(nn.Module):
        def scale(self, a, b):
            return a * b

        def forward(self, x: torch.Tensor):
            return self.scale(x, x) + self.scale(x, 2.0)

        def unused(self, y):
            return y

    def helper(a):
        return a

    def caller(x: torch.Tensor):
        return helper(x)
    """
    flow, _, _ = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src))
    methods = flow.methods["M"]
    assert set(flow.parameter_hints(methods["scale"])) == {"a"}  # b is 2.0 at one site
    assert flow.parameter_hints(methods["unused"]) == {}  # no call site
    assert flow.parameter_hints(flow.functions["helper"]) == {}  # module-level callers may be anywhere: not hinted


def test_one_line_suites_are_followed():
    src = """
    def f(x: torch.Tensor, n: int):
        t = torch.ones(n)
        if x.is_cuda: t = t.to(x.device)
        return x + t

    def g(x: torch.Tensor, n: int):
        if n: t = torch.ones(n)
        else: t = torch.zeros(n)
        return x + t
    """
    assert [m[0] for m in meetings(src)] == ["g", "g"]


@pytest.mark.parametrize(
    "src, expected",
    [
        # forward returns a CPU tensor: the caller gets it from a model on a GPU
        (
            """
            class Crop(nn.Module):
                def forward(self, samples):
                    out = torch.empty(samples.shape[0], 4)
                    for i, s in enumerate(samples):
                        out[i] = s[:4]
                    return out
            """,
            [("forward", 4, 7, "output")],
        ),
        # ... but not a 0-dim one, nor from a module with no tensor input or weights
        (
            """
            class Zero(nn.Module):
                def forward(self, x):
                    return torch.tensor(0.0)

            class Table(nn.Module):
                def forward(self, n: int):
                    return torch.arange(n)
            """,
            [],
        ),
        # a submodule is given a CPU state tuple and a CPU keyword mask; lengths stay CPU
        (
            """
            class Tagger(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rnn = nn.LSTM(4, 4)
                    self.att = nn.MultiheadAttention(4, 1)

                def forward(self, x, lengths):
                    h = (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
                    out, _ = self.rnn(x, h)
                    mask = torch.ones(2, 2)
                    self.att(out, out, out, attn_mask=mask, lengths=torch.tensor(lengths))
                    return out
            """,
            [("forward", 9, 10, "submodule"), ("forward", 11, 12, "submodule")],
        ),
        # a static helper called by its class's name, a nested helper
        (
            """
            class Head(nn.Module):
                @staticmethod
                def offsets(n: int):
                    return torch.arange(n)

                def forward(self, x: torch.Tensor):
                    def grid(n):
                        return torch.linspace(0, 1, n)
                    return x + Head.offsets(x.shape[-1]) + grid(x.shape[-1])
            """,
            # (and both calls, line 10, where forward can name x's device)
            [("forward", 5, 10, "operator"), ("forward", 9, 10, "operator"), ("forward", 10, 10, "operator")],
        ),
        # self.<attr> state set in forward, read by a method it calls
        (
            """
            class Scale(nn.Module):
                def scale(self, x: torch.Tensor):
                    return x * self.factors

                def forward(self, x: torch.Tensor):
                    self.factors = torch.full((4,), 0.5)
                    return self.scale(x)
            """,
            [("forward", 7, 4, "operator")],
        ),
        # a collective on a CPU tensor: NCCL takes CUDA tensors only
        (
            """
            import torch.distributed as dist

            def seed():
                t = torch.randint(0, 100, ())
                dist.all_reduce(t)
                return t.item()
            """,
            [("seed", 5, 6, "collective")],
        ),
        # device=t.device with t born on the CPU is still that birth
        (
            """
            def f(x: torch.Tensor, n: int):
                base = torch.arange(n)
                ones = torch.ones(n, device=base.device)
                return x + base, x * ones
            """,
            [("f", 3, 5, "operator")],
        ),
    ],
)
def test_sinks_and_calls_the_flow_follows(src, expected):
    found = sorted(set(meetings(src)))
    assert found == sorted(expected)


def test_a_callee_sees_what_its_caller_knows_is_on_the_cpu():
    src = """
    def rescale(scores: torch.Tensor, baseline: torch.Tensor):
        return scores - baseline

    def caller(x: torch.Tensor, n: int):
        scores = x.cpu()
        return rescale(scores, torch.zeros(n))
    """
    # scores is a CPU tensor here: the CPU baseline meets nothing in rescale
    assert meetings(src) == []
    assert [m[1:] for m in meetings(src.replace("x.cpu()", "x * 2"))] == [(7, 3, "operator")]


# -- devices that do not follow the inputs (what DL002 asks) ----------------------


def placed(src: str) -> List[Tuple[str, int, int, str, str]]:
    """(function, line of the placing call, line of the meeting, how, device)
    for tensors put on the current or a fixed GPU."""
    flow, _, line = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src))
    out = []
    for fn in flow.all_functions():
        for m in flow.function(fn).meetings:
            if m.device != CPU:
                out.append((fn.name.value, line[m.origin] - 3, line[m.at] - 3, m.how, m.device))
    return sorted(set(out))


def test_a_device_chosen_between_the_gpu_and_the_cpu_is_the_current_gpu():
    # on a GPU run the "cuda" path is taken, and "cuda" is the current GPU, not x's
    src = """
    def f(x: torch.Tensor):
        device = "cuda" if x.is_cuda else "cpu"
        return x + torch.ones(3, device=device)
    """
    assert placed(src) == [("f", 3, 3, "operator", "current")]
    assert join(Value(DEVICE, CPU), Value(DEVICE, FIXED)).device == FIXED
    # chosen from the input's own device: its device
    assert placed(src.replace('"cuda" if x.is_cuda', 'x.device if x.is_cuda')) == []


def test_a_device_fixed_when_the_module_was_built():
    src = """
    class M(nn.Module):
        def __init__(self, device, gpu):
            super().__init__()
            self.device = device
            self.gpu = gpu
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            a = torch.zeros(4, device=self.device)
            b = torch.ones(4).cuda(self.gpu)
            c = torch.ones(4, device=f"cuda:{self.gpu}")
            d = torch.ones(4, device=f"cuda:{x.get_device()}")
            return self.fc(x) + a + b + c + d
    """
    assert placed(src) == [
        ("forward", 9, 13, "operator", "fixed"), ("forward", 10, 13, "operator", "fixed"),
        ("forward", 11, 13, "operator", "fixed"),
    ]
    flow, _, line = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src))
    forward = next(f for f in flow.all_functions() if f.name.value == "forward")
    assert sorted(flow.function(forward).placed_by.values()) == ["self.device", "self.gpu", "self.gpu"]


def test_a_device_the_class_keeps_in_step_is_not_fixed():
    base = """
    class M(nn.Module):
        def __init__(self, device):
            super().__init__()
            self.device = device
            self.fc = nn.Linear(4, 4)
        {extra}
        def forward(self, x):
            return self.fc(x) + torch.zeros(4, device=self.device)
    """
    assert placed(base.format(extra=""))  # fixed in __init__ only
    kept = "def _apply(self, fn, *a, **k):\n            self.device = self.fc.weight.device\n            return super()._apply(fn, *a, **k)\n"
    assert placed(base.format(extra=kept)) == []
    reset = "def set_input(self, x):\n            self.device = x.device\n"
    assert placed(base.format(extra=reset)) == []


def test_a_module_level_device_is_fixed_in_a_module_but_not_in_a_script():
    src = """
    DEVICE = torch.device("cuda:0")

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            global DEVICE
            return self.fc(x) + torch.zeros(4, device=DEVICE)

    def step(x: torch.Tensor):
        return x + torch.zeros(4, device=DEVICE)
    """
    # in the script function DEVICE is the process's device, where its inputs are
    assert placed(src) == [("forward", 10, 10, "operator", "fixed")]


def test_a_default_device_is_what_a_call_without_one_uses():
    src = """
    def one_hot(labels: torch.Tensor, n: int, device="cuda"):
        return torch.zeros(labels.size(0), n, device=device).scatter_(1, labels[:, None], 1.0)
    """
    assert placed(src) == [("one_hot", 2, 2, "method scatter_", "current")]


def test_a_submodule_helper_returns_what_it_built():
    src = """
    class Cell(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.GRUCell(4, 4)

        def init_hidden(self, b):
            return torch.zeros(b, 4).cuda()

        def forward(self, x, h):
            return self.cell(x, h)

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = Cell()

        def forward(self, x):
            h = self.rnn.init_hidden(x.size(0))
            return self.rnn(x, h)
    """
    assert ("forward", 7, 10, "submodule", "current") in placed(src)
    flow, _, _ = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src))
    init_hidden = next(f for f in flow.all_functions() if f.name.value == "init_hidden")
    assert flow.runs_in_replica(init_hidden)  # called on a submodule from forward


def test_moving_something_that_may_be_a_model_is_no_birth():
    # Net().to(device), a batch: not known to be tensors, so no placement to report
    src = """
    def main(make, x: torch.Tensor):
        model = make().cuda()
        w = next(model.parameters())
        return x * w
    """
    assert placed(src) == []


def test_a_tensor_moved_to_a_gpu_on_one_path_is_on_it_in_a_gpu_run():
    # t = t.cuda() if the input is on a GPU, else t stays: a GPU run takes the GPU path
    src = """
    def f(x: torch.Tensor):
        mask = torch.rand(3) > 0.5
        if x.is_cuda:
            mask = mask.cuda()
        return x * mask
    """
    assert placed(src) == [("f", 4, 5, "operator", "current")]
    # torch.autograd.Variable wraps its tensor where it is
    wrapped = src.replace("mask = mask.cuda()", "mask = torch.autograd.Variable(mask).cuda()")
    assert placed(wrapped) == [("f", 4, 5, "operator", "current")]


# -- scripts: models a script moved, batches its loaders yield (what DL011 asks) --


def script_meetings(src: str) -> List[Tuple[str, str, str, str]]:
    """(scope, the CPU tensor as the code names it, how, the model it meets)
    for meetings with a model a script moved."""
    from devlint.facts.flow import Flow, is_placed
    from devlint.facts.store import FactStore
    from devlint.facts.classes import Classes
    from devlint.facts.training import Training

    module = cst.parse_module("import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\n" + textwrap.dedent(src))
    flow = FactStore(module, [Classes, Flow, Training])[Flow]
    out = []
    for fn in [flow.module_function(), *flow.all_functions()]:
        ff = flow.function(fn)
        for m in ff.meetings:
            if is_placed(m.against):
                item = ff.loader_items.get(m.origin)
                name = item.key if item is not None else cst.Module(body=[]).code_for_node(m.origin)
                out.append((flow.scope_name(fn), name, m.how, m.against.split(":", 1)[1] or m.partner))
    return sorted(set(out))


def test_batches_a_loader_yields_meet_the_model_the_script_moved():
    src = """
    def train(model, dataset, device):
        model = model.to(device)
        loader = DataLoader(dataset, batch_size=8)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
        for batch in loader:
            out = model(batch["input_ids"])
            x0, y0 = batch
            model(batch)  # a whole batch: a dict or a list, which .to() cannot move
    """
    assert script_meetings(src) == [
        ("train", "batch[\"input_ids\"]", "model input", "model"),
        ("train", "x", "model input", "model"),
        ("train", "y", "torch.nn.functional.cross_entropy", "model"),
    ]


def test_what_moves_a_batch_and_what_does_not():
    src = """
    def train(model, loader, device):
        model.to(device)
        for x, y in loader:
            x = x.to(device)
            y.to(device)  # a moved copy, thrown away
            out = model(x)
            loss = (out.argmax(1) == y).sum()
        for batch in loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            model(batch["x"])
    """
    assert script_meetings(src) == [("train", "y", "operator", "model")]
    # a model moved to the CPU, or only cast, is where the batches are
    assert script_meetings(src.replace("model.to(device)", 'model.to("cpu")')) == []
    assert script_meetings(src.replace("model.to(device)", "model.to(torch.float64)")) == []
    # a DataParallel wrapper moves its inputs: only the target meets the output
    wrapped = src.replace("model.to(device)", "model = nn.DataParallel(model).to(device)").replace("x = x.to(device)", "pass")
    assert script_meetings(wrapped) == [("train", "y", "operator", "model")]


def test_models_moved_elsewhere_in_the_script():
    src = """
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(4, 2).to(device)
    teacher = nn.Linear(4, 2)
    teacher.cuda().eval()

    def evaluate(loader):
        for x, _ in loader:
            model(x)  # the module-level model, moved above

    class Trainer:
        def __init__(self, net, loader):
            self.net = net.to(device)
            self.loader = loader

        def epoch(self):
            for x, y in self.loader:
                self.net(x)

    for x, y in DataLoader([]):
        teacher(x)
        model(torch.randn(2, 4))  # built on the CPU and fed to the model
    """
    assert script_meetings(src) == [
        ("<module>", "torch.randn(2, 4)", "model input", "model"),
        ("<module>", "x", "model input", "teacher"),
        ("Trainer.epoch", "x", "model input", "self.net"),
        ("evaluate", "x", "model input", "model"),
    ]


def test_a_row_of_a_vector_is_0_dim_and_a_plain_attribute_index_is_on_the_cpu():
    src = """
    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.schedule = torch.linspace(0.04, 0.07, 30)
            self.perm = torch.arange(8)
            self.fc = nn.Linear(8, 8)

        def forward(self, x, epoch: int):
            t = self.schedule[epoch]
            y = self.fc(x)[:, self.perm + 1]
            return y / t
    """
    # a 0-dim CPU divisor and a CPU index into a device tensor are both fine
    assert [m for m in meetings(src) if m[0] == "forward"] == []
    # the whole schedule (1-D) against the activations is not
    assert [m[3] for m in meetings(src.replace("y / t", "y / self.schedule"))] == ["operator"]


def test_a_device_argument_is_where_the_caller_wants_tensors():
    src = """
    def kernel(n: int, device):
        return torch.ones(n, n, device=device)

    def smooth(x: torch.Tensor, uniform: bool):
        device = x.device
        if uniform:
            k = torch.ones(3, 3) / 9
        else:
            k = kernel(3, device)
        return torch.nn.functional.conv2d(x, k)
    """
    # the CPU kernel of one path meets x; a helper given x's device builds there
    assert meetings(src) == [("smooth", 8, 11, "torch.nn.functional.conv2d")]


def test_a_callee_sees_the_tensors_its_caller_passes_on_the_inputs_device():
    src = """
    def pdf(x, concentration):
        return torch.xlogy(concentration - 1.0, x)

    def features(positions: torch.Tensor, n: int):
        mean = torch.linspace(1.0, 2.0, n)
        return pdf(positions.float(), mean)
    """
    # x is only an operand in pdf's own text; the caller knows it is a tensor
    assert [m[1:] for m in meetings(src)] == [(6, 3, "torch.xlogy")]


def test_a_collective_sends_a_maybe_0_dim_cpu_tensor():
    src = """
    import random
    import torch.distributed as dist

    def seed():
        t = torch.tensor(random.randrange(10_000))
        return dist.all_reduce(t)
    """
    assert [m[3] for m in meetings(src)] == ["collective"]


def test_a_parameter_every_caller_hands_a_cpu_tensor_is_on_the_cpu():
    src = """
    class Loader:
        def ids(self):
            return torch.randint(1, 100, (7,))

        def pad(self, ids):
            return torch.cat((torch.zeros(3, dtype=torch.int64), ids))

        def __next__(self):
            return self.pad(self.ids())

    def append_eos(ids):
        return torch.cat([ids, torch.tensor([2])])

    def collate(samples):
        return [append_eos(torch.as_tensor(s)) for s in samples]

    def public(x):
        return torch.add(x, torch.ones(1))

    if __name__ == "__main__":
        public(torch.ones(2))
    """
    # pad's and append_eos's callers hand them CPU tensors; public is only
    # called by the module's own demo code, which says nothing of its callers
    assert meetings(src) == [("public", 19, 19, "torch.add")]


def test_one_caller_on_the_inputs_device_keeps_the_parameter_there():
    src = """
    class Net(nn.Module):
        def pad(self, ids):
            return torch.cat((torch.zeros(3, dtype=torch.int64), ids))

        def forward(self, x):
            a = self.pad(torch.randint(1, 100, (7,)))
            return self.pad(x) + a
    """
    # forward's input reaches pad: its zeros meet a tensor on the inputs' device
    assert ("pad", 4, 4, "torch.cat") in meetings(src)


def test_a_typed_legacy_constructor_is_on_the_cpu_whatever_it_is_given():
    src = """
    def chunk_mask(x_len, starts):
        starts = torch.LongTensor(starts)
        rows = torch.arange(0, x_len).unsqueeze(-1)
        return rows < torch.nn.functional.pad(starts, (0, 1), value=x_len)

    def scales(layer_ids: torch.Tensor):
        s = torch.Tensor(layer_ids + 1)
        return s * torch.ones(3)
    """
    # torch.LongTensor(t) refuses a CUDA tensor: what it returns is on the
    # CPU, so the CPU tensors made beside it meet no GPU there; torch.Tensor(t)
    # is t itself, wherever t is (checked: a meta tensor stays on meta)
    assert [m[:3] for m in meetings(src)] == [("scales", 9, 9)]


def test_star_parameters_hold_what_the_callers_pass():
    # *xs: each element follows the inputs like any parameter, so a CPU index
    # built beside it meets it (segmentation_models_pytorch's _take_channels)
    found = meetings(
        """
        def take_channels(*xs, ignore=None):
            channels = [c for c in range(xs[0].shape[1]) if c not in ignore]
            return [torch.index_select(x, dim=1, index=torch.tensor(channels)) for x in xs]
        """
    )
    assert [(fn, born, how) for fn, born, _, how in found] == [("take_channels", 4, "torch.index_select")]


def test_a_number_on_one_path_is_the_tensor_of_the_other():
    # lengths = -1 or a count tensor: a later use meets the tensor
    r = returns(
        """
        def last(x, pad=None):
            if pad is None:
                n = -1
            else:
                n = torch.ones(3).sum()
            return n
        """,
        "last",
    )
    assert r.kind == TENSOR and r.device == CPU


def test_integer_arguments_take_a_0dim_tensor_as_a_number():
    # torch.multinomial(w, n): num_samples is an int; a 0-dim GPU tensor
    # there is read with __index__ and meets nothing (only forward's return
    # of the CPU draw is left); in a tensor argument the same value meets
    src = """
        class M(nn.Module):
            def forward(self, x):
                n = x.sum()
                return torch.{call}
        """
    assert [how for *_, how in meetings(src.format(call="multinomial(torch.ones(4), n)"))] == ["output"]
    assert "torch.add" in [how for *_, how in meetings(src.format(call="add(torch.ones(4), n)"))]


def test_a_function_that_takes_a_number_first_does_not_make_it_a_tensor():
    # torch.remainder(Scalar, Tensor) exists: seq_length may be an int, so the
    # CPU arange meets nothing (transformers' gpt_neo ONNX helper)
    src = """
        def blocks(seq_length, window):
            candidates = torch.arange(1, window)
            return torch.{fn}(seq_length, candidates)
        """
    assert meetings(src.format(fn="remainder")) == []
    assert [how for *_, how in meetings(src.format(fn="fmod"))] == ["torch.fmod"]


def test_an_attribute_reassigned_on_some_paths_holds_its_first_value_on_the_others():
    """``self.table`` regrown in ``forward`` for long inputs only: where the
    branch is skipped it is still the tensor ``__init__`` built; rebuilt on
    every path before the read, it is not."""
    src = """
    class Regrow(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.zeros(16, 8)

        def forward(self, x):
            if x.size(1) > self.table.size(0):
                self.table = torch.zeros(x.size(1), 8, device=x.device)
            return x + self.table[: x.size(1)]


    class Rebuilt(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.zeros(16, 8)

        def forward(self, x):
            if x.size(1) > 16:
                self.table = torch.zeros(x.size(1), 8, device=x.device)
            else:
                self.table = torch.zeros(16, 8, device=x.device)
            return x + self.table[: x.size(1)]
    """
    flow, _, _ = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src))
    assert flow.held_meetings("Regrow") == {"table"}
    assert flow.held_meetings("Rebuilt") == set()


def test_an_attribute_pinned_on_one_path_keeps_that_birth():
    """``self.masks`` set on the current GPU on the first step only: the
    branch's own placement is kept (DL002's bug), not lost in a join with
    the empty tensor ``__init__`` left there."""
    src = """
    class Gyro(nn.Module):
        def __init__(self):
            super().__init__()
            self.masks = torch.empty(0, 0)
            self.step = 0

        def forward(self, x):
            if self.step == 0:
                self.masks = torch.rand(4, x.shape[1]).to("cuda")
            return x * self.masks[0]
    """
    got = meetings(src)
    assert [(fn, how) for fn, _, _, how in got] == [("forward", "operator")]


def test_a_cpu_generator_draws_on_the_cpu_by_design():
    """A generator draws only into tensors on its own device: what
    ``torch.Generator()`` draws (a factory given ``generator=``, or an
    in-place ``uniform_``) is on the CPU by design, no missing ``device=``,
    and so is a CPU tensor combined with such a draw (``eye @ z``: it has to
    stay there for that operation). A CPU tensor that meets the inputs on
    its own, or a draw of a generator on a GPU, still meets them."""
    src = """
    def lookup(u, levels):
        return torch.searchsorted(levels, u)

    def draws(levels, n, seed):
        g = torch.Generator().manual_seed(seed)
        z = torch.randn(4, n, generator=g)
        eye = torch.eye(4)
        u = torch.empty(4, n)
        u.uniform_(0.0, 1.0, generator=g)
        return lookup(torch.matmul(eye, z) + u, levels)

    def beside(levels, n):
        g = torch.Generator(device="cpu")
        z = torch.rand(n, generator=g)
        return lookup(z, levels), lookup(torch.rand(n), levels)

    def on_a_gpu(levels, n):
        g = torch.Generator(device="cuda")
        return lookup(torch.empty(n).uniform_(generator=g), levels)
    """
    got = sorted((fn, birth) for fn, birth, _, _ in meetings(src))
    assert got == [("beside", 16), ("on_a_gpu", 20)]


# -- branches a value rules out -----------------------------------------------------


def test_a_name_known_to_be_none_rules_out_the_branch_that_needs_a_value():
    src = """
    def f(x: torch.Tensor):
        mask = None
        if mask is not None:
            x = x + torch.ones(3)
        return x + (torch.zeros(3) if mask is not None else x)
    """
    assert meetings(src) == []
    # one that is only maybe None decides nothing
    src_maybe = """
    def f(x: torch.Tensor, mask=None):
        if mask is not None:
            x = x + torch.ones(3)
        return x
    """
    assert [m[1:3] for m in meetings(src_maybe)] == [(4, 4)]


def test_a_call_leaving_a_parameter_at_its_default_decides_the_callees_branches():
    src = """
    class Drop(nn.Module):
        def forward(self, x):
            return x * self.make_mask(input=x)

        def make_mask(self, input=None, shape=None):
            if input is not None:
                return torch.ones_like(input)
            elif shape is not None:
                return torch.ones(shape)
            raise ValueError
    """
    assert meetings(src) == []
    # given a shape, the CPU branch is the one that runs
    taken = src.replace("self.make_mask(input=x)", "self.make_mask(shape=x.shape)")
    assert ("forward", 10, 4, "operator") in meetings(taken)


def test_a_private_method_every_caller_leaves_at_false_skips_its_flagged_branch():
    src = """
    class Attention(nn.Module):
        def _scores(self, q, is_causal=False):
            bias = torch.zeros(q.shape[-2], q.shape[-2], device=q.device)
            if is_causal:
                bias.masked_fill_(torch.ones(2, 2, dtype=torch.bool).triu(1), float("-inf"))
            return q @ q.transpose(-2, -1) + bias

        def forward(self, x):
            return self._scores(x)
    """
    assert meetings(src) == []
    assert [m[:2] for m in meetings(src.replace("self._scores(x)", "self._scores(x, is_causal=True)"))] == [("_scores", 6)]
    # a public method may be called with True from elsewhere: its branch counts
    public = src.replace("_scores", "scores")
    assert [m[:2] for m in meetings(public)] == [("scores", 6)]


def test_a_function_of_the_file_that_returns_host_data_follows_none_of_its_arguments():
    src = """
    class Captioner(nn.Module):
        def _to_image(self, frame):
            array = frame.cpu().numpy()
            return Image.fromarray(array)

        def encode(self, frames):
            ids = self.processor(self._to_image(frames[0]))["input_ids"]
            return torch.cat((ids, torch.tensor([[2]])), dim=1)
    """
    assert meetings(src) == []
    # a callable the flow cannot see, given the frame itself, computes where it is
    unseen = src.replace("self._to_image(frames[0])", "frames[0]")
    assert [m[:2] for m in meetings(unseen)] == [("encode", 9)]


def test_text_is_on_no_device():
    src = """
    def encode(processor, name, image):
        prompt = "a photo of {}".format(name.lower())
        ids = processor(prompt)
        return torch.cat((ids, torch.tensor([[2]])), dim=1)
    """
    assert meetings(src) == []
    # the same call given the image (a parameter: it follows the inputs)
    assert [m[:2] for m in meetings(src.replace("processor(prompt)", "processor(prompt, image)"))] == [("encode", 5)]


def test_tensors_asked_of_a_tokenizer_follow_none_of_its_inputs():
    src = """
    def encode(tokenizer, texts):
        ids = tokenizer(texts, return_tensors="pt")["input_ids"]
        return torch.cat((ids, torch.full((ids.size(0), 1), 2)), dim=1)
    """
    assert meetings(src) == []
    assert [m[:2] for m in meetings(src.replace('return_tensors="pt"', 'return_tensors="np"'))] == [("encode", 4)]


def test_a_branch_taken_only_while_fx_traces_meets_nothing():
    src = """
    import torch.fx

    class Shift(nn.Module):
        def forward(self, ids, start: int):
            if isinstance(ids, torch.fx.Proxy):
                return torch.cat([torch.full(ids.shape[:-1] + (1,), start), ids[..., :-1]], dim=-1)
            return ids.roll(1, -1)
    """
    assert meetings(src) == []
    negated = """
    from transformers.utils import is_torch_fx_proxy

    def shift(ids, start: int):
        if not is_torch_fx_proxy(ids):
            return ids.roll(1, -1)
        else:
            return torch.cat([torch.full(ids.shape[:-1] + (1,), start), ids[..., :-1]], dim=-1)
    """
    assert meetings(negated) == []
    other_test = src.replace("isinstance(ids, torch.fx.Proxy)", "ids.dim() > 1")
    assert [m[:2] for m in meetings(other_test)] == [("forward", 7)]


def test_a_full_tensor_of_zeros_is_no_empty_placeholder():
    src = """
    def pad(ids):
        start = torch.full((ids.size(0), 1), 0)
        return torch.cat([start, ids], dim=-1)
    """
    assert [m[:2] for m in meetings(src)] == [("pad", 3)]
    # a size with a zero dimension holds nothing: an unused placeholder
    assert meetings(src.replace("torch.full((ids.size(0), 1), 0)", "torch.full((ids.size(0), 0), 1)")) == []


def test_a_layer_built_on_the_inputs_path_has_its_weights_on_the_cpu():
    src = """
    class Adapter(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(8)

        def forward(self, x):
            head = nn.Linear(8, 4)
            return head(self.norm(x))
    """
    assert meetings(src) == [("forward", 8, 9, "submodule")]
    # built with the inputs' device, or moved there: its weights are where x is
    assert meetings(src.replace("nn.Linear(8, 4)", "nn.Linear(8, 4, device=x.device)")) == []
    assert meetings(src.replace("nn.Linear(8, 4)", "nn.Linear(8, 4).to(x.device)")) == []
    # built while the module is built: a submodule, moved with the model
    built = src.replace("head = nn.Linear(8, 4)\n            return head(", "return self.head(").replace(
        "self.norm = nn.LayerNorm(8)", "self.norm = nn.LayerNorm(8)\n            self.head = nn.Linear(8, 4)")
    assert meetings(built) == []


def test_replica_calls_that_always_pass_a_device():
    src = """
    class Cells(nn.Module):
        def init_hidden(self, b, device=None):
            if device is None:
                device = next(self.parameters()).device
            return torch.zeros(b, 4, device=device)

        def forward(self, x):
            return self.init_hidden(x.size(0), device=x.device) + x
    """
    flow, _, _ = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src))
    init = next(f for f in flow.all_functions() if f.name.value == "init_hidden")
    assert flow.replica_calls_pass(init, {"device"})
    fallback = next(n for n in _calls(init) if "parameters" in cst.Module(body=[]).code_for_node(n.func))
    assert flow.replica_skips(init, fallback)
    flow, _, _ = _flow("import torch\nimport torch.nn as nn\n" + textwrap.dedent(src).replace(", device=x.device", ""))
    init = next(f for f in flow.all_functions() if f.name.value == "init_hidden")
    assert not flow.replica_calls_pass(init, {"device"})


def _calls(fn: cst.FunctionDef) -> List[cst.Call]:
    found: List[cst.Call] = []

    class _C(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    fn.visit(_C())
    return found


def test_pytest_parametrize_constants_are_python_values_not_inputs():
    src = """
    import itertools

    import pytest
    from lib import Normalizer


    @pytest.mark.parametrize(["center", "kind"], itertools.product([True, False], ["log", None, -1.5]))
    def test_constants(center, kind):
        normalized = Normalizer(center=center, kind=kind).fit_transform(torch.tensor([1.0, 2.0]))
        return torch.cat([normalized, torch.zeros(2)])


    @pytest.mark.parametrize("center", [torch.ones(2)])
    def test_a_tensor_value(center):
        normalized = Normalizer(center=center).fit_transform(torch.tensor([1.0, 2.0]))
        return torch.cat([normalized, torch.zeros(2)])


    def test_a_fixture(center):
        normalized = Normalizer(center=center).fit_transform(torch.tensor([1.0, 2.0]))
        return torch.cat([normalized, torch.zeros(2)])
    """
    found = {(f, how) for f, _, _, how in meetings(src)}
    # an object built from constants follows no input: the CPU tensors meet nothing
    assert not any(f == "test_constants" for f, _ in found)
    # a parametrized tensor, or a fixture, may be anywhere: what is built from it follows it
    assert any(f == "test_a_tensor_value" for f, _ in found)
    assert any(f == "test_a_fixture" for f, _ in found)


def test_a_closure_reads_the_enclosing_functions_tensors():
    # the CPU gate meets the activations inside the nested function: the
    # enclosing function's finding, as if the gate were passed in
    found = meetings(
        """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def forward(self, x):
                gate = torch.ones(4)

                def apply(h):
                    return h * gate

                return apply(self.proj(x))
        """
    )
    assert ("forward", 8, 11, "operator") in found
    # a placed tensor, or one used for a Python number, meets nothing there
    assert meetings(
        """
        class Block(nn.Module):
            def forward(self, x):
                gate = torch.ones(4, device=x.device)
                sizes = torch.tensor([1, 2])

                def apply(h):
                    return h * gate * int(sizes.max().item())

                return apply(x)
        """
    ) == []


def test_a_row_of_a_matrix_is_a_tensor_not_a_scalar():
    # torch.eye(n) keeps two dimensions through unsqueeze and casts: its
    # row [0] is a matrix, which the kernel meets (a 0-dim row would not)
    found = meetings(
        """
        def resample(kernel: torch.Tensor) -> torch.Tensor:
            basis = torch.eye(kernel.shape[-1]).unsqueeze(0).float()
            return kernel @ basis[0]

        def scale(x: torch.Tensor) -> torch.Tensor:
            steps = torch.arange(4)
            return x * steps[0]
        """
    )
    assert [(f, b) for f, b, _, _ in found] == [("resample", 3)]


def test_a_vmapped_function_runs_on_its_arguments_devices():
    # torch.vmap(f)(x), maps of maps, a local alias of vmap and a name bound
    # to a map: each call runs f on slices of x, where the closure's CPU
    # matrix meets them
    found = meetings(
        """
        def direct(kernel: torch.Tensor) -> torch.Tensor:
            mat = torch.eye(4)

            def one(k):
                return mat @ k

            return torch.func.vmap(torch.func.vmap(one, 0, 0), 1, 1)(kernel)

        def aliased(kernel: torch.Tensor) -> torch.Tensor:
            try:
                import functorch
                vmap = functorch.vmap
            except ImportError:
                vmap = torch.vmap
            mat = torch.eye(4)

            def one(k):
                return mat @ k

            per_column = vmap(one, 1, 1)
            return per_column(kernel)
        """
    )
    assert sorted({(f, b) for f, b, _, _ in found}) == [("aliased", 16), ("direct", 3)]


def test_module_level_tensors_are_cpu_constants_only_when_bound_once():
    """A tensor the module makes at import (``MEAN = torch.tensor(...)``) is
    on the CPU wherever a function reads it; a name bound again (at module
    level, or by a function that declares it ``global``), a 0-dim tensor,
    and one made with a device are not such constants."""
    src = (
        "MEAN = torch.tensor([0.5, 0.4, 0.3]).view(1, 3, 1, 1)\n"
        "SCALE = torch.tensor(0.07)\n"
        "ON_GPU = torch.ones(3, device='cuda')\n"
        "GRID = torch.linspace(0, 1, 5)\n"
        "GRID = GRID.cuda()\n"
        "CACHE = torch.zeros(3)\n"
        "for TABLE in (torch.ones(3),):\n"
        "    pass\n\n"
        "def reset():\n"
        "    global CACHE\n"
        "    CACHE = torch.zeros(3)\n\n"
        "def f(x: torch.Tensor):\n"
        "    return x - MEAN\n"
    )
    flow, _, _ = _flow("import torch\n" + src)
    assert flow.module_tensor("MEAN").device == CPU
    for name in ("SCALE", "ON_GPU", "GRID", "CACHE", "TABLE", "f", "torch"):
        assert flow.module_tensor(name) is None, name
    assert [(m[0], m[1], m[3]) for m in meetings(src)] == [("f", 1, "operator")]
    # a local of the same name shadows the constant
    assert not meetings("MEAN = torch.ones(3)\n\ndef f(x: torch.Tensor):\n    MEAN = x.mean()\n    return x - MEAN\n")


_AVERAGER = """
class Shadow:
    def __init__(self, model):
        self.copy = {COPY}

    def update(self, model):
        for n, p in model.named_parameters():
            self.copy[n].mul_(0.99).add_(p)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


def main(device):
    net = Net()
    shadow = Shadow(net)
    net.to(device)
    shadow.update(net)
"""


@pytest.mark.parametrize("copy, found", [
    # copies of the weights a move leaves on the CPU
    ("{n: p.detach().clone() for n, p in model.named_parameters()}", True),
    ("{n: p.clone() for n, p in model.named_parameters()}", True),
    ("dict(model.state_dict())", False),  # (a dict() of it is no value the flow follows)
    # the parameters themselves: moved in place with the model
    ("dict(model.named_parameters())", False),
])
def test_a_copy_of_the_weights_made_before_the_move_stays_on_the_cpu(copy, found):
    """``model.to(device)`` moves a module's own parameters in place (a
    reference taken before the move sees the move); a copy (``clone``,
    ``detach``, ``deepcopy``, ``state_dict``) made before it does not."""
    meetings = script_meetings(_AVERAGER.replace("{COPY}", copy))
    assert bool([m for m in meetings if m[0] == "main" and m[2] == "method add_"]) == found, meetings


def test_a_model_copied_after_the_move_is_where_the_model_is():
    src = _AVERAGER.replace("{COPY}", "{n: p.detach().clone() for n, p in model.named_parameters()}")
    src = src.replace("    shadow = Shadow(net)\n    net.to(device)\n", "    net.to(device)\n    shadow = Shadow(net)\n")
    assert not [m for m in script_meetings(src) if m[0] == "main"]
