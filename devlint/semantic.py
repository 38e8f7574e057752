"""Per-file semantic facts shared by every rule, computed once per parse.

The facts are a plain, serialisable record (:class:`FileFacts`): names and
source snippets, never libcst nodes, so that a later cross-file index can
cache and merge them. Name resolution is a light import-alias table (one pass
over ``import`` statements), not libcst's scope analysis, which costs about
seven times the parse itself (``shared/bench/BASELINE.md``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Container, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from devlint.facts.store import FactStore, Provider
from devlint.syntax import LINES, blocks, statements
from devlint.walk import walk

# Spellings that name the same object; resolved names are normalised to the
# value so rules compare against one spelling.
CANONICAL_NAMES: Dict[str, str] = {
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.nn.modules.Module": "torch.nn.Module",
    "torch.nn.modules.container.ModuleList": "torch.nn.ModuleList",
    "torch.nn.modules.container.ModuleDict": "torch.nn.ModuleDict",
    "torch.nn.modules.container.Sequential": "torch.nn.Sequential",
    "torch.nn.parameter.Parameter": "torch.nn.Parameter",
    "torch.nn.parameter.Buffer": "torch.nn.Buffer",
}

DATA_PARALLEL = "torch.nn.DataParallel"
DISTRIBUTED_DATA_PARALLEL = "torch.nn.parallel.DistributedDataParallel"
WRAPPERS = frozenset({DATA_PARALLEL, DISTRIBUTED_DATA_PARALLEL})

#: torch functions that create a tensor and take ``device=``.
TENSOR_FACTORIES = frozenset(
    {
        "arange", "range", "zeros", "ones", "empty", "full", "rand", "randn",
        "randint", "randperm", "eye", "linspace", "logspace", "tensor",
        "as_tensor", "tril_indices", "triu_indices", "empty_strided",
        "normal", "bartlett_window", "blackman_window", "hamming_window",
        "hann_window", "kaiser_window", "scalar_tensor", "sparse_coo_tensor",
        "complex", "polar",
    }
)
#: factories whose device is not given by ``device=`` but by their input.
_NOT_FACTORIES = frozenset({"complex", "polar", "normal"})
#: the factories :meth:`FileFacts.is_factory` recognises.
DEVICE_FACTORIES = TENSOR_FACTORIES - _NOT_FACTORIES

# Classes from outside torch.nn that are nn.Modules; the value says whether
# the class provides a ``device`` attribute (transformers' PreTrainedModel,
# Lightning's LightningModule and diffusers' ModelMixin all do). Matched on
# the last component so relative imports inside those projects count too.
KNOWN_MODULE_BASES: Dict[str, bool] = {
    "PreTrainedModel": True,
    "LightningModule": True,
    "ModelMixin": True,
}

#: torch.nn layers that hold a ``weight`` parameter by default, usable as a
#: device anchor (``self.embed.weight.device``).
WEIGHTED_LAYERS = frozenset(
    {
        "Linear", "Bilinear", "Embedding", "EmbeddingBag", "Conv1d", "Conv2d",
        "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
        "LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
        "PReLU", "RMSNorm", "LazyLinear",
    }
)
#: torch.nn containers of submodules.
MODULE_CONTAINERS = frozenset({"ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict"})
#: pre-factory tensor constructors (``torch.FloatTensor([d])``)
_LEGACY_TENSOR_CONSTRUCTORS = frozenset(
    f"torch.{p}{t}Tensor"
    for p in ("", "cuda.")
    for t in ("", "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
) - {"torch.cuda.Tensor"}
LEGACY_TENSOR_CONSTRUCTORS = _LEGACY_TENSOR_CONSTRUCTORS
#: torch functions that take tensors but do not return one tensor
_NOT_ONE_TENSOR = frozenset(
    {
        "is_tensor", "is_storage", "is_floating_point", "is_complex", "is_nonzero", "numel", "equal",
        "allclose", "typename", "get_default_dtype", "split", "chunk", "unbind", "tensor_split",
        "hsplit", "vsplit", "dsplit", "meshgrid", "broadcast_tensors", "topk", "sort", "max", "min",
        "median", "nanmedian", "mode", "kthvalue", "var_mean", "std_mean", "unique", "unique_consecutive",
        "histogram", "frexp", "aminmax", "svd", "qr", "lu", "slogdet", "save", "load", "manual_seed",
        "device", "dtype", "Size", "no_grad", "set_grad_enabled", "where", "nonzero", "broadcast_shapes",
    }
)
#: tensor methods that do not return a tensor
_NOT_TENSOR_METHODS = frozenset(
    {
        "tolist", "item", "numpy", "size", "dim", "ndimension", "numel", "nelement", "element_size",
        "data_ptr", "storage", "untyped_storage", "is_contiguous", "is_floating_point", "is_complex",
        "split", "chunk", "unbind", "tensor_split", "sort", "topk", "max", "min", "median", "mode",
        "kthvalue", "unique", "nonzero_static", "stride", "get_device", "equal", "allclose", "register_hook",
        "backward", "__len__", "__iter__", "type", "dtype", "device", "shape",
    }
)
#: functions and methods that keep a tensor's shape (and 0-dim stays 0-dim)
_ELEMENTWISE = frozenset(
    {
        "sqrt", "rsqrt", "exp", "log", "log2", "log10", "log1p", "abs", "neg", "reciprocal", "sin", "cos",
        "tanh", "sigmoid", "float", "double", "half", "bfloat16", "long", "int", "bool", "clone", "detach",
        "requires_grad_", "clamp", "clamp_min", "clamp_max", "pow", "square",
    }
)


# --------------------------------------------------------------------------
# small node helpers shared by the semantic pass and the rules


def dotted_name(node: cst.CSTNode) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: List[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def code_of(node: cst.CSTNode) -> str:
    """Source text of an expression node (no surrounding whitespace)."""
    return cst.Module(body=[]).code_for_node(node)


def string_value(node: cst.CSTNode) -> Optional[str]:
    """The value of a plain (non-f) string literal, else None."""
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # pragma: no cover - malformed literal
            return None
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = string_value(node.left), string_value(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def is_number_literal(node: cst.CSTNode) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return is_number_literal(node.expression)
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return True
    if isinstance(node, cst.BinaryOperation):
        return is_number_literal(node.left) and is_number_literal(node.right)
    return False


def keyword_arg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def positional_args(call: cst.Call) -> List[cst.Arg]:
    return [a for a in call.args if a.keyword is None and a.star == ""]


def self_attribute(node: cst.CSTNode, self_name: str = "self") -> Optional[str]:
    """``x`` for ``self.x``, else None."""
    if (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == self_name
    ):
        return node.attr.value
    return None


def dynamic_self_attribute(node: cst.CSTNode, self_name: str = "self") -> Optional[str]:
    """The attribute name that ``setattr(self, <name>, v)`` sets or
    ``getattr(self, <name>[, default])`` reads: the string for a literal
    name, the literal parts with ``{}`` for each replacement of an f-string
    (``f"scale_{i}"`` -> ``scale_{}``: the same family of attributes whatever
    ``i``), else None."""
    if not isinstance(node, cst.Call) or dotted_name(node.func) not in ("setattr", "getattr"):
        return None
    if len(node.args) < 2 or any(a.star or a.keyword is not None for a in node.args):
        return None
    if dotted_name(node.args[0].value) != self_name:
        return None
    name = node.args[1].value
    s = string_value(name)
    if s is not None:
        return s
    if isinstance(name, cst.FormattedString):
        parts = []
        for part in name.parts:
            if isinstance(part, cst.FormattedStringText):
                parts.append(part.value)
            else:
                parts.append("{}")
        return "".join(parts)
    return None


def loop_over_attribute(node: cst.For, self_name: str = "self") -> Optional[Tuple[str, str, Optional[str]]]:
    """(loop variable, attribute, index variable) for ``for b in self.blocks``
    or ``for i, b in enumerate(self.blocks)``, else None."""
    it, target = node.iter, node.target
    index: Optional[str] = None
    if isinstance(it, cst.Call) and dotted_name(it.func) == "enumerate" and it.args:
        if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
            return None
        first = target.elements[0].value
        index = first.value if isinstance(first, cst.Name) else None
        it, target = it.args[0].value, target.elements[1].value
    attr = self_attribute(it, self_name)
    if attr is None or not isinstance(target, cst.Name):
        return None
    return target.value, attr, index


def module_class_of(
    facts: "FileFacts", cls: "ClassFacts", node: cst.CSTNode, self_name: str, loop_vars: Dict[str, str]
) -> Optional[str]:
    """The class of the nn.Module an expression in a method of ``cls`` refers
    to: ``self``, ``self.encoder``, ``self.blocks[i]``, or ``block`` where
    ``loop_vars`` says ``block`` iterates ``self.blocks``; None when unknown."""
    if isinstance(node, cst.Name):
        if node.value == self_name:
            return cls.name if cls.is_module else None
        attr = loop_vars.get(node.value)
        return _element_class_of(facts, cls, attr) if attr else None
    if isinstance(node, cst.Subscript):
        attr = self_attribute(node.value, self_name)
        return _element_class_of(facts, cls, attr) if attr else None
    attr = self_attribute(node, self_name)
    if attr is not None:
        a = facts.class_attribute(cls.name, attr)
        if a is not None and a.kind in ("module", "nn_container") and a.module_class:
            return a.module_class
    return None


def _element_class_of(facts: "FileFacts", cls: "ClassFacts", attr: str) -> Optional[str]:
    a = facts.class_attribute(cls.name, attr)
    if a is None or a.kind not in ("nn_container", "module_container"):
        return None
    if not a.element_class or a.element_class == "torch.nn.Module":
        return None  # empty or mixed
    return a.element_class


def shown_device(device: str) -> str:
    """A device expression as a message shows it: ``.cuda(1)`` records the
    bare index ``1``, which reads better as ``cuda:1``."""
    return f"cuda:{device}" if device.isdigit() else device


def is_cuda_string(value: Optional[str]) -> bool:
    return value is not None and (value == "cuda" or value.startswith("cuda:"))


# --------------------------------------------------------------------------
# the facts


#: ``torch.nn`` modules without parameters, buffers or train/eval behaviour
#: (the weighted losses qualify only without their weight arguments)
_WEIGHTED_LOSSES = frozenset(
    {"CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss"}
)
STATELESS_MODULES = _WEIGHTED_LOSSES | frozenset(
    {"L1Loss", "MSELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss",
     "CosineEmbeddingLoss", "MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss", "MultiLabelMarginLoss",
     "TripletMarginLoss", "CTCLoss", "ReLU", "ReLU6", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "Softmax",
     "LogSoftmax", "LeakyReLU", "ELU", "SELU", "CELU", "Softplus", "Hardtanh", "Hardswish", "Hardsigmoid",
     "Identity", "Flatten", "Unflatten"}
)


@dataclass
class AttributeFacts:
    """What ``self.<name> = <value>`` in a module class assigns.

    kind is one of: ``module`` (a submodule), ``module_container`` (a plain
    list/tuple/dict of modules), ``nn_container`` (nn.ModuleList & co.),
    ``tensor``, ``tensor_container``, ``parameter``, ``buffer``, ``device``
    (a device fixed at construction), ``other``.
    """

    name: str
    kind: str
    method: str
    line: int
    value: str = ""
    #: for modules: the class called (qualified when resolvable)
    module_class: str = ""
    #: for modules pinned with ``.to(dev)``/``.cuda(i)``: the device expression
    device: str = ""
    #: for containers: the element class when the elements are homogeneous
    element_class: str = ""
    #: for tensors: a 0-dim tensor (``torch.tensor(0.5)``), which PyTorch lets
    #: mix with tensors on any device
    scalar: bool = False
    #: for containers: ``list``, ``tuple`` or ``dict``
    container: str = ""
    #: for dict containers: every key is a string (literal, f-string, ``str()``)
    str_keys: bool = False
    #: for module containers: the same modules are also registered another way
    #: (``nn.Sequential(*layers)``, ``self.add_module(...)``, ``setattr(self, ...)``)
    registered_elsewhere: bool = False
    #: for module containers written as a literal: every element is a
    #: ``torch.nn`` module with no parameters, buffers or train/eval
    #: behaviour (a loss without ``weight=``/``pos_weight=``, ``nn.ReLU()``)
    stateless_elements: bool = False
    #: holds a list or tuple: a display or comprehension (``(0.5, 1.0, 2.0)``,
    #: ``list(ratios)``) or an argument whose default is one
    #: (``self.ratios = ratios`` with ``ratios=(0.5, 1.0, 2.0)``), so
    #: ``torch.tensor(self.ratios)`` has dimensions
    sequence: bool = False


@dataclass
class FunctionFacts:
    name: str
    params: List[str]
    #: parameters known or guessed to hold tensors, in order of preference
    tensor_params: List[str] = field(default_factory=list)
    #: ``self.<m>(...)`` calls made in the body
    self_calls: List[str] = field(default_factory=list)
    is_property: bool = False
    #: a @staticmethod: no ``self``, so no anchor through the module
    is_static: bool = False
    line: int = 0


@dataclass
class ClassFacts:
    name: str
    line: int
    bases: List[str]
    is_module: bool = False
    #: the class (or a base) defines a ``device`` attribute or property
    defines_device: bool = False
    methods: Dict[str, FunctionFacts] = field(default_factory=dict)
    #: methods that run when ``forward`` runs: forward and what it calls on self
    forward_reachable: List[str] = field(default_factory=list)
    attributes: Dict[str, AttributeFacts] = field(default_factory=dict)
    buffers: List[str] = field(default_factory=list)
    parameters: List[str] = field(default_factory=list)
    #: submodule attributes moved to a device after construction
    #: (``self.blocks[i].to(devices[i])``, ``for b in self.blocks: b.cuda(1)``)
    placed_attributes: Dict[str, str] = field(default_factory=dict)
    #: every ``self.<name> = value`` outside ``forward``, in source order
    #: (``attributes`` keeps the one that says what the attribute is)
    assignments: List[AttributeFacts] = field(default_factory=list)
    #: attributes whose value is used when ``forward`` runs (forward-reachable
    #: methods, inherited ones and those of local subclasses included), not
    #: counting reads where the device does not matter: moved on the spot
    #: (``self.x.to(t.device)``, ``.cuda()``, ``.type_as(t)``, ``t.new_tensor(self.x)``,
    #: a call with ``device=``), only inspected (``.shape``, ``.size()``, ``.dtype``,
    #: ``len()``, ``is None``, ``.zero_()``), or used as an index (``y[:, self.perm]``)
    forward_reads: List[str] = field(default_factory=list)
    #: attributes assigned when ``forward`` runs (``self.cache = ...``)
    forward_writes: List[str] = field(default_factory=list)
    #: names assigned in the class body (class attributes)
    class_attributes: List[str] = field(default_factory=list)
    #: container attribute -> the device expressions its elements were placed
    #: on, one per placement site (``for i, b in enumerate(self.blocks):
    #: b.to(devices[i % n])``, ``nn.ModuleList([B().to(d0), B().to(d1)])``)
    element_placements: Dict[str, List[str]] = field(default_factory=dict)
    #: container attribute -> the index variable an element placement
    #: expression uses (``i`` above), when it uses one
    element_index: Dict[str, str] = field(default_factory=dict)
    #: every ``self.<name>`` assigned in any method, ``forward`` included
    self_assigned: List[str] = field(default_factory=list)
    #: a path from an instance to a tensor it holds directly or through its
    #: own submodules (``ln1.weight``, ``scale``, ``attn.proj.weight``), usable
    #: as a device anchor (``block.ln1.weight.device``); "" when none is known
    anchor_tensor: str = ""
    #: ``forward`` moves one of its own arguments (``x = x.to(self.w.device)``),
    #: so callers need not
    moves_inputs: bool = False

    def attribute(self, name: str) -> Optional[AttributeFacts]:
        return self.attributes.get(name)

    def assignment_for(self, method: str, name: str, value: str) -> Optional[AttributeFacts]:
        """The record of ``self.<name> = <value>`` in ``method`` (value as source text)."""
        for record in self.assignments:
            if record.method == method and record.name == name and record.value == value:
                return record
        return None

    def assignments_of(self, name: str) -> List[AttributeFacts]:
        return [a for a in self.assignments if a.name == name]
    def elements_spread(self, name: str) -> bool:
        """The elements of container ``name`` were placed on devices that can
        differ from one element to the next."""
        placements = self.element_placements.get(name, [])
        return len(set(placements)) > 1 or bool(placements and self.element_index.get(name))

    def pinned_devices(self) -> Dict[str, str]:
        """Submodule attribute -> the device expression it was pinned to."""
        out = {n: a.device for n, a in self.attributes.items() if a.kind in ("module", "nn_container") and a.device}
        out.update(self.placed_attributes)
        return out


@dataclass
class FileFacts:
    #: local name -> qualified names it may refer to (sorted; more than one
    #: when a name is imported on several branches, e.g. try/except)
    imports: Dict[str, List[str]] = field(default_factory=dict)
    classes: Dict[str, ClassFacts] = field(default_factory=dict)
    #: module-level names bound to a fixed device (``device = torch.device("cuda")``)
    module_devices: Dict[str, str] = field(default_factory=dict)
    #: module-level names bound to a list/tuple of devices
    #: (``devices = [torch.device("cuda:0"), torch.device("cuda:1")]``) -> elements
    module_device_lists: Dict[str, List[str]] = field(default_factory=dict)
    #: every name assigned at module level (so a rule knows what a method can see)
    module_assigned: List[str] = field(default_factory=list)
    # -- name resolution ---------------------------------------------------
    def qualify_dotted(self, dotted: str) -> Optional[str]:
        head, _, rest = dotted.partition(".")
        targets = self.imports.get(head)
        if not targets:
            return None
        # deterministic: prefer a torch spelling, then the sorted first
        target = next((t for t in targets if t.split(".")[0] == "torch"), targets[0])
        full = f"{target}.{rest}" if rest else target
        return canonical(full)

    def qualify(self, node: cst.CSTNode) -> Optional[str]:
        """The qualified name an expression refers to through the imports."""
        dotted = dotted_name(node)
        return self.qualify_dotted(dotted) if dotted else None

    def torch_function(self, node: cst.CSTNode) -> Optional[str]:
        """``zeros`` if node refers to ``torch.zeros``, else None."""
        q = self.qualify(node)
        if q and q.startswith("torch.") and q.count(".") == 1:
            return q[len("torch."):]
        return None

    def is_factory(self, func: cst.CSTNode) -> Optional[str]:
        name = self.torch_function(func)
        if name in TENSOR_FACTORIES and name not in _NOT_FACTORIES:
            return name
        return None

    def is_wrapper(self, func: cst.CSTNode) -> Optional[str]:
        q = self.qualify(func)
        return q if q in WRAPPERS else None

    def local_name_for(self, qualified: str) -> Optional[str]:
        """How this file can spell ``qualified`` with the names it imports."""
        best: Optional[str] = None
        for local, targets in sorted(self.imports.items()):
            for target in targets:
                if qualified == target:
                    cand = local
                elif qualified.startswith(target + "."):
                    cand = local + qualified[len(target):]
                else:
                    continue
                if best is None or len(cand) < len(best):
                    best = cand
        return best

    def class_of_call(self, func: cst.CSTNode) -> Optional[str]:
        """Name of the class a constructor call builds: a local class name or
        a qualified name."""
        dotted = dotted_name(func)
        if dotted is None:
            return None
        if dotted in self.classes:
            return dotted
        return self.qualify_dotted(dotted)

    def is_module_class(self, name: str) -> bool:
        if name in self.classes:
            return self.classes[name].is_module
        return _is_torch_module_name(name)

    def lineage(self, class_name: str) -> Iterator[str]:
        """``class_name`` and its bases, breadth first, each once: classes of
        this file are followed to their own bases; an imported base (a
        qualified name) is yielded but not followed."""
        seen: Set[str] = set()
        todo = [class_name]
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            yield name
            cls = self.classes.get(name)
            if cls is not None:
                todo.extend(cls.bases)

    def class_attribute(self, class_name: str, attr: str) -> Optional[AttributeFacts]:
        """``attr`` as assigned by class ``class_name`` or a base class defined
        in this file."""
        for name in self.lineage(class_name):
            cls = self.classes.get(name)
            if cls is not None and attr in cls.attributes:
                return cls.attributes[attr]
        return None

    def has_device_attribute(self, class_name: str) -> bool:
        """Whether instances of ``class_name`` have a ``device`` attribute.
        torch.nn classes have none; a class of this file has one when it (or
        a base) defines or assigns it; anything else (an external class) is
        assumed to have one rather than cry wolf."""
        cls = self.classes.get(class_name)
        if cls is None:
            # DistributedDataParallel sets ``self.device``; no other torch.nn module does
            return not _is_torch_module_name(class_name) or class_name == DISTRIBUTED_DATA_PARALLEL
        for name in self.lineage(class_name):
            c = self.classes.get(name)
            if c is not None and (c.defines_device or "device" in c.self_assigned or "__getattr__" in c.methods):
                return True
        return False

    def tensor_path_of_class(self, class_name: str) -> Optional[str]:
        """A path from an instance of ``class_name`` to a tensor it holds
        (``weight`` for ``nn.Linear``, ``ln1.weight`` for a local ``Block``),
        or None."""
        cls = self.classes.get(class_name)
        if cls is not None:
            return cls.anchor_tensor or None
        if class_name.startswith("torch.nn.") and class_name.rsplit(".", 1)[-1] in WEIGHTED_LAYERS:
            return "weight"
        return None



def canonical(qualified: str) -> str:
    return CANONICAL_NAMES.get(qualified, qualified)


def _is_torch_module_name(q: str) -> bool:
    if not q.startswith("torch.nn."):
        return False
    last = q.rsplit(".", 1)[-1]
    return last[:1].isupper() and last not in ("Parameter", "Buffer", "Identity_") and not q.startswith(
        "torch.nn.functional."
    ) and not q.startswith("torch.nn.init.")


# --------------------------------------------------------------------------
# building the facts


_NON_TENSOR_ANNOTATIONS = frozenset(
    {"int", "float", "bool", "str", "bytes", "dict", "list", "tuple", "None", "Dict", "List", "Tuple", "Optional[int]", "Optional[bool]", "Optional[str]", "Optional[float]", "torch.device", "device", "torch.dtype", "dtype", "Size", "torch.Size"}
)
_TENSOR_USES = frozenset({"shape", "size", "device", "dtype", "view", "reshape", "dim", "ndim", "unsqueeze", "flatten", "transpose", "permute", "float", "contiguous", "masked_fill", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "numel", "type_as", "expand", "squeeze", "sum", "mean", "matmul", "softmax", "to"})
_DEVICE_NAME_HINTS = ("device", "dev")


def _annotation_code(param: cst.Param) -> Optional[str]:
    if param.annotation is None:
        return None
    return code_of(param.annotation.annotation).replace(" ", "")


#: generic collections: ``List[Tensor]`` holds tensors but has no ``.device``
_COLLECTION_ANNOTATIONS = frozenset(
    {"list", "tuple", "sequence", "mutablesequence", "dict", "mapping", "mutablemapping", "iterable",
     "iterator", "collection", "set", "frozenset", "deque", "generator", "ordereddict", "defaultdict"}
)


def _is_collection_annotation(ann: str) -> bool:
    """``List[torch.Tensor]``, ``tuple[Tensor, ...]``, ``Dict[str, Tensor]``:
    a container of tensors, not a tensor."""
    outer = ann.split("[", 1)[0].rsplit(".", 1)[-1].lower()
    return "[" in ann and outer in _COLLECTION_ANNOTATIONS


class _NameUses(cst.CSTVisitor):
    """Collects, for a function body: ``p.<attr>`` uses of names and
    ``self.<m>(...)`` calls (also ``ClassName.<m>(...)``, a static method
    called through the class's own name)."""

    def __init__(self, self_name: str, method_names: Set[str], class_name: Optional[str] = None) -> None:
        self.self_name = self_name
        self.method_names = method_names
        self.class_name = class_name
        self.attr_uses: Dict[str, Set[str]] = {}
        self.self_calls: List[str] = []
        self.args_of_self_calls: Set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name):
            self.attr_uses.setdefault(node.value.value, set()).add(node.attr.value)

    def visit_Call(self, node: cst.Call) -> None:
        attr = self_attribute(node.func, self.self_name)
        if attr is None and self.class_name is not None:
            attr = self_attribute(node.func, self.class_name)
            if attr is not None and attr not in self.method_names:
                attr = None
        if attr is not None and attr not in self.self_calls:
            self.self_calls.append(attr)
        if attr is not None and attr not in self.method_names:
            # an argument handed to a submodule (self.layer(x)) is a tensor
            for a in node.args:
                if isinstance(a.value, cst.Name):
                    self.args_of_self_calls.add(a.value.value)

    # nested classes have their own self
    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False


def _function_facts(fn: cst.FunctionDef, is_method: bool, method_names: Set[str] = frozenset(),
                    class_name: Optional[str] = None) -> FunctionFacts:
    decorators = {dotted_name(d.decorator) for d in fn.decorators}
    is_static = "staticmethod" in decorators
    is_method = is_method and not is_static
    params = [p.name.value for p in fn.params.params]
    params += [p.name.value for p in fn.params.posonly_params]
    params += [p.name.value for p in fn.params.kwonly_params]
    self_name = params[0] if is_method and params else "self"
    uses = _NameUses(self_name, set(method_names), class_name)
    walk(fn.body, uses)
    tensor_params: List[str] = []
    all_params = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
    if is_method:
        all_params = all_params[1:] if all_params else []
    for i, p in enumerate(all_params):
        name = p.name.value
        ann = _annotation_code(p)
        if ann is not None:
            if "Tensor" in ann and "Optional" not in ann and "None" not in ann:
                if not _is_collection_annotation(ann):
                    tensor_params.append(name)
            continue
        if any(h in name.lower() for h in _DEVICE_NAME_HINTS):
            continue
        used = uses.attr_uses.get(name, set())
        if used & _TENSOR_USES:
            tensor_params.append(name)
        elif fn.name.value == "forward" and i == 0 and p.default is None:
            tensor_params.append(name)
        elif name in uses.args_of_self_calls and p.default is None:
            tensor_params.append(name)
    # a parameter that defaults to None may be None: never an anchor; one
    # without a default is always bound: prefer those
    none_default = {p.name.value for p in all_params if isinstance(p.default, cst.Name) and p.default.value == "None"}
    defaults = {p.name.value for p in all_params if p.default is not None}
    tensor_params = [n for n in tensor_params if n not in none_default]
    tensor_params.sort(key=lambda n: n in defaults)
    is_property = bool(decorators & {"property", "functools.cached_property", "cached_property"})
    return FunctionFacts(
        name=fn.name.value,
        params=params,
        tensor_params=tensor_params,
        self_calls=uses.self_calls,
        is_property=is_property,
        is_static=is_static,
    )


def _strip_placement(node: cst.BaseExpression) -> Tuple[cst.BaseExpression, Optional[cst.BaseExpression], bool]:
    """For ``X(...).to(dev)`` / ``X(...).cuda(i)`` return (X(...), device node, is_cuda_call)."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        attr = node.func.attr.value
        if attr == "to" and node.args:
            first = node.args[0]
            dev = first.value if first.keyword is None or first.keyword.value == "device" else None
            if dev is not None:
                inner, _, _ = _strip_placement(node.func.value)
                return inner, dev, False
        if attr == "cuda":
            inner, _, _ = _strip_placement(node.func.value)
            return inner, (node.args[0].value if node.args else None), True
    return node, None, False


def _is_python_number(node: cst.BaseExpression, scalar_names: Iterable[str] = ()) -> bool:
    """An expression that evaluates to a Python number (never a list or an
    array): a literal, a name known to hold one, ``math.*``/``float()``/``int()``,
    arithmetic of those, and ``d ** 0.5``."""
    if is_number_literal(node):
        return True
    if isinstance(node, cst.Name):
        return node.value in scalar_names
    if isinstance(node, cst.Attribute):
        return dotted_name(node) in ("math.pi", "math.e", "math.tau", "math.inf")
    if isinstance(node, cst.UnaryOperation):
        return _is_python_number(node.expression, scalar_names)
    if isinstance(node, cst.Call):
        d = dotted_name(node.func) or ""
        return d in ("float", "int", "abs", "round") or d.startswith("math.")
    if isinstance(node, cst.BinaryOperation):
        left = _is_python_number(node.left, scalar_names)
        right = _is_python_number(node.right, scalar_names)
        if left and right:
            return True
        # ``dim ** -0.5``: the usual attention scale
        return isinstance(node.operator, cst.Power) and is_number_literal(node.right)
    return False


class _FactsBuilder:
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.facts = FileFacts()
        self._class_nodes: Dict[str, cst.ClassDef] = {}
        #: class -> module-container attributes whose modules are registered another way
        self._registered_attrs: Dict[str, Set[str]] = {}
        # class name -> attributes assigned an empty ``nn.ModuleList()`` /
        # ``nn.ModuleDict()`` / ``nn.Sequential()``, filled by later appends
        self._empty_nn_containers: Dict[str, Set[str]] = {}
        # helpers that return a tensor (``self.kernel = make_kernel(5)``):
        # (class name, self name) whose ``self.<m>(...)`` calls are resolved
        # while its attributes are collected; function node id -> result
        self._self_call_owner: Optional[Tuple[str, str]] = None
        self._returns_tensor_cache: Dict[int, bool] = {}
        self._returned_module_cache: Dict[int, str] = {}
        self._module_functions: Optional[Dict[str, cst.FunctionDef]] = None

    # -- imports -----------------------------------------------------------
    def _add_import(self, local: str, target: str) -> None:
        targets = self.facts.imports.setdefault(local, [])
        if target not in targets:
            targets.append(target)
            targets.sort()

    def _import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self._add_import(alias.asname.name.value, full)
            else:
                head = full.split(".")[0]
                self._add_import(head, head)

    def _import_from(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        base = dotted_name(node.module) if node.module is not None else ""
        if base is None:
            return
        dots = "".join("." for _ in node.relative)
        prefix = dots + base
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            target = f"{prefix}.{name}" if prefix and not prefix.endswith(".") else prefix + name
            self._add_import(local, target)

    # -- walking -----------------------------------------------------------
    def build(self) -> FileFacts:
        self._walk_statements(self.module.body, top_level=True)
        for cls in self.facts.classes.values():
            cls.is_module = self._class_is_module(cls, set())
            cls.defines_device = cls.defines_device or self._base_defines_device(cls, set())
        for cls in self.facts.classes.values():
            if cls.is_module:
                self._finish_module_class(cls)
        self._finish_inherited_reach()
        self._finish_forward_uses()
        self._finish_anchors()
        return self.facts

    def _module_function_nodes(self) -> Dict[str, cst.FunctionDef]:
        """The module-level ``def``s of the file by name (built once)."""
        if self._module_functions is None:
            self._module_functions = {s.name.value: s for s in self.module.body if isinstance(s, cst.FunctionDef)}
        return self._module_functions

    def _walk_statements(self, body: Sequence[cst.CSTNode], top_level: bool) -> None:
        for stmt in body:
            if isinstance(stmt, LINES):
                for small in stmt.body:
                    if isinstance(small, cst.Import):
                        self._import(small)
                    elif isinstance(small, cst.ImportFrom):
                        self._import_from(small)
                    elif top_level and isinstance(small, (cst.Assign, cst.AnnAssign)):
                        self._module_assign(small)
            elif isinstance(stmt, cst.ClassDef):
                if stmt.name.value not in self.facts.classes:
                    self._class(stmt)
            elif isinstance(stmt, cst.FunctionDef):
                # imports inside functions are common in scripts (``def main(): import torch``)
                self._walk_statements(statements(stmt), top_level=False)
            elif isinstance(stmt, (cst.If, cst.Try, cst.With, cst.For, cst.While, cst.TryStar, cst.Match)):
                for block in blocks(stmt):
                    self._walk_statements(block, top_level)

    def _module_assign(self, node: Union[cst.Assign, cst.AnnAssign]) -> None:
        value = node.value
        if value is None:
            return
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for t in targets:
            if isinstance(t, cst.Name) and t.value not in self.facts.module_assigned:
                self.facts.module_assigned.append(t.value)
        if self._is_fixed_device(value, params=()):
            for t in targets:
                if isinstance(t, cst.Name):
                    self.facts.module_devices[t.value] = code_of(value)
        elif isinstance(value, (cst.List, cst.Tuple)) and value.elements:
            elements = [e.value for e in value.elements if isinstance(e, cst.Element)]
            if len(elements) == len(value.elements) and all(self._is_fixed_device(e, params=()) for e in elements):
                for t in targets:
                    if isinstance(t, cst.Name):
                        self.facts.module_device_lists[t.value] = [code_of(e) for e in elements]

    def _is_fixed_device(self, value: cst.BaseExpression, params: Iterable[str]) -> bool:
        """A device expression fixed at construction: ``torch.device(...)``,
        a ``"cuda..."``/``"cpu"`` literal, a ``device``-like argument, or a
        conditional over those."""
        if isinstance(value, cst.IfExp):
            return self._is_fixed_device(value.body, params) or self._is_fixed_device(value.orelse, params)
        s = string_value(value)
        if s is not None:
            return s == "cpu" or is_cuda_string(s)
        if isinstance(value, cst.Call):
            q = self.facts.qualify(value.func)
            return q == "torch.device"
        if isinstance(value, cst.Name):
            return value.value in params and any(h in value.value.lower() for h in _DEVICE_NAME_HINTS)
        return False

    # -- classes -----------------------------------------------------------
    def _class(self, node: cst.ClassDef) -> None:
        bases = []
        for arg in node.bases:
            if arg.keyword is not None:
                continue
            dotted = dotted_name(arg.value)
            if dotted is None:
                continue
            q = self.facts.qualify_dotted(dotted)
            bases.append(q if q is not None and dotted not in self.facts.classes else dotted)
        cls = ClassFacts(name=node.name.value, line=0, bases=bases)
        self.facts.classes[cls.name] = cls
        self._class_nodes[cls.name] = node
        method_names = {s.name.value for s in statements(node) if isinstance(s, cst.FunctionDef)}
        for stmt in statements(node):
            if isinstance(stmt, cst.FunctionDef):
                fn = _function_facts(stmt, is_method=True, method_names=method_names, class_name=cls.name)
                cls.methods[fn.name] = fn
                if fn.name == "device":
                    cls.defines_device = True
            elif isinstance(stmt, LINES):
                for small in stmt.body:
                    if isinstance(small, (cst.Assign, cst.AnnAssign)):
                        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                        if any(isinstance(t, cst.Name) and t.value == "device" for t in targets):
                            cls.defines_device = True
                        if not (isinstance(small, cst.AnnAssign) and small.value is None):
                            cls.class_attributes.extend(t.value for t in targets if isinstance(t, cst.Name))


    def _class_is_module(self, cls: ClassFacts, seen: Set[str]) -> bool:
        if cls.name in seen:
            return False
        seen.add(cls.name)
        for base in cls.bases:
            if base in self.facts.classes:
                if self._class_is_module(self.facts.classes[base], seen):
                    return True
            elif _is_torch_module_name(base) or base.rsplit(".", 1)[-1] in KNOWN_MODULE_BASES:
                return True
        return False

    def _base_defines_device(self, cls: ClassFacts, seen: Set[str]) -> bool:
        if cls.name in seen:
            return False
        seen.add(cls.name)
        for base in cls.bases:
            if base in self.facts.classes:
                b = self.facts.classes[base]
                if b.defines_device or self._base_defines_device(b, seen):
                    return True
            elif KNOWN_MODULE_BASES.get(base.rsplit(".", 1)[-1]):
                return True
            elif not _is_torch_module_name(base) and base not in ("object",):
                # an unknown base class (imported from elsewhere) may define
                # ``device``; assume it does rather than cry wolf
                return True
        return False

    def _finish_module_class(self, cls: ClassFacts) -> None:
        # forward reachability
        reach = _self_call_closure(cls, [m for m in ("forward",) if m in cls.methods], set())
        cls.forward_reachable = reach
        # attributes
        node = self._class_nodes[cls.name]
        for stmt in statements(node):
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value != "forward":
                self._method_attributes(cls, stmt)
            elif isinstance(stmt, cst.FunctionDef):
                params = [p.name.value for p in stmt.params.params]
                assigned = _SelfAssignments(params[0] if params else "self", params[1:])
                walk(stmt.body, assigned)
                for name in assigned.names:
                    if name not in cls.self_assigned:
                        cls.self_assigned.append(name)
                cls.moves_inputs = assigned.moves_inputs
        registered = self._registered_attrs.get(cls.name, set())
        for record in cls.assignments:
            if record.kind == "module_container" and record.name in registered:
                record.registered_elsewhere = True

    def _finish_inherited_reach(self) -> None:
        """A method a module class inherits from a module base of this file
        and runs from ``forward`` (``h = self.init_hidden(b)``, defined by the
        base) is forward-reachable in the base too."""
        for cls in list(self.facts.classes.values()):
            if not cls.is_module or cls.name not in self._class_nodes or not any(b in self.facts.classes for b in cls.bases):
                continue
            methods = self._effective_methods(cls, set())
            todo = [(cls, m) for m in cls.forward_reachable]
            seen = {(cls.name, m) for m in cls.forward_reachable}
            while todo:
                owner, m = todo.pop()
                for callee in owner.methods[m].self_calls:
                    target = methods[callee][0] if callee in methods else None
                    if target is None or (target.name, callee) in seen:
                        continue
                    seen.add((target.name, callee))
                    todo.append((target, callee))
                    if target is not cls and target.is_module:
                        if callee not in target.forward_reachable:
                            target.forward_reachable.append(callee)

    def _effective_methods(self, cls: ClassFacts, seen: Set[str]) -> Dict[str, Tuple[ClassFacts, cst.FunctionDef]]:
        """Method name -> (defining class, node), local base classes included."""
        out: Dict[str, Tuple[ClassFacts, cst.FunctionDef]] = {}
        if cls.name in seen:
            return out
        seen = seen | {cls.name}
        for base in reversed(cls.bases):
            if base in self.facts.classes and base in self._class_nodes:
                out.update(self._effective_methods(self.facts.classes[base], seen))
        for stmt in statements(self._class_nodes[cls.name]):
            if isinstance(stmt, cst.FunctionDef):
                out[stmt.name.value] = (cls, stmt)
        return out

    def _forward_uses(self, cls: ClassFacts) -> Tuple[Set[str], Set[str]]:
        """(attributes read, attributes written) by the code ``forward`` runs."""
        methods = self._effective_methods(cls, set())
        reads: Set[str] = set()
        writes: Set[str] = set()
        done: Set[str] = set()
        todo = ["forward"] if "forward" in methods else []
        while todo:
            name = todo.pop()
            if name in done:
                continue
            done.add(name)
            owner, fn = methods[name]
            params = [p.name.value for p in fn.params.params]
            uses = _SelfAttributeUses(params[0] if params else "self")
            walk(fn.body, uses)
            reads |= uses.reads
            writes |= uses.writes
            facts = owner.methods.get(name)
            callees = list(facts.self_calls) if facts else []
            # properties read on self run too
            callees += [r for r in uses.loaded if r in methods and methods[r][0].methods[r].is_property]
            todo.extend(c for c in callees if c in methods and c not in done)
        return reads, writes

    def _finish_forward_uses(self) -> None:
        modules = [c for c in self.facts.classes.values() if c.is_module and c.name in self._class_nodes]
        uses = {c.name: self._forward_uses(c) for c in modules}
        for cls in modules:
            reads, writes = set(uses[cls.name][0]), set(uses[cls.name][1])
            # an attribute set up here may be read by a subclass's forward
            for other in modules:
                if other is not cls and self._derives_from(other, cls.name, set()):
                    reads |= uses[other.name][0]
                    writes |= uses[other.name][1]
            cls.forward_reads = sorted(reads)
            cls.forward_writes = sorted(writes)

    def _derives_from(self, cls: ClassFacts, base: str, seen: Set[str]) -> bool:
        if cls.name in seen:
            return False
        seen.add(cls.name)
        for b in cls.bases:
            if b == base or (b in self.facts.classes and self._derives_from(self.facts.classes[b], base, seen)):
                return True
        return False

    def _finish_anchors(self) -> None:
        """``anchor_tensor`` of every module class; needs every class's
        attributes, so it runs after them."""
        for cls in self.facts.classes.values():
            if cls.is_module:
                cls.anchor_tensor = self._anchor_of(cls, depth=0) or ""

    def _anchor_of(self, cls: ClassFacts, depth: int) -> Optional[str]:
        for name in cls.parameters:
            return name
        for name, attr in cls.attributes.items():
            if attr.kind == "parameter":
                return name
        for name in cls.buffers:
            return name
        for name, attr in cls.attributes.items():
            if attr.kind == "module" and attr.module_class.startswith("torch.nn.") and attr.module_class.rsplit(".", 1)[-1] in WEIGHTED_LAYERS:
                return f"{name}.weight"
        if depth < 3:
            for name, attr in cls.attributes.items():
                sub = self.facts.classes.get(attr.module_class) if attr.kind == "module" else None
                if sub is not None and sub.is_module and sub is not cls:
                    inner = self._anchor_of(sub, depth + 1)
                    if inner:
                        return f"{name}.{inner}"
        return None

    def _method_attributes(self, cls: ClassFacts, fn: cst.FunctionDef) -> None:
        params = [p.name.value for p in fn.params.params]
        self_name = params[0] if params else "self"
        scalars = [p.name.value for p in fn.params.params + fn.params.kwonly_params if _is_number_param(p)]
        collector = _AttributeCollector(self, cls, fn.name.value, self_name, params, scalars)
        collector.sequence_params = {
            p.name.value for p in fn.params.params + fn.params.kwonly_params
            if p.default is not None and _is_sequence_value(p.default)
        }
        self._self_call_owner = (cls.name, self_name)
        try:
            walk(fn.body, collector)
        finally:
            self._self_call_owner = None
        collector.finish()

    def _called_function(self, func: cst.BaseExpression) -> Optional[cst.FunctionDef]:
        """The function of this file a call runs: ``make_kernel(...)`` (a
        module-level ``def``) or ``self._make_kernel(...)`` (a method of the
        class whose attributes are being collected); None otherwise."""
        if isinstance(func, cst.Name):
            return self._module_function_nodes().get(func.value)
        owner = self._self_call_owner
        if owner is None or not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name):
            return None
        if func.value.value != owner[1] or owner[0] not in self._class_nodes:
            return None
        for stmt in statements(self._class_nodes[owner[0]]):
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == func.attr.value:
                decorators = {dotted_name(d.decorator) for d in stmt.decorators}
                return None if decorators & {"property", "staticmethod", "classmethod"} else stmt
        return None

    def returned_module_class(self, func: cst.BaseExpression) -> str:
        """The module class a helper of this file returns when called through
        ``func`` (``self._make_stage(w)``, ``make_block(d)``): every ``return``
        gives a call of a module class, directly or through a local name
        (``"torch.nn.Module"`` when the classes differ); ``""`` when unknown,
        or when the helper registers what it builds itself
        (``self.add_module(...)``, ``setattr(self, ...)``, ``self.x = ...``)."""
        fn = self._called_function(func)
        if fn is None:
            return ""
        key = id(fn)
        if key in self._returned_module_cache:
            return self._returned_module_cache[key]
        self._returned_module_cache[key] = ""
        finder = _ReturnsAndAssigns()
        walk(fn.body, finder)
        result = ""
        if finder.returns and not finder.yields and not finder.registers:
            local: Dict[str, str] = {}
            for target, value in finder.assigns:
                inner, _, _ = _strip_placement(value)
                c = self.facts.class_of_call(inner.func) if isinstance(inner, cst.Call) else None
                local[target] = c if c is not None and self.facts.is_module_class(c) else ""
            classes = set()
            for r in finder.returns:
                inner, _, _ = _strip_placement(r) if r is not None else (None, None, None)
                c: Optional[str] = None
                if isinstance(inner, cst.Call):
                    c = self.facts.class_of_call(inner.func)
                    if c is not None and not self.facts.is_module_class(c):
                        c = None
                elif isinstance(inner, cst.Name):
                    c = local.get(inner.value) or None
                if c is None:
                    classes = set()
                    break
                classes.add(c)
            if classes:
                result = classes.pop() if len(classes) == 1 else "torch.nn.Module"
        self._returned_module_cache[key] = result
        return result

    def _returns_tensor(self, fn: cst.FunctionDef) -> bool:
        """Every ``return`` of ``fn`` gives one tensor (``_is_tensor_expr``,
        with the function's own local tensor names): ``self.kernel =
        self._make_kernel()`` holds a tensor. Not generators."""
        key = id(fn)
        if key in self._returns_tensor_cache:
            return self._returns_tensor_cache[key]
        self._returns_tensor_cache[key] = False  # recursion: not known to be a tensor
        finder = _ReturnsAndAssigns()
        walk(fn.body, finder)
        local: Set[str] = set()
        result = False
        if not finder.yields and finder.returns:
            for target, value in finder.assigns:
                if self._is_tensor_expr(value, local):
                    local.add(target)
                else:
                    local.discard(target)
            result = all(r is not None and self._is_tensor_expr(r, local) for r in finder.returns)
        self._returns_tensor_cache[key] = result
        return result

    def classify_value(
        self, value: cst.BaseExpression, params: Sequence[str], local_tensors: Iterable[str] = ()
    ) -> Tuple[str, str, str, str]:
        """(kind, module_class, device, element_class) for an assigned value.
        ``local_tensors``: local names known to hold tensors."""
        inner, device, is_cuda = _strip_placement(value)
        if isinstance(inner, cst.Call):
            cls_name = self.facts.class_of_call(inner.func)
            if cls_name is not None:
                if cls_name == "torch.nn.Parameter":
                    return "parameter", "", "", ""
                if cls_name == "torch.nn.Buffer":
                    return "buffer", "", "", ""
                if cls_name.rsplit(".", 1)[-1] in MODULE_CONTAINERS and cls_name.startswith("torch.nn."):
                    elem = self._element_class(inner.args[0].value) if inner.args else ""
                    dev = code_of(device) if device is not None else ("cuda" if is_cuda else "")
                    return "nn_container", cls_name, dev, elem
                if self.facts.is_module_class(cls_name):
                    dev = ""
                    if device is not None:
                        dev = code_of(device)
                    elif is_cuda:
                        dev = "cuda"
                    return "module", cls_name, dev, ""
        if self._is_tensor_expr(inner, local_tensors):
            return "tensor", "", "", ""
        if self._is_fixed_device(value, params):
            return "device", "", "", ""
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.Dict, cst.DictComp)) or is_sequence_call(value) \
                or is_keyword_dict_call(value):
            elem = self._element_class(value)
            if elem:
                return "module_container", "", "", elem
            if self._container_of_tensors(value, local_tensors):
                return "tensor_container", "", "", ""
        return "other", "", "", ""

    def _is_tensor_expr(self, node: cst.BaseExpression, local_tensors: Iterable[str] = ()) -> bool:
        """Whether an expression certainly evaluates to one tensor: a torch
        factory or legacy constructor (``torch.FloatTensor([d])``), a torch
        function of tensors (``torch.sqrt(...)``), a tensor method chain,
        arithmetic, indexing or ``.T`` on a tensor, or a local tensor name."""
        if isinstance(node, cst.Call):
            q = self.facts.qualify(node.func)
            if q in _LEGACY_TENSOR_CONSTRUCTORS:
                return True
            name = self.facts.torch_function(node.func)
            if name is not None and (name in TENSOR_FACTORIES or name in ("from_numpy", "stack", "cat", "load")):
                return name != "load"
            if name is not None:
                if name in _NOT_ONE_TENSOR or not name[:1].islower():
                    return False
                return any(
                    self._is_tensor_expr(a.value, local_tensors) or self._container_of_tensors(a.value, local_tensors)
                    for a in node.args
                    if a.star == ""
                )
            # a helper of this file that returns a tensor: make_kernel(5), self._make_kernel()
            called = self._called_function(node.func)
            if called is not None:
                owner = self._self_call_owner if isinstance(node.func, cst.Attribute) else None
                saved, self._self_call_owner = self._self_call_owner, owner
                try:
                    return self._returns_tensor(called)
                finally:
                    self._self_call_owner = saved
            # a tensor method chained on a tensor: torch.arange(n).float()
            if isinstance(node.func, cst.Attribute) and node.func.attr.value not in _NOT_TENSOR_METHODS:
                return self._is_tensor_expr(node.func.value, local_tensors)
            return False
        if isinstance(node, cst.BinaryOperation):
            return self._is_tensor_expr(node.left, local_tensors) or self._is_tensor_expr(node.right, local_tensors)
        if isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Not):
            return self._is_tensor_expr(node.expression, local_tensors)
        if isinstance(node, cst.Subscript):
            return self._is_tensor_expr(node.value, local_tensors)
        if isinstance(node, cst.Attribute) and node.attr.value in ("T", "mT", "H", "data"):
            return self._is_tensor_expr(node.value, local_tensors)
        if isinstance(node, cst.Name):
            return node.value in local_tensors
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and local_tensors:
            return f"{node.value.value}.{node.attr.value}" in local_tensors  # self.betas, assigned a tensor above
        return False

    def is_scalar_tensor(self, node: cst.BaseExpression, scalar_names: Iterable[str] = ()) -> bool:
        """A 0-dim tensor: ``torch.tensor(<number>)`` (``scalar_names``: local
        names known to hold Python numbers), elementwise functions and
        arithmetic of those. PyTorch lets a 0-dim CPU tensor mix with CUDA
        tensors, so it cannot cause a device mismatch."""
        node, _, _ = _strip_placement(node)
        if isinstance(node, cst.Call):
            name = self.facts.torch_function(node.func)
            if name in ("tensor", "as_tensor", "scalar_tensor"):
                args = positional_args(node)
                return bool(args) and _is_python_number(args[0].value, scalar_names)
            if name in _ELEMENTWISE and node.args:
                return self.is_scalar_tensor(node.args[0].value, scalar_names)
            if name is None and isinstance(node.func, cst.Attribute) and node.func.attr.value in _ELEMENTWISE:
                return self.is_scalar_tensor(node.func.value, scalar_names)
            return False
        if isinstance(node, cst.BinaryOperation):
            sides = (node.left, node.right)
            return all(self.is_scalar_tensor(x, scalar_names) or _is_python_number(x, scalar_names) for x in sides) and any(
                self.is_scalar_tensor(x, scalar_names) for x in sides
            )
        if isinstance(node, cst.UnaryOperation):
            return self.is_scalar_tensor(node.expression, scalar_names)
        return False

    def _element_class(self, node: cst.BaseExpression) -> str:
        elements: List[cst.BaseExpression] = []
        if isinstance(node, (cst.List, cst.Tuple)):
            elements = [e.value for e in node.elements if isinstance(e, (cst.Element,))]
        elif isinstance(node, (cst.ListComp, cst.GeneratorExp)):
            elements = [node.elt]
        elif isinstance(node, cst.Dict):
            elements = [e.value for e in node.elements if isinstance(e, cst.DictElement)]
        elif isinstance(node, cst.DictComp):
            elements = [node.value]
        elif is_keyword_dict_call(node):
            elements = [a.value for a in node.args]  # dict(rgb=Branch(), depth=Branch())
        elif isinstance(node, cst.Call) and dotted_name(node.func) in ("list", "tuple", "dict"):
            return self._element_class(node.args[0].value) if node.args else ""
        classes = set()
        for e in elements:
            inner, _, _ = _strip_placement(e)
            if not isinstance(inner, cst.Call):
                return ""
            c = self.facts.class_of_call(inner.func)
            if c is None or not self.facts.is_module_class(c):
                c = self.returned_module_class(inner.func)  # [self._make_stage(w) for w in widths]
                if not c:
                    return ""
            classes.add(c)
        if len(classes) == 1:
            return classes.pop()
        return "torch.nn.Module" if classes else ""

    def stateless_elements(self, node: cst.BaseExpression) -> bool:
        """A list/tuple/dict literal whose every element is a stateless
        ``torch.nn`` module (``AttributeFacts.stateless_elements``)."""
        if isinstance(node, (cst.List, cst.Tuple)):
            elements = [e.value for e in node.elements if isinstance(e, cst.Element)]
            if len(elements) != len(node.elements):
                return False
        elif isinstance(node, cst.Dict):
            elements = [e.value for e in node.elements if isinstance(e, cst.DictElement)]
            if len(elements) != len(node.elements):
                return False
        elif is_keyword_dict_call(node):
            elements = [a.value for a in node.args]
        else:
            return False
        for e in elements:
            if not isinstance(e, cst.Call):
                return False
            q = self.facts.class_of_call(e.func) or ""
            short = q.rsplit(".", 1)[-1]
            if not q.startswith("torch.nn.") or short not in STATELESS_MODULES:
                return False
            if any(a.star for a in e.args):
                return False
            if short in _WEIGHTED_LOSSES:
                # the first positional argument (or weight=/pos_weight=) is a buffer
                if any(a.keyword is None for a in e.args[:1]) or any(
                    a.keyword is not None and a.keyword.value in ("weight", "pos_weight") for a in e.args
                ):
                    return False
        return bool(elements)

    def _container_of_tensors(self, node: cst.BaseExpression, local_tensors: Iterable[str] = ()) -> bool:
        elements: List[cst.BaseExpression] = []
        if isinstance(node, (cst.List, cst.Tuple)):
            elements = [e.value for e in node.elements if isinstance(e, cst.Element)]
        elif isinstance(node, cst.ListComp):
            elements = [node.elt]
        elif isinstance(node, cst.Dict):
            elements = [e.value for e in node.elements if isinstance(e, cst.DictElement)]
        elif isinstance(node, cst.DictComp):
            elements = [node.value]
        return bool(elements) and all(self._is_tensor_expr(e, local_tensors) for e in elements)


class _ReturnsAndAssigns(cst.CSTVisitor):
    """The ``return`` values (None for a bare ``return``) and the plain
    ``name = value`` assignments, in source order, of one function body,
    nested functions, classes and lambdas left out; and whether it yields."""

    def __init__(self) -> None:
        self.returns: List[Optional[cst.BaseExpression]] = []
        self.assigns: List[Tuple[str, cst.BaseExpression]] = []
        self.yields = False
        #: it registers modules itself: ``x.add_module(...)``,
        #: ``x.register_module(...)``, ``setattr(...)`` or an attribute store
        self.registers = False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (isinstance(func, cst.Attribute) and func.attr.value in ("add_module", "register_module")) or (
            isinstance(func, cst.Name) and func.value == "setattr"
        ):
            self.registers = True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        self.returns.append(node.value)

    def visit_Yield(self, node: cst.Yield) -> None:
        self.yields = True

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.assigns.append((t.target.value, node.value))
            elif isinstance(t.target, cst.Attribute):
                self.registers = True

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self.assigns.append((node.target.value, node.value))
        elif isinstance(node.target, cst.Attribute):
            self.registers = True


@dataclass
class _LocalContainer:
    """A local list/dict being filled with modules inside one method."""

    container: str
    element_class: str = ""
    str_keys: bool = True
    registered: bool = False
    #: local module names appended to it
    element_locals: Set[str] = field(default_factory=set)


_EMPTY_CONTAINER_CALLS = {"list": "list", "dict": "dict", "tuple": "tuple", "collections.OrderedDict": "dict", "OrderedDict": "dict"}


def _container_type(node: cst.BaseExpression) -> str:
    """``list``/``tuple``/``dict`` for a container display, comprehension or
    ``list(...)``/``dict(...)`` call, else ``""``."""
    if isinstance(node, (cst.List, cst.ListComp)):
        return "list"
    if isinstance(node, cst.Tuple):
        return "tuple"
    if isinstance(node, (cst.Dict, cst.DictComp)):
        return "dict"
    if isinstance(node, cst.Call):
        return _EMPTY_CONTAINER_CALLS.get(dotted_name(node.func) or "", "")
    return ""


def _is_empty_container(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.List, cst.Tuple, cst.Dict)):
        return not node.elements
    return isinstance(node, cst.Call) and not node.args and _container_type(node) != ""


def _is_argument_device(value: cst.BaseExpression, params: Sequence[str]) -> bool:
    """``config.device`` / ``args.device`` / ``opt.gpu_device``: a device
    attribute of a parameter."""
    if not (isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value in params):
        return False
    return _is_device_name(value.attr.value.lower())


def _self_call_closure(cls: ClassFacts, start: List[str], exclude: Set[str]) -> List[str]:
    """``start`` and every method of ``cls`` they reach through ``self.m(...)``
    calls, leaving out ``exclude``."""
    reach: List[str] = []
    todo = list(start)
    while todo:
        m = todo.pop()
        if m in reach:
            continue
        reach.append(m)
        todo.extend(c for c in cls.methods[m].self_calls if c in cls.methods and c not in reach and c not in exclude)
    return reach


def is_sequence_call(node: cst.BaseExpression) -> bool:
    """``list(<one iterable>)`` / ``tuple(<one iterable>)``: ``list(Block() for _ in range(n))``."""
    return (
        isinstance(node, cst.Call)
        and dotted_name(node.func) in ("list", "tuple")
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    )


def _is_sequence_value(node: cst.BaseExpression) -> bool:
    """A non-empty list/tuple display, a list comprehension, or
    ``list(...)``/``tuple(...)`` of one iterable."""
    if isinstance(node, (cst.List, cst.Tuple)):
        return bool(node.elements)
    return isinstance(node, cst.ListComp) or is_sequence_call(node)


def is_keyword_dict_call(node: cst.BaseExpression) -> bool:
    """``dict(rgb=a, depth=b)``: a dict display spelled as a call, every
    argument a keyword (its name is the key)."""
    return (
        isinstance(node, cst.Call)
        and dotted_name(node.func) == "dict"
        and bool(node.args)
        and all(a.keyword is not None and not a.star for a in node.args)
    )


def _is_empty_nn_container(node: cst.BaseExpression) -> bool:
    """``nn.ModuleList()``, ``nn.ModuleDict({})``, ``nn.ModuleList([])``
    (placement stripped): a torch.nn container created with no modules."""
    inner, _, _ = _strip_placement(node)
    if not isinstance(inner, cst.Call):
        return False
    if not inner.args:
        return True
    if len(inner.args) != 1 or inner.args[0].keyword is not None or inner.args[0].star:
        return False
    arg = inner.args[0].value
    return isinstance(arg, (cst.List, cst.Tuple, cst.Dict)) and not arg.elements


def _is_string_key(node: cst.BaseExpression) -> bool:
    if string_value(node) is not None or isinstance(node, cst.FormattedString):
        return True
    return isinstance(node, cst.Call) and dotted_name(node.func) == "str"


def _dict_has_str_keys(node: cst.BaseExpression) -> bool:
    if is_keyword_dict_call(node):
        return True  # dict(rgb=..., depth=...): the keys are the argument names
    if isinstance(node, cst.Dict):
        return all(isinstance(e, cst.DictElement) and _is_string_key(e.key) for e in node.elements)
    if isinstance(node, cst.DictComp):
        return _is_string_key(node.key)
    return isinstance(node, cst.Call) and not node.args


class _AttributeCollector(cst.CSTVisitor):
    """``self.x = ...``, ``self.register_buffer(...)`` and post-construction
    placement (``self.blocks[i].to(dev)``, ``for b in self.blocks: b.to(dev)``)
    in one method of a module class; and, for module containers, whether the
    modules are registered another way (``nn.Sequential(*layers)``,
    ``self.add_module(name, m)``)."""

    def __init__(
        self,
        builder: _FactsBuilder,
        cls: ClassFacts,
        method: str,
        self_name: str,
        params: Sequence[str],
        scalar_names: Iterable[str] = (),
    ) -> None:
        self.b = builder
        self.cls = cls
        self.method = method
        self.self_name = self_name
        self.params = params
        # loop variable -> attribute it iterates (``for blk in self.blocks``)
        self.loop_vars: Dict[str, str] = {}
        # local names known to hold Python numbers, tensors, modules, module lists
        self.scalar_names: Set[str] = set(scalar_names)
        self.local_tensors: Set[str] = set()
        self.local_modules: Dict[str, str] = {}
        self.local_lists: Dict[str, _LocalContainer] = {}
        # loop variable -> local list it iterates
        self.list_loop_vars: Dict[str, str] = {}
        # local module names registered (``self.add_module(k, m)``, ``self.m = m``)
        self.registered_locals: Set[str] = set()
        # records assigned from a local list, settled when the method ends
        self.pending: List[Tuple[AttributeFacts, _LocalContainer]] = []
        # attribute -> local module names appended to it
        self.attr_element_locals: Dict[str, Set[str]] = {}
        # loop variable -> the index variable beside it (``for i, blk in enumerate(...)``)
        self.loop_index: Dict[str, str] = {}
        # parameters whose default is a list or tuple display
        self.sequence_params: Set[str] = set()

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_For(self, node: cst.For) -> None:
        it = node.iter
        var: Optional[cst.BaseExpression] = node.target
        index: Optional[cst.BaseExpression] = None
        # for i, b in enumerate(self.blocks)
        if isinstance(it, cst.Call) and dotted_name(it.func) == "enumerate" and it.args:
            it = it.args[0].value
            pair = isinstance(node.target, cst.Tuple) and len(node.target.elements) == 2
            var = node.target.elements[1].value if pair else None
            index = node.target.elements[0].value if pair else None
        if not isinstance(var, cst.Name):
            return
        attr = self_attribute(it, self.self_name)
        if attr:
            self.loop_vars[var.value] = attr
            if isinstance(index, cst.Name):
                self.loop_index[var.value] = index.value
        elif isinstance(it, cst.Name) and it.value in self.local_lists:
            self.list_loop_vars[var.value] = it.value

    def _record(self, target: cst.BaseExpression, value: cst.BaseExpression, line_node: cst.CSTNode,
                name: Optional[str] = None) -> None:
        name = name or self_attribute(target, self.self_name)
        if name is None:
            if isinstance(target, cst.Name):
                self._bind_local(target.value, value)
            elif isinstance(target, cst.Subscript):
                self._subscript_store(target, value)
            return
        if name not in self.cls.self_assigned:
            self.cls.self_assigned.append(name)
        if isinstance(value, cst.Name) and value.value in self.local_modules:
            self.registered_locals.add(value.value)
        kind, mclass, device, elem = self.b.classify_value(value, self.params, self.local_tensors)
        if kind == "other" and self.method == "__init__" and _is_argument_device(value, self.params):
            kind = "device"  # self.device = config.device: read from an argument at construction
        if kind in ("nn_container", "module_container"):
            self._element_placements(name, value)
        empty = self.b._empty_nn_containers.setdefault(self.cls.name, set())
        if kind == "nn_container" and _is_empty_nn_container(value):
            empty.add(name)
        else:
            empty.discard(name)
        record = AttributeFacts(
            name=name, kind=kind, method=self.method, line=0, value=code_of(value),
            module_class=mclass, device=device, element_class=elem,
        )
        if kind == "tensor":
            record.scalar = self.b.is_scalar_tensor(value, self.scalar_names)
        if kind == "module_container":
            record.stateless_elements = self.b.stateless_elements(value)
        record.sequence = _is_sequence_value(value) or (
            isinstance(value, cst.Name) and value.value in self.sequence_params
        )
        record.container = _container_type(value)
        if record.container == "dict":
            record.str_keys = _dict_has_str_keys(value)
        if isinstance(value, cst.Name) and value.value in self.local_lists:
            local = self.local_lists[value.value]
            record.container = local.container
            self.pending.append((record, local))
        self.cls.assignments.append(record)
        # later code of the method reads self.<name> as the tensor it holds
        # (alphas = 1.0 - self.betas): followed like a local tensor name (not
        # a parameter: self.w2 = self.w stores the Parameter, which registers)
        if kind in ("tensor", "buffer"):
            self.local_tensors.add(f"{self.self_name}.{name}")
        else:
            self.local_tensors.discard(f"{self.self_name}.{name}")
        if name in self.cls.attributes and self.method != "__init__" and self.cls.attributes[name].method == "__init__":
            return  # __init__ says what the attribute is
        self.cls.attributes[name] = record

    def _bind_local(self, name: str, value: cst.BaseExpression) -> None:
        # a re-bound name forgets what it held
        self.local_tensors.discard(name)
        self.scalar_names.discard(name)
        self.local_modules.pop(name, None)
        self.local_lists.pop(name, None)
        if _is_python_number(value, self.scalar_names):
            self.scalar_names.add(name)
        elif self.b._is_tensor_expr(value, self.local_tensors):
            self.local_tensors.add(name)
        elif isinstance(value, cst.Call):
            inner, _, _ = _strip_placement(value)
            c = self.b.facts.class_of_call(inner.func) if isinstance(inner, cst.Call) else None
            if c is not None and self.b.facts.is_module_class(c) and c.rsplit(".", 1)[-1] not in MODULE_CONTAINERS:
                self.local_modules[name] = c
            elif _is_empty_container(value) and _container_type(value) in ("list", "dict"):
                self.local_lists[name] = _LocalContainer(_container_type(value))
        if _container_type(value) and name not in self.local_lists and not isinstance(value, cst.Call):
            elem = self.b._element_class(value)
            if elem or _is_empty_container(value):
                kind = _container_type(value)
                self.local_lists[name] = _LocalContainer(
                    kind, elem, str_keys=kind != "dict" or _dict_has_str_keys(value)
                )

    def _element_of(self, node: cst.BaseExpression) -> Tuple[str, Optional[str]]:
        """(module class, local name) of an element added to a container."""
        if isinstance(node, cst.Name) and node.value in self.local_modules:
            return self.local_modules[node.value], node.value
        inner, _, _ = _strip_placement(node)
        if isinstance(inner, cst.Call):
            c = self.b.facts.class_of_call(inner.func)
            if c is not None and self.b.facts.is_module_class(c):
                return c, None
            c = self.b.returned_module_class(inner.func)  # self.layers.append(self._make_layer(i))
            if c:
                return c, None
        return "", None

    def _add_elements(self, owner: cst.BaseExpression, elem: str, local: Optional[str], key: Optional[cst.BaseExpression] = None) -> None:
        if not elem:
            return
        attr = self_attribute(owner, self.self_name)
        if attr is not None:
            record = self.cls.attributes.get(attr)
            if record is not None and record.kind == "nn_container":
                # ``self.blocks = nn.ModuleList()`` then ``self.blocks.append(Block())``:
                # the appended modules are its elements (a container built
                # from something else keeps its element class unknown)
                if attr in self.b._empty_nn_containers.get(self.cls.name, ()):
                    record.element_class = _merge_class(record.element_class, elem)
                return
            if record is None or record.kind not in ("other", "module_container") or not record.container:
                return
            record.kind = "module_container"
            record.element_class = _merge_class(record.element_class, elem)
            if key is not None and not _is_string_key(key):
                record.str_keys = False
            if local:
                self.attr_element_locals.setdefault(attr, set()).add(local)
        elif isinstance(owner, cst.Name) and owner.value in self.local_lists:
            lc = self.local_lists[owner.value]
            lc.element_class = _merge_class(lc.element_class, elem)
            if key is not None and not _is_string_key(key):
                lc.str_keys = False
            if local:
                lc.element_locals.add(local)

    def _subscript_store(self, target: cst.Subscript, value: cst.BaseExpression) -> None:
        # self.heads[name] = nn.Linear(...) / heads[name] = nn.Linear(...)
        if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
            return
        elem, local = self._element_of(value)
        self._add_elements(target.value, elem, local, key=target.slice[0].slice.value)

    def _mark_registered(self, node: cst.BaseExpression) -> None:
        attr = self_attribute(node, self.self_name)
        if attr is not None:
            self.b._registered_attrs.setdefault(self.cls.name, set()).add(attr)
        elif isinstance(node, cst.Name):
            name = node.value
            if name in self.local_lists:
                self.local_lists[name].registered = True
            elif name in self.list_loop_vars and self.list_loop_vars[name] in self.local_lists:
                self.local_lists[self.list_loop_vars[name]].registered = True
            elif name in self.loop_vars:
                self.b._registered_attrs.setdefault(self.cls.name, set()).add(self.loop_vars[name])
            elif name in self.local_modules:
                self.registered_locals.add(name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, (cst.Tuple, cst.List)) and isinstance(node.value, (cst.Tuple, cst.List)):
                for te, ve in zip(t.target.elements, node.value.elements):
                    self._record(te.value, ve.value, node)
            else:
                self._record(t.target, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._record(node.target, node.value, node)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        # modules handed to a module constructor are registered by it:
        # nn.Sequential(*layers), nn.ModuleList(self.blocks), Wrapper(blocks)
        cls_name = self.b.facts.class_of_call(func)
        if cls_name is not None and self.b.facts.is_module_class(cls_name):
            for a in node.args:
                self._mark_registered(a.value)
        if dotted_name(func) == "setattr" and len(node.args) == 3 and dotted_name(node.args[0].value) == self.self_name:
            self._mark_registered(node.args[2].value)
            # setattr(self, f"scale_{i}", torch.ones(c)): an attribute like self.x = ...
            name = dynamic_self_attribute(node, self.self_name)
            if name is not None:
                self._record(node, node.args[2].value, node, name=name)
            return
        if not isinstance(func, cst.Attribute):
            return
        attr = func.attr.value
        owner = func.value
        if attr in ("add_module", "register_module") and dotted_name(owner) == self.self_name and len(node.args) >= 2:
            self._mark_registered(node.args[1].value)
            return
        if attr in ("append", "insert") and node.args:
            elem, local = self._element_of(node.args[-1].value)
            self._add_elements(owner, elem, local)
            return
        if attr == "extend" and node.args:
            arg = node.args[0].value
            elem = self.b._element_class(arg)
            self._add_elements(owner, elem, None)
            return
        if attr in ("register_buffer", "register_parameter") and isinstance(owner, cst.Name) and owner.value == self.self_name:
            if node.args:
                name = string_value(node.args[0].value)
                if name:
                    (self.cls.buffers if attr == "register_buffer" else self.cls.parameters).append(name)
            return
        if attr in ("to", "cuda"):
            _, device, is_cuda = _strip_placement(node)
            dev = code_of(device) if device is not None else ("cuda" if is_cuda else "")
            if not dev:
                return
            target = owner
            index: Optional[str] = None
            element = False
            if isinstance(target, cst.Subscript):
                element = True
                sub = target.slice[0].slice if len(target.slice) == 1 else None
                if isinstance(sub, cst.Index) and isinstance(sub.value, cst.Name):
                    index = sub.value.value
                target = target.value
            name = self_attribute(target, self.self_name)
            if name is None and isinstance(target, cst.Name):
                name = self.loop_vars.get(target.value)
                if name is not None:
                    element = True
                    index = self.loop_index.get(target.value)
            if name is not None:
                self.cls.placed_attributes[name] = dev
                if element:
                    self._add_element_placement(name, device, dev, index)

    def _add_element_placement(self, name: str, device: Optional[cst.BaseExpression], dev: str, index: Optional[str]) -> None:
        self.cls.element_placements.setdefault(name, []).append(dev)
        self.cls.placed_attributes.setdefault(name, dev)
        if index and device is not None and _uses_name(device, index):
            self.cls.element_index[name] = index

    def _element_placements(self, name: str, value: cst.BaseExpression) -> None:
        """Placements written inside a container's constructor:
        ``nn.ModuleList([B().to(devices[i]) for i in ...])``, ``[A().to(d0), B().to(d1)]``."""
        inner, _, _ = _strip_placement(value)
        if isinstance(inner, cst.Call):
            if len(inner.args) == 1 and inner.args[0].star == "" and not isinstance(inner.args[0].value, cst.Call):
                inner = inner.args[0].value
            elif all(a.keyword is None and a.star == "" for a in inner.args):
                # nn.Sequential(A().to(d0), B().to(d1))
                for a in inner.args:
                    self._element_placement_of(name, a.value, None)
                return
            elif len(inner.args) == 1 and inner.args[0].star == "*":
                inner = inner.args[0].value
        if isinstance(inner, (cst.List, cst.Tuple)):
            for e in inner.elements:
                if isinstance(e, cst.Element):
                    self._element_placement_of(name, e.value, None)
        elif isinstance(inner, cst.ListComp):
            target = inner.for_in.target
            self._element_placement_of(name, inner.elt, target.value if isinstance(target, cst.Name) else None)

    def _element_placement_of(self, name: str, element: cst.BaseExpression, index: Optional[str]) -> None:
        _, device, is_cuda = _strip_placement(element)
        dev = code_of(device) if device is not None else ("cuda" if is_cuda else "")
        if dev:
            self._add_element_placement(name, device, dev, index)

    def finish(self) -> None:
        """Settle what is only known at the end of the method."""
        for record, local in self.pending:
            if local.element_class:
                record.kind = "module_container"
                record.element_class = local.element_class
                record.str_keys = local.str_keys
            if local.registered or local.element_locals & self.registered_locals:
                record.registered_elsewhere = True
        for attr, locals_ in self.attr_element_locals.items():
            if locals_ & self.registered_locals:
                self.b._registered_attrs.setdefault(self.cls.name, set()).add(attr)


def _merge_class(old: str, new: str) -> str:
    if not old or old == new:
        return new
    return "torch.nn.Module"


def _is_number_param(param: cst.Param) -> bool:
    """A parameter that holds a Python number: numeric default or int/float annotation."""
    ann = _annotation_code(param)
    if ann is not None:
        return ann in ("int", "float")
    return param.default is not None and is_number_literal(param.default)


#: attribute accesses that only inspect a tensor (no device involved)
_INSPECT_ATTRS = frozenset({"shape", "size", "dtype", "ndim", "dim", "numel", "is_cuda", "requires_grad", "nelement"})
#: tensor methods that, called without arguments, involve no other tensor
_SELF_CONTAINED_METHODS = frozenset({"zero_", "detach_", "requires_grad_", "numel", "dim", "size", "item", "tolist"})
#: calls that place their receiver on the computation's device
_MOVE_METHODS = frozenset({"to", "cuda", "type_as"})
_MOVE_CHAIN = frozenset(
    {"unsqueeze", "squeeze", "view", "reshape", "expand", "expand_as", "repeat", "float", "long", "int", "half",
     "double", "bool", "t", "transpose", "permute", "flatten", "contiguous", "clone", "detach", "unfold", "flip"}
)


def self_attribute_loads(fn: cst.FunctionDef) -> Set[str]:
    """Every ``self.<x>`` a method reads (``self``: its first parameter);
    targets of assignments are not reads."""
    params = fn.params.params
    uses = _SelfAttributeUses(params[0].name.value if params else "self")
    walk(fn.body, uses)
    return uses.loaded


class _SelfAttributeUses(cst.CSTVisitor):
    """``self.<x>`` reads and writes in one method body. ``reads`` leaves out
    reads where the device does not matter (see ``ClassFacts.forward_reads``);
    ``loaded`` has every read."""

    def __init__(self, self_name: str) -> None:
        self.self_name = self_name
        self.reads: Set[str] = set()
        self.loaded: Set[str] = set()
        self.writes: Set[str] = set()
        self._quiet: Set[int] = set()
        self._stores: Set[int] = set()

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def _store(self, target: cst.BaseExpression) -> None:
        name = self_attribute(target, self.self_name)
        if name is not None:
            self.writes.add(name)
            self._stores.add(id(target))
        elif isinstance(target, cst.Subscript) and self_attribute(target.value, self.self_name) is not None:
            # self.grid[i] = ...: forward keeps that container up to date itself
            self.writes.add(self_attribute(target.value, self.self_name) or "")
            self._stores.add(id(target.value))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self._store(e.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._store(t.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._store(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._store(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._store(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._store(node.asname.name)

    def _quiet_chain(self, node: cst.BaseExpression) -> None:
        # self.pe[:, :n].float().to(x.device): the read of self.pe is moved
        while True:
            if self_attribute(node, self.self_name) is not None or dynamic_self_attribute(node, self.self_name):
                self._quiet.add(id(node))
                return
            if isinstance(node, cst.Subscript):
                node = node.value
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _MOVE_CHAIN:
                node = node.func.value
            else:
                return

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) and func.value == "getattr":
            # getattr(self, f"scale_{i}"): a read of the attributes setattr made
            name = dynamic_self_attribute(node, self.self_name)
            if name is not None:
                self.loaded.add(name)
                if id(node) not in self._quiet:
                    self.reads.add(name)
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            if attr in _MOVE_METHODS and not _is_dtype_only(node):
                self._quiet_chain(func.value)
            if attr == "new_tensor":
                for a in node.args:
                    self._quiet_chain(a.value)
            if attr in _SELF_CONTAINED_METHODS and not node.args and self_attribute(func.value, self.self_name):
                # self.buf.zero_(): touches no other tensor
                self._quiet.add(id(func.value))
        if dotted_name(func) in _VALUE_ONLY_CALLS or keyword_arg(node, "device") is not None:
            for a in node.args:
                self._quiet_chain(a.value)

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        # f"{self.table}": formatting reads values, it meets no other device
        self._quiet_chain(node.expression)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # ``self.buf is None``: no tensor operation
        if all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in node.comparisons):
            self._quiet_chain(node.left)
            for c in node.comparisons:
                self._quiet_chain(c.comparator)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # y[:, self.perm]: indexing accepts a CPU index tensor on any device,
        # also one computed from held indices and numbers (y[:, self.m + self.l])
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                value = element.slice.value
                leaves = _index_arithmetic_leaves(value)
                if leaves == [value] or all(self_attribute(leaf, self.self_name) for leaf in leaves):
                    for leaf in leaves:
                        self._quiet_chain(leaf)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in _INSPECT_ATTRS and self_attribute(node.value, self.self_name) is not None:
            self._quiet.add(id(node.value))
        name = self_attribute(node, self.self_name)
        if name is None or id(node) in self._stores:
            return
        self.loaded.add(name)
        if id(node) not in self._quiet:
            self.reads.add(name)


#: calls that only read a value: its device meets nothing
_VALUE_ONLY_CALLS = frozenset({"len", "isinstance", "str", "repr", "print", "format"})


def _index_arithmetic_leaves(node: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The operands of an index expression built by arithmetic from held
    values and numbers only (``self.midx + self.lmax``, ``-self.perm``), or
    the expression itself: an operand from elsewhere (a local that may be on
    the GPU) makes the arithmetic itself a device meeting, so then nothing."""
    if isinstance(node, cst.UnaryOperation):
        return _index_arithmetic_leaves(node.expression)
    if not isinstance(node, cst.BinaryOperation):
        return [node]
    leaves: List[cst.BaseExpression] = []
    for side in (node.left, node.right):
        if isinstance(side, (cst.BinaryOperation, cst.UnaryOperation)):
            sub = _index_arithmetic_leaves(side)
            if not sub:
                return []
            leaves += sub
        elif is_number_literal(side):
            continue
        elif isinstance(side, (cst.Attribute, cst.Subscript)):
            leaves.append(side)
        else:
            return []
    return leaves


def _is_dtype_only(call: cst.Call) -> bool:
    """``t.to(torch.float16)``, ``t.to(x.dtype)``, ``t.to(dtype=...)``: no device change."""
    if not call.args:
        return False
    first = call.args[0]
    if first.keyword is not None:
        return all(a.keyword is not None and a.keyword.value in ("dtype", "non_blocking", "copy", "memory_format") for a in call.args)
    d = dotted_name(first.value) or ""
    last = d.rsplit(".", 1)[-1]
    return last == "dtype" or (d.startswith("torch.") and last in _DTYPE_NAMES)


_DTYPE_NAMES = frozenset(
    {"float", "float16", "float32", "float64", "bfloat16", "half", "double", "long", "int", "int8", "int16",
     "int32", "int64", "uint8", "bool", "complex64", "complex128", "cfloat", "cdouble", "short"}
)


#: tensor methods that keep "the same tensor" as far as its device goes
_SAME_DEVICE_METHODS = frozenset(
    {"view", "reshape", "long", "int", "float", "half", "double", "bool", "unsqueeze", "squeeze", "flatten",
     "contiguous", "clone", "detach", "t", "transpose", "permute", "expand", "expand_as", "repeat"}
)


def is_dtype_expr(facts: FileFacts, node: cst.BaseExpression) -> bool:
    """A dtype, not a device: ``torch.float16``, ``x.dtype``, ``self.dtype``,
    ``torch.get_default_dtype()``."""
    if isinstance(node, cst.Call) and not node.args:
        return facts.qualify(node.func) == "torch.get_default_dtype"
    return _is_dtype_expr(facts, node)


def is_dtype_cast(facts: FileFacts, call: cst.Call) -> bool:
    """``t.to(x.dtype)``, ``t.to(torch.float16)``, ``t.to(dtype=...)``: a cast
    that keeps the tensor on its device, not a transfer."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "to") or not call.args:
        return False
    if any(a.star for a in call.args):
        return False
    first = call.args[0]
    if first.keyword is not None:
        return all(a.keyword is not None and a.keyword.value in ("dtype", "non_blocking", "copy", "memory_format") for a in call.args)
    if not is_dtype_expr(facts, first.value):
        return False
    return all(a.keyword is None or a.keyword.value != "device" for a in call.args)


class _SelfAssignments(cst.CSTVisitor):
    """Names of ``self.<name> = ...`` targets in one method body, and whether
    the method moves one of its own parameters (``x.to(...)``)."""

    def __init__(self, self_name: str, params: Sequence[str] = ()) -> None:
        self.self_name = self_name
        self.params = set(params)
        self.names: List[str] = []
        self.moves_inputs = False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in ("to", "cuda")
            and isinstance(func.value, cst.Name)
            and func.value.value in self.params
        ):
            self.moves_inputs = True

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def _target(self, node: cst.BaseExpression) -> None:
        if isinstance(node, (cst.Tuple, cst.List)):
            for e in node.elements:
                self._target(e.value)
            return
        name = self_attribute(node, self.self_name)
        if name is not None and name not in self.names:
            self.names.append(name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._target(t.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target)


def _uses_name(node: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` appears as a plain name inside ``node``."""
    found = []

    class _Find(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            if n.value == name:
                found.append(n)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            walk(n.value, self)
            return False

    walk(node, _Find())
    return bool(found)


def build_facts(module: cst.Module) -> FileFacts:
    """Compute the shared facts of one parsed file."""
    return _FactsBuilder(module).build()


class Classes(Provider):
    """:class:`FileFacts`: the import aliases, module-level devices, and every
    class with its bases, methods, attributes and forward reach."""

    @classmethod
    def build(cls, store: FactStore) -> FileFacts:
        return build_facts(store.module)


# --------------------------------------------------------------------------
# script facts: training and evaluation code (models moved to devices, data
# loaders, device and rank names, checkpoints loaded), per scope.
#
# A scope is named by the classes and functions around it: ``<module>``,
# ``main``, ``Trainer`` (the class: ``self.<x>`` facts of every method) and
# ``Trainer.fit``. :class:`ScopeStack` gives rules the same names.

MODULE_SCOPE = "<module>"

#: qualified names of torch's data loader class
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
#: callables whose result iterates like their first argument (``tqdm(loader)``)
ITER_WRAPPERS = frozenset({"enumerate", "iter", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.rich.tqdm"})
#: names that hold the index of a CUDA device (``local_rank``, ``args.gpu``)
_RANK_NAMES = frozenset({"local_rank", "rank", "gpu", "gpu_id", "device_id", "local_gpu", "gpu_index"})
#: words in a loader's binding or arguments that say batches arrive on a device
_PLACING_WORDS = ("device", "cuda", "prepare", "accelerator", "fabric", "to_gpu", "gpu")
#: library collate functions that return CPU tensors (``transformers``'
#: ``DataCollator*`` classes are matched by name, see :func:`is_cpu_collator`)
_CPU_COLLATORS = frozenset({
    "torch.utils.data.default_collate", "torch.utils.data.dataloader.default_collate",
    "torch.utils.data._utils.collate.default_collate", "transformers.default_data_collator",
    "transformers.data.data_collator.default_data_collator", "transformers.data.default_data_collator",
})
#: DataLoader keywords that never put a batch on a device (``pin_memory=use_cuda``
#: pins host memory; a sampler or generator only orders the samples)
_NON_PLACING_LOADER_ARGS = frozenset({
    "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "pin_memory", "drop_last", "timeout",
    "worker_init_fn", "multiprocessing_context", "generator", "prefetch_factor", "persistent_workers",
})


@dataclass
class Placement:
    """A name moved to a device: ``model.to(device)``, ``model = Net().cuda()``.

    ``device`` is the device expression as it can be written in the scope the
    fact belongs to (``""`` with ``how == "cuda"``: ``.cuda()`` without an
    argument); ``known`` is False when the model reached this scope as an
    argument and its device expression has no spelling here."""

    device: str
    how: str  # "to" or "cuda"
    known: bool = True
    #: the move sits under an ``if`` (``if use_cuda: model.cuda()``) or in
    #: a conditional expression: on some runs the model stays where it was
    conditional: bool = False

    def is_cpu(self) -> bool:
        return self.how == "to" and self.device in ('"cpu"', "'cpu'")


@dataclass
class WrapFacts:
    """A name bound to a DataParallel/DDP wrapper."""

    wrapper: str
    #: the wrapper moves its inputs onto the device (DataParallel always,
    #: DistributedDataParallel when given ``device_ids``)
    moves_inputs: bool


@dataclass
class LoaderFacts:
    """What a name that may hold a data loader is bound to.

    kind: ``dataloader`` (a ``torch.utils.data.DataLoader`` built here and
    only that), ``other`` (some other value), ``param`` (a parameter).
    ``places_on_device``: batches may already be on the device (a
    ``collate_fn`` or ``pin_memory_device``, a dataset built with a device, a
    device-moving wrapper such as ``accelerator.prepare``)."""

    kind: str
    places_on_device: bool = False
    #: ``pbar = tqdm(loader)``: the loader this name iterates (kind ``iter``),
    #: and whether an ``enumerate`` wraps it
    wraps: str = ""
    enumerated: bool = False


@dataclass
class CallSite:
    """A call of a function or method defined in the same file."""

    callee: str
    args: List[str]
    kwargs: Dict[str, str]
    is_method_call: bool = False


@dataclass
class ScriptScope:
    name: str
    kind: str  # "module", "class" or "function"
    params: List[str] = field(default_factory=list)
    #: the class scope whose ``self.<x>`` facts apply here (methods)
    class_scope: str = ""
    #: names (``model``, ``self.model``) moved to a device
    placements: Dict[str, Placement] = field(default_factory=dict)
    wrapped: Dict[str, WrapFacts] = field(default_factory=dict)
    loaders: Dict[str, LoaderFacts] = field(default_factory=dict)
    #: names holding a device (``device = torch.device(...)``, a ``device`` parameter)
    device_names: List[str] = field(default_factory=list)
    #: names holding a CUDA device index (``local_rank``, ``args.gpu``,
    #: the argument of ``torch.cuda.set_device``)
    rank_names: List[str] = field(default_factory=list)
    #: names bound to ``torch.load(...)``: True when every use feeds
    #: ``load_state_dict`` (which copies onto the parameters' devices)
    loaded: Dict[str, bool] = field(default_factory=dict)
    #: names bound to ``torch.load(...)`` whose every use restores a random
    #: number generator (``torch.set_rng_state(state["cpu"])``): RNG states
    #: are CPU byte tensors wherever they were saved
    rng_states: List[str] = field(default_factory=list)
    #: file arguments given to ``torch.save`` here (an in-process round trip)
    saved_files: List[str] = field(default_factory=list)
    #: names bound to an in-memory buffer (``buf = io.BytesIO(data)``)
    buffers: List[str] = field(default_factory=list)
    #: expressions holding the bytes of a file or a download read here
    #: (``data = f.read()``, ``raw = path.read_bytes()``; ``resp.content``
    #: for ``resp = requests.get(url)``): a checkpoint, not a hand-over
    file_bytes: List[str] = field(default_factory=list)
    #: names tested against None here (``if args.gpu is not None``): an
    #: index that may be None is no ``f"cuda:{i}"``
    maybe_none: List[str] = field(default_factory=list)
    #: names bound to a library collator that builds CPU tensors
    #: (``collator = DataCollatorWithPadding(tokenizer)``)
    cpu_collators: List[str] = field(default_factory=list)
    calls: List[CallSite] = field(default_factory=list)
    #: device names and whether every binding here names the CPU
    #: (``device = "cpu"``, ``device = torch.device("cpu")``)
    cpu_devices: Dict[str, bool] = field(default_factory=dict)
    #: plain names this scope binds (assignments, loop and ``with`` targets),
    #: less those it declares ``global``/``nonlocal``
    bound: List[str] = field(default_factory=list)
    #: the function's body moves data (``.to(...)``, ``.cuda()``, ``.pin_memory()``,
    #: a ``device=`` argument); set once its body has been read
    moves_data: bool = False
    #: the whole body has been read (``moves_data`` is final)
    complete: bool = False
    #: names (``crit``, ``self.ctc``) bound to ``nn.CTCLoss(...)``, whose
    #: targets and lengths may stay on the CPU
    ctc_losses: Dict[str, bool] = field(default_factory=dict)


class ScopeStack:
    """The scope name of the current position, kept by a visitor's
    visit/leave of ``ClassDef`` and ``FunctionDef`` (same names as
    :attr:`FileFacts.script_scopes`)."""

    def __init__(self) -> None:
        self._names: List[str] = []

    def push(self, node: cst.CSTNode) -> None:
        self._names.append(node.name.value)  # type: ignore[attr-defined]

    def pop(self) -> None:
        self._names.pop()

    @property
    def name(self) -> str:
        return ".".join(self._names) if self._names else MODULE_SCOPE


def ref_of(node: cst.CSTNode, self_name: str = "self") -> Optional[str]:
    """``x`` for a name, ``self.x`` for an attribute of the method's self
    (spelt ``self.`` whatever the parameter is called), else None."""
    if isinstance(node, cst.Name):
        return node.value
    attr = self_attribute(node, self_name)
    return f"self.{attr}" if attr is not None else None


def looks_like_loader(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    return "loader" in last or last in ("dl", "train_dl", "valid_dl", "val_dl", "test_dl")


def _is_dtype_expr(facts: FileFacts, node: cst.BaseExpression) -> bool:
    """``.to(torch.float16)``/``.to(dtype)``/``.to(other_tensor)`` are no device moves."""
    dotted = dotted_name(node)
    if dotted is None:
        return False
    if "dtype" in dotted.rsplit(".", 1)[-1].lower():
        return True
    q = facts.qualify_dotted(dotted)
    return q is not None and q.startswith("torch.") and q != "torch.device"


def placement_of(facts: FileFacts, value: cst.BaseExpression) -> Optional[Placement]:
    """The device a ``X.to(dev)``/``X.cuda(i)`` expression moves X to."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return None
    attr = value.func.attr.value
    if attr == "cuda":
        args = positional_args(value)
        dev = args[0].value if args else (keyword_arg(value, "device").value if keyword_arg(value, "device") else None)
        return Placement(code_of(dev) if dev is not None else "", "cuda")
    if attr == "to" and value.args:
        first = value.args[0]
        if first.star:
            return None
        if first.keyword is not None and first.keyword.value != "device":
            dev_arg = keyword_arg(value, "device")
            if dev_arg is None:
                return None
            first = dev_arg
        if _is_dtype_expr(facts, first.value):
            return None
        return Placement(code_of(first.value), "to")
    return None


#: methods that return their receiver on the device it is on: ``nn.Module.eval()``/
#: ``train()``/``requires_grad_()`` return the module itself; dtype casts keep the device
_KEEPS_PLACEMENT = frozenset({"eval", "train", "half", "float", "double", "bfloat16", "requires_grad_", "share_memory"})


#: calls whose result lives where their argument does
_SAME_DEVICE_COPIES = frozenset({"copy.deepcopy", "torch.compile"})


def moved_part(facts: FileFacts, value: cst.BaseExpression) -> cst.BaseExpression:
    """``value`` without the calls chained after a move that keep the device:
    ``Net().cuda().eval()`` -> ``Net().cuda()``, ``m.to(device).to(torch.half)``
    -> ``m.to(device)``."""
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and not any(a.star for a in value.args)
        and (
            value.func.attr.value in _KEEPS_PLACEMENT
            or (value.func.attr.value == "to" and placement_of(facts, value) is None)
        )
    ):
        value = value.func.value
    return value


def _load_device(facts: FileFacts, value: cst.BaseExpression) -> Optional[str]:
    """The device ``torch.load(f, map_location=<device>)`` loads onto, when it
    names one other than the CPU (not a dict, a function or ``**kwargs``)."""
    if not (isinstance(value, cst.Call) and is_torch_load(facts, value.func)):
        return None
    args = positional_args(value)
    loc = keyword_arg(value, "map_location")
    node = loc.value if loc is not None else (args[1].value if len(args) > 1 else None)
    if node is None or _is_cpu_device(facts, node):
        return None
    if isinstance(node, (cst.SimpleString, cst.FormattedString)) or dotted_name(node) is not None:
        return code_of(node)
    if isinstance(node, cst.Call) and facts.qualify(node.func) == "torch.device":
        return code_of(node)
    return None


def _strip_iter_wrappers(facts: FileFacts, node: cst.BaseExpression) -> Tuple[cst.BaseExpression, bool]:
    """(the iterable under ``enumerate(tqdm(loader))``, whether an enumerate
    was among the wrappers: ``tqdm(enumerate(loader))`` yields pairs too)."""
    enumerated = False
    while isinstance(node, cst.Call) and node.args and node.args[0].star == "":
        dotted = dotted_name(node.func)
        if dotted is None:
            break
        q = facts.qualify_dotted(dotted) or dotted
        if q not in ITER_WRAPPERS and dotted not in ITER_WRAPPERS:
            break
        if dotted == "enumerate":
            enumerated = True
        node = node.args[0].value
    return node, enumerated


def lookup_scoped(training: "TrainingFacts", scope: str, ref: str, table: str) -> Optional[object]:
    """``ref`` in the ``table`` (``placements``, ``wrapped``, ``loaders``) of
    scope, then of its class (for ``self.x``)."""
    s = training.scopes.get(scope)
    if s is None:
        return None
    found = getattr(s, table).get(ref)
    if found is None and ref.startswith("self.") and s.class_scope:
        cs = training.scopes.get(s.class_scope)
        if cs is not None:
            found = getattr(cs, table).get(ref)
    if found is None and s.kind == "function" and "." not in ref:
        found = _lookup_enclosing(training, s, ref, table)
    return found


def _lookup_enclosing(training: "TrainingFacts", s: ScriptScope, ref: str, table: str) -> Optional[object]:
    """A name a function reads without binding it (``model`` in an
    ``evaluate()`` defined beside ``model = Net().to(device)``): its fact in
    the enclosing functions, then at module level. A placement whose device
    the function shadows has no spelling there."""
    inner = s
    parts = s.name.split(".")
    while True:
        if ref in inner.params or ref in inner.bound:
            return None
        parts = parts[:-1]
        outer = training.scopes.get(".".join(parts)) if parts else training.scopes.get(MODULE_SCOPE)
        if outer is None:
            return None
        if outer.kind == "class":
            continue  # a class body does not enclose its methods
        found = getattr(outer, table).get(ref)
        if found is not None or outer.kind == "module":
            break
        inner = outer
    if isinstance(found, Placement) and found.known and found.device:
        head = found.device.split(".")[0].split("(")[0].split("[")[0]
        if head in s.params or head in s.bound:
            return Placement(found.device, found.how, False, found.conditional)
    return found


@dataclass
class LoaderLoop:
    """A ``for`` loop over a data loader: its batch item names."""

    loader: str
    #: names the loop target binds to batch items (not the enumerate index)
    items: List[str]
    #: True when the target is one name (the whole batch, not unpacked)
    whole_batch: bool
    #: names bound to a whole batch (``batch``; in ``for (xs, ys), tb in
    #: zip(a, b)``: ``tb``), and the loader each batch item or batch comes
    #: from when the loop zips several
    batches: List[str] = field(default_factory=list)
    loader_of: Dict[str, str] = field(default_factory=dict)


def _loader_ref(training: "TrainingFacts", scope: str, it: cst.BaseExpression, self_name: str) -> Tuple[Optional[str], bool]:
    """The name of the data loader ``it`` iterates, when its batches are not
    placed on a device by the loader itself (through ``pbar = tqdm(loader)``:
    the loader), and whether an ``enumerate`` bound with it adds an index."""
    base = it.value if isinstance(it, cst.Subscript) else it  # dataloaders[phase]
    if isinstance(base, cst.Call) and base is it:
        return _inline_loader(training, scope, base), False
    ref = ref_of(base, self_name)
    if ref is None:
        return None, False
    info = lookup_scoped(training, scope, ref, "loaders")
    enumerated = False
    if isinstance(info, LoaderFacts) and info.wraps:
        if info.places_on_device:
            return None, False
        ref, enumerated = info.wraps, info.enumerated
        info = lookup_scoped(training, scope, ref, "loaders")
    if isinstance(info, LoaderFacts):
        if info.places_on_device or info.wraps:
            return None, False
        if info.kind != "dataloader" and not looks_like_loader(ref):
            return None, False
    elif not looks_like_loader(ref):
        return None, False
    return ref, enumerated


def _inline_loader(training: "TrainingFacts", scope: str, call: cst.Call) -> Optional[str]:
    """``for x, y in DataLoader(ds, batch_size=64)``: the loader's spelling when
    the call builds a ``DataLoader`` that leaves its batches on the CPU (no
    ``collate_fn`` of its own, no ``pin_memory_device``, no dataset or
    argument that mentions a device)."""
    cls = training.facts.class_of_call(call.func)
    if cls not in DATA_LOADERS:
        return None
    for a in call.args:
        if a.star:
            return None
        kw = a.keyword.value if a.keyword is not None else None
        if kw == "pin_memory_device" or (kw == "collate_fn" and not is_cpu_collator(training.facts, a.value)):
            return None
        if (kw is None or kw not in _NON_PLACING_LOADER_ARGS) and _mentions_placing(a.value):
            return None
        if kw is None and isinstance(a.value, cst.Call) and _holds_placed_names(training.scopes, scope, a.value):
            return None  # DataLoader(TensorDataset(X, Y)) with X on the GPU
    return code_of(call.func)


def _holds_placed_names(scopes: Dict[str, ScriptScope], scope: str, call: cst.Call) -> bool:
    """A positional argument of ``call`` is a name moved to a device (not the
    CPU, not under a condition) in ``scope`` or, unbound there, at module level."""
    s = scopes.get(scope)
    module = scopes.get(MODULE_SCOPE)
    for a in call.args:
        if a.keyword is not None or a.star or not isinstance(a.value, cst.Name):
            continue
        name = a.value.value
        p = s.placements.get(name) if s is not None else None
        if p is None and module is not None and (s is None or name not in s.bound):
            p = module.placements.get(name)
        if p is not None and not p.is_cpu() and not p.conditional:
            return True
    return False


def loader_loop(training: "TrainingFacts", scope: str, node: cst.For, self_name: str = "self") -> Optional[LoaderLoop]:
    """The batch items of a loop over a data loader whose batches are not
    placed on a device by the loader itself, else None. ``zip(a, b)`` pairs
    each loader with its part of the target; parts from other iterables
    are left out."""
    it, enumerated = _strip_iter_wrappers(training.facts, node.iter)
    target = node.target
    if enumerated:
        if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
            return None
        target = target.elements[1].value
    if isinstance(it, cst.Call) and dotted_name(it.func) == "zip" and training.facts.qualify_dotted("zip") is None:
        if any(a.star or a.keyword is not None for a in it.args):
            return None
        if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(it.args)):
            return None
        pairs = []
        for a, e in zip(it.args, target.elements):
            part_it, part_enum = _strip_iter_wrappers(training.facts, a.value)
            if not part_enum:  # an enumerated part is left out
                pairs.append((part_it, e.value))
    else:
        ref, wrapped_enum = _loader_ref(training, scope, it, self_name)
        if ref is None:
            return None
        if wrapped_enum:
            if enumerated or not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
                return None
            target = target.elements[1].value
        if isinstance(target, cst.Name):
            return LoaderLoop(ref, [target.value], True, [target.value], {target.value: ref})
        if isinstance(target, (cst.Tuple, cst.List)):
            names = [e.value.value for e in target.elements if isinstance(e, cst.Element) and isinstance(e.value, cst.Name)]
            return LoaderLoop(ref, names, False, [], {n: ref for n in names})
        return None
    items: List[str] = []
    batches: List[str] = []
    loader_of: Dict[str, str] = {}
    first = ""
    for part_it, part in pairs:
        ref, part_enum = _loader_ref(training, scope, part_it, self_name)
        if ref is None or part_enum:
            continue
        first = first or ref
        if isinstance(part, cst.Name):
            batches.append(part.value)
            loader_of[part.value] = ref
        elif isinstance(part, (cst.Tuple, cst.List)):
            for e in part.elements:
                if isinstance(e, cst.Element) and isinstance(e.value, cst.Name):
                    items.append(e.value.value)
                    loader_of[e.value.value] = ref
    if not first:
        return None
    return LoaderLoop(first, items, False, batches, loader_of)


def next_loader(training: "TrainingFacts", scope: str, node: cst.BaseExpression, self_name: str = "self") -> Optional[str]:
    """The data loader ``next(node)`` takes a batch from, when its batches are
    not placed on a device by the loader itself: ``next(iter(loader))``, or
    ``next(it)`` with ``it = iter(loader)`` (or a name like ``loader_iter``)."""
    if isinstance(node, cst.Call) and dotted_name(node.func) == "iter" and training.facts.qualify_dotted("iter") is None:
        if len(node.args) != 1 or node.args[0].star or node.args[0].keyword is not None:
            return None
        node = node.args[0].value
    ref, enumerated = _loader_ref(training, scope, node, self_name)
    return None if enumerated else ref


def device_candidates(training: "TrainingFacts", scope: str) -> List[str]:
    """Expressions naming the device this scope targets, best first:
    where its models were moved, names holding a device, then CUDA indices
    (as ``f"cuda:{i}"``). Names from the module scope come last."""
    out: List[str] = []
    chain = [scope]
    s = training.scopes.get(scope)
    if s is not None and s.class_scope:
        chain.append(s.class_scope)
    if scope != MODULE_SCOPE:
        chain.append(MODULE_SCOPE)
    for name in chain:
        sf = training.scopes.get(name)
        if sf is None:
            continue
        for p in sf.placements.values():
            if p.known and p.device and not p.is_cpu() and p.device not in sf.maybe_none:
                cand = _as_map_location(p.device, p.how)
                if p.conditional and cand is not None and cand[:1] in ("'", '"') and "cuda" in cand:
                    continue  # if use_cuda: model.to("cuda") -- not where every run can load
                if cand and cand not in out:
                    out.append(cand)
        for d in sf.device_names:
            if d not in out:
                out.append(d)
        for r in sorted(sf.rank_names, key=_rank_preference):
            if r in sf.maybe_none:
                continue  # f"cuda:{args.gpu}" with args.gpu None names no device
            cand = _as_map_location(r, "cuda", index=True)
            if cand and cand not in out:
                out.append(cand)
    return out


def _rank_preference(name: str) -> int:
    last = name.rsplit(".", 1)[-1]
    return 0 if "local" in last else (1 if "gpu" in last or "device" in last else 2)


def _as_map_location(device: str, how: str, index: bool = False) -> Optional[str]:
    """A ``map_location`` value for a device expression (an index becomes
    ``f"cuda:{i}"``; map_location does not accept a bare int)."""
    try:
        node = cst.parse_expression(device)
    except Exception:
        return None
    dotted = dotted_name(node)
    last = dotted.rsplit(".", 1)[-1].lower() if dotted else ""
    is_index = isinstance(node, cst.Integer) or (
        dotted is not None and (index or ((last in _RANK_NAMES or how == "cuda") and "device" not in last))
    )
    if is_index:
        if dotted is None and not isinstance(node, cst.Integer):
            return None
        return f'"cuda:{device}"' if isinstance(node, cst.Integer) else f'f"cuda:{{{device}}}"'
    if dotted is not None or isinstance(node, (cst.SimpleString, cst.FormattedString)):
        return device
    return None


class _TrainingCollector(cst.CSTVisitor):
    def __init__(self, facts: FileFacts) -> None:
        self.facts = facts
        self.scopes: Dict[str, ScriptScope] = {MODULE_SCOPE: ScriptScope(MODULE_SCOPE, "module")}
        self.stack: List[str] = []
        # per scope: the method's self name (functions directly in a class)
        self.self_names: List[str] = ["self"]
        self.class_of: List[str] = [""]
        self.parents: List[cst.CSTNode] = []
        # scope -> loaded name -> every use so far restores an RNG
        self.rng_candidates: Dict[str, Dict[str, bool]] = {}
        # scope -> names it declares global/nonlocal
        self._declared: Dict[str, Set[str]] = {}
        # method scope -> (class scope, self.<x>, local device name) placed
        # with a device only the method can name
        self._unnamed: Dict[str, List[Tuple[str, str, str]]] = {}
        # method scope -> local name -> self.<x> it is stored in (self.device = device)
        self._kept: Dict[str, Dict[str, str]] = {}

    # -- scopes --------------------------------------------------------------
    @property
    def scope(self) -> ScriptScope:
        return self.scopes[".".join(self.stack) if self.stack else MODULE_SCOPE]

    def on_visit(self, node: cst.CSTNode) -> bool:
        go = super().on_visit(node)
        if go:
            self.parents.append(node)
        return go

    def on_leave(self, original_node: cst.CSTNode) -> None:
        super().on_leave(original_node)
        if self.parents and self.parents[-1] is original_node:
            self.parents.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.stack.append(node.name.value)
        name = ".".join(self.stack)
        self.scopes.setdefault(name, ScriptScope(name, "class"))
        self.self_names.append("self")
        self.class_of.append(name)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.stack.pop()
        self.self_names.pop()
        self.class_of.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        in_class = self.scope.kind == "class"
        self.stack.append(node.name.value)
        name = ".".join(self.stack)
        params = [p.name.value for p in list(node.params.posonly_params) + list(node.params.params) + list(node.params.kwonly_params)]
        sf = self.scopes.setdefault(name, ScriptScope(name, "function"))
        sf.params = params
        sf.class_scope = self.class_of[-1] if in_class else ""
        self.self_names.append(params[0] if in_class and params else "self")
        self.class_of.append(self.class_of[-1] if in_class else "")
        for param in list(node.params.posonly_params) + list(node.params.params) + list(node.params.kwonly_params):
            if param.annotation is not None and (dotted_name(param.annotation.annotation) or "").rsplit(".", 1)[-1] == "BytesIO":
                sf.buffers.append(param.name.value)
        for p in params[1:] if in_class else params:
            self._note_name(sf, p, None)
            if looks_like_loader(p):
                sf.loaders.setdefault(p, LoaderFacts("param"))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scope.complete = True
        me = self.scope.name
        kept = self._kept.get(me, {})
        for class_scope, ref, head in self._unnamed.get(me, []):
            p = self.scopes[class_scope].placements.get(ref)
            if p is not None and not p.known and head in kept and p.device.split(".")[0].split("(")[0] == head:
                # self.model = model.to(device); self.device = device: other methods say self.device
                self.scopes[class_scope].placements[ref] = Placement(kept[head] + p.device[len(head):], p.how, True, p.conditional)
        self.stack.pop()
        self.self_names.pop()
        self.class_of.pop()

    # -- bindings ------------------------------------------------------------
    def _target_scope(self, ref: str) -> ScriptScope:
        """``self.x`` facts live on the class scope."""
        sf = self.scope
        if ref.startswith("self.") and sf.class_scope:
            return self.scopes[sf.class_scope]
        return sf

    def _note_name(self, sf: ScriptScope, name: str, value: Optional[cst.BaseExpression]) -> None:
        last = name.rsplit(".", 1)[-1].lower()
        if value is not None and _is_cpu_device(self.facts, value):
            sf.cpu_devices[name] = sf.cpu_devices.get(name, True)
        elif name in sf.cpu_devices or _is_device_name(last):
            sf.cpu_devices[name] = False
        if _is_device_name(last):
            if value is not None and _is_index_value(self.facts, value):
                if name not in sf.rank_names:
                    sf.rank_names.append(name)
            elif (value is None or _is_device_value(value)) and name not in sf.device_names:
                sf.device_names.append(name)
        elif last in _RANK_NAMES and name not in sf.rank_names:
            sf.rank_names.append(name)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # args.local_rank, args.gpu, cfg.device: a device the script targets
        dotted = dotted_name(node)
        if dotted is None or dotted.startswith("self.") or dotted.count(".") != 1:
            return
        sf = self.scope
        last = node.attr.value
        if last in ("local_rank", "gpu", "local_gpu") and dotted not in sf.rank_names:
            sf.rank_names.append(dotted)
        elif last == "device" and dotted.split(".")[0] in ("args", "opt", "opts", "cfg", "config", "hparams", "FLAGS") and dotted not in sf.device_names:
            sf.device_names.append(dotted)

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression, whole: bool) -> None:
        """``target = value`` (``whole``: value is the whole right-hand side
        of a tuple unpacking, not this target's own element)."""
        ref = ref_of(target, self.self_names[-1])
        if ref is None:
            if isinstance(target, (cst.Tuple, cst.List)):
                for e in target.elements:
                    self._bind(e.value, value, True)
            return
        sf = self._target_scope(ref)
        self._note_bound(ref)
        if ref.startswith("self.") and not whole and sf is not self.scope:
            kept = _device_kept(self.facts, value)
            if kept is not None and kept in self.scope.params + self.scope.bound:
                self._kept.setdefault(self.scope.name, {}).setdefault(kept, ref)
        self._note_name(sf, ref, value if not whole else None)
        if isinstance(value, cst.Call) and self.facts.class_of_call(value.func) in CTC_LOSSES:
            sf.ctc_losses[ref] = True
        elif ref in sf.ctc_losses:
            del sf.ctc_losses[ref]
        if not whole:
            self._bind_placement(sf, ref, value)
            self._bind_load(sf, ref, value)
            if "." not in ref:
                if is_cpu_collator(self.facts, value):
                    if ref not in sf.cpu_collators:
                        sf.cpu_collators.append(ref)
                elif ref in sf.cpu_collators:
                    sf.cpu_collators.remove(ref)
            if is_memory_buffer(self.facts, value, sf) and ref not in sf.buffers:
                sf.buffers.append(ref)
            if is_file_bytes(self.facts, value, sf) and ref not in sf.file_bytes:
                sf.file_bytes.append(ref)
            elif (
                isinstance(value, cst.Call)
                and (self.facts.qualify(value.func) or "").split(".")[0] in _HTTP_CLIENTS
                and f"{ref}.content" not in sf.file_bytes
            ):
                sf.file_bytes.append(f"{ref}.content")  # resp = requests.get(url): resp.content is a download
        self._bind_loader(sf, ref, value)

    def _place(self, sf: ScriptScope, ref: str, p: Placement) -> None:
        if sf.kind == "class" and p.device:
            # self.model = Net().to(device) in __init__: ``device`` is a local
            # there, unknown to the other methods
            head = p.device.split(".")[0].split("(")[0]
            me = self.scope
            local = head in me.params or head in me.device_names or head in me.rank_names
            literal = p.device[:1] in ("'", '"') or p.device.isdigit()
            if not literal and head != self.self_names[-1] and (local or head not in self.scopes[MODULE_SCOPE].device_names):
                p = Placement(p.device, p.how, False, p.conditional)
                # ... unless the method keeps it: self.device = device
                self._unnamed.setdefault(me.name, []).append((sf.name, ref, head))
            elif head == self.self_names[-1] and head != "self":
                p = Placement("self" + p.device[len(head):], p.how, p.known, p.conditional)
        if not p.conditional and self._under_condition():
            p = Placement(p.device, p.how, p.known, True)
        sf.placements[ref] = p

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # ``x is None`` / ``x is not None`` / ``x == None``
        sides = [node.left] + [t.comparator for t in node.comparisons]
        if not any(isinstance(s, cst.Name) and s.value == "None" for s in sides):
            return
        sf = self.scope
        for side in sides:
            name = dotted_name(side)
            if name is not None and name != "None" and name not in sf.maybe_none:
                sf.maybe_none.append(name)

    def _under_condition(self) -> bool:
        """The node being visited sits under an ``if`` or a conditional
        expression of its function (``if __name__ == "__main__"`` aside)."""
        for node in reversed(self.parents):
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(node, cst.IfExp):
                return True
            if isinstance(node, cst.If) and "__name__" not in code_of(node.test):
                return True
        return False

    def _bind_placement(self, sf: ScriptScope, ref: str, value: cst.BaseExpression) -> None:
        moved = moved_part(self.facts, value)
        p = placement_of(self.facts, moved)
        if p is not None:
            receiver = moved.func.value  # type: ignore[attr-defined]
            if isinstance(receiver, cst.Call) and self.facts.is_wrapper(receiver.func) is not None:
                self._bind_placement(sf, ref, receiver)  # nn.DataParallel(model).to(device): wrapped, then moved
            self._place(sf, ref, p)
            return
        wrapper = self.facts.is_wrapper(value.func) if isinstance(value, cst.Call) else None
        if wrapper is not None and isinstance(value, cst.Call):
            args = positional_args(value)
            moves = wrapper == DATA_PARALLEL
            if wrapper != DATA_PARALLEL:
                ids = keyword_arg(value, "device_ids")
                given = ids.value if ids is not None else (args[1].value if len(args) > 1 else None)
                moves = given is not None and not (isinstance(given, cst.Name) and given.value == "None")
            sf.wrapped[ref] = WrapFacts(wrapper, moves)
            inner = args[0].value if args else (keyword_arg(value, "module").value if keyword_arg(value, "module") else None)
            if inner is not None:
                ip = placement_of(self.facts, inner)
                inner_ref = ref_of(inner, self.self_names[-1])
                if ip is None and inner_ref is not None:
                    ip = self._target_scope(inner_ref).placements.get(inner_ref)
                if ip is not None:
                    self._place(sf, ref, ip)
            return
        loaded_to = _load_device(self.facts, moved)
        if loaded_to is not None:
            # model = torch.load(path, map_location=device): on that device
            self._place(sf, ref, Placement(loaded_to, "to"))
            return
        if isinstance(moved, cst.Call) and self.facts.qualify(moved.func) in _SAME_DEVICE_COPIES:
            # ema = copy.deepcopy(model), fast = torch.compile(model): the copy
            # (or the compiled module sharing the parameters) is where the model is
            args = positional_args(moved)
            src = ref_of(args[0].value, self.self_names[-1]) if args else None
            found = self._target_scope(src).placements.get(src) if src is not None else None
            if found is not None:
                sf.placements[ref] = found
                return
        if ref in sf.placements and not _mentions_name(value, ref.rsplit(".", 1)[-1]):
            # rebound to something new (``model = Net()``): no longer placed
            del sf.placements[ref]

    def _bind_loader(self, sf: ScriptScope, ref: str, value: cst.BaseExpression) -> None:
        is_dl = False
        places = False
        inner, enumerated = _strip_iter_wrappers(self.facts, value)
        if inner is not value:
            # pbar = tqdm(train_loader): iterating pbar iterates the loader
            inner_ref = ref_of(inner.value if isinstance(inner, cst.Subscript) else inner, self.self_names[-1])
            if inner_ref is not None and "." not in ref:
                found = self._target_scope(inner_ref).loaders.get(inner_ref)
                if (found is not None and not found.wraps) or looks_like_loader(inner_ref):
                    sf.loaders[ref] = LoaderFacts("iter", False, inner_ref, enumerated)
                    return
        if isinstance(value, cst.Call):
            cls = self.facts.class_of_call(value.func)
            dotted = dotted_name(value.func) or ""
            is_dl = cls in DATA_LOADERS or (cls is not None and cls.rsplit(".", 1)[-1] == "DataLoader" and dotted.rsplit(".", 1)[-1] == "DataLoader")
            if is_dl:
                places = any(
                    a.keyword is not None
                    and (a.keyword.value == "pin_memory_device" or (a.keyword.value == "collate_fn" and not self._cpu_collator(sf, a.value)))
                    for a in value.args
                ) or any(
                    _mentions_placing(a.value)
                    for a in value.args
                    if a.keyword is None or a.keyword.value not in _NON_PLACING_LOADER_ARGS
                ) or any(a.star for a in value.args)
                ds = value.args[0].value if value.args and value.args[0].keyword is None and not value.args[0].star else None
                if isinstance(ds, cst.Call) and "dataset" in (dotted_name(ds.func) or "").rsplit(".", 1)[-1].lower():
                    places = places or self._holds_placed(sf, ds)  # DataLoader(TensorDataset(X, Y)), X on the GPU
                ds_ref = ref_of(ds, self.self_names[-1]) if ds is not None else None
                if ds_ref is not None and ds_ref in self._target_scope(ds_ref).loaders:
                    places = places or self._target_scope(ds_ref).loaders[ds_ref].places_on_device
        if not is_dl:
            places = _mentions_placing(value) or self._holds_placed(sf, value)
            if not looks_like_loader(ref) and ref not in sf.loaders:
                # remember datasets built with a device (TensorDataset(x.cuda()))
                dotted = dotted_name(value.func) if isinstance(value, cst.Call) else None
                if not (places and dotted is not None and "dataset" in dotted.rsplit(".", 1)[-1].lower()):
                    return
        old = sf.loaders.get(ref)
        kind = "dataloader" if is_dl and (old is None or old.kind == "dataloader") else "other"
        sf.loaders[ref] = LoaderFacts(kind, places or (old.places_on_device if old else False))

    def _holds_placed(self, sf: ScriptScope, value: cst.BaseExpression) -> bool:
        """``TensorDataset(X, Y)`` with ``X`` moved to a device here or at module
        level (``X = X.to(device)``, ``X = torch.load(p, map_location=device)``):
        its items come out on that device."""
        return isinstance(value, cst.Call) and _holds_placed_names(self.scopes, sf.name, value)

    def _cpu_collator(self, sf: ScriptScope, node: cst.BaseExpression) -> bool:
        """``collate_fn=`` a library collator that builds CPU tensors, or a
        name bound to one here or at module level."""
        if is_cpu_collator(self.facts, node):
            return True
        if isinstance(node, cst.Name):
            if any(node.value in s.cpu_collators for s in (sf, self.scope, self.scopes[MODULE_SCOPE])):
                return True
            # a collate function of the script's own, already read, that moves nothing
            here = self.scope.name
            for name in ((f"{here}.{node.value}" if here != MODULE_SCOPE else node.value), node.value):
                fn = self.scopes.get(name)
                if fn is not None and fn.kind == "function" and not fn.class_scope:
                    return fn.complete and not fn.moves_data
        return False

    def _bind_load(self, sf: ScriptScope, ref: str, value: cst.BaseExpression) -> None:
        if "." in ref:
            return
        inner = value
        while isinstance(inner, cst.Subscript):
            inner = inner.value
        if isinstance(inner, cst.Call) and is_torch_load(self.facts, inner.func):
            sf.loaded[ref] = True
            self.rng_candidates.setdefault(sf.name, {})[ref] = True

    def _note_bound(self, ref: str) -> None:
        sf = self.scope
        if "." not in ref and ref not in sf.bound and ref not in self._declared.get(sf.name, ()):
            sf.bound.append(ref)

    def _note_bound_target(self, target: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            self._note_bound(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                self._note_bound_target(e.value)
        elif isinstance(target, cst.StarredElement):
            self._note_bound_target(target.value)

    def visit_For(self, node: cst.For) -> None:
        self._note_bound_target(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._note_bound_target(node.asname.name)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._note_bound_target(node.target)

    def visit_Global(self, node: cst.Global) -> None:
        self._declared.setdefault(self.scope.name, set()).update(n.name.value for n in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self._declared.setdefault(self.scope.name, set()).update(n.name.value for n in node.names)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            target = t.target
            if isinstance(target, (cst.Tuple, cst.List)) and isinstance(node.value, (cst.Tuple, cst.List)) and len(target.elements) == len(node.value.elements):
                for te, ve in zip(target.elements, node.value.elements):
                    self._bind(te.value, ve.value, False)
            else:
                self._bind(target, node.value, isinstance(target, (cst.Tuple, cst.List)))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, node.value, False)

    def visit_Expr(self, node: cst.Expr) -> None:
        # model.to(device) / model.cuda() as a statement: nn.Module.to moves in place
        value = moved_part(self.facts, node.value)
        p = placement_of(self.facts, value)
        if p is not None and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            ref = ref_of(value.func.value, self.self_names[-1])
            if ref is not None:
                self._place(self._target_scope(ref), ref, p)

    def visit_Call(self, node: cst.Call) -> None:
        sf = self.scope
        if (isinstance(node.func, cst.Attribute) and node.func.attr.value in ("to", "cuda", "pin_memory")) or keyword_arg(node, "device") is not None:
            sf.moves_data = True
        q = self.facts.qualify(node.func)
        if q == "torch.cuda.set_device" and node.args:
            code = code_of(node.args[0].value)
            if code not in sf.rank_names and dotted_name(node.args[0].value) is not None:
                sf.rank_names.append(code)
        elif q in ("torch.save", "torch.serialization.save"):
            args = positional_args(node)
            f = args[1].value if len(args) > 1 else (keyword_arg(node, "f").value if keyword_arg(node, "f") else None)
            if f is not None:
                sf.saved_files.append(code_of(f))
        func = node.func
        callee = None
        is_method = False
        if isinstance(func, cst.Name):
            callee = func.value
        elif self_attribute(func, self.self_names[-1]) is not None and sf.class_scope:
            callee = f"{sf.class_scope}.{func.attr.value}"  # type: ignore[attr-defined]
            is_method = True
        if callee is not None:
            args = []
            for a in node.args:
                if a.keyword is not None or a.star:
                    break
                args.append(code_of(a.value))
            kwargs = {a.keyword.value: code_of(a.value) for a in node.args if a.keyword is not None}
            sf.calls.append(CallSite(callee, args, kwargs, is_method))

    def visit_Name(self, node: cst.Name) -> None:
        sf = self.scope
        if node.value not in sf.loaded:
            return
        if sf.loaded[node.value]:
            sf.loaded[node.value] = _feeds_load_state_dict(node, self.parents)
        rng = self.rng_candidates.get(sf.name, {})
        if rng.get(node.value):
            rng[node.value] = _restores_rng(node, self.parents)

    def leave_Module(self, original_node: cst.Module) -> None:
        for scope, names in self.rng_candidates.items():
            self.scopes[scope].rng_states = sorted(n for n, ok in names.items() if ok)


def _is_device_name(last: str) -> bool:
    """``device``, ``dev``, ``<word>_device`` (``train_device``), not
    ``num_device``/``place_model_on_device`` (a count, a flag)."""
    return last in ("device", "dev") or (
        last.endswith("_device") and last.count("_") == 1 and not last.startswith(("num_", "n_", "is_", "use_", "on_"))
    )


def _device_kept(facts: FileFacts, value: cst.BaseExpression) -> Optional[str]:
    """``device`` for ``device`` or ``torch.device(device)``: the value is the
    device that name holds."""
    if isinstance(value, cst.Call) and facts.qualify(value.func) == "torch.device":
        args = positional_args(value)
        if len(args) != 1 or len(value.args) != 1:
            return None
        value = args[0].value
    return value.value if isinstance(value, cst.Name) else None


def _is_cpu_device(facts: FileFacts, value: cst.BaseExpression) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if isinstance(value, cst.Call) and facts.qualify(value.func) == "torch.device":
        args = positional_args(value)
        return len(args) == 1 and string_value(args[0].value) == "cpu"
    return string_value(value) == "cpu"


def placed_on_cpu(training: "TrainingFacts", scope: str, p: Placement) -> bool:
    """The placement names the CPU: ``.to("cpu")``, or ``.to(device)`` with
    every binding of ``device`` a CPU device (here, or at module level for a
    name the function neither binds nor takes)."""
    if p.is_cpu():
        return True
    if p.how != "to" or not p.device.isidentifier():
        return False
    s = training.scopes.get(scope)
    if s is None:
        return False
    if p.device in s.cpu_devices:
        return s.cpu_devices[p.device]
    if scope == MODULE_SCOPE or p.device in s.params:
        return False
    return training.scopes[MODULE_SCOPE].cpu_devices.get(p.device, False)


def _is_index_value(facts: FileFacts, value: cst.BaseExpression) -> bool:
    """``torch.cuda.current_device()``: a CUDA index, not a device."""
    return isinstance(value, cst.Call) and facts.qualify(value.func) == "torch.cuda.current_device"


def _is_device_value(value: cst.BaseExpression) -> bool:
    """A value a ``device`` name may hold: a literal, ``torch.device(...)``,
    an f-string, another device name, a call whose name says device."""
    if isinstance(value, cst.IfExp):
        return _is_device_value(value.body) and _is_device_value(value.orelse)
    if isinstance(value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    target = value.func if isinstance(value, cst.Call) else value
    dotted = dotted_name(target)
    if dotted is None:
        return False
    last = dotted.rsplit(".", 1)[-1].lower()
    if isinstance(value, cst.Call):
        # torch.device(...), get_device(); current_device() is an index
        return "device" in last and last not in ("current_device", "device_count")
    return _is_device_name(last)


def _mentions_name(node: cst.CSTNode, name: str) -> bool:
    found = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            if n.value == name:
                found.append(n)

    walk(node, V())
    return bool(found)


def is_cpu_collator(facts: FileFacts, node: cst.BaseExpression) -> bool:
    """A library collate function that builds CPU tensors:
    ``default_collate``, ``default_data_collator``, a ``transformers``
    ``DataCollator*`` class or an instance of one (``DataCollatorWithPadding(tok)``)."""
    func = node.func if isinstance(node, cst.Call) else node
    q = facts.qualify(func)
    if q is None:
        return False
    if isinstance(node, cst.Call):
        return q.startswith("transformers.") and q.rsplit(".", 1)[-1].startswith("DataCollator")
    return q in _CPU_COLLATORS


def _mentions_placing(node: cst.CSTNode) -> bool:
    code = code_of(node).lower()
    return any(w in code for w in _PLACING_WORDS)


#: methods whose result, called without a positional argument, is the whole
#: contents of a file or of an object in a bucket (``f.read()``,
#: ``Path.read_bytes()``, ``obj["Body"].read()``, ``blob.download_as_bytes()``).
#: A member read by name (``zipfile.ZipFile.read(name)``,
#: ``archive.read_bytes(name)``) is not one: that is a container format
#: restoring what it packed, like an in-memory hand-over.
_FILE_READS = frozenset({"read", "read_bytes", "readall", "download_as_bytes", "download_as_string"})

#: HTTP client modules whose responses' ``.content`` is a downloaded file
_HTTP_CLIENTS = frozenset({"requests", "httpx"})


def is_file_bytes(facts: FileFacts, node: cst.CSTNode, scope: Optional[ScriptScope] = None) -> bool:
    """Bytes just read from a file or a download: ``f.read()``,
    ``path.read_bytes()``, ``requests.get(url).content``, or a name of
    ``scope`` bound to one. A read of an in-memory buffer of ``scope``
    (``buf.read()`` after ``torch.save(obj, buf)``) and an archive member
    read by name (``archive.read(name)``) are not."""
    if scope is not None and code_of(node) in scope.file_bytes:
        return True
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _FILE_READS
        and not positional_args(node)
    ):
        receiver = code_of(node.func.value)
        return scope is None or (receiver not in scope.buffers and receiver not in scope.saved_files)
    if isinstance(node, cst.Attribute) and node.attr.value == "content" and isinstance(node.value, cst.Call):
        return (facts.qualify(node.value.func) or "").split(".")[0] in _HTTP_CLIENTS
    return False


def is_memory_buffer(facts: FileFacts, node: cst.CSTNode, scope: Optional[ScriptScope] = None) -> bool:
    """``io.BytesIO(data)``: bytes held in memory, not a file on disk; but
    not ``io.BytesIO(f.read())``, whose bytes are a file's
    (:func:`is_file_bytes`)."""
    if not (isinstance(node, cst.Call) and facts.qualify(node.func) in ("io.BytesIO", "_io.BytesIO")):
        return False
    args = positional_args(node)
    return not (args and is_file_bytes(facts, args[0].value, scope))


#: ``nn.CTCLoss`` and ``F.ctc_loss``: targets and lengths may be CPU tensors
#: beside CUDA log-probabilities (cuDNN's CTC even wants them there)
CTC_LOSSES = frozenset({
    "torch.nn.CTCLoss", "torch.nn.modules.loss.CTCLoss", "torch.nn.functional.ctc_loss", "torch.ctc_loss",
})


#: the qualified names of ``torch.load``
TORCH_LOADS = frozenset({"torch.load", "torch.serialization.load"})


def is_torch_load(facts: FileFacts, func: cst.CSTNode) -> bool:
    q = facts.qualify(func)
    return q in TORCH_LOADS


def _checkpoint_use(name: cst.Name, parents: List[cst.CSTNode]) -> Tuple[Optional[bool], int, cst.CSTNode]:
    """What every reading of a loaded object's use starts with: a verdict for
    the binding itself, ``del`` and a ``"key" in ckpt`` test (else None), and
    past any subscripts (``ckpt["model"]``), the index in ``parents`` of the
    node that uses the value and the outermost subscript (or the name)."""
    if not parents:
        return True, -1, name
    parent = parents[-1]
    if isinstance(parent, (cst.AssignTarget, cst.Del)):
        return True, -1, name
    if (isinstance(parent, cst.Attribute) and parent.attr is name) or (isinstance(parent, cst.Arg) and parent.keyword is name):
        return True, -1, name  # ``args.ckpt``, ``f(ckpt=...)``: another name spelt the same
    if isinstance(parent, cst.ComparisonTarget) and isinstance(parent.operator, (cst.In, cst.NotIn)):
        return parent.comparator is name, -1, name
    node: cst.CSTNode = name
    i = len(parents) - 1
    while i >= 0 and isinstance(parents[i], cst.Subscript) and parents[i].value is node:  # type: ignore[attr-defined]
        node = parents[i]
        i -= 1
    return None, i, node


def _feeds_load_state_dict(name: cst.Name, parents: List[cst.CSTNode]) -> bool:
    """Whether this occurrence of a loaded checkpoint's name is harmless under
    ``map_location="cpu"``: an argument of ``load_state_dict`` (possibly
    subscripted: ``ckpt["model"]``), a ``"key" in ckpt`` test,
    ``ckpt = ckpt["model"]``, the binding itself or ``del``. ``parents``: the
    nodes around the name, innermost last."""
    verdict, i, node = _checkpoint_use(name, parents)
    if verdict is not None:
        return verdict
    if i < 0:
        return False
    parent = parents[i]
    if isinstance(parent, cst.Arg) and i >= 1 and isinstance(parents[i - 1], cst.Call):
        call = parents[i - 1]
        if (
            isinstance(call.func, cst.Attribute)  # type: ignore[attr-defined]
            and call.func.attr.value == "load_state_dict"  # type: ignore[attr-defined]
            and (parent.keyword is None or parent.keyword.value == "state_dict")
            and not parent.star
        ):
            assign = keyword_arg(call, "assign")  # type: ignore[arg-type]
            return assign is None or (isinstance(assign.value, cst.Name) and assign.value.value == "False")
        return False
    if isinstance(parent, cst.Assign) and node is not name and parent.value is node:
        # ckpt = ckpt["state_dict"]
        return all(isinstance(t.target, cst.Name) and t.target.value == name.value for t in parent.targets)
    return _rekeys(name, parents)


def _rekeys(name: cst.Name, parents: List[cst.CSTNode]) -> bool:
    """``state = {k.replace("module.", ""): v for k, v in state.items()}``: the
    loaded dict re-keyed into the same name, its values passed through."""
    if len(parents) < 5:
        return False
    attr, call, comp_for, comp, assign = parents[-1], parents[-2], parents[-3], parents[-4], parents[-5]
    if not (
        isinstance(attr, cst.Attribute) and attr.value is name and attr.attr.value == "items"
        and isinstance(call, cst.Call) and call.func is attr and not call.args
        and isinstance(comp_for, cst.CompFor) and comp_for.iter is call and comp_for.inner_for_in is None
        and isinstance(comp, cst.DictComp) and comp.for_in is comp_for
        and isinstance(assign, cst.Assign) and assign.value is comp
    ):
        return False
    target = comp_for.target
    if not (isinstance(target, cst.Tuple) and len(target.elements) == 2 and isinstance(target.elements[1].value, cst.Name)):
        return False
    passes_values = isinstance(comp.value, cst.Name) and comp.value.value == target.elements[1].value.value
    return passes_values and all(isinstance(t.target, cst.Name) and t.target.value == name.value for t in assign.targets)


_RNG_SETTERS = frozenset({"set_rng_state", "set_rng_state_all", "setstate", "set_state"})


def _restores_rng(name: cst.Name, parents: List[cst.CSTNode]) -> bool:
    """This use of a loaded object is the binding, a ``"key" in state`` test,
    or an argument (possibly subscripted) of an RNG setter."""
    verdict, i, _ = _checkpoint_use(name, parents)
    if verdict is not None:
        return verdict
    if i < 1 or not isinstance(parents[i], cst.Arg) or not isinstance(parents[i - 1], cst.Call):
        return False
    dotted = dotted_name(parents[i - 1].func)  # type: ignore[attr-defined]
    if dotted is None:
        return False
    last = dotted.rsplit(".", 1)[-1]
    # torch.set_rng_state, random.setstate, a helper set_rng_state_for_device(...)
    return last in _RNG_SETTERS or (last.startswith("set_") and "rng_state" in last)


def _resolve_callee(scopes: Dict[str, ScriptScope], caller: str, callee: str) -> Optional[str]:
    if "." in callee:
        return callee if callee in scopes else None
    nested = f"{caller}.{callee}" if caller != MODULE_SCOPE else callee
    if nested in scopes and scopes[nested].kind == "function":
        return nested
    if callee in scopes and scopes[callee].kind == "function":
        return callee
    return None


def _bind_params(site: CallSite, callee: ScriptScope) -> Dict[str, str]:
    """parameter -> argument code for one call site."""
    params = list(callee.params)
    if callee.class_scope and site.is_method_call and params:
        params = params[1:]
    out = dict(zip(params, site.args))
    for k, v in site.kwargs.items():
        if k in callee.params:
            out[k] = v
    return out


def _translate_device(device: str, how: str, binding: Dict[str, str], caller: ScriptScope, callee: ScriptScope,
                      module: ScriptScope) -> Optional[str]:
    """The caller's device expression as the callee can spell it, else None."""
    if not device:
        return device  # .cuda()
    try:
        node = cst.parse_expression(device)
    except Exception:
        return None
    if isinstance(node, (cst.SimpleString, cst.Integer)):
        return device
    dotted = dotted_name(node)
    if dotted is None:
        for param, arg in binding.items():
            if arg == device:
                return param
        return None
    head, _, rest = dotted.partition(".")
    for param, arg in binding.items():
        if arg == dotted:
            return param
        if arg == head:
            return param + ("." + rest if rest else "")
    if head == "self" and caller.class_scope and caller.class_scope == callee.class_scope:
        return device
    if head not in callee.params and caller.name != MODULE_SCOPE and _module_binds(module, head):
        return device
    if caller.name == MODULE_SCOPE and head not in callee.params:
        return device  # a module-level name, visible in the function
    return None


def _module_binds(module: ScriptScope, name: str) -> bool:
    return name in module.device_names or name in module.rank_names or name in module.placements


def build_training_facts(module: cst.Module, facts: FileFacts) -> Dict[str, ScriptScope]:
    """Collect the script facts of every scope, then carry models and loaders
    passed as arguments into the functions defined in the same file."""
    collector = _TrainingCollector(facts)
    walk(module, collector)
    scopes = collector.scopes
    modscope = scopes[MODULE_SCOPE]
    for _round in range(3):
        changed = False
        for caller in list(scopes.values()):
            for site in caller.calls:
                target = _resolve_callee(scopes, caller.name, site.callee)
                if target is None:
                    continue
                callee = scopes[target]
                binding = _bind_params(site, callee)
                for param, arg in binding.items():
                    src = caller.placements.get(arg)
                    if src is None and arg.startswith("self.") and caller.class_scope:
                        src = scopes[caller.class_scope].placements.get(arg)
                    if src is not None and param not in callee.placements:
                        dev = _translate_device(src.device, src.how, binding, caller, callee, modscope) if src.known else None
                        callee.placements[param] = Placement(dev or "", src.how, dev is not None, src.conditional)
                        changed = True
                    wrap = caller.wrapped.get(arg)
                    if wrap is not None and param not in callee.wrapped:
                        callee.wrapped[param] = wrap
                        changed = True
                    loader = caller.loaders.get(arg)
                    if loader is None and arg.startswith("self.") and caller.class_scope:
                        loader = scopes[caller.class_scope].loaders.get(arg)
                    if loader is not None:
                        mine = callee.loaders.get(param)
                        if mine is None or (mine.kind == "param" and (loader.places_on_device or loader.kind == "dataloader")):
                            callee.loaders[param] = LoaderFacts(loader.kind if mine is None or mine.kind == "param" else "other",
                                                                loader.places_on_device or (mine.places_on_device if mine else False))
                            changed = mine is None or changed
                    elif param in callee.loaders and _mentions_placing_code(arg) and not callee.loaders[param].places_on_device:
                        callee.loaders[param] = LoaderFacts("other", True)
                        changed = True
        if not changed:
            break
    return scopes


@dataclass
class TrainingFacts:
    """Training and evaluation code per scope (see :class:`ScriptScope`):
    models moved to devices, loaders, device and rank names, checkpoints."""

    facts: FileFacts
    #: scope name (``<module>``, ``main``, ``Trainer``, ``Trainer.fit``) -> its facts
    scopes: Dict[str, ScriptScope]


class Training(Provider):
    """:class:`TrainingFacts`: a walk of the whole file that only the rules
    about scripts need (on model code it costs more than the classes)."""

    requires = (Classes,)

    @classmethod
    def build(cls, store: FactStore) -> TrainingFacts:
        facts = store[Classes]
        return TrainingFacts(facts, build_training_facts(store.module, facts))


def _mentions_placing_code(code: str) -> bool:
    return any(w in code.lower() for w in _PLACING_WORDS)


# --------------------------------------------------------------------------
# script facts: how models are built, wrapped and placed in each function
#
# Training scripts wrap and move models at module level, in ``main()``, in
# trainer methods. For each function scope (index 0 is the module level; then
# every ``def`` in the order a pre-order walk meets it) the facts list, in
# evaluation order, the wrapper calls, the ``.to()``/``.cuda()`` calls and the
# name bindings. A rule walking the tree meets the same calls in the same
# order (after their arguments: at ``leave_Call``), so the k-th wrapper call
# it leaves in a scope is ``scope.wraps[k]`` (see :func:`placement_call`).
#
# ``branch`` says on which arm of which ``if``/``try``/loop an event sits:
# ``"3:0"`` is the body of the scope's branch point 3, ``"3:1"`` its ``else``.
# Event A happens on every path through event B when A's branch list is a
# subset of B's.


@dataclass
class WrapEvent:
    """``DataParallel(...)`` / ``DistributedDataParallel(...)`` called."""

    index: int
    order: int
    wrapper: str
    #: dotted name the result is bound to (``model``, ``self.net``), else ""
    target: str = ""
    #: dotted target of the statement the call sits in, at any depth
    statement_target: str = ""
    #: source of the wrapped expression (first argument)
    wrapped: str = ""
    #: dotted name under the wrapped expression, placements stripped
    wrapped_name: str = ""
    #: class constructed when the wrapped expression is a constructor call
    wrapped_class: str = ""
    #: dotted names passed to that constructor (``Seq2Seq(enc, dec)``)
    wrapped_args: List[str] = field(default_factory=list)
    #: the wrapped expression is itself a wrapper call (``DP(DP(m))``)
    wrapped_is_wrap: bool = False
    #: ``device_map=`` of a call wrapped directly (``DP(from_pretrained(..., device_map="auto"))``)
    wrapped_device_map: str = ""
    #: device of a placement inside: ``DP(m.to(dev))`` ("" none; ``.cuda()``: "cuda")
    placed_inside: str = ""
    #: device of a placement chained on the result: ``DP(m).to(dev)``
    placed_after: str = ""
    device_ids: str = ""
    output_device: str = ""
    branch: List[str] = field(default_factory=list)
    in_loop: bool = False
    #: for a call of a wrap helper (``ScopeFacts.helper_wraps``): the callee
    #: as written (``maybe_parallel``, ``self.wrap``) and which call of that
    #: callee in the scope it is (0-based, in the order calls are left)
    helper: str = ""
    helper_call: int = -1


@dataclass
class WrapHelper:
    """A function that returns its parameter ``param`` (``param_name``)
    wrapped in ``wrapper``, on every path or only under a condition
    (``if torch.cuda.device_count() > 1: model = nn.DataParallel(model)`` /
    ``return model``). Functions that test whether the parameter is already
    wrapped (``isinstance``, ``hasattr``, ``.module``) are not helpers:
    calling them twice wraps once."""

    param: int
    param_name: str
    wrapper: str
    conditional: bool = False
    #: (index, name) of the other parameters the wrap's condition reads: a
    #: call passing ``False``/``None``/``0`` for one of them does not wrap
    condition_params: List[Tuple[int, str]] = field(default_factory=list)


@dataclass
class PlaceEvent:
    """``X.to(...)`` / ``X.cuda(...)`` called (on anything: models, tensors)."""

    index: int
    order: int
    method: str
    #: dotted name placed, or "" when it is not a plain name
    target: str = ""
    #: index of the wrap event when placed directly on a wrapper call
    on_wrap: int = -1
    #: source of the device argument ("" for ``.cuda()`` / ``.to(dtype=...)``)
    device: str = ""
    #: ``expr``: the whole statement is the call; ``assign``: ``X = <call>``
    #: rebinding the placed name; else ""
    statement: str = ""
    branch: List[str] = field(default_factory=list)
    in_loop: bool = False


@dataclass
class BindEvent:
    """A name (or ``self.x``) bound in the scope.

    kind: ``param``, ``wrap`` (to a wrapper call, ``wrap_index``), ``place``
    (to ``source.to(...)``), ``unwrap`` (``source.module``), ``construct``
    (an nn.Module constructor, ``value_class``), ``call`` (another call,
    ``call``), ``alias`` (``= source``), ``other``.
    """

    order: int
    target: str
    kind: str
    source: str = ""
    wrap_index: int = -1
    value_class: str = ""
    call: str = ""
    #: dotted names passed to the constructor or call
    args: List[str] = field(default_factory=list)
    #: device the value was placed on (``Encoder().to("cuda:1")``)
    placed: str = ""
    #: ``device_map=`` given to the call (``from_pretrained(..., device_map="auto")``)
    device_map: str = ""
    #: source of a ``torch.device(...)`` or string value (``device = torch.device("cuda:1")``)
    value: str = ""
    branch: List[str] = field(default_factory=list)
    in_loop: bool = False


@dataclass
class ScopeFacts:
    index: int
    #: qualified name: ``<module>``, ``main``, ``Trainer.setup``
    name: str
    #: the class when the scope is a method, else ""
    class_name: str = ""
    params: List[str] = field(default_factory=list)
    wraps: List[WrapEvent] = field(default_factory=list)
    placements: List[PlaceEvent] = field(default_factory=list)
    binds: List[BindEvent] = field(default_factory=list)
    #: expressions holding this process's rank usable as a CUDA index, best
    #: first (``local_rank``, ``args.local_rank``, a ``rank`` parameter, ...)
    rank_names: List[str] = field(default_factory=list)
    #: the function returns a wrapper around this parameter (index), else -1
    wraps_param: int = -1
    #: wrapper the function returns around its parameter
    wraps_param_with: str = ""
    #: the function calls ``torch.cuda.set_device``
    sets_cuda_device: bool = False
    #: the function (may) return a model it wrapped (wrapper qualified name)
    returns_wrapper: str = ""
    #: calls of this file's wrap helpers (``FileFacts.wrap_helpers``), as
    #: wrap events of the argument the helper wraps (``index`` counts these)
    helper_wraps: List[WrapEvent] = field(default_factory=list)

    def last_binding(self, name: str, before: int, branch: Sequence[str]) -> Optional[BindEvent]:
        """The latest binding of ``name`` before order ``before`` on a path
        that can reach an event on ``branch``; placements that rebind a name
        to itself (``model = model.to(dev)``) are skipped."""
        for b in reversed(self.binds):
            if b.order >= before or b.target != name:
                continue
            if not branches_compatible(b.branch, branch):
                continue
            if b.kind == "place" and b.source == name:
                continue
            return b
        return None

    def binds_between(self, name: str, start: int, end: int) -> List[BindEvent]:
        return [b for b in self.binds if b.target == name and start < b.order < end]


def branches_compatible(a: Sequence[str], b: Sequence[str]) -> bool:
    """Can one run pass through both branch positions?"""
    arms = {}
    for item in a:
        point, _, arm = item.partition(":")
        arms[point] = arm
    for item in b:
        point, _, arm = item.partition(":")
        if point in arms and arms[point] != arm:
            return False
    return True


def always_before(first: Sequence[str], then: Sequence[str]) -> bool:
    """Does every path through ``then`` pass through ``first`` (given
    ``first`` comes earlier)?"""
    return set(first) <= set(then)


def placement_call(call: cst.Call) -> Optional[Tuple[cst.BaseExpression, str, Optional[cst.BaseExpression]]]:
    """(owner, method, device node) for ``owner.to(...)`` / ``owner.cuda(...)``."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
        return None
    device: Optional[cst.BaseExpression] = None
    kw = keyword_arg(call, "device")
    if kw is not None:
        device = kw.value
    else:
        args = positional_args(call)
        if args:
            device = args[0].value
    return func.value, func.attr.value, device


def strip_placements(node: cst.BaseExpression) -> Tuple[cst.BaseExpression, str]:
    """``X.to(dev).cuda()`` -> (X, device code of the outermost placement)."""
    device = ""
    first = True
    while isinstance(node, cst.Call):
        p = placement_call(node)
        if p is None:
            break
        owner, method, dev = p
        if first:
            device = code_of(dev) if dev is not None else ("cuda" if method == "cuda" else "")
            first = False
        node = owner
    return node, device


_RANK_ATTRS = ("local_rank", "LOCAL_RANK")


class _ScriptCollector(cst.CSTVisitor):
    def __init__(self, facts: FileFacts) -> None:
        self.facts = facts
        self.out = ScriptFacts(facts)
        self.scopes: List[ScopeFacts] = []
        self.stack: List[ScopeFacts] = []
        self.names: List[str] = []
        self.class_names: List[Optional[str]] = []
        # per-scope walking state, saved on entering a nested def
        self.branch: List[str] = []
        self.loops = 0
        self.points = 0
        self.order = 0
        self.saved: List[Tuple[List[str], int, int, int]] = []
        self.try_ids: List[int] = []
        self.assign_target: Dict[int, str] = {}
        self.statement_targets: List[str] = []
        self.pending_after: Dict[int, str] = {}
        self.wrap_index_of: Dict[int, int] = {}
        self.statement_kind: Dict[int, str] = {}
        # for wrap helpers (filled into facts by ``_finish_wrap_helpers``):
        # returns (scope, returned name, order, branch, wrap index or -1),
        # ``if`` tests by (scope, branch point), scopes that test whether a
        # parameter is already wrapped, calls that may be helper calls
        self.returns: List[Tuple[int, str, int, List[str], int]] = []
        self.if_tests: Dict[Tuple[int, int], cst.BaseExpression] = {}
        self.guarded: Set[int] = set()
        self.call_counts: Dict[Tuple[int, str], int] = {}
        self.maybe_helper_calls: List[Tuple[int, str, int, cst.Call, WrapEvent]] = []

    # -- scopes ------------------------------------------------------------
    def _open(self, name: str, class_name: str, params: List[str]) -> ScopeFacts:
        scope = ScopeFacts(index=len(self.scopes), name=name, class_name=class_name, params=params)
        self.scopes.append(scope)
        self.stack.append(scope)
        self.saved.append((self.branch, self.loops, self.points, self.order))
        self.branch, self.loops, self.points, self.order = [], 0, 0, 0
        return scope

    def _close(self) -> None:
        self.stack.pop()
        self.branch, self.loops, self.points, self.order = self.saved.pop()

    @property
    def scope(self) -> ScopeFacts:
        return self.stack[-1]

    def _next(self) -> int:
        self.order += 1
        return self.order

    def visit_Module(self, node: cst.Module) -> None:
        self._open("<module>", "", [])

    def leave_Module(self, node: cst.Module) -> None:
        self._close()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.names.append(node.name.value)
        self.class_names.append(node.name.value)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.names.pop()
        self.class_names.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        # a method: the def sits directly in a class body
        class_name = self.class_names[-1] if self.class_names and self.class_names[-1] is not None else ""
        self.names.append(node.name.value)
        params = [p.name.value for p in list(node.params.posonly_params) + list(node.params.params) + list(node.params.kwonly_params)]
        scope = self._open(".".join(self.names), class_name, params)
        self.class_names.append(None)
        for p in params:
            scope.binds.append(BindEvent(order=self._next(), target=p, kind="param"))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.names.pop()
        self.class_names.pop()
        self._close()

    # -- branches ----------------------------------------------------------
    def _branch(self) -> List[str]:
        return [b for b in self.branch if b]

    def _point(self) -> int:
        self.points += 1
        return self.points

    def visit_If(self, node: cst.If) -> None:
        self.try_ids.append(self._point())
        self.if_tests[(self.scope.index, self.try_ids[-1])] = node.test

    def leave_If(self, node: cst.If) -> None:
        self.try_ids.pop()

    def visit_If_body(self, node: cst.If) -> None:
        # ``if __name__ == "__main__":`` always runs when the script runs
        self.branch.append("" if _is_main_guard(node.test) else f"{self.try_ids[-1]}:0")

    def leave_If_body(self, node: cst.If) -> None:
        self.branch.pop()

    def visit_If_orelse(self, node: cst.If) -> None:
        self.branch.append(f"{self.try_ids[-1]}:1")

    def leave_If_orelse(self, node: cst.If) -> None:
        self.branch.pop()

    def visit_Try(self, node: cst.Try) -> None:
        self.try_ids.append(self._point())

    def leave_Try(self, node: cst.Try) -> None:
        self.try_ids.pop()

    def visit_Try_body(self, node: cst.Try) -> None:
        self.branch.append(f"{self.try_ids[-1]}:0")

    def leave_Try_body(self, node: cst.Try) -> None:
        self.branch.pop()

    def visit_Try_orelse(self, node: cst.Try) -> None:
        self.branch.append(f"{self.try_ids[-1]}:0")

    def leave_Try_orelse(self, node: cst.Try) -> None:
        self.branch.pop()

    def visit_Try_handlers(self, node: cst.Try) -> None:
        self.branch.append(f"{self.try_ids[-1]}:1")

    def leave_Try_handlers(self, node: cst.Try) -> None:
        self.branch.pop()

    def _loop_body(self, node: Union[cst.For, cst.While]) -> None:
        self.try_ids.append(self._point())
        self.branch.append(f"{self.try_ids[-1]}:0")
        self.loops += 1

    def _loop_body_end(self) -> None:
        self.loops -= 1
        self.branch.pop()
        self.try_ids.pop()

    def visit_For_body(self, node: cst.For) -> None:
        self._loop_body(node)

    def leave_For_body(self, node: cst.For) -> None:
        self._loop_body_end()

    def visit_While_body(self, node: cst.While) -> None:
        self._loop_body(node)

    def leave_While_body(self, node: cst.While) -> None:
        self._loop_body_end()

    def visit_For(self, node: cst.For) -> None:
        for name in _target_names(node.target):
            self.scope.binds.append(self._bind(name, "other"))

    # -- statements --------------------------------------------------------
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) != 1:
            return
        small = node.body[0]
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            self.statement_kind[id(small.value)] = "expr"
        elif isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call):
            target = dotted_name(small.targets[0].target)
            p = placement_call(small.value)
            if target is not None and p is not None and dotted_name(p[0]) == target:
                self.statement_kind[id(small.value)] = "assign"

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if _env_read(t.target) == "CUDA_VISIBLE_DEVICES" and not (
                string_value(node.value) is not None or isinstance(node.value, cst.Integer)
            ):
                # ``= str(rank)``: each process sees its own GPU as cuda:0; a
                # constant (``= "0,1,2,3"``) gives every process the same GPUs
                self.out.sets_visible_devices = True
        target = dotted_name(node.targets[0].target) if len(node.targets) == 1 else None
        self.statement_targets.append(target or "")
        if target is not None:
            self._mark_value(node.value, target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        target = dotted_name(node.target)
        self.statement_targets.append(target or "")
        if target is not None and node.value is not None:
            self._mark_value(node.value, target)

    def _mark_value(self, value: cst.BaseExpression, target: str) -> None:
        node = value
        self.assign_target[id(node)] = target
        while isinstance(node, cst.Call) and placement_call(node) is not None:
            node = node.func.value  # type: ignore[attr-defined]
            self.assign_target[id(node)] = target

    def leave_Assign(self, node: cst.Assign) -> None:
        self.statement_targets.pop()
        for t in node.targets:
            if isinstance(t.target, (cst.Tuple, cst.List)):
                for name in _target_names(t.target):
                    self.scope.binds.append(self._bind(name, "other"))
                continue
            target = dotted_name(t.target)
            if target is not None:
                self.scope.binds.append(self._bind_value(target, node.value))

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.statement_targets.pop()
        target = dotted_name(node.target)
        if target is not None and node.value is not None:
            self.scope.binds.append(self._bind_value(target, node.value))

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        target = dotted_name(node.target)
        if target is not None:
            self.scope.binds.append(self._bind(target, "other"))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            for name in _target_names(node.asname.name):
                self.scope.binds.append(self._bind(name, "other"))

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is None or len(self.stack) < 2:
            return
        inner, _ = strip_placements(node.value)
        name = dotted_name(inner)
        if name is not None:
            for b in reversed(self.scope.binds):
                if b.target == name and not (b.kind == "place" and b.source == name):
                    if b.kind == "wrap":
                        self.scope.returns_wrapper = self.scope.wraps[b.wrap_index].wrapper
                    break
        if isinstance(inner, cst.Call):
            wrapper = self.facts.is_wrapper(inner.func)
            args = positional_args(inner)
            if wrapper:
                self.scope.returns_wrapper = wrapper
            if wrapper and args:
                wrapped, _ = strip_placements(args[0].value)
                name = dotted_name(wrapped)
                if name in self.scope.params:
                    self.scope.wraps_param = self.scope.params.index(name)
                    self.scope.wraps_param_with = wrapper

    def leave_Return(self, original_node: cst.Return) -> None:
        if original_node.value is None or len(self.stack) < 2:
            return
        inner, _ = strip_placements(original_node.value)
        if isinstance(inner, cst.IfExp):
            # ``return DataParallel(m) if multi_gpu else m``: each arm is a
            # return under the expression's test
            point = self._point()
            self.if_tests[(self.scope.index, point)] = inner.test
            for arm, value in ((0, inner.body), (1, inner.orelse)):
                self._note_return(value, self._branch() + [f"{point}:{arm}"])
            return
        self._note_return(inner, self._branch())

    def _note_return(self, value: cst.BaseExpression, branch: List[str]) -> None:
        inner, _ = strip_placements(value)
        wrap_index = self.wrap_index_of.get(id(inner), -1)
        name = dotted_name(inner) if wrap_index < 0 else ""
        if wrap_index >= 0 or name:
            self.returns.append((self.scope.index, name or "", self.order, branch, wrap_index))

    def _bind(self, target: str, kind: str, **kw) -> BindEvent:
        return BindEvent(order=self._next(), target=target, kind=kind, branch=self._branch(), in_loop=self.loops > 0, **kw)

    def _bind_value(self, target: str, value: cst.BaseExpression) -> BindEvent:
        inner, placed = strip_placements(value)
        rank = self._rank_value(value)
        if rank is None and "." not in target and "rank" in target.lower() and not is_number_literal(value):
            rank = 0 if "local" in target.lower() else 1
        if rank is not None and "." not in target:
            self._add_rank(target, rank)
        if isinstance(inner, cst.Call):
            if id(inner) in self.wrap_index_of:
                return self._bind(target, "wrap", wrap_index=self.wrap_index_of[id(inner)], placed=placed)
            args = _arg_names(inner)
            device_map = _device_map(inner)
            cls = self.facts.class_of_call(inner.func)
            if cls is not None and self.facts.is_module_class(cls):
                return self._bind(target, "construct", value_class=cls, args=args, placed=placed, device_map=device_map)
            value = code_of(inner) if cls == "torch.device" and not placed else ""
            return self._bind(target, "call", call=dotted_name(inner.func) or "", args=args, placed=placed, device_map=device_map, value=value)
        if string_value(value) is not None:
            return self._bind(target, "other", value=code_of(value))
        name = dotted_name(inner)
        if placed and name is not None:
            return self._bind(target, "place", source=name, placed=placed)
        if isinstance(inner, cst.Attribute) and inner.attr.value == "module":
            src = dotted_name(inner.value)
            if src is not None:
                return self._bind(target, "unwrap", source=src)
        if name is not None:
            return self._bind(target, "alias", source=name)
        return self._bind(target, "other")

    # -- calls -------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        p = placement_call(node)
        if p is not None and isinstance(p[0], cst.Call):
            dev = p[2]
            self.pending_after[id(p[0])] = code_of(dev) if dev is not None else ("cuda" if p[1] == "cuda" else "")
        if self.facts.qualify(node.func) == "torch.cuda.set_device":
            self.scope.sets_cuda_device = True
        if len(self.stack) > 1 and isinstance(node.func, cst.Name) and node.func.value in ("isinstance", "hasattr") and node.args:
            if dotted_name(node.args[0].value) in self.scope.params:
                self.guarded.add(self.scope.index)
        if self.facts.qualify(node.func) in ("torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"):
            args = positional_args(node)
            name = dotted_name(args[0].value) if args else None
            if name and name not in self.out.spawn_targets:
                self.out.spawn_targets.append(name)

    def leave_Call(self, node: cst.Call) -> None:
        scope = self.scope
        wrapper = self.facts.is_wrapper(node.func)
        if wrapper:
            ev = WrapEvent(
                index=len(scope.wraps), order=self._next(), wrapper=wrapper,
                target=self.assign_target.get(id(node), ""),
                statement_target=self.statement_targets[-1] if self.statement_targets else "",
                branch=self._branch(), in_loop=self.loops > 0,
                placed_after=self.pending_after.pop(id(node), ""),
            )
            args = positional_args(node)
            first = args[0].value if args else (keyword_arg(node, "module").value if keyword_arg(node, "module") else None)
            if first is not None:
                ev.wrapped = code_of(first)
                inner, ev.placed_inside = strip_placements(first)
                ev.wrapped_name = dotted_name(inner) or ""
                if isinstance(inner, cst.Call):
                    if self.facts.is_wrapper(inner.func):
                        ev.wrapped_is_wrap = True
                    else:
                        cls = self.facts.class_of_call(inner.func)
                        if cls is not None and self.facts.is_module_class(cls):
                            ev.wrapped_class = cls
                            ev.wrapped_args = _arg_names(inner)
                        ev.wrapped_device_map = _device_map(inner)
            ids = keyword_arg(node, "device_ids")
            if ids is None and len(args) > 1:
                ids = args[1]
            ev.device_ids = code_of(ids.value) if ids is not None else ""
            out = keyword_arg(node, "output_device")
            if out is None and len(args) > 2:
                out = args[2]
            ev.output_device = code_of(out.value) if out is not None else ""
            self.wrap_index_of[id(node)] = ev.index
            scope.wraps.append(ev)
            return
        self._count_call(node)
        p = placement_call(node)
        if p is not None:
            owner, method, dev = p
            ev2 = PlaceEvent(
                index=len(scope.placements), order=self._next(), method=method,
                target=dotted_name(owner) or "",
                on_wrap=self.wrap_index_of.get(id(owner), -1),
                device=code_of(dev) if dev is not None else "",
                statement=self.statement_kind.get(id(node), ""),
                branch=self._branch(), in_loop=self.loops > 0,
            )
            scope.placements.append(ev2)

    def _count_call(self, node: cst.Call) -> None:
        """Count the call per (scope, callee) as ``ScriptRule.calls_by_name``
        does, and keep a call that may be one of a wrap helper (a plain
        function, or a method through ``self``) for ``_finish_wrap_helpers``."""
        callee = dotted_name(node.func)
        if callee is None:
            return
        scope = self.scope
        k = self.call_counts.get((scope.index, callee), 0)
        self.call_counts[(scope.index, callee)] = k + 1
        head, dot, rest = callee.partition(".")
        if not node.args or (dot and ("." in rest or not (scope.class_name and scope.params and head == scope.params[0]))):
            return
        ev = WrapEvent(
            index=-1, order=self._next(), wrapper="",
            target=self.assign_target.get(id(node), ""),
            statement_target=self.statement_targets[-1] if self.statement_targets else "",
            branch=self._branch(), in_loop=self.loops > 0, helper=callee, helper_call=k,
        )
        self.maybe_helper_calls.append((scope.index, callee, k, node, ev))

    def _param_wrapped(self, scope: ScopeFacts, ev: WrapEvent) -> int:
        """Index of the parameter whose value ``ev`` wraps (through aliases
        and placements), else -1."""
        name, order, branch = ev.wrapped_name, ev.order, ev.branch
        for _ in range(8):
            if not name:
                return -1
            b = scope.last_binding(name, order, branch)
            if b is None:
                return -1
            if b.kind == "param":
                index = scope.params.index(b.target)
                return -1 if index == 0 and scope.class_name else index
            if b.kind not in ("alias", "place") or not b.source:
                return -1
            name, order, branch = b.source, b.order, b.branch
        return -1

    def _condition_params(self, scope: ScopeFacts, branch: Sequence[str], keep: str) -> List[Tuple[int, str]]:
        names: Set[str] = set()
        for item in branch:
            test = self.if_tests.get((scope.index, int(item.partition(":")[0])))
            if test is not None:
                names.update(free_names(test))
        first = 1 if scope.class_name else 0  # ``self.multi_gpu`` is no switch of the caller's
        return [(i, p) for i, p in enumerate(scope.params) if i >= first and p != keep and p in names]

    def _finish_wrap_helpers(self) -> None:
        """Fill ``facts.wrap_helpers`` and every scope's ``helper_wraps``."""
        helpers = self.out.wrap_helpers
        for si, name, order, branch, wrap_index in self.returns:
            scope = self.scopes[si]
            if si in self.guarded or not scope.params:
                continue
            if wrap_index < 0:
                b = scope.last_binding(name, order + 1, branch)
                for _ in range(8):
                    if b is None or b.kind != "alias" or not b.source:
                        break
                    b = scope.last_binding(b.source, b.order, b.branch)
                if b is None or b.kind != "wrap":
                    continue
                wrap_index = b.wrap_index
            ev = scope.wraps[wrap_index]
            param = self._param_wrapped(scope, ev)
            if param < 0:
                continue
            conditional = bool(ev.branch or branch)
            old = helpers.get(scope.name)
            if old is None or (old.conditional and not conditional):
                cond = self._condition_params(scope, list(ev.branch) + list(branch), scope.params[param])
                helpers[scope.name] = WrapHelper(param, scope.params[param], ev.wrapper, conditional, cond)
        if not helpers:
            return
        for si, callee, _k, node, ev in self.maybe_helper_calls:
            scope = self.scopes[si]
            shift = 1 if "." in callee else 0  # ``self.wrap(m)``: ``self`` is the first parameter
            helper = helpers.get(callee_name(scope, callee, helpers))
            if helper is None or any(a.star for a in node.args):
                continue
            args = positional_args(node)
            index = helper.param - shift
            arg = args[index] if 0 <= index < len(args) else keyword_arg(node, helper.param_name)
            if arg is None:
                continue
            switches = [
                args[i - shift] if 0 <= i - shift < len(args) else keyword_arg(node, p)
                for i, p in helper.condition_params
            ]
            if any(a is not None and _is_off(a.value) for a in switches):
                continue  # ``maybe_wrap(m, parallel=False)``
            ev.index = len(scope.helper_wraps)
            ev.wrapper = helper.wrapper
            ev.wrapped = code_of(arg.value)
            inner, ev.placed_inside = strip_placements(arg.value)
            ev.wrapped_name = dotted_name(inner) or ""
            if isinstance(inner, cst.Call) and not self.facts.is_wrapper(inner.func):
                cls = self.facts.class_of_call(inner.func)
                if cls is not None and self.facts.is_module_class(cls):
                    ev.wrapped_class = cls
                    ev.wrapped_args = _arg_names(inner)
                ev.wrapped_device_map = _device_map(inner)
            scope.helper_wraps.append(ev)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "module" and len(self.stack) > 1 and dotted_name(node.value) in self.scope.params:
            self.guarded.add(self.scope.index)
        # ``args.local_rank`` read in the scope: usable as the rank
        if node.attr.value in _RANK_ATTRS and dotted_name(node.value) is not None:
            self._add_rank(code_of(node), 0)

    # -- ranks -------------------------------------------------------------
    def _rank_value(self, value: cst.BaseExpression) -> Optional[int]:
        """0: a local rank; 2: a global rank; None: not a rank."""
        if isinstance(value, cst.Call):
            q = self.facts.qualify(value.func)
            if q in ("torch.distributed.get_node_local_rank",):
                return 0
            if q in ("torch.distributed.get_rank",):
                return 2
            if dotted_name(value.func) == "int" and value.args:
                env = _env_read(value.args[0].value)
                if env == "LOCAL_RANK":
                    return 0
                if env == "RANK":
                    return 2
        if isinstance(value, cst.Attribute) and value.attr.value in _RANK_ATTRS:
            return 0
        return None

    def _add_rank(self, name: str, priority: int) -> None:
        ranks = self.scope.rank_names
        if name not in ranks:
            ranks.append(name)
            self._rank_priority[(self.scope.index, name)] = priority

    _rank_priority: Dict[Tuple[int, str], float]

    def finish(self) -> None:
        for scope in self.scopes:
            for p in scope.params:
                if "local_rank" in p.lower():
                    self._rank_priority[(scope.index, p)] = 0
                elif "rank" in p.lower():
                    self._rank_priority[(scope.index, p)] = 1
                else:
                    continue
                if p not in scope.rank_names:
                    scope.rank_names.append(p)
            if scope.name in self.out.spawn_targets and scope.params and scope.params[0] not in scope.rank_names:
                scope.rank_names.append(scope.params[0])
            if scope.name in self.out.spawn_targets and scope.params:
                # mp.spawn passes the process index on this node: a local rank
                self._rank_priority[(scope.index, scope.params[0])] = 0
        # ``self.local_rank = ...`` in one method is the rank in the others
        class_ranks: Dict[str, List[Tuple[str, int]]] = {}
        for scope in self.scopes:
            if not scope.class_name or not scope.params:
                continue
            me = scope.params[0] + "."
            for b in scope.binds:
                attr = b.target[len(me):] if b.target.startswith(me) else ""
                if attr and "." not in attr and "rank" in attr.lower() and b.kind != "param":
                    entry = (attr, 0 if "local" in attr.lower() else 1)
                    if entry not in class_ranks.setdefault(scope.class_name, []):
                        class_ranks[scope.class_name].append(entry)
        for scope in self.scopes:
            for attr, priority in class_ranks.get(scope.class_name, []) if scope.params else []:
                name = f"{scope.params[0]}.{attr}"
                if name not in scope.rank_names:
                    scope.rank_names.append(name)
                    self._rank_priority[(scope.index, name)] = priority + 0.5
            scope.rank_names.sort(key=lambda n: self._rank_priority.get((scope.index, n), 3))
        self._finish_wrap_helpers()
        # which module classes hold wrappers (set in a method or a helper)
        for scope in self.scopes:
            cls = self.facts.classes.get(scope.class_name)
            if cls is None or not cls.is_module or not scope.params:
                continue
            me = scope.params[0] + "."
            for w in scope.wraps:
                t = w.statement_target
                if t.startswith(me) and "." not in t[len(me):]:
                    self.out.inner_wrappers.setdefault(cls.name, {}).setdefault(t[len(me):], w.wrapper)
            for b in scope.binds:
                if b.kind == "call" and b.call.startswith(me) and b.target.startswith(me):
                    helper = self.out.scope_named(f"{scope.class_name}.{b.call[len(me):]}")
                    if helper is not None and helper.wraps_param >= 0:
                        self.out.inner_wrappers.setdefault(cls.name, {}).setdefault(b.target[len(me):], helper.wraps_param_with)
            # ``self.x = wrap(X())`` through a wrap helper of the file
            for ev in scope.helper_wraps:
                t = ev.statement_target
                if t.startswith(me) and "." not in t[len(me):]:
                    self.out.inner_wrappers.setdefault(cls.name, {}).setdefault(t[len(me):], ev.wrapper)


def callee_name(scope: "ScopeFacts", call: str, defined: Container[str]) -> str:
    """The scope name of the function a call in ``scope`` runs: a method
    through the instance (``self.wrap(...)`` in ``Trainer.fit``:
    ``Trainer.wrap``), a function defined inside the calling one (``wrap(m)``
    in ``main``, with ``main.wrap`` in ``defined``), else the callee as
    written."""
    if "." in call:
        if scope.class_name and scope.params and call.startswith(scope.params[0] + "."):
            return f"{scope.class_name}.{call.split('.', 1)[1]}"
        return call
    if scope.name != "<module>" and f"{scope.name}.{call}" in defined:
        return f"{scope.name}.{call}"
    return call


def _is_off(node: cst.BaseExpression) -> bool:
    """``False``, ``None``, ``0``: a switch turned off."""
    return (isinstance(node, cst.Name) and node.value in ("False", "None")) or (
        isinstance(node, cst.Integer) and node.value == "0"
    )


def with_keyword_arg(
    args: Sequence[cst.Arg], name: str, value: cst.BaseExpression, at: Optional[int] = None
) -> List[cst.Arg]:
    """``args`` with ``name=value`` inserted at ``at`` (default: the end),
    keeping the layout: a trailing comma stays trailing."""
    out = list(args)
    at = len(out) if at is None else at
    new = cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if at == 0:
        if out:
            new = new.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    else:
        prev = out[at - 1]
        if isinstance(prev.comma, cst.Comma):
            new = new.with_changes(comma=prev.comma)
        else:
            out[at - 1] = prev.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    out.insert(at, new)
    return out


def free_names(node: cst.CSTNode) -> Set[str]:
    """The plain names an expression reads (or a target binds): ``args`` of
    ``args.gpu``, ``local_rank`` of ``f"cuda:{local_rank}"``; not attribute
    names nor the keywords of call arguments."""
    found: Set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            walk(n.value, self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            walk(n.value, self)
            return False

    walk(node, _Find())
    return found


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    left, right = test.left, test.comparisons[0].comparator
    names = {dotted_name(left), dotted_name(right)}
    return isinstance(test.comparisons[0].operator, cst.Equal) and "__name__" in names and (
        string_value(left) == "__main__" or string_value(right) == "__main__"
    )


def _env_read(node: cst.BaseExpression) -> Optional[str]:
    """``"LOCAL_RANK"`` for ``os.environ["LOCAL_RANK"]``, ``os.environ.get(...)``,
    ``os.getenv(...)``."""
    if isinstance(node, cst.Subscript) and node.slice:
        el = node.slice[0].slice
        if isinstance(el, cst.Index) and (dotted_name(node.value) or "").endswith("environ"):
            return string_value(el.value)
    if isinstance(node, cst.Call) and node.args:
        name = dotted_name(node.func) or ""
        if name.endswith("environ.get") or name.endswith("getenv"):
            return string_value(node.args[0].value)
    return None


#: ``device_map=`` strings with which accelerate spreads a model over devices
_SPREADING_DEVICE_MAPS = frozenset({"auto", "balanced", "balanced_low_0", "sequential"})


def _device_map(call: cst.Call) -> str:
    """The ``device_map=`` of a call when it may split the model over
    devices, else "". A map onto one device (``"cuda:0"``, ``0``,
    ``torch.device(...)``, ``{"": local_rank}``, a dict whose values are all
    the same, a ``device``/``local_rank`` variable) places the whole model
    like ``.to()``: the QLoRA-under-DDP recipe
    (``device_map={"": PartialState().process_index}``) is one process, one GPU."""
    dm = keyword_arg(call, "device_map")
    if dm is None or (isinstance(dm.value, cst.Name) and dm.value.value == "None"):
        return ""
    value = dm.value
    text = string_value(value)
    if text is not None:
        return code_of(value) if text in _SPREADING_DEVICE_MAPS else ""
    if isinstance(value, cst.Integer) or (isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("device")):
        return ""
    if isinstance(value, cst.FormattedString):
        head = value.parts[0] if value.parts else None
        text = head.value if isinstance(head, cst.FormattedStringText) else ""
        return "" if text.startswith(("cuda", "cpu", "mps", "xpu", "npu")) else code_of(value)
    if isinstance(value, cst.Dict):
        targets = {code_of(e.value) for e in value.elements if isinstance(e, cst.DictElement)}
        keys = [string_value(e.key) for e in value.elements if isinstance(e, cst.DictElement)]
        if len(targets) == 1 and len(keys) == len(value.elements) and (keys == [""] or None not in keys):
            return ""
        return code_of(value)
    last = (dotted_name(value) or "").rsplit(".", 1)[-1].lower()
    if last and (_is_device_name(last) or last in _RANK_NAMES or last in ("process_index", "local_process_index")):
        return ""
    return code_of(value)


def _target_names(node: cst.BaseExpression) -> List[str]:
    if isinstance(node, (cst.Tuple, cst.List)):
        out: List[str] = []
        for el in node.elements:
            out += _target_names(el.value)
        return out
    name = dotted_name(node)
    return [name] if name is not None else []


def _arg_names(call: cst.Call) -> List[str]:
    out = []
    for a in call.args:
        inner, _ = strip_placements(a.value)
        name = dotted_name(inner)
        if name is not None:
            out.append(name)
    return out


def collect_script_facts(module: cst.Module, facts: FileFacts) -> "ScriptFacts":
    """The script facts of one file (see :class:`ScriptFacts`)."""
    collector = _ScriptCollector(facts)
    collector._rank_priority = {}
    walk(module, collector)
    collector.out.scopes = collector.scopes
    collector.finish()
    return collector.out


@dataclass
class ScriptFacts:
    """How models are built, wrapped and placed in each function of a file."""

    facts: FileFacts
    #: script facts per function scope (index 0: module level), in the order
    #: a pre-order walk meets the ``def`` statements (see :class:`ScopeFacts`)
    scopes: List[ScopeFacts] = field(default_factory=list)
    #: functions started once per process by ``mp.spawn(fn, ...)`` (their
    #: first parameter is the process index)
    spawn_targets: List[str] = field(default_factory=list)
    #: the file assigns ``os.environ["CUDA_VISIBLE_DEVICES"]`` a value that is
    #: not a constant (``str(rank)``: each process its own GPU)
    sets_visible_devices: bool = False
    #: functions of this file that return one of their parameters wrapped in
    #: DataParallel/DDP, possibly under a condition (scope name, e.g.
    #: ``maybe_parallel`` or ``Trainer.wrap`` -> :class:`WrapHelper`)
    wrap_helpers: Dict[str, WrapHelper] = field(default_factory=dict)
    #: module class -> its submodule attributes that hold a DataParallel/DDP
    #: wrapper, set in ``__init__`` or a helper method (attribute -> wrapper)
    inner_wrappers: Dict[str, Dict[str, str]] = field(default_factory=dict)

    def scope_named(self, name: str) -> Optional[ScopeFacts]:
        for scope in self.scopes:
            if scope.name == name:
                return scope
        return None

    def callee_scope(self, scope: ScopeFacts, call: str) -> Optional[ScopeFacts]:
        """The function of this file that ``call`` (a callee as written) runs
        when called from ``scope``, or None: see :func:`callee_name`."""
        return self.scope_named(callee_name(scope, call, {s.name for s in self.scopes}))

    def never_replicated(self, cls: ClassFacts) -> bool:
        """Whether ``cls``'s own ``forward`` can never run inside a
        DataParallel replica, where ``parameters()`` is empty and a device
        fixed outside the call is not the replica's: it pins its parts to
        devices (model parallelism: wrapping it is DL004's bug), it is a
        DataParallel/DDP subclass (its ``forward`` scatters and gathers on the
        main device), or it holds a DataParallel/DDP wrapper as a submodule
        (it is the outer model: replicating it would nest wrappers, DL003)."""
        if cls.pinned_devices():
            return True
        facts = self.facts
        if any(n not in facts.classes and canonical(n) in WRAPPERS for n in facts.lineage(cls.name)):
            return True
        return bool(self.inner_wrappers.get(cls.name))

    def to_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "facts"}


class Scripts(Provider):
    """:class:`ScriptFacts`: one walk of the whole file."""

    requires = (Classes,)

    @classmethod
    def build(cls, store: FactStore) -> ScriptFacts:
        return collect_script_facts(store.module, store[Classes])
