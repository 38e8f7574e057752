"""Model-parallel stages (devlint/facts/stages.py) and the handovers the
device flow finds with them, asked directly rather than through DL008."""

from __future__ import annotations

import textwrap
from typing import List, Tuple

import libcst as cst

from devlint.facts.classes import build_facts
from devlint.facts.flow import DeviceFlow
from devlint.facts.stages import Stages

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _flow(src: str) -> Tuple[DeviceFlow, cst.Module, dict]:
    module = cst.parse_module(HEADER + textwrap.dedent(src))
    wrapper = cst.metadata.MetadataWrapper(module, unsafe_skip_copy=True)
    pos = wrapper.resolve(cst.metadata.PositionProvider)
    return DeviceFlow(build_facts(module), module), module, {n: p.start.line - 3 for n, p in pos.items()}


def handovers(src: str, method: str = "forward") -> List[Tuple[int, str, str, str, str, bool]]:
    """(line, value handed over, kind, its stage, what receives it, arrival)."""
    flow, _, line = _flow(src)
    out = []
    for fn in flow.all_functions():
        if fn.name.value != method:
            continue
        for h in flow.function(fn).handovers:
            code = cst.Module(body=[]).code_for_node(h.arg)
            out.append((line[h.arg], code, h.kind, h.source, h.receiver, h.arrival))
    return out


PIPELINE = """
class Pipeline(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = nn.Linear(8, 8).to("cuda:0")
        self.stage2 = nn.Linear(8, 2).to("cuda:1")
        self.act = nn.ReLU()

    def forward(self, x, labels):
        h = self.act(self.stage1(x))
        logits = self.stage2({handed})
        return F.cross_entropy(logits, labels)
"""


def test_an_activation_handed_to_another_stage():
    found = handovers(PIPELINE.format(handed="h"))
    # h from cuda:0 into the part on cuda:1; the labels arrive with x, on cuda:0
    assert found == [
        (11, "h", "between", '`"cuda:0"`', "`self.stage2`", False),
        (12, "labels", "between", '`"cuda:0"`', "`logits`", True),
    ]


def test_a_move_or_a_cast_is_what_it_is():
    assert handovers(PIPELINE.format(handed='h.to("cuda:1")'))[:1] == [
        (12, "labels", "between", '`"cuda:0"`', "`logits`", True)
    ]
    # a dtype cast keeps the stage: still a handover
    assert handovers(PIPELINE.format(handed="h.to(torch.float16)"))[0][:3] == (11, "h.to(torch.float16)", "between")
    # moved to where another tensor of the receiving stage is
    src = PIPELINE.format(handed="h").replace("logits = self.stage2(h)", "logits = self.stage2(h.to(self.stage2.weight.device))")
    assert [f[1] for f in handovers(src)] == ["labels"]


def test_blocks_spread_over_devices():
    src = """
    devices = [torch.device("cuda:0"), torch.device("cuda:1")]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            return self.fc(x)

    class Spread(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(n)])
            for i, block in enumerate(self.blocks):
                block.to(devices[i % 2])
            self.head = nn.Linear(8, 2).to(devices[0])

        def forward(self, x):
            x = x.to(devices[0])
            for block in self.blocks:
                x = block({handed})
            return self.head({out})
    """
    found = handovers(src.format(handed="x", out="x"))
    assert [(f[1], f[2]) for f in found] == [("x", "into"), ("x", "out of")]
    moved = src.format(handed="x.to(block.fc.weight.device)", out="x.to(devices[0])")
    assert handovers(moved) == []


def test_stage_keys_name_the_same_device_however_it_is_written():
    src = """
    DEV = torch.device("cuda:1")
    devices = ["cuda:0", "cuda:1"]

    class M(nn.Module):
        def __init__(self, dev1):
            super().__init__()
            self.dev1 = dev1
            self.a = nn.Linear(2, 2).to(dev1)
            self.b = nn.Linear(2, 2).to(DEV)
    """
    module = cst.parse_module(HEADER + textwrap.dedent(src))
    facts = build_facts(module)
    stages = Stages(facts, facts.classes["M"], "self")
    key = lambda code: stages.key(cst.parse_expression(code))  # noqa: E731
    assert key('"cuda:1"') == key("DEV") == key("devices[1]") == key('torch.device("cuda", 1)') == key("1") == "cuda:1"
    assert key('"cuda"') == "cuda:0"
    assert key("self.dev1") == key("dev1") == "name:dev1"
    assert stages.of_attribute("a") == "name:dev1" and stages.of_attribute("b") == "cuda:1"
    assert stages.expression("b") == "DEV"  # usable in forward as written
    assert stages.expression("a") == "self.a.weight.device"  # dev1 is __init__'s own


def test_a_part_that_moves_its_own_inputs_takes_any():
    src = """
    class Stage(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x.to(self.fc.weight.device))

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Stage().to("cuda:0")
            self.b = Stage().to("cuda:1")

        def forward(self, x):
            return self.b(self.a(x))
    """
    assert handovers(src) == []
    # the same parts without the move: cuda:0's output goes into cuda:1's part
    plain = src.replace("self.fc(x.to(self.fc.weight.device))", "self.fc(x)")
    assert [(f[1], f[2]) for f in handovers(plain)] == [("self.a(x)", "between")]
