"""The ``ast`` candidate scan (devlint/scan.py) lets files skip the libcst
parse; it must never drop a finding. Every fixture and every rule example is
checked with and without it (new rules and fixtures are picked up
automatically), and the scan must actually rule files out."""

from __future__ import annotations

import textwrap

import pytest

from conftest import FIXTURES
from devlint.engine import _scan_filter, fix_source, lint_source, select_rules
from devlint.rule import Rule, all_rules
from devlint.scan import scan_source

ALL_FIXTURES = sorted(FIXTURES.glob("**/*.py"))
EXAMPLES = [
    pytest.param(textwrap.dedent(ex.code).lstrip("\n"), id=f"{code}-{kind}-{i}")
    for code, rule in all_rules().items()
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i, ex in enumerate(examples)
]


def _findings(result):
    return [
        (d.line, d.col, d.end_line, d.end_col, d.code, d.message, d.no_fix_reason,
         None if d.fix is None else (d.fix.safety, d.fix.description, [e.to_json() for e in d.fix.edits]))
        for d in result.diagnostics
    ]


def _same_with_and_without_scan(src: str, name: str) -> None:
    codes = list(all_rules())  # every rule, including those off by default
    with_scan = lint_source(src, name, codes=codes)
    without = lint_source(src, name, codes=codes, scan=False)
    assert _findings(with_scan) == _findings(without)
    assert with_scan.internal_errors == without.internal_errors
    for unsafe in (True,):  # the unsafe run applies every fix the safe one does, and more
        a = fix_source(src, name, codes=codes, unsafe=unsafe)
        b = fix_source(src, name, codes=codes, unsafe=unsafe, scan=False)
        assert a.fixed_text == b.fixed_text
        assert _findings(a) == _findings(b)
        # what fixing leaves is what checking the fixed text finds
        assert _findings(a) == _findings(lint_source(a.fixed_text, name, codes=codes))


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=[str(p.relative_to(FIXTURES)) for p in ALL_FIXTURES])
def test_fixture_findings_identical_with_and_without_scan(path):
    _same_with_and_without_scan(path.read_text(encoding="utf-8"), path.name)


@pytest.mark.parametrize("src", EXAMPLES)
def test_example_findings_identical_with_and_without_scan(src):
    _same_with_and_without_scan(src, "example.py")


def test_every_buggy_fixture_is_a_candidate_for_its_rule():
    for path in FIXTURES.glob("DL*/bad_*.py"):
        if path.name.count(".") != 1:
            continue
        rule = all_rules()[path.parent.name]
        summary = scan_source(path.read_text(encoding="utf-8"))
        assert summary is not None, path
        assert rule.candidate(summary), f"{path}: the scan rules out {rule.code}"


def test_scan_rules_out_plain_torch_code():
    src = """
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)
            self.register_buffer("mask", torch.ones(4))

        def forward(self, x):
            return self.proj(x) * self.mask + torch.zeros_like(x)

    def make_grid(n, device):
        return torch.arange(n, device=device)
    """
    rules = select_rules(["DL001"])
    assert _scan_filter(textwrap.dedent(src), rules) == []
    # a helper's CPU tensor may meet a tensor anywhere in a file that has
    # tensors (the device flow decides), but not in one that has none
    helper = src.replace("torch.arange(n, device=device)", "torch.arange(n)")
    assert _scan_filter(textwrap.dedent(helper), rules) == rules
    plain = "import torch\n\ndef make_grid(n):\n    return torch.arange(n)\n"
    assert _scan_filter(plain, rules) == []


@pytest.mark.parametrize(
    "src",
    [
        # through an alias, in a helper forward calls, in a nested function
        """
        import torch as T
        class M(T.nn.Module):
            def forward(self, x):
                return self.helper(x)
            def helper(self, x):
                def inner():
                    return T.zeros(3)
                return inner()
        """,
        # from-import, meeting a parameter of the module
        """
        from torch import arange, nn
        class M(nn.Module):
            def forward(self, x):
                return x + arange(3)
        """,
        # imported twice under one name: every target counts
        """
        try:
            from numpy import zeros
        except ImportError:
            from torch import zeros
        import torch
        class M(torch.nn.Module):
            def forward(self, x):
                return x * zeros(3)
        """,
    ],
)
def test_scan_keeps_factory_in_forward(src):
    src = textwrap.dedent(src)
    summary = scan_source(src)
    assert summary is not None
    assert all_rules()["DL001"].candidate(summary)
    found = lint_source(src, "t.py", codes=["DL001"], scan=False).diagnostics
    # the factory (and, for a helper's result, the call where forward meets it)
    assert {d.code for d in found} == {"DL001"} and any("creates its tensor" in d.message for d in found)


def test_scan_drops_what_the_flow_cannot_report():
    # forward of a class that is no module, a decorator default: nothing meets
    src = "from torch import arange\nclass M:\n    @staticmethod\n    def forward(x=arange(3)):\n        return x\n"
    assert lint_source(src, "t.py", codes=["DL001"], scan=False).diagnostics == []
    assert not all_rules()["DL001"].candidate(scan_source(src))


@pytest.mark.parametrize(
    "src",
    [
        "import torch.nn as nn\nclass Net(nn.Module):\n    pass\nm = Net().cuda()\nprint(m.device)\n",
        "from torch import nn\ndef f():\n    lin = nn.Linear(2, 2)\n    return lin.device\n",
        "import torch.nn as nn\nclass B(nn.Module):\n    def f(self):\n        return self.device\n",
        "import torch.nn as nn\nclass B(nn.Module):\n    def __init__(s, /, x):\n        s.enc = nn.Linear(2, 2)\n    def f(s, /):\n        return s.enc.device\n",
        "import torch.nn as nn\nclass B(nn.Module):\n    def __init__(self):\n        self.blocks = [nn.Linear(2, 2)]\n"
        "    def f(self):\n        a = self.blocks[0].device\n        for b in self.blocks:\n            a = b.device\n",
        # a class inside a function has no class facts: plain names are looked up
        "import torch.nn as nn\ndef make():\n    class L:\n        def f(self):\n            m = nn.GRU(2, 2)\n            return m.device\n",
    ],
)
def test_scan_keeps_module_device_reads(src):
    summary = scan_source(src)
    assert summary is not None
    assert all_rules()["DL009"].candidate(summary)


def test_scan_rules_out_tensor_device_reads():
    src = textwrap.dedent(
        """
        import torch.nn as nn
        class B(nn.Module):
            def __init__(self):
                super().__init__()
                self.pos = nn.Parameter(torch.zeros(3))
            def forward(self, x):
                x = self.norm(x)
                return x.to(self.pos.device) + self.pos.data.device.index
        """
    )
    assert not all_rules()["DL009"].candidate(scan_source(src))


def test_unparsable_by_ast_keeps_every_rule():
    rules = select_rules()
    assert scan_source("def f(:\n    pass\n") is None
    assert _scan_filter("import torch\ndef f(:\n", rules) == rules
    result = lint_source("import torch\ndef f(:\n    pass\n", "bad.py")
    assert [d.code for d in result.diagnostics] == ["DL000"]


def test_a_rule_without_a_hook_is_always_a_candidate():
    class NoHook(Rule):
        code = "DL999"
        name = "no-hook"
        message = "x"

    class Crashes(Rule):
        code = "DL998"
        name = "crashes"
        message = "x"

        @classmethod
        def candidate(cls, scan):
            raise ValueError("bug in a hook")

    rules = [NoHook, Crashes]
    assert _scan_filter("x = 1\n", rules) == rules


def test_summary_contents():
    src = textwrap.dedent(
        """
        import torch.nn as nn
        from torch.nn.parallel import DistributedDataParallel as DDP
        from . import utils

        class Net(nn.Module):
            def __init__(self):
                self.a, self.b = 1, 2

            def forward(self, x):
                return self.head(x.to("cuda:1"))

            def head(self, x):
                return x

        model = DDP(Net(), device_ids=[0])
        """
    )
    s = scan_source(src)
    assert s.imports["nn"] == ["torch.nn"]
    assert s.resolve("DDP") == ["torch.nn.parallel.DistributedDataParallel"]
    assert s.resolve("nn.parallel.DataParallel") == ["torch.nn.DataParallel"]
    assert s.resolve("utils") == [".utils"]
    assert s.resolve("x.to") == []
    assert s.forward_methods()["Net"] == frozenset({"forward", "head"})
    assert "cuda:1" in s.strings and "device" not in s.attributes and "to" in s.attributes
    assert [(c, m, a, v.value) for c, m, a, v in s.attribute_stores] == [("Net", "__init__", "a", 1), ("Net", "__init__", "b", 2)]
    ddp = [c for c in s.calls if c.func == "DDP"][0]
    assert ddp.keywords == ("device_ids",) and ddp.n_args == 1 and ddp.cls is None
    to = [c for c in s.calls if c.attr == "to"][0]
    assert (to.cls, to.method, to.n_args) == ("Net", "forward", 1)


# DL002 / DL008 hooks: each snippet is a finding of the rule that a looser
# reading of the scan would lose; the hook must keep it
_HOOK_KEEPS = [
    # DL008: elements placed inside the container's constructor, through plain names
    ("DL008", """
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            a = nn.Linear(4, 4)
            b = nn.Linear(4, 4)
            self.blocks = nn.ModuleList([a.to("cuda:0"), b.to("cuda:1")])
        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x
    """),
    ("DL008", """
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            a = nn.Linear(4, 4)
            b = nn.Linear(4, 4)
            self.blocks = nn.Sequential(a.to("cuda:0"), b.to("cuda:1"))
        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x
    """),
    # DL008: a submodule pinned by a call on a loop variable
    ("DL008", """
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(4)])
            for i, blk in enumerate(self.blocks):
                blk.to(f"cuda:{i % 2}")
        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x
    """),
    # DL002: a module-level device name, a self attribute holding a device
    ("DL002", """
    import torch
    import torch.nn as nn
    DEV = "cuda"
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
        def forward(self, x):
            return self.lin(x) * torch.ones(4).to(DEV)
    """),
    ("DL002", """
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.dev = torch.device("cuda:0")
        def forward(self, x):
            return self.lin(x) * torch.ones(4, device=self.dev)
    """),
    ("DL002", """
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
        def forward(self, x):
            return self.lin(x) * self.scale(x)
        def scale(self, x):
            return x.new_ones(4).to(device=0)
    """),
]


# Findings the tightened DL001/DL006/DL007/DL009 hooks must keep: each is a
# real finding of the rule (checked without the scan first), written in the
# roundabout ways the semantic pass still understands.
_TIGHT_KEEPS = [
    # DL006: a tensor through a chain of locals, read by a subclass's forward
    # through a property
    ("DL006", """
    import torch
    from torch import nn
    class Base(nn.Module):
        def __init__(self, n=8):
            super().__init__()
            raw = torch.arange(n)
            table = raw.float() / n
            self.table = table * 2
    class Head(Base):
        @property
        def scaled(self):
            return self.table * 3
        def forward(self, x):
            return x + self.scaled
    """),
    # DL006: a dict of tensors built in a helper method
    ("DL006", """
    import torch as T
    import torch.nn as nn
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self._setup()
        def _setup(self):
            self.stats = {"mean": T.zeros(3), "std": T.ones(3)}
        def forward(self, x):
            return (x - self.stats["mean"]) / self.stats["std"]
    """),
    # DL007: an empty list filled with modules by append in another method
    ("DL007", """
    import torch.nn as nn
    class Block(nn.Module):
        def forward(self, x):
            return x
    class Net(nn.Module):
        def __init__(self, depth=2):
            super().__init__()
            self.blocks = []
            self._build(depth)
        def _build(self, depth):
            for _ in range(depth):
                blk = Block()
                self.blocks.append(blk)
        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x
    """),
    # DL007: a local dict filled by subscript stores, then assigned
    ("DL007", """
    from torch import nn
    class Heads(nn.Module):
        def __init__(self, names=("a", "b")):
            super().__init__()
            heads = {}
            for name in names:
                heads[name] = nn.Linear(4, 2)
            self.heads = heads
        def forward(self, x):
            return {k: h(x) for k, h in self.heads.items()}
    """),
    # DL009: .device of a loop variable over a ModuleList of local blocks
    ("DL009", """
    import torch.nn as nn
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
        def forward(self, x):
            return self.lin(x)
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(2)])
        def forward(self, x):
            for i, block in enumerate(self.blocks):
                x = block(x.to(block.device))
            return x
    """),
    # DL009: self.device in a module whose only base is torch's
    ("DL009", """
    import torch
    from torch.nn import Module, Linear
    class Net(Module):
        def __init__(self):
            super().__init__()
            self.lin = Linear(4, 4)
        def forward(self, x):
            return self.lin(x) + torch.ones(4, device=self.device)
    """),
    # DL001: a tensor literal from a local list, moved only later
    ("DL001", """
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
        def forward(self, x):
            offsets = [[0.5, 0.5]]
            return self.lin(x) + torch.tensor(offsets)
    """),
]


@pytest.mark.parametrize("code,src", _HOOK_KEEPS + _TIGHT_KEEPS)
def test_hooks_keep_their_findings(code, src):
    src = textwrap.dedent(src).lstrip("\n")
    assert code in [d.code for d in lint_source(src, "m.py", codes=[code], scan=False).diagnostics]
    assert all_rules()[code].candidate(scan_source(src))
    _same_with_and_without_scan(src, "m.py")


def test_dl002_dl008_hooks_rule_out_dtype_casts():
    # transformers-style forward code: casts and moves to a tensor's device
    src = textwrap.dedent(
        """
        import torch
        import torch.nn as nn
        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def forward(self, hidden_states, mask):
                dtype = hidden_states.dtype
                h = self.proj(hidden_states.to(torch.float32))
                mask = mask.to(h.device)
                return self._norm(h).to(dtype) * mask
            def _norm(self, h):
                return h.to(device=h.device) / h.norm()
        """
    )
    summary = scan_source(src)
    assert not all_rules()["DL002"].candidate(summary)
    assert not all_rules()["DL008"].candidate(summary)


def test_tightened_hooks_rule_out_ordinary_model_code():
    # what most timm/transformers files look like: submodules, parameters,
    # Python numbers and lists of dicts on self, outputs written on another
    # object, factories that are moved or only index, devices read from tensors
    src = textwrap.dedent(
        """
        import torch
        import torch.nn as nn
        from transformers import PreTrainedModel
        class Block(nn.Module):
            def __init__(self, dim, heads=4):
                super().__init__()
                self.norm = nn.LayerNorm(dim)
                self.proj = nn.Linear(dim, dim)
                self.scale = (dim // heads) ** -0.5
                self.gamma = nn.Parameter(torch.ones(dim))
                self.feature_info = []
                self.feature_info.append(dict(num_chs=dim, module="proj"))
                self.stage_ends = [i for i in range(4)]
            def forward(self, x, outputs):
                pos = torch.arange(x.shape[1]).unsqueeze(0).to(x.device)
                x = x[:, torch.arange(x.shape[1])]
                t = torch.tensor(self.scale)
                outputs.pooler_output = torch.split(x, 2)
                return self.proj(self.norm(x + pos)) * self.gamma * t
        class Model(PreTrainedModel):
            def forward(self, x):
                return x.to(self.device)
        """
    )
    summary = scan_source(src)
    for code in ("DL001", "DL006", "DL007", "DL008", "DL009"):
        assert not all_rules()[code].candidate(summary), code


def test_a_function_that_holds_no_input_tensor_and_returns_to_no_caller_is_no_candidate():
    # compute_default_rope_parameters(config: Config, **kwargs), a static
    # method only referenced (rope_init_fn = self.compute_...): what it
    # creates meets nothing in this file, so DL001 need not parse it
    src = textwrap.dedent(
        """\
        import torch

        class Rope(torch.nn.Module):
            def __init__(self, config):
                super().__init__()
                fn = self.compute
                self.inv_freq, self.scale = fn(config)

            @staticmethod
            def compute(config: "Config", **kwargs):
                return 1.0 / torch.arange(0, 8, 2), 1.0
        """
    )
    summary = scan_source(src)
    assert not summary.may_hold_local_tensors_in("Rope", "compute")
    assert not all_rules()["DL001"].candidate(summary)
    assert lint_source(src, "t.py", codes=["DL001"], scan=False).diagnostics == []
    # called by name, or given a parameter that may be a tensor: a candidate
    for changed in (
        src + "\ndef use(x: torch.Tensor):\n    return x + Rope.compute(None)[0]\n",
        src.replace('config: "Config", **kwargs', "config, scale"),
        src.replace('config: "Config", **kwargs', "config: torch.Tensor"),
        # a bare container holds what the callers pass, as the flow reads it
        src.replace('config: "Config", **kwargs', "config: list"),
        src.replace('config: "Config", **kwargs', "config: typing.Dict"),
    ):
        assert all_rules()["DL001"].candidate(scan_source(changed))
    # a collective needs no tensor in scope
    seed = "import torch\nimport torch.distributed as dist\n\ndef seed(n: int = 10):\n    t = torch.randint(0, n, ())\n    dist.all_reduce(t)\n    return t.item()\n"
    assert all_rules()["DL001"].candidate(scan_source(seed))
    assert [d.code for d in lint_source(seed, "t.py", codes=["DL001"]).diagnostics] == ["DL001"]


def test_factory_attributes_bound_the_attributes_that_hold_a_torch_factory():
    """``ScanSummary.factory_attributes`` (DL001's pre-filter) is a superset
    of the attributes whose ``AttributeFacts.factory`` the class facts set,
    over every fixture, and it is not everything."""
    import libcst as cst

    from devlint.facts.classes import build_facts

    seen = 0
    for path in ALL_FIXTURES:
        src = path.read_text()
        try:
            module = cst.parse_module(src)
        except cst.ParserSyntaxError:
            continue
        facts = build_facts(module)
        exact = {a.name for c in facts.classes.values() for a in c.assignments if a.factory}
        summary = scan_source(src)
        if summary is None:
            continue
        assert exact <= summary.factory_attributes(), path
        seen += bool(exact)
    assert seen >= 1
    src = "import torch\nclass C:\n    def __init__(self, fn=len, w=torch.hann_window):\n        self.fn = fn\n        self.w = w\n"
    assert scan_source(src).factory_attributes() == {"w"}


def test_weights_device_attributes_bound_the_devices_read_off_the_weights():
    """``ScanSummary.weights_device_attrs`` (DL001's pre-filter for
    ``device=self.device``) is a superset of the attributes whose
    ``AttributeFacts.weights_device`` the class facts set, over every
    fixture, and it is not everything."""
    import libcst as cst

    from devlint.facts.classes import build_facts

    seen = 0
    for path in ALL_FIXTURES:
        src = path.read_text()
        try:
            module = cst.parse_module(src)
        except cst.ParserSyntaxError:
            continue
        exact = {a.name for c in build_facts(module).classes.values() for a in c.assignments if a.weights_device}
        summary = scan_source(src)
        if summary is None:
            continue
        assert exact <= summary.weights_device_attrs, path
        seen += bool(exact)
    assert seen >= 1
    src = (
        "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, device):\n"
        "        super().__init__()\n        self.fc = nn.Linear(2, 2)\n        self.device = device\n"
        "        self.home = next(self.parameters()).device\n        self.fc_home = self.fc.weight.device\n"
    )
    assert scan_source(src).weights_device_attrs == {"home", "fc_home"}


def test_output_classes_and_the_annotations_that_name_them():
    # the scan's tensor fields are the facts' (one tensor, maybe None; not a
    # tuple of them), its record classes the wider bound; an annotation names
    # a class bare, quoted or Optional
    src = textwrap.dedent(
        """
        import torch
        from typing import Optional, Tuple

        class Output:
            logits: Optional[torch.FloatTensor] = None
            hidden_states: Optional[Tuple[torch.FloatTensor]] = None
            mask: torch.BoolTensor | None = None
            name: str = ""

        class Config:
            size: int = 3

        def post(out: "Optional[Output]", cfg: Config, other: Output | None, n: int):
            pass
        """
    )
    from devlint.facts.classes import build_facts
    import libcst as cst

    scan = scan_source(src)
    assert scan.tensor_fields == {"Output": build_facts(cst.parse_module(src)).classes["Output"].tensor_fields}
    assert scan.tensor_fields == {"Output": ["logits", "mask"]}
    assert scan.record_classes == {"Output"}
    assert scan.annotated_classes[(None, "post")] == {"Output", "Config", "int"}


def test_dataset_classes_bound_the_host_datasets_of_the_flow():
    """DL011's hook keeps a file that builds a dataset of host data: a
    ``torch.utils.data.Dataset`` class of the file, also through a base of
    the file (``DeviceFlow.host_dataset`` follows the whole lineage), and
    the finding on its sample is the same with and without the scan."""
    src = textwrap.dedent(
        """
        import torch
        import torch.nn as nn
        from torch.utils.data import Dataset


        class Base(Dataset):
            def __len__(self):
                return 4


        class Pairs(Base):
            def __getitem__(self, i):
                return torch.randn(3), torch.tensor(i)


        model = nn.Linear(3, 2).to("cuda")
        x, y = Pairs()[0]
        print(model(x))
        """
    )
    summary = scan_source(src)
    assert summary.class_may_derive("Pairs", frozenset({"torch.utils.data.Dataset"}))
    assert not summary.class_may_derive("Pairs", frozenset({"torch.utils.data.Sampler"}))
    assert all_rules()["DL011"].candidate(summary)
    assert [(d.line, d.code) for d in lint_source(src, "t.py").diagnostics if d.code == "DL011"] == [(19, "DL011")]
    _same_with_and_without_scan(src, "t.py")
