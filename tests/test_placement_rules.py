"""DL002 / DL008 / DL009 beyond their examples: the facts they read, how
they share a file with each other and with DL001 (no rule fights another,
fixes converge), and the look-alikes the issue names."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from devlint.engine import fix_source, lint_source
from devlint.facts.classes import build_facts


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _codes(text: str, codes=None):
    return [(d.line, d.code) for d in lint_source(_src(text), "t.py", codes=codes).diagnostics]


def _fix(text: str) -> str:
    result = fix_source(_src(text), "t.py")
    assert not result.internal_errors, result.internal_errors
    again = fix_source(result.fixed_text, "t.py")
    assert again.fixed_text == result.fixed_text, "fixing twice changed the code"
    return result.fixed_text


SEED_SPLIT = """
import torch
import torch.nn as nn

devices = [torch.device("cuda:0"), torch.device("cuda:1")]

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.GELU())

    def forward(self, x):
        return x + self.mlp(self.ln1(x))

class LM(nn.Module):
    def __init__(self, n_layer=4):
        super().__init__()
        self.wte = nn.Embedding(10, 8).to(devices[0])
        self.blocks = nn.ModuleList([Block(8) for _ in range(n_layer)])
        for i, block in enumerate(self.blocks):
            block.to(devices[i % len(devices)])
        self.head = nn.Linear(8, 10).to(devices[0])

    def forward(self, idx):
        idx = idx.to(devices[0])
        x = self.wte(idx) + self.wte(torch.arange(idx.size(1), device=devices[0]))
        for block in self.blocks:
            x = BODY
        return self.head(x)
"""


# -- facts ---------------------------------------------------------------------


def test_facts_element_placement_anchor_and_device_list():
    facts = build_facts(cst.parse_module(_src(SEED_SPLIT.replace("BODY", "block(x)"))))
    lm, block = facts.classes["LM"], facts.classes["Block"]
    assert facts.module_device_lists == {"devices": ['torch.device("cuda:0")', 'torch.device("cuda:1")']}
    assert "devices" in facts.module_assigned
    assert lm.element_placements == {"blocks": ["devices[i % len(devices)]"]}
    assert lm.element_index == {"blocks": "i"}
    assert lm.elements_spread("blocks") and not lm.elements_spread("head")
    assert lm.pinned_devices()["head"] == "devices[0]"
    assert lm.attributes["blocks"].element_class == "Block"
    assert block.anchor_tensor == "ln1.weight"
    assert facts.tensor_path_of_class("Block") == "ln1.weight"
    assert facts.tensor_path_of_class("torch.nn.Linear") == "weight"
    assert facts.tensor_path_of_class("torch.nn.LSTM") == "weight_ih_l0"
    assert facts.tensor_path_of_class("torch.nn.Transformer") is None
    assert not facts.has_device_attribute("Block")


def test_facts_placements_inside_container_constructors():
    facts = build_facts(
        cst.parse_module(
            _src(
                """
                import torch.nn as nn
                class M(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.stages = nn.ModuleList([nn.Linear(2, 2).to(f"cuda:{k}") for k in range(2)])
                        self.pair = nn.Sequential(nn.Linear(2, 2).to("cuda:0"), nn.Linear(2, 2).to("cuda:1"))
                        self.whole = nn.Sequential(nn.Linear(2, 2)).to("cuda:1")
                """
            )
        )
    )
    m = facts.classes["M"]
    assert m.element_index == {"stages": "k"}
    assert m.element_placements["pair"] == ['"cuda:0"', '"cuda:1"']
    assert m.elements_spread("stages") and m.elements_spread("pair")
    assert m.pinned_devices()["whole"] == '"cuda:1"'


def test_facts_device_attribute_through_bases_and_ddp():
    facts = build_facts(
        cst.parse_module(
            _src(
                """
                import torch.nn as nn
                from torch.nn.parallel import DistributedDataParallel as DDP
                from mylib import Mixin
                class Base(nn.Module):
                    def __init__(self, device):
                        super().__init__()
                        self.device = device
                class Child(Base):
                    pass
                class Plain(nn.Module):
                    pass
                class Mixed(Mixin, nn.Module):
                    pass
                """
            )
        )
    )
    assert facts.has_device_attribute("Child")
    assert not facts.has_device_attribute("Plain")
    assert facts.has_device_attribute("Mixed")  # unknown base: assumed to define it
    assert facts.has_device_attribute("torch.nn.parallel.DistributedDataParallel")
    assert not facts.has_device_attribute("torch.nn.DataParallel")
    assert facts.class_attribute("Child", "device").kind == "device"


# -- the seed's model-parallel GPT, three ways ---------------------------------


def test_seed_split_without_moves_gets_per_block_moves():
    fixed = _fix(SEED_SPLIT.replace("BODY", "block(x)"))
    assert "x = block(x.to(block.ln1.weight.device))" in fixed
    assert "return self.head(x.to(devices[0]))" in fixed
    # model-parallel code places tensors on purpose: DL002 stays out of it
    assert "device=devices[0]" in fixed and "idx.to(devices[0])" in fixed
    assert lint_source(fixed, "t.py").diagnostics == []


def test_seed_fixed_code_with_block_device_is_dl009_only():
    found = _codes(SEED_SPLIT.replace("BODY", "block(x.to(block.device))"))
    assert [c for _, c in found] == ["DL009", "DL008"]  # block.device, then the head
    fixed = _fix(SEED_SPLIT.replace("BODY", "block(x.to(block.device))"))
    assert "block(x.to(block.ln1.weight.device))" in fixed


def test_loop_index_placement_is_reused_when_no_tensor_is_held():
    src = """
    import torch
    import torch.nn as nn
    devices = [torch.device("cuda:0"), torch.device("cuda:1")]
    class Gate(nn.Module):
        def forward(self, x):
            return x.relu()
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.gates = nn.ModuleList([Gate() for _ in range(4)])
            for i, g in enumerate(self.gates):
                g.to(devices[i % 2])
        def forward(self, x):
            for j, gate in enumerate(self.gates):
                x = gate(x)
            return x
    """
    assert "x = gate(x.to(devices[j % 2]))" in _fix(src)


def test_receiver_that_moves_its_own_inputs_is_trusted():
    src = SEED_SPLIT.replace("BODY", "block(x)").replace(
        "return x + self.mlp(self.ln1(x))",
        "x = x.to(self.ln1.weight.device)\n        return x + self.mlp(self.ln1(x))",
    )
    found = _codes(src, codes=["DL008"])
    assert len(found) == 1  # only the head: the blocks move their own inputs


# -- DL001 and DL002 on one file ----------------------------------------------


def test_dl001_and_dl002_do_not_fight():
    src = """
    import torch
    import torch.nn as nn
    device = torch.device("cuda:0")
    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
        def forward(self, src):
            a = torch.arange(src.size(1))
            b = torch.arange(src.size(1), device=device)
            c = torch.ones(3).cuda()
            d = src.to(device)
            return a, b, c, d
    """
    found = _codes(src)
    assert found == [(9, "DL001"), (10, "DL002"), (11, "DL002"), (12, "DL002")]
    fixed = _fix(src)
    assert "torch.arange(src.size(1), device=src.device)" in fixed
    assert fixed.count("device=src.device") == 2
    assert "torch.ones(3).to(src.device)" in fixed
    assert "d = src.to(self.emb.weight.device)" in fixed  # not src.to(src.device)


# -- look-alikes named by the issue ------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        # device passed as an argument of forward
        "def forward(self, x, device):\n        return x + torch.zeros(3, device=device)",
        # a local that shadows the module-level device
        "def forward(self, x):\n        device = x.device\n        return x + torch.zeros(3, device=device)",
        # a device read from a parameter
        "def forward(self, x):\n        return x.to(self.fc.weight.device)",
        # .cpu() / .to('cpu') on purpose
        "def forward(self, x):\n        return self.fc(x).to('cpu'), x.cpu()",
        # .cuda(i) with an index taken from a tensor
        "def forward(self, x):\n        return torch.ones(3).cuda(x.get_device())",
    ],
)
def test_dl002_look_alikes(body):
    src = f"""
import torch
import torch.nn as nn
device = torch.device("cuda:0")
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
    {body}
"""
    assert _codes(src) == []


def test_dl002_global_statement_still_means_the_module_device():
    src = """
    import torch
    import torch.nn as nn
    device = torch.device("cuda:0")
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)
        def forward(self, x):
            global device
            return self.fc(x) + torch.zeros(3, device=device)
    """
    assert _codes(src) == [(10, "DL002")]


def test_dl002_no_anchor_reports_without_fix():
    src = """
    import torch
    import torch.nn as nn
    class M(nn.Module):
        def __init__(self, device):
            super().__init__()
            self.device = device
            self.body = nn.Sequential(nn.ReLU())
        def forward(self, x):
            return self.body(x) + torch.zeros(3, device=self.device)
    """
    result = lint_source(_src(src), "t.py")
    [d] = result.diagnostics
    assert d.code == "DL002" and d.fix is None and d.no_fix_reason


def test_dl009_no_parameters_next_inside_forward():
    src = """
    import torch.nn as nn
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(4, 4)
        def forward(self, x):
            return self.rnn(x.to(self.rnn.device))[0]
        def predict(self, x):
            return self(x.to(self.rnn.device))
    """
    fixed = _fix(src)
    # an LSTM's first-layer weight names its device, inside forward too
    assert "x.to(self.rnn.weight_ih_l0.device))[0]" in fixed
    assert "self(x.to(self.rnn.weight_ih_l0.device))" in fixed
    assert [c for _, c in _codes(src)] == ["DL009", "DL009"]
    # a module with no tensor devlint can name: no fix inside forward
    other = src.replace("nn.LSTM(4, 4)", "nn.Transformer(4, 2)")
    assert "x.to(self.rnn.device))[0]" in _fix(other)


def test_dl009_script_model_moved_then_read():
    src = """
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
    def main():
        model = Net()
        model = model.to("cuda")
        x = torch.zeros(2, 2).to(model.device)
        other = load_model()
        y = x.to(other.device)
    """
    fixed = _fix(src)
    assert "torch.zeros(2, 2).to(model.fc.weight.device)" in fixed
    assert "x.to(other.device)" in fixed


def test_facts_element_class_of_nn_containers_filled_later():
    # an nn.ModuleList() / nn.ModuleDict() created empty takes the class of the
    # modules appended or stored into it; one built from something devlint
    # cannot see keeps an unknown element class, appends or not
    facts = build_facts(
        cst.parse_module(
            textwrap.dedent(
                """
                import torch.nn as nn

                class Block(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(4, 4)

                class M(nn.Module):
                    def __init__(self, layers):
                        super().__init__()
                        self.blocks = nn.ModuleList()
                        self.more = nn.ModuleList([])
                        self.mixed = nn.ModuleList()
                        self.given = nn.ModuleList(layers)
                        self.heads = nn.ModuleDict()
                        for i in range(2):
                            self.blocks.append(Block().to(f"cuda:{i}"))
                            self.more.append(Block())
                            self.mixed.append(Block())
                            self.mixed.append(nn.Linear(4, 4))
                            self.given.append(Block())
                        self.heads["cls"] = nn.Linear(4, 2)
                        self._build()

                    def _build(self):
                        self.more.extend([Block()])
                """
            )
        )
    )
    attrs = facts.classes["M"].attributes
    assert attrs["blocks"].element_class == "Block"
    assert attrs["more"].element_class == "Block"
    assert attrs["mixed"].element_class == "torch.nn.Module"
    assert attrs["given"].element_class == ""
    assert attrs["heads"].element_class == "torch.nn.Linear"


def test_facts_element_class_from_helpers_that_return_modules():
    # a helper of the file whose every return builds a module gives the
    # element class; one that registers what it builds, or returns something
    # else on some path, gives none
    facts = build_facts(
        cst.parse_module(
            textwrap.dedent(
                """
                import torch.nn as nn

                def conv_bn(a, b):
                    block = nn.Sequential(nn.Conv2d(a, b, 1), nn.BatchNorm2d(b))
                    return block

                class M(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.stages = [self._stage(w) for w in (4, 8)]
                        self.proj = [conv_bn(4, 8)]
                        self.taps = [self._tap(i) for i in range(2)]
                        self.maybe = [self._maybe(i) for i in range(2)]
                        self.blocks = nn.ModuleList()
                        self.blocks.append(self._stage(4))

                    def _stage(self, w):
                        return nn.Sequential(nn.Conv2d(w, w, 3), nn.ReLU())

                    def _tap(self, i):
                        m = nn.Linear(4, 4)
                        self.add_module(f"tap{i}", m)
                        return m

                    def _maybe(self, i):
                        if i:
                            return nn.Linear(4, 4)
                        return None
                """
            )
        )
    )
    attrs = facts.classes["M"].attributes
    assert (attrs["stages"].kind, attrs["stages"].element_class) == ("module_container", "torch.nn.Sequential")
    assert (attrs["proj"].kind, attrs["proj"].element_class) == ("module_container", "torch.nn.Sequential")
    assert attrs["taps"].kind == "other"
    assert attrs["maybe"].kind == "other"
    assert attrs["blocks"].element_class == "torch.nn.Sequential"


def test_cuda_index_devices_are_named_as_cuda_devices_in_messages():
    # .cuda(0) / .cuda(1) record a bare index; the messages say cuda:0 / cuda:1
    src = """
        import torch.nn as nn

        class EncDec(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(8, 8).cuda(0)
                self.decoder = nn.Linear(8, 8).cuda(1)

            def forward(self, x):
                return self.decoder(self.encoder(x.cuda(0)))

        model = nn.DataParallel(EncDec())
    """
    messages = {d.code: d.message for d in lint_source(_src(src), "t.py").diagnostics}
    assert "is on `cuda:0` but `self.decoder` is on `cuda:1`" in messages["DL008"]
    assert "`decoder` on `cuda:1`" in messages["DL004"] and "`encoder` on `cuda:0`" in messages["DL004"]


def test_dl009_wrapper_read_asks_what_reaches_the_read():
    head = """
    import torch
    from torch import nn
    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
        @property
        def device(self):
            return self.fc.weight.device
    def spread(m):
        if torch.cuda.device_count() > 1:
            m = nn.DataParallel(m)
        return m
    """
    # unwrapped on one path only: the other path still reads the wrapper's device
    one_path = head + """
    def main(flag):
        enc = nn.DataParallel(Enc().cuda())
        if flag:
            enc = enc.module
        return enc.device
    """
    assert [c for _, c in _codes(one_path, ["DL009"])] == ["DL009"]
    # unwrapped on every path, or a read before the wrap: nothing
    before = head + """
    def main():
        enc = Enc().cuda()
        d = enc.device
        enc = nn.DataParallel(enc)
        enc = enc.module
        return enc.device, d
    """
    assert _codes(before, ["DL009"]) == []
    # through an alias and a wrap helper of the file
    helper = head + """
    def main():
        enc = spread(Enc().cuda())
        same = enc
        return same.device
    """
    assert [c for _, c in _codes(helper, ["DL009"])] == ["DL009"]


def test_dl009_script_class_is_the_one_that_reaches_the_read():
    src = """
    import torch.nn as nn
    class A(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
    class B(A):
        pass
    def main(flag):
        model = A()
        model = B().eval()
        x = model.device
        if flag:
            model = A()
        return model.device
    """
    # the second read may see an A or a B: no one class to name
    assert _codes(src, ["DL009"]) == [(11, "DL009")]


def test_dl001_names_a_factory_held_in_an_attribute_as_written():
    src = _src("""
    import torch
    import torch.nn as nn
    class C(nn.Module):
        def __init__(self, n=8, window_fn=torch.hann_window):
            super().__init__()
            self.n = n
            self.window_fn = window_fn
            self.w = nn.Parameter(torch.ones(1))
        def forward(self, x):
            return x * self.window_fn(self.n) + torch.zeros(self.n) * self.w
    """)
    found = lint_source(src, "t.py", codes=["DL001"]).diagnostics
    assert [d.message.split(" in ")[0] for d in found] == [
        "`self.window_fn(...)` (`torch.hann_window` by default)", "`torch.zeros`",
    ]
    # the callable may take no ``device=``: the fix moves what it returns
    assert [d.fix.description for d in found] == ["move it to `x.device`", "create it on `x.device`"]
