"""The semantic facts DL006 and DL007 read: what a tensor is, which
attributes forward really uses, and which module containers are registered."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from devlint.facts.classes import build_facts


def _facts(src: str):
    return build_facts(cst.parse_module(textwrap.dedent(src)))


def _kinds(cls):
    return {a.name: a.kind for a in cls.assignments}


def test_forward_reads_leave_out_reads_where_the_device_does_not_matter():
    facts = _facts(
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.zeros(3)
                self.moved = torch.zeros(3)
                self.cast = torch.zeros(3)
                self.shape_only = torch.zeros(3)
                self.index = torch.arange(3)
                self.copied = torch.zeros(3)
                self.dtype_only = torch.zeros(3)
                self.via_property = torch.zeros(3)
                self.cache = torch.zeros(3)
                self.grids = [torch.zeros(1)]

            @property
            def table(self):
                return self.via_property

            def helper(self, x):
                return x + self.a

            def forward(self, x):
                n = self.shape_only.shape[0] + len(self.shape_only)
                y = x[:, self.index] + self.moved.to(x.device) + self.cast.type_as(x)
                y = y + x.new_tensor(self.copied) + self.dtype_only.to(torch.float16) + self.table
                self.cache = y
                self.grids[0] = y
                return self.helper(y) * n
        """
    )
    cls = facts.classes["M"]
    assert set(cls.forward_reads) >= {"a", "dtype_only", "via_property"}
    assert not {"moved", "cast", "shape_only", "index", "copied"} & set(cls.forward_reads)
    assert {"cache", "grids"} <= set(cls.forward_writes)


def test_a_table_indexed_before_it_is_moved_is_read_on_its_device():
    facts = _facts(
        """
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.table = torch.zeros(10, 3)
                self.sliced = torch.zeros(10, 3)
                self.row = torch.zeros(10, 3)

            def forward(self, ids, x):
                a = self.table[ids, :].to(x.device)
                b = self.sliced[:, :2].to(x.device) + self.row[-1].to(x.device)
                return a + b
        """
    )
    reads = set(facts.classes["M"].forward_reads)
    # indexing by ids (maybe a tensor on the inputs' device) happens on the
    # table's device, before the move; slices and constant rows do not meet
    assert "table" in reads
    assert not {"sliced", "row"} & reads


def test_forward_reads_of_a_subclass_count_for_the_base():
    facts = _facts(
        """
        import torch
        from torch import nn

        class Base(nn.Module):
            def __init__(self):
                super().__init__()
                self.anchors = torch.ones(3, 2)

        class Head(Base):
            def forward(self, x):
                return x * self.anchors
        """
    )
    assert "anchors" in facts.classes["Base"].forward_reads


def test_tensor_expressions_and_zero_dim_tensors():
    facts = _facts(
        """
        import math
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self, d, anchors, temperature: float = 0.07, eps=1e-6):
                super().__init__()
                self.scale = torch.sqrt(torch.FloatTensor([d]))
                self.anchors = torch.tensor(anchors).float() / 8
                pe = torch.zeros(10, d)
                self.pe = pe.unsqueeze(0)
                self.t = torch.tensor(temperature)
                self.inv = torch.tensor(d ** -0.5)
                self.log_scale = torch.tensor(math.log(1 / 0.07)).float()
                self.e = torch.tensor(eps)
                self.ids = torch.arange(3).tolist()
                self.n = torch.numel(pe)
                self.parts = torch.split(pe, 2)
                self.levels = {"a": torch.ones(2), "b": torch.ones(3)}
        """
    )
    cls = facts.classes["M"]
    by_name = {a.name: a for a in cls.assignments}
    for name in ("scale", "anchors", "pe", "t", "inv", "log_scale", "e"):
        assert by_name[name].kind == "tensor", name
    assert [n for n in ("scale", "anchors", "pe", "t", "inv", "log_scale", "e") if by_name[n].scalar] == [
        "t", "inv", "log_scale", "e"
    ]
    assert by_name["ids"].kind == by_name["n"].kind == by_name["parts"].kind == "other"
    assert by_name["levels"].kind == "tensor_container" and by_name["levels"].container == "dict"


def test_module_containers_and_how_they_are_registered():
    facts = _facts(
        """
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.appended = []
                for _ in range(2):
                    self.appended.append(nn.Linear(2, 2))
                self.heads = {}
                self.heads["cls"] = nn.Linear(2, 2)
                self.by_int = {0: nn.Linear(2, 2)}
                layers = []
                for _ in range(2):
                    layer = nn.Linear(2, 2)
                    layers.append(layer)
                self.local = layers
                seq_layers = [nn.Linear(2, 2)]
                self.in_seq = seq_layers
                self.body = nn.Sequential(*seq_layers)
                self.named = [nn.Linear(2, 2)]
                for i, m in enumerate(self.named):
                    self.add_module(str(i), m)
                self.numbers = [1, 2]
                self.wrapped = nn.ModuleList([nn.Linear(2, 2)])
        """
    )
    by_name = {a.name: a for a in facts.classes["M"].assignments}
    assert by_name["appended"].kind == "module_container" and by_name["appended"].container == "list"
    assert by_name["heads"].kind == "module_container" and by_name["heads"].str_keys
    assert by_name["by_int"].kind == "module_container" and not by_name["by_int"].str_keys
    assert by_name["local"].kind == "module_container" and not by_name["local"].registered_elsewhere
    assert by_name["in_seq"].registered_elsewhere
    assert by_name["named"].registered_elsewhere
    assert by_name["numbers"].kind == "other"
    assert by_name["wrapped"].kind == "nn_container"


def test_a_module_handed_to_a_helper_that_registers_it_is_registered():
    # set_module_by_path(root, path, m) ends in setattr(parent, last, m):
    # whatever it hangs the module on registers it; a helper that only
    # reads its argument registers nothing
    facts = _facts(
        """
        import torch.nn as nn

        def install(root, path, module):
            *parents, last = path.split(".")
            setattr(root.get_submodule(".".join(parents)), last, module)

        def attach(parent, name, *, child):
            parent.add_module(name, child)

        def describe(module):
            return str(module)

        class M(nn.Module):
            def __init__(self, backbone, paths):
                super().__init__()
                self.by_path = {}
                self.by_keyword = {}
                self.described = {}
                for p in paths:
                    a = nn.Linear(2, 2)
                    install(backbone, p, a)
                    self.by_path[p] = a
                    b = nn.Linear(2, 2)
                    attach(backbone, p, child=b)
                    self.by_keyword[p] = b
                    c = nn.Linear(2, 2)
                    describe(c)
                    self.described[p] = c
        """
    )
    by_name = {a.name: a for a in facts.classes["M"].assignments}
    assert by_name["by_path"].registered_elsewhere
    assert by_name["by_keyword"].registered_elsewhere
    assert by_name["described"].kind == "module_container" and not by_name["described"].registered_elsewhere


def test_an_assignment_through_a_property_setter_is_no_plain_attribute():
    """``self.w = v`` where the class defines ``@w.setter`` calls the setter
    (gpytorch's mixture weights copy into a registered parameter): the class
    facts record no attribute ``w``, so DL006 has nothing to report."""
    import libcst as cst

    from devlint.facts.classes import build_facts

    src = (
        "import torch\nimport torch.nn as nn\n\n"
        "class Mixture(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.raw = nn.Parameter(torch.zeros(3))\n\n"
        "    @property\n    def weights(self):\n        return self.raw.softmax(-1)\n\n"
        "    @weights.setter\n    def weights(self, value):\n        self.raw.data.copy_(value)\n\n"
        "    def init_from(self, y: torch.Tensor):\n        self.weights = y.std().expand(3)\n        self.scale = y.std()\n\n"
        "    def forward(self, x):\n        return x * self.weights.sum()\n"
    )
    cls = build_facts(cst.parse_module(src)).classes["Mixture"]
    names = {a.name for a in cls.assignments}
    assert "weights" not in names
    assert "scale" in names


def test_forward_writes_the_flow_does_not_follow_are_opaque():
    src = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.grids = [torch.zeros(1)]
            self.total = torch.zeros(1)
            self.table = torch.zeros(4)

        def forward(self, x):
            self.grids[0] = x.new_zeros(3)
            self.total += x.sum()
            if x.size(0) > 4:
                self.table = x.new_zeros(x.size(0))
            return x
    """)
    cls = build_facts(cst.parse_module(src)).classes["M"]
    assert set(cls.forward_writes) == {"grids", "total", "table"}
    assert cls.forward_opaque_writes == ["grids", "total"]
def test_complex_tensor_attributes():
    facts = _facts(
        """
        import math
        import torch
        import torch.nn as nn

        class Spectral(nn.Module):
            def __init__(self, n, w):
                super().__init__()
                k = torch.arange(n, dtype=torch.float32)
                tw = torch.polar(torch.ones(n), -2 * math.pi * k / n)
                self.twiddle = tw
                self.conj = self.twiddle.conj()
                self.cf = torch.zeros(n, dtype=torch.cfloat)
                self.c128 = torch.randn(n, dtype=torch.complex128)
                self.vc = torch.view_as_complex(torch.randn(n, 2))
                self.spec = torch.fft.rfft(torch.randn(n))
                self.back = torch.fft.irfft(torch.randn(n))
                self.freqs = torch.fft.fftfreq(n)
                self.moved = torch.randn(n).to(torch.complex64)
                self.phase = torch.exp(1j * torch.arange(n))
                self.real = torch.arange(n).float()
                self.mag = torch.polar(torch.ones(n), k).abs()
                self.cast = tw.to(torch.float32)
                self.window = torch.hann_window(n)
        """
    )
    attrs = facts.classes["Spectral"].attributes
    complex_ = {name for name, a in attrs.items() if a.complex}
    assert complex_ == {"twiddle", "conj", "cf", "c128", "vc", "spec", "moved", "phase"}


def test_a_helper_returning_a_container_of_modules_holds_modules():
    facts = _facts(
        """
        import torch.nn as nn

        def map_values(fn, d):
            return {k: fn(v) for k, v in d.items()}

        def make_head(n):
            return nn.Linear(8, n)

        def blocks(n):
            out = [nn.Linear(8, 8) for _ in range(n)]
            return out

        def sizes(n):
            return [n, 2 * n]

        class M(nn.Module):
            def __init__(self, outs):
                super().__init__()
                self.heads = map_values(lambda n: nn.Linear(8, n), outs)
                self.named = map_values(make_head, outs)
                self.classes = map_values(nn.Linear, outs)
                self.blocks = blocks(3)
                self.doubled = map_values(lambda n: n * 2, outs)
                self.sizes = sizes(3)
        """
    )
    cls = facts.classes["M"]
    kinds = _kinds(cls)
    assert {k: kinds[k] for k in ("heads", "named", "classes", "blocks")} == dict.fromkeys(
        ("heads", "named", "classes", "blocks"), "module_container"
    )
    assert kinds["doubled"] == kinds["sizes"] == "other"
    assert cls.attribute("heads").container == "dict" and not cls.attribute("heads").str_keys
    assert cls.attribute("blocks").container == "list"
    assert cls.attribute("heads").element_class == "torch.nn.Linear"


def test_a_module_inside_a_functools_wrapper_is_held_unregistered():
    facts = _facts(
        """
        import functools
        from functools import lru_cache, partial
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self, net: nn.Module, other: "nn.Module", size: int = 4):
                super().__init__()
                self.cached = lru_cache(maxsize=size)(net)
                self.built = functools.partial(nn.Linear(4, 4))
                self.factory = partial(nn.Linear, bias=False)
                self.sized = lru_cache(maxsize=size)(size)
                self.other = other
                self.through = functools.cache(other)
        """
    )
    cls = facts.classes["M"]
    kinds = _kinds(cls)
    assert kinds["cached"] == kinds["built"] == kinds["through"] == "module_container"
    assert kinds["factory"] == kinds["sized"] == "other"
    assert cls.attribute("cached").wrapper == "functools.lru_cache"
    assert cls.attribute("built").wrapper == "functools.partial"
    assert not cls.attribute("cached").registered_elsewhere
    assert cls.attribute("through").registered_elsewhere  # self.other = other registers it


def test_a_helper_returning_a_container_of_tensors_holds_tensors():
    facts = _facts(
        """
        import torch
        import torch.nn as nn

        def tables(n):
            t = torch.arange(n).float()
            return t.cos(), t.sin()

        def sizes(strides):
            return [torch.tensor([s, s]) for s in strides]

        def shapes(strides):
            return [(s, s) for s in strides]

        def mixed(n):
            return torch.ones(n), n

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.tables = tables(4)
                self.sizes = sizes((8, 16))
                self.shapes = shapes((8, 16))
                self.mixed = mixed(3)
        """
    )
    cls = facts.classes["M"]
    kinds = _kinds(cls)
    assert kinds["tables"] == kinds["sizes"] == "tensor_container"
    assert kinds["shapes"] == kinds["mixed"] == "other"
    assert cls.attribute("tables").container == "tuple" and cls.attribute("sizes").container == "list"


def test_device_attributes_only_move_overrides_update():
    facts = _facts(
        """
        import torch
        import torch.nn as nn

        class Stale(nn.Module):
            def __init__(self):
                super().__init__()
                self._device = torch.device("cpu")

            def _set(self, device):
                self._device = device

            def to(self, device):
                self._set(device)
                return super().to(device)

            def half(self):
                self._set(self._device)
                return super().half()

            def fresh(self):
                return torch.zeros(3, device=self._device)

        class InApply(Stale):
            def _apply(self, fn, *args):
                self._set(fn(torch.zeros(1)).device)
                return super()._apply(fn, *args)

        class Unread(nn.Module):
            def __init__(self):
                super().__init__()
                self._device = torch.device("cpu")

            def to(self, device):
                self._device = device
                return super().to(device)
        """
    )
    assert facts.kept_by_move_overrides("Stale") == {"_device": ("to",)}  # half() is a cast beside it
    assert facts.kept_by_move_overrides("InApply") == {}  # its _apply runs the update on every move (the `to` is inherited)
    assert facts.kept_by_move_overrides("Unread") == {}  # nothing reads it once built


@pytest.mark.parametrize("annotation, none", [
    ("Tuple[Dict[str, str], List[str]]", True),
    ("np.ndarray", True),
    ("npt.NDArray[np.float32]", True),
    ("Optional[int]", True),
    ("dict[str, int] | None", True),
    ("'List[str]'", True),
    ("Tuple[int, ...]", True),
    ("torch.Tensor", False),
    ("Dict[str, Tensor]", False),
    ("Any", False),
    ("Batch", False),  # a class of the project may hold tensors
    ("Optional[Batch]", False),
    ("List", False),  # a bare generic holds anything
])
def test_declared_types_without_tensors(annotation, none):
    from devlint.facts.classes import annotation_holds_no_tensors

    facts = build_facts(cst.parse_module(
        "import numpy as np\nimport numpy.typing as npt\nfrom typing import Any, Dict, List, Optional, Tuple\n"
        "from torch import Tensor\nimport torch\nfrom .records import Batch\n"
    ))
    assert annotation_holds_no_tensors(cst.parse_expression(annotation), facts) is none
