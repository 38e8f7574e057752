"""Model-parallel stages: which device an expression names in a module that
pins its parts to devices, and how code inside its methods can name it.

A module class that pins submodules (``self.enc = Enc().to("cuda:0")``,
blocks placed in a loop over a device list) runs each part on its own
device: a *stage*. The device flow (:mod:`devlint.facts.flow`) keeps, for
each tensor of such a module's methods, the stage it is on, as a *key*:

- ``"cuda:1"``, ``"cpu"``: a device the code names (``"cuda"`` and
  ``.cuda()`` count as ``cuda:0``; ``devices[1]`` of a module-level list is
  its element);
- ``"name:dev1"``: a device held in a name the flow cannot read
  (``self.dev1 = dev1`` in ``__init__`` is ``dev1``'s key);
- ``"each:<attr>"``: the device of the block a loop over the spread
  container ``self.<attr>`` holds now (``x.to(block.ln1.weight.device)``);
- ``"spread:<attr>"``: one of the devices ``self.<attr>``'s blocks are
  spread over (what a block's output is on after the loop).

A module a ``device_map`` may split (``ClassFacts.dispatched``: it holds the
blocks a ``_no_split_modules`` names) has stages too, though its code names
no device. accelerate's ``device_map="auto"`` fills the GPUs in the order
the module registers its parts, keeping each listed block whole; it moves a
part's inputs to the part and leaves the output there. So what comes before
the *spreading* parts (a container of such blocks, a part that holds one,
or a whole pretrained model an auto class builds) is on the first device,
and what comes out of them, or out of a part registered after them, may be
on the last. Its keys:

- ``"first"``: the model's inputs (where the user put them: the device of
  the map's first part), the module's own parameters and buffers, and the
  output of a part registered before the spreading ones (but see
  ``"part:"``);
- ``"part:<attr>"``: the output of a part registered before the spreading
  ones but after the embedding table ``self.<attr>`` the module registers
  first and ``forward`` looks its inputs up in (``self.wpe`` after
  ``self.wte``, ``self.wte(input_ids)``): the map goes on to the next GPU
  wherever a part no longer fits, and a token table is a large share of the
  model (a third of GPT-2 small), so a balanced map may end the first GPU
  right after it;
- ``"last"``: the output of the first spreading part (the blocks of
  ``self.layers``, ``self.model``), or of a part registered after one
  (``self.norm``, ``self.lm_head``);
- ``"whole:<attr>"``: a spreading part registered after another one, all of
  it (``self.model.embed_tokens`` after ``self.visual``, and what
  ``self.model`` puts out): past where the parts before it ended.

Calling a part hands nothing over (its hook moves the inputs); two stages
meeting in an operation, an index, an index write or a loss is a handover.

This module answers the syntax-level questions about stages (which key an
expression names, whether a device expression written in ``__init__`` can
be written in ``forward``, how to name a block's device); the flow decides
where values are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Set

import libcst as cst

from devlint.facts.classes import ClassFacts, FileFacts
from devlint.torch_api import STATELESS_MODULES, is_auto_model_class
from devlint.syntax import code_of, free_names, is_cuda_string, positional_args, self_attribute, shown_device, string_value

_BUILTINS = frozenset({"len", "int", "min", "max", "abs", "str", "range"})

#: embedding tables: a vocabulary's can fill a GPU's share of a map
_TABLES = frozenset({"torch.nn.Embedding", "torch.nn.modules.sparse.Embedding", "torch.nn.EmbeddingBag"})

EACH = "each:"
SPREAD = "spread:"
FIRST = "first"
LAST = "last"
#: in a split model, the parts registered before the spreading ones after a
#: token embedding table: ``"part:wte"`` (the map may end a GPU right after
#: the table, a large share of the model)
PART = "part:"
#: in a split model, all of a spreading part the map fills after another
#: one: ``"whole:language_model"`` (its embedding, its output), past where
#: the parts before it ended
WHOLE = "whole:"
#: the device of a model a method is handed (``update(self, model)``):
#: wherever the caller put it
ARG = "arg:"
#: the device-flow device of a tensor on a stage: ``"stage:" + key``
STAGE_PREFIX = "stage:"


def stage_device(key: str) -> str:
    return STAGE_PREFIX + key


def stage_of(device: str) -> Optional[str]:
    """The stage key of a device-flow device, or None."""
    return device[len(STAGE_PREFIX):] if device.startswith(STAGE_PREFIX) else None


@dataclass(frozen=True)
class Handover:
    """An activation handed from one stage to another without a move."""

    #: the expression handed over (where a fix adds ``.to(...)``)
    arg: cst.CSTNode
    #: the call or operation that receives it
    at: cst.CSTNode
    #: "between" two stages, "into" a spread container's blocks (each on its
    #: own device), "out of" one into a single stage
    kind: str
    #: how a message names the value's stage, and what receives it and where
    source: str
    receiver: str
    target: str
    #: a device expression for the receiving stage, valid where the value is
    #: handed over (None: no fix)
    expression: Optional[str]
    #: the value is an input of the model, on the stage where the inputs
    #: enter it (inferred from the first stage that takes one)
    arrival: bool = False
    #: for "into" and "out of": the container whose blocks are spread
    container: str = ""
    #: the stages are where a ``device_map`` put the model's parts
    dispatched: bool = False
    #: one side is the weights of a model the method was handed (``ARG``)
    handed_model: bool = False


class Stages:
    """The stages of one model-parallel module class, as its method
    ``self_name`` sees them."""

    def __init__(self, facts: FileFacts, cls: ClassFacts, self_name: str,
                 portable: Optional[Dict[str, str]] = None) -> None:
        self.facts = facts
        self.cls = cls
        self.self_name = self_name
        #: key -> a device expression any method of the class (with the
        #: same ``self`` name) can write: shared by the class's methods, so a
        #: helper handed tensors on stages names them as its caller does
        self.portable: Dict[str, str] = portable if portable is not None else {}
        #: pinned submodule attribute -> its device expression in ``__init__``
        self.pinned: Dict[str, str] = cls.pinned_devices()
        init = cls.methods.get("__init__")
        self._init_locals: Set[str] = set(init.params) if init else set()
        # self.device = device in __init__: every method names that device
        # ``self.device`` (how a message shows a part pinned with ``.to(device)``)
        for a in cls.assignments:
            if a.method == "__init__" and a.value in self._init_locals and a.kind in ("device", "other") and self_name:
                self.portable.setdefault(f"name:{a.value}", f"{self_name}.{a.name}")
        #: key -> the device expression a message shows for it (None: the key's own text)
        self.shown: Dict[str, Optional[str]] = {}
        #: split by a ``device_map``, not pinned by its own code
        self.dispatched = not self.pinned and cls.dispatched
        #: a split module: each part's stage (FIRST or LAST; a spreading
        #: part, whose blocks the map spreads, has none: see :meth:`spread`)
        self.order: Dict[str, str] = {}
        #: the spreading parts, in the order ``__init__`` registers them
        self.spreading: List[str] = []
        if self.dispatched:
            self._order_parts()
            self.pinned = {n: "" for n in (*self.order, *self.spreading)}

    def _order_parts(self) -> None:
        stage = FIRST
        table = ""  # an embedding table registered first, before the spreading parts
        for a in self.cls.assignments:
            if a.method != "__init__" or a.kind not in ("module", "nn_container") or a.name in self.order or a.name in self.spreading:
                continue
            held = {a.module_class.rsplit(".", 1)[-1], a.element_class.rsplit(".", 1)[-1]} - {""}
            units = self.facts.split_units
            if (a.kind == "nn_container" and held & units) or any(
                (h in self.facts.classes and self.facts.classes[h].dispatched) or is_auto_model_class(h) for h in held
            ):
                self.spreading.append(a.name)
                stage = LAST
            elif not self._holds_no_tensor(a.module_class):
                # a part with no weights follows its inputs; one after an
                # embedding table (and before the blocks) may be past the
                # first GPU
                first = not self.order
                self.order[a.name] = PART + table if stage == FIRST and table else stage
                if first and stage == FIRST and a.kind == "module" and a.module_class in _TABLES and a.name in self.cls.input_parts:
                    table = a.name  # the token table forward looks the inputs up in, first of all

    def _holds_no_tensor(self, name: str) -> bool:
        """A part of class ``name`` holds no parameter or buffer (``nn.ReLU``,
        ``nn.Dropout``, a class of the file with none and no submodule, itself
        or through its bases: :meth:`FileFacts.holds_weights`)."""
        short = name.rsplit(".", 1)[-1]
        if short in STATELESS_MODULES or short in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"):
            return True
        return name in self.facts.classes and not self.facts.holds_weights(name)

    def name(self, node: cst.BaseExpression, written_here: bool = True) -> Optional[str]:
        """:meth:`key`, remembering how to show it: as written when it is
        written in the method, or in ``__init__`` and valid in the method."""
        if self.dispatched:
            return None  # the map places the parts, not the code
        key = self.key(node)
        if key is not None and key not in self.shown:
            usable = self.usable(node)
            self.shown[key] = code_of(node) if written_here or usable else None
            if usable:
                self.portable.setdefault(key, code_of(node))
        return key

    def shown_as(self, key: str) -> Optional[str]:
        """How this method writes the device of stage ``key`` (None: it
        cannot)."""
        return self.shown.get(key) or self.portable.get(key)

    # -- keys ----------------------------------------------------------------
    def of_attribute(self, attr: str) -> Optional[str]:
        """The stage of the pinned submodule ``self.<attr>`` (None for a
        container whose blocks are spread: see :meth:`spread`)."""
        if self.dispatched:
            if attr in self.spreading[1:]:
                # a spreading part the map fills after another one: all of
                # it, its first pieces too (``self.model.embed_tokens`` after
                # ``self.visual``), is past the first one's last device, and
                # past what the parts between the two put out
                return WHOLE + attr
            return self.order.get(attr)
        code = self.pinned.get(attr)
        if code is None or self.spread(attr):
            return None
        try:
            node = cst.parse_expression(code)
        except Exception:
            return None
        return self.name(node, written_here=False)

    def output_of(self, attr: str) -> Optional[str]:
        """In a split model, the stage of what calling the part
        ``self.<attr>`` puts out (None: it follows its inputs): the last
        device for the first spreading part, else the part's own stage."""
        return LAST if self.spreading[:1] == [attr] else self.of_attribute(attr)

    def spread(self, attr: str) -> bool:
        if self.dispatched:
            return attr in self.spreading
        return self.cls.elements_spread(attr)

    def key(self, node: cst.BaseExpression, depth: int = 0) -> Optional[str]:
        """Which device a device expression names, as a stage key; None when
        it names none (``x.dtype``)."""
        if depth > 4:
            return None
        s = string_value(node)
        if s is not None:
            if s == "cuda":
                return "cuda:0"
            return s if is_cuda_string(s) or s == "cpu" else None
        if isinstance(node, cst.Integer):
            return f"cuda:{node.value}"
        if isinstance(node, cst.Call) and self.facts.qualify(node.func) == "torch.device":
            args = positional_args(node)
            if len(args) == 2 and isinstance(args[1].value, cst.Integer):
                base = string_value(args[0].value)
                return f"{base}:{args[1].value.value}" if base else None
            if len(args) == 1:
                return self.key(args[0].value, depth + 1)
            return None
        if isinstance(node, cst.Name):
            value = self.facts.module_devices.get(node.value)
            if value is not None and node.value not in self._init_locals:
                try:
                    inner = self.key(cst.parse_expression(value), depth + 1)
                except Exception:
                    inner = None
                return inner or f"name:{node.value}"
            return f"name:{node.value}"
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and len(node.slice) == 1:
            idx = node.slice[0].slice
            lst = self.facts.module_device_lists.get(node.value.value)
            if isinstance(idx, cst.Index) and isinstance(idx.value, cst.Integer) and lst is not None:
                i = int(idx.value.value)
                if 0 <= i < len(lst):
                    try:
                        return self.key(cst.parse_expression(lst[i]), depth + 1) or f"{node.value.value}[{i}]"
                    except Exception:
                        return None
        attr = self_attribute(node, self.self_name)
        if attr is not None:
            a = self.facts.class_attribute(self.cls.name, attr)
            if a is not None and a.method == "__init__" and a.value.isidentifier() and a.kind in ("device", "other"):
                # self.dev1 = dev1 in __init__, which also pins
                # self.dec = nn.Linear(...).to(dev1): the same device
                return self.key(cst.Name(a.value), depth + 1)
            if a is not None and a.kind == "device":
                try:
                    inner = self.key(cst.parse_expression(a.value), depth + 1)
                except Exception:
                    inner = None
                if inner is not None and not inner.startswith("name:"):
                    return inner
            return f"self.{attr}"
        return "expr:" + "".join(code_of(node).split())

    # -- how forward names a stage --------------------------------------------
    def usable(self, node: cst.BaseExpression, extra: Set[str] = frozenset()) -> bool:
        """Whether a device expression written in ``__init__`` means the same
        inside a method: its names are module-level, imported or builtins."""
        known = set(self.facts.module_assigned) | set(self.facts.imports) | _BUILTINS | set(extra)
        known.add(self.self_name)
        return all(n in known for n in free_names(node))

    def expression(self, attr: str) -> Optional[str]:
        """A device expression for ``self.<attr>``'s stage that a method can
        write: the one ``__init__`` used, when it means the same there, else
        a parameter the submodule holds (``self.dec.weight.device``)."""
        code = self.pinned.get(attr)
        if code:
            try:
                node = cst.parse_expression(code)
            except Exception:
                node = None
            if node is not None and self.usable(node):
                return code
        a = self.cls.attributes.get(attr)
        path = self.facts.tensor_path_of_class(a.module_class) if a is not None else None
        return f"{self.self_name}.{attr}.{path}.device" if path else None

    def block_expression(self, attr: str, var: str, index: Optional[str]) -> Optional[str]:
        """How a loop over the spread container ``self.<attr>`` names the
        current block's device: a parameter of the block
        (``block.ln1.weight.device``), or the placement ``__init__`` used with
        its loop index renamed (``devices[i % 2]``)."""
        a = self.facts.class_attribute(self.cls.name, attr)
        path = self.facts.tensor_path_of_class(a.element_class) if a is not None and a.element_class else None
        if path:
            return f"{var}.{path}.device"
        init_index = self.cls.element_index.get(attr)
        placements = self.cls.element_placements.get(attr, [])
        if index and init_index and len(set(placements)) == 1:
            try:
                node = cst.parse_expression(placements[0])
            except Exception:
                return None
            renamed = node.visit(NameRenamer(init_index, index))
            if self.usable(renamed, extra={index}):
                return code_of(renamed)
        return None

    def describe(self, key: Optional[str]) -> str:
        """A stage as a message names it."""
        if key is None:
            return "an unknown device"
        if key == FIRST:
            return "the first device"
        if key == LAST:
            return f"the last device (after `{self.self_name}.{self.spreading[0]}`)" if self.spreading else "the last device"
        if key.startswith(SPREAD) or key.startswith(EACH):
            return f"the devices `{self.self_name}.{key.split(':', 1)[1]}` is spread over"
        if key.startswith(WHOLE):
            first = f" (after `{self.self_name}.{self.spreading[0]}`)" if self.spreading else ""
            return f"the devices of `{self.self_name}.{key[len(WHOLE):]}`{first}"
        if key.startswith(PART):
            return f"the device after `{self.self_name}.{key[len(PART):]}`"
        if key.startswith(ARG):
            return f"`{key[len(ARG):]}`'s device (wherever the caller put it)"
        text = self.shown_as(key) or (key.split(":", 1)[1] if key.startswith(("name:", "expr:")) else key)
        return f"`{shown_device(text)}`"


class NameRenamer(cst.CSTTransformer):
    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value=self.new) if updated_node.value == self.old else updated_node
