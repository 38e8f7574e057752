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


# -- a model a device_map splits (``_no_split_modules``) ------------------------

#: a block a device_map keeps whole, and the base class that says so
SPLIT_BASE = """
class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


class Base(nn.Module):
    _no_split_modules = ["Layer"]
"""

SPLIT = SPLIT_BASE + """

class Stack(Base):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.pos = nn.Embedding(10, 8)
        self.layers = nn.ModuleList([Layer() for _ in range(4)])

    def forward(self, ids):
        h = self.embed(ids)
        h = h + self.pos(torch.arange(ids.shape[1], device=ids.device)).to(h.device)
        for layer in self.layers:
            h = layer(h)
        return h


class LM(Base):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.drop = nn.Dropout(0.1)
        self.stack = Stack()
        self.head = nn.Linear(8, 10)

    def forward(self, ids, labels):
        logits = self.head(self.drop(self.stack(ids)))
        loss = F.cross_entropy(logits, {labels})
        return loss, self._scaled(logits, labels)

    def _scaled(self, logits, labels):
        return logits * {scale}, logits - labels
"""


def test_split_units_and_dispatched_classes():
    facts = build_facts(cst.parse_module(HEADER + textwrap.dedent(SPLIT.format(labels="labels", scale="2"))))
    assert facts.split_units == {"Layer"}
    assert facts.classes["Base"].no_split == ["Layer"]
    dispatched = {n for n, c in facts.classes.items() if c.dispatched}
    # the stack holds the blocks, the LM holds the stack; a block itself is kept whole
    assert dispatched == {"Stack", "LM"}


def test_a_block_listed_in_no_split_modules_is_a_module_whatever_its_base():
    src = """
from transformers.modeling_layers import GradientCheckpointingLayer
class Block(GradientCheckpointingLayer):
    def forward(self, x):
        return x
class Encoder(nn.Module):
    _no_split_modules = ["Block"]
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])
        self.extra = nn.Parameter(torch.zeros(3)) if True else None
"""
    facts = build_facts(cst.parse_module(HEADER + textwrap.dedent(src)))
    enc = facts.classes["Encoder"]
    assert facts.classes["Block"].is_module and enc.dispatched
    assert enc.attributes["blocks"].element_class == "Block"
    # X if c else None is what X is
    assert enc.attributes["extra"].kind == "parameter"


def test_parts_are_first_or_last_by_registration_order():
    facts = build_facts(cst.parse_module(HEADER + textwrap.dedent(SPLIT.format(labels="labels", scale="2"))))
    lm = Stages(facts, facts.classes["LM"], "self")
    assert lm.dispatched and lm.spreading == ["stack"]
    # a part without weights (nn.Dropout) follows its inputs: no stage of its own
    assert lm.order == {"head": "last"}
    stack = Stages(facts, facts.classes["Stack"], "self")
    # a balanced map may end the first GPU right after a vocabulary table:
    # what is registered after it (before the blocks) may be on the next one
    assert stack.spreading == ["layers"] and stack.order == {"embed": "first", "pos": "part:embed"}
    # after a part that is no table, nothing is past the first GPU
    conv = SPLIT.format(labels="labels", scale="2").replace("self.embed = nn.Embedding(10, 8)", "self.embed = nn.Linear(8, 8)")
    facts = build_facts(cst.parse_module(HEADER + textwrap.dedent(conv)))
    assert Stages(facts, facts.classes["Stack"], "self").order == {"embed": "first", "pos": "first"}


def test_two_parts_before_the_blocks_may_sit_on_two_devices():
    src = SPLIT.format(labels="labels.to(logits.device)", scale="2").replace(
        ").to(h.device)\n", ")\n"
    )
    found = [(f[1], f[3], f[4]) for f in handovers(src)]
    assert ("self.pos(torch.arange(ids.shape[1], device=ids.device))", "the device after `self.embed`", "`h`") in found
    assert ("self.pos(torch.arange(ids.shape[1], device=ids.device))", "the device after `self.embed`", "`h`") not in [
        (f[1], f[3], f[4]) for f in handovers(SPLIT.format(labels="labels.to(logits.device)", scale="2"))
    ]


def test_a_pretrained_model_an_auto_class_builds_is_spread():
    src = SPLIT_BASE + """
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

class Captioner(Base):
    def __init__(self, config):
        super().__init__()
        self.tokenizer = AutoTokenizer.from_pretrained(config.name)
        self.vision = AutoModel.from_config(config.vision)
        self.proj = Layer()
        text = AutoModelForCausalLM.from_config(config.text)
        self.text = text

    def forward(self, ids, pixels):
        embeds = self.text.get_input_embeddings()(ids)
        feats = self.proj(self.vision(pixels))
        return embeds * (ids > 0)[..., None] + feats
"""
    facts = build_facts(cst.parse_module(HEADER + textwrap.dedent(src)))
    cap = facts.classes["Captioner"]
    # a module kept through a local name is a module; a tokenizer is none
    assert cap.attributes["text"].kind == "module" and cap.attributes["tokenizer"].kind == "other"
    stages = Stages(facts, cap, "self")
    assert stages.spreading == ["vision", "text"] and stages.order == {"proj": "last"}
    # the text embedding is past the image tower: the ids' mask meets it, and
    # so do the projected features (where the image tower ended)
    assert [(f[1], f[3]) for f in handovers(src)] == [
        ("(ids > 0)[..., None]", "the first device"), ("feats", "the last device (after `self.vision`)")
    ]


def test_pins_in_a_parallelize_method_give_way_to_the_map():
    src = SPLIT.format(labels="labels", scale="2").replace(
        "    def forward(self, ids):\n        h = self.embed(ids)",
        "    def parallelize(self):\n        self.embed = self.embed.to('cuda:0')\n"
        "        self.layers = self.layers.to('cuda:1')\n\n    def forward(self, ids):\n        h = self.embed(ids)",
    )
    facts = build_facts(cst.parse_module(HEADER + textwrap.dedent(src)))
    stack = facts.classes["Stack"]
    assert stack.pins_optional and stack.pinned_devices() == {}
    assert Stages(facts, stack, "self").dispatched
    # pinned in __init__, the model's own code places it
    pinned = src.replace("self.embed = nn.Embedding(10, 8)", "self.embed = nn.Embedding(10, 8).to('cuda:0')")
    facts = build_facts(cst.parse_module(HEADER + textwrap.dedent(pinned)))
    assert not facts.classes["Stack"].pins_optional and facts.classes["Stack"].pinned_devices()


def test_what_meets_the_output_after_the_blocks_is_handed_over():
    found = handovers(SPLIT.format(labels="labels", scale="2"))
    # the labels stay where the inputs are; the logits come after the blocks
    assert [(f[1], f[2], f[3], f[5]) for f in found] == [("labels", "between", "the first device", True)]
    # the embeddings and the inputs before the blocks share the first device;
    # calling a part hands nothing over (its hook moves what it is given)
    assert [f[0] for f in found] == [40]  # the loss, in LM.forward; none in Stack.forward


def test_moved_labels_and_a_helper_s_parameters_are_not_handovers():
    # moved to the logits: nothing to hand over in forward itself; the
    # helper forward hands the logits to (last device) subtracts the labels,
    # still on the inputs' device: forward's call hands that over
    found = handovers(SPLIT.format(labels="labels.to(logits.device)", scale="2"))
    assert [(f[1], f[3], f[4]) for f in found] == [("labels", "the first device", "`logits`")]
    assert handovers(SPLIT.format(labels="labels.to(logits.device)", scale="2").replace(
        "logits - labels", "logits - labels.to(logits.device)")) == []
    # a helper that forward alone calls sees what forward hands it: the
    # logits on the last device meet the model's own parameter (first)
    found = handovers(SPLIT.format(labels="labels", scale="self.scale"), method="_scaled")
    assert [(f[1], f[3], f[4]) for f in found] == [("self.scale", "the first device", "`logits`")]
    # ... but called from elsewhere with something else, its parameters
    # need not be the head's logits: nothing there is on a stage
    other = SPLIT.format(labels="labels", scale="self.scale") + (
        "\n    def score(self, feats, labels):\n        return self._scaled(feats, labels)\n"
    )
    assert handovers(other, method="_scaled") == []
    # the model's own parameter meets the logits in forward itself
    found = handovers(SPLIT.format(labels="labels.to(logits.device)", scale="2").replace(
        "logits = self.head(self.drop(self.stack(ids)))", "logits = self.head(self.drop(self.stack(ids))) * self.scale"
    ).replace("logits - labels", "logits - labels.to(logits.device)"))
    assert [(f[1], f[3], f[5]) for f in found] == [("self.scale", "the first device", False)]


def test_a_pinned_module_is_not_read_as_split():
    facts = build_facts(cst.parse_module(HEADER + textwrap.dedent(PIPELINE.format(handed="h"))))
    assert not facts.classes["Pipeline"].dispatched
    assert not Stages(facts, facts.classes["Pipeline"], "self").dispatched


# -- what a device_map's stages reach: helpers, constructors, wrappers ----------

HELPER = SPLIT_BASE + """

class Tower(Base):
    def __init__(self, n):
        super().__init__()
        self.layers = nn.ModuleList([Layer() for _ in range(n)])

    @classmethod
    def build(cls, n):
        tower = cls(n)
        return tower

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Joint(Base):
    def __init__(self):
        super().__init__()
        self.tower = {tower}
        self.head = nn.Linear(8, 2)

    def features(self, x, mask):
        out = Record(hidden=self.tower(x))
        h = out.hidden
        ones = torch.ones(h.shape[:-1], device=h.device)
        return torch.cat([ones, mask], dim=1)

    def forward(self, x, mask):
        return self.head(x), self.features(x, mask)
"""


def test_a_classmethod_returning_cls_builds_the_class():
    facts = build_facts(cst.parse_module(HEADER + "from types import SimpleNamespace as Record\n" + textwrap.dedent(HELPER.format(tower="Tower.build(4)"))))
    assert facts.classes["Tower"].methods["build"].constructs
    assert not facts.classes["Tower"].methods["forward"].constructs
    joint = facts.classes["Joint"]
    assert joint.attributes["tower"].kind == "module" and joint.attributes["tower"].module_class == "Tower"
    assert Stages(facts, joint, "self").spreading == ["tower"]


def test_a_classmethod_returning_something_else_builds_nothing():
    src = HELPER.format(tower="Tower.build(4)").replace("        tower = cls(n)\n        return tower", "        return n * 2")
    facts = build_facts(cst.parse_module(HEADER + "from types import SimpleNamespace as Record\n" + textwrap.dedent(src)))
    assert not facts.classes["Tower"].methods["build"].constructs
    assert facts.classes["Joint"].attributes["tower"].kind != "module"


def test_a_helper_forward_hands_the_inputs_sees_them_on_the_first_device():
    # the helper's mask is the model's input; what an unknown call wraps the
    # tower's output in (Record(...)) and its attribute stay on the tower's stage
    found = handovers("from types import SimpleNamespace as Record\n" + HELPER.format(tower="Tower.build(4)"), method="features")
    assert [(f[1], f[3], f[4], f[5]) for f in found] == [("mask", "the first device", "`ones`", True)]
    # the same mask moved first: nothing handed over
    moved = HELPER.format(tower="Tower.build(4)").replace("[ones, mask]", "[ones, mask.to(ones.device)]")
    assert handovers("from types import SimpleNamespace as Record\n" + moved, method="features") == []


TWO_SPREADING = SPLIT_BASE + """

class Stack(Base):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.layers = nn.ModuleList([Layer() for _ in range(4)])

    def forward(self, ids):
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h)
        return h


class Pair(Base):
    def __init__(self):
        super().__init__()
        self.first = Stack()
        self.second = Stack()

    def forward(self, ids, mask):
        embeds = self.{which}.embed(ids)
        return embeds.masked_fill(mask == 0, 0.0), self.second(embeds), torch.cat([mask, mask])
"""


def test_a_spreading_part_after_another_is_on_the_last_stage_with_its_pieces():
    facts = build_facts(cst.parse_module(HEADER + textwrap.dedent(TWO_SPREADING.format(which="second"))))
    pair = Stages(facts, facts.classes["Pair"], "self")
    assert pair.spreading == ["first", "second"]
    # the first spreading part has no stage of its own (its pieces start
    # where the inputs are); the one the map fills after it is past it, and
    # past what the parts between the two put out
    assert pair.of_attribute("first") is None and pair.of_attribute("second") == "whole:second"
    assert pair.output_of("first") == "last" and pair.output_of("second") == "whole:second"


def test_a_tensor_method_meets_its_tensor_arguments_across_stages():
    # self.second.embed(ids) is on the last stage: the mask from the inputs
    # meets it in masked_fill; self.first.embed(ids) is with the inputs
    found = handovers(TWO_SPREADING.format(which="second"))
    assert [(f[1], f[2], f[5]) for f in found] == [("mask == 0", "between", True)]
    assert handovers(TWO_SPREADING.format(which="first")) == []


def test_a_row_of_the_inputs_indexed_by_a_tensor_from_another_stage_has_dimensions():
    src = TWO_SPREADING.format(which="first") + """

class Tagger(Base):
    def __init__(self):
        super().__init__()
        self.stack = Stack()

    def forward(self, ids):
        h = self.stack(ids)
        keep = h.sum(-1) > 0
        rows = []
        for i, row in enumerate(ids):
            rows.append(row[keep[i]])
        return rows
"""
    found = handovers(src)
    assert [(f[1], f[5]) for f in found] == [("row", True)]



def test_a_tensor_parameter_every_caller_passes_on_a_stage_is_on_it():
    # the annotation says a tensor, not where: the callers do (a mask moved
    # past the blocks, handed to a helper that indexes the inputs with it)
    src = TWO_SPREADING.format(which="first") + """

class Masked(Base):
    def __init__(self):
        super().__init__()
        self.stack = Stack()

    def forward(self, ids, mask: torch.Tensor):
        h = self.stack(ids)
        return self._kept(ids, mask.to(h.device))

    def _kept(self, ids: torch.Tensor, mask: torch.Tensor):
        return ids[mask == 1]
"""
    assert [(f[1], f[5]) for f in handovers(src, "_kept")] == [("ids", True)]


def test_a_mask_from_the_inputs_meets_the_output_after_the_blocks():
    src = SPLIT_BASE + """

class Tagger(Base):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer() for _ in range(2)])
        self.head = nn.Linear(8, 8)

    def forward(self, x, token_type_ids):
        for layer in self.layers:
            x = layer(x)
        h = self.head(x)
        h = h.masked_fill(token_type_ids == 0, 0)
        kept = torch.where(token_type_ids[..., None] > 0, h, torch.zeros_like(h))
        return kept + h
"""
    found = handovers(src)
    # a mask is a tensor, on the device of what it compares: the inputs'
    assert [(f[1], f[3], f[4]) for f in found] == [
        ("token_type_ids == 0", "the first device", "`h`"),
        ("token_type_ids[..., None] > 0", "the first device", "`h`"),
    ]
    # what torch.where makes of an input's mask and the head's output is on
    # the head's stage (where the fix moves the mask): `kept + h` meets nothing
    assert all(f[0] != 19 for f in found)


def test_tuples_two_parts_return_are_joined_not_mixed():
    src = SPLIT_BASE + """

class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer() for _ in range(2)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x, x.mean(-1)


class Pair(Base):
    def __init__(self):
        super().__init__()
        self.first = Attention()
        self.second = Attention()

    def forward(self, x):
        a = self.first(x)
        b = self.second(a[0])
        outputs = a[1:] + b[1:]
        return b[0] + a[0], outputs
"""
    # a part's forward returns a tuple: concatenating two parts' tuples is
    # Python, not a tensor operation; their tensors on two stages still meet
    found = [(f[1], f[3]) for f in handovers(src)]
    assert found == [("a[0]", "the last device (after `self.first`)")]


def test_generate_writing_image_features_into_the_text_embeddings():
    src = SPLIT_BASE + """
from transformers import AutoModel, AutoModelForCausalLM

class Captioner(Base):
    def __init__(self, config):
        super().__init__()
        self.vision = AutoModel.from_config(config.vision)
        self.proj = nn.Linear(8, 8)
        self.text = AutoModelForCausalLM.from_config(config.text)

    def get_input_embeddings(self):
        return self.text.get_input_embeddings()

    @torch.no_grad()
    def generate(self, pixel_values, input_ids):
        feats = self.proj(self.vision(pixel_values).last_hidden_state)
        embeds = self.get_input_embeddings()(input_ids)
        mask = (input_ids == 3).unsqueeze(-1).expand_as(embeds)
        embeds[mask] = feats.flatten()
        return self.text.generate(inputs_embeds=embeds)
"""
    # an index write's values must be on the written tensor's device: the
    # projected features (where the image tower ended) into the embeddings
    # of the language model the map fills after it
    found = handovers(src, method="generate")
    assert [(f[1], f[3]) for f in found] == [("feats.flatten()", "the last device (after `self.vision`)")]
    flow, _, _ = _flow(src)
    gen = next(fn for fn in flow.all_functions() if fn.name.value == "generate")
    assert flow.function(gen).runs_parts
    # moved to the embeddings: nothing handed over
    assert handovers(src.replace("= feats.flatten()", "= feats.flatten().to(embeds.device)"), method="generate") == []


SCRIPT = """
class TwoStage(nn.Module):
    def __init__(self, dev0="cuda:0", dev1="cuda:1"):
        super().__init__()
        self.dev0, self.dev1 = dev0, dev1
        self.body = nn.Linear(8, 8).to(dev0)
        self.head = nn.Linear(8, 2).to(dev1)

    def forward(self, x):
        return self.head(self.body(x.to(self.dev0)).to(self.dev1))


def loss_of(model, x, labels):
    logits = model(x)
    return F.cross_entropy(logits, {labels})


def run():
    model = TwoStage()
    return loss_of(model, torch.randn(4, 8), torch.tensor([0, 1, 0, 1]))
"""


def test_code_that_runs_a_model_parallel_model_sees_its_stages():
    # the model's output is on its last stage; the labels, moved to a
    # device the model names (model.dev0), meet it there: a handover in the
    # helper, found through the caller that hands it the model
    found = handovers(SCRIPT.format(labels="labels.to(model.dev0)"), method="run")
    assert found == [(15, "labels.to(model.dev0)", "between", "`model.dev0`", "`logits`", False)]
    # moved to where the logits are, or to the last stage by name: nothing
    for labels in ("labels.to(logits.device)", "labels.to(model.dev1)"):
        assert handovers(SCRIPT.format(labels=labels), method="run") == [], labels
    # the helper alone does not know what it is handed
    assert handovers(SCRIPT.format(labels="labels.to(model.dev0)"), method="loss_of") == []
    # a class that pins its parts to devices it writes out: the script's
    # "cuda:0" and .cuda() (the current GPU) are its first stage, .cuda(1) its last
    literal = SCRIPT.replace(".to(dev0)", '.to("cuda:0")').replace(".to(dev1)", '.to("cuda:1")')
    for labels in ('labels.to("cuda:0")', "labels.cuda()"):
        found = handovers(literal.format(labels=labels), method="run")
        assert found == [(15, labels, "between", '`"cuda:0"`', "`logits`", False)], labels
    assert handovers(literal.format(labels="labels.cuda(1)"), method="run") == []


def test_a_model_moved_or_wrapped_whole_has_no_stages_in_the_script():
    src = SCRIPT.format(labels="labels.to(model.dev0)")
    for how in ("model = TwoStage().to('cuda:0')", "model = nn.DataParallel(TwoStage())"):
        assert handovers(src.replace("model = TwoStage()", how), method="run") == [], how


def test_a_fix_in_script_code_names_no_device_of_a_tuple():
    # ``outs = model(x)`` of a forward returning a tuple: ``outs[0]`` is on
    # the last stage, but ``outs.device`` would be an AttributeError
    src = SCRIPT.replace("return self.head(self.body(x.to(self.dev0)).to(self.dev1))",
                         "return self.head(self.body(x.to(self.dev0)).to(self.dev1)), x")
    src = src.replace("logits = model(x)\n    return F.cross_entropy(logits, {labels})",
                      "outs = model(x)\n    return F.cross_entropy(outs[0], {labels})")
    flow, _, _ = _flow(src.format(labels="labels.to(model.dev0)"))
    found = [h for fn in flow.all_functions() if fn.name.value == "run" for h in flow.function(fn).handovers]
    assert [(cst.Module(body=[]).code_for_node(h.arg), h.expression) for h in found] == [("labels.to(model.dev0)", None)]


def test_a_model_moved_beside_a_model_parallel_one_is_still_a_model():
    # ``net = make_net().cuda()`` in a function that also runs a model-parallel
    # model: a move of something of unknown kind, not a stage's tensor, so a
    # CPU batch fed to ``net`` is still DL011's
    from devlint.engine import lint_source

    literal = SCRIPT.replace(".to(dev0)", '.to("cuda:0")').replace(".to(dev1)", '.to("cuda:1")')
    src = HEADER + "from zoo import make_net\n" + textwrap.dedent(literal.format(labels="labels.to(model.dev1)")) + textwrap.dedent('''
        def main(loader):
            model = TwoStage()
            net = make_net().cuda()
            for images, _ in loader:
                net(images)
                model(images)
        ''')
    codes = [d.code for d in lint_source(src, "script.py").diagnostics]
    assert codes.count("DL011") == 1, codes
