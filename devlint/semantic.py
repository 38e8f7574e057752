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
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

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


def is_cuda_string(value: Optional[str]) -> bool:
    return value is not None and (value == "cuda" or value.startswith("cuda:"))


# --------------------------------------------------------------------------
# the facts


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


@dataclass
class FunctionFacts:
    name: str
    params: List[str]
    #: parameters known or guessed to hold tensors, in order of preference
    tensor_params: List[str] = field(default_factory=list)
    #: ``self.<m>(...)`` calls made in the body
    self_calls: List[str] = field(default_factory=list)
    is_property: bool = False
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
    #: a call with ``device=``) or only inspected (``.shape``, ``.size()``, ``.dtype``, ``len()``)
    forward_reads: List[str] = field(default_factory=list)
    #: attributes assigned when ``forward`` runs (``self.cache = ...``)
    forward_writes: List[str] = field(default_factory=list)
    #: names assigned in the class body (class attributes)
    class_attributes: List[str] = field(default_factory=list)

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

    def pinned_devices(self) -> Dict[str, str]:
        """Submodule attribute -> the device expression it was pinned to."""
        out = {n: a.device for n, a in self.attributes.items() if a.kind == "module" and a.device}
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

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


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


class _NameUses(cst.CSTVisitor):
    """Collects, for a function body: ``p.<attr>`` uses of names and
    ``self.<m>(...)`` calls."""

    def __init__(self, self_name: str, method_names: Set[str]) -> None:
        self.self_name = self_name
        self.method_names = method_names
        self.attr_uses: Dict[str, Set[str]] = {}
        self.self_calls: List[str] = []
        self.args_of_self_calls: Set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name):
            self.attr_uses.setdefault(node.value.value, set()).add(node.attr.value)

    def visit_Call(self, node: cst.Call) -> None:
        attr = self_attribute(node.func, self.self_name)
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


def _function_facts(fn: cst.FunctionDef, is_method: bool, method_names: Set[str] = frozenset()) -> FunctionFacts:
    params = [p.name.value for p in fn.params.params]
    params += [p.name.value for p in fn.params.posonly_params]
    params += [p.name.value for p in fn.params.kwonly_params]
    self_name = params[0] if is_method and params else "self"
    uses = _NameUses(self_name, set(method_names))
    fn.body.visit(uses)
    tensor_params: List[str] = []
    all_params = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
    if is_method:
        all_params = all_params[1:] if all_params else []
    for i, p in enumerate(all_params):
        name = p.name.value
        ann = _annotation_code(p)
        if ann is not None:
            if "Tensor" in ann and "Optional" not in ann and "None" not in ann:
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
    # a tensor parameter without a default is always bound; prefer those
    defaults = {p.name.value for p in all_params if p.default is not None}
    tensor_params.sort(key=lambda n: n in defaults)
    is_property = any(
        dotted_name(d.decorator) in ("property", "functools.cached_property", "cached_property")
        for d in fn.decorators
    )
    line = 0
    return FunctionFacts(
        name=fn.name.value,
        params=params,
        tensor_params=tensor_params,
        self_calls=uses.self_calls,
        is_property=is_property,
        line=line,
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
        self._finish_forward_uses()
        return self.facts

    def _walk_statements(self, body: Sequence[cst.CSTNode], top_level: bool) -> None:
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine):
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
                self._walk_statements(_body_of(stmt), top_level=False)
            elif isinstance(stmt, (cst.If, cst.Try, cst.With, cst.For, cst.While, cst.TryStar)):
                for block in _blocks_of(stmt):
                    self._walk_statements(block, top_level)

    def _module_assign(self, node: Union[cst.Assign, cst.AnnAssign]) -> None:
        value = node.value
        if value is None:
            return
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        if self._is_fixed_device(value, params=()):
            for t in targets:
                if isinstance(t, cst.Name):
                    self.facts.module_devices[t.value] = code_of(value)

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
        method_names = {s.name.value for s in _body_of(node) if isinstance(s, cst.FunctionDef)}
        for stmt in _body_of(node):
            if isinstance(stmt, cst.FunctionDef):
                fn = _function_facts(stmt, is_method=True, method_names=method_names)
                cls.methods[fn.name] = fn
                if fn.name == "device":
                    cls.defines_device = True
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, (cst.Assign, cst.AnnAssign)):
                        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                        if any(isinstance(t, cst.Name) and t.value == "device" for t in targets):
                            cls.defines_device = True
                        if not (isinstance(small, cst.AnnAssign) and small.value is None):
                            cls.class_attributes.extend(t.value for t in targets if isinstance(t, cst.Name))
                    elif isinstance(small, (cst.Import, cst.ImportFrom)):
                        pass

    _class_nodes: Dict[str, cst.ClassDef]
    #: class -> module-container attributes whose modules are registered another way
    _registered_attrs: Dict[str, Set[str]]

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
        reach: List[str] = []
        todo = [m for m in ("forward",) if m in cls.methods]
        while todo:
            m = todo.pop()
            if m in reach:
                continue
            reach.append(m)
            for callee in cls.methods[m].self_calls:
                if callee in cls.methods and callee not in reach:
                    todo.append(callee)
        cls.forward_reachable = reach
        # attributes
        node = self._class_nodes[cls.name]
        for stmt in _body_of(node):
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value != "forward":
                self._method_attributes(cls, stmt)
        registered = self._registered_attrs.get(cls.name, set())
        for record in cls.assignments:
            if record.kind == "module_container" and record.name in registered:
                record.registered_elsewhere = True

    def _effective_methods(self, cls: ClassFacts, seen: Set[str]) -> Dict[str, Tuple[ClassFacts, cst.FunctionDef]]:
        """Method name -> (defining class, node), local base classes included."""
        out: Dict[str, Tuple[ClassFacts, cst.FunctionDef]] = {}
        if cls.name in seen:
            return out
        seen = seen | {cls.name}
        for base in reversed(cls.bases):
            if base in self.facts.classes and base in self._class_nodes:
                out.update(self._effective_methods(self.facts.classes[base], seen))
        for stmt in _body_of(self._class_nodes[cls.name]):
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
            fn.body.visit(uses)
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

    def _method_attributes(self, cls: ClassFacts, fn: cst.FunctionDef) -> None:
        params = [p.name.value for p in fn.params.params]
        self_name = params[0] if params else "self"
        scalars = [p.name.value for p in fn.params.params + fn.params.kwonly_params if _is_number_param(p)]
        collector = _AttributeCollector(self, cls, fn.name.value, self_name, params, scalars)
        fn.body.visit(collector)
        collector.finish()

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
                    return "nn_container", cls_name, "", elem
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
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.Dict, cst.DictComp)):
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
        elif isinstance(node, cst.ListComp):
            elements = [node.elt]
        elif isinstance(node, cst.Dict):
            elements = [e.value for e in node.elements if isinstance(e, cst.DictElement)]
        elif isinstance(node, cst.DictComp):
            elements = [node.value]
        elif isinstance(node, cst.Call) and dotted_name(node.func) in ("list", "tuple", "dict"):
            return self._element_class(node.args[0].value) if node.args else ""
        classes = set()
        for e in elements:
            inner, _, _ = _strip_placement(e)
            if not isinstance(inner, cst.Call):
                return ""
            c = self.facts.class_of_call(inner.func)
            if c is None or not self.facts.is_module_class(c):
                return ""
            classes.add(c)
        if len(classes) == 1:
            return classes.pop()
        return "torch.nn.Module" if classes else ""

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


def _is_string_key(node: cst.BaseExpression) -> bool:
    if string_value(node) is not None or isinstance(node, cst.FormattedString):
        return True
    return isinstance(node, cst.Call) and dotted_name(node.func) == "str"


def _dict_has_str_keys(node: cst.BaseExpression) -> bool:
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

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_For(self, node: cst.For) -> None:
        it = node.iter
        var: Optional[cst.BaseExpression] = node.target
        # for i, b in enumerate(self.blocks)
        if isinstance(it, cst.Call) and dotted_name(it.func) == "enumerate" and it.args:
            it = it.args[0].value
            var = node.target.elements[1].value if isinstance(node.target, cst.Tuple) and len(node.target.elements) == 2 else None
        if not isinstance(var, cst.Name):
            return
        attr = self_attribute(it, self.self_name)
        if attr:
            self.loop_vars[var.value] = attr
        elif isinstance(it, cst.Name) and it.value in self.local_lists:
            self.list_loop_vars[var.value] = it.value

    def _record(self, target: cst.BaseExpression, value: cst.BaseExpression, line_node: cst.CSTNode) -> None:
        name = self_attribute(target, self.self_name)
        if name is None:
            if isinstance(target, cst.Name):
                self._bind_local(target.value, value)
            elif isinstance(target, cst.Subscript):
                self._subscript_store(target, value)
            return
        if isinstance(value, cst.Name) and value.value in self.local_modules:
            self.registered_locals.add(value.value)
        kind, mclass, device, elem = self.b.classify_value(value, self.params, self.local_tensors)
        record = AttributeFacts(
            name=name, kind=kind, method=self.method, line=0, value=code_of(value),
            module_class=mclass, device=device, element_class=elem,
        )
        if kind == "tensor":
            record.scalar = self.b.is_scalar_tensor(value, self.scalar_names)
        record.container = _container_type(value)
        if record.container == "dict":
            record.str_keys = _dict_has_str_keys(value)
        if isinstance(value, cst.Name) and value.value in self.local_lists:
            local = self.local_lists[value.value]
            record.container = local.container
            self.pending.append((record, local))
        self.cls.assignments.append(record)
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
        return "", None

    def _add_elements(self, owner: cst.BaseExpression, elem: str, local: Optional[str], key: Optional[cst.BaseExpression] = None) -> None:
        if not elem:
            return
        attr = self_attribute(owner, self.self_name)
        if attr is not None:
            record = self.cls.attributes.get(attr)
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
            if isinstance(target, cst.Subscript):
                target = target.value
            name = self_attribute(target, self.self_name)
            if name is None and isinstance(target, cst.Name):
                name = self.loop_vars.get(target.value)
            if name is not None:
                self.cls.placed_attributes[name] = dev

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
#: calls that place their receiver on the computation's device
_MOVE_METHODS = frozenset({"to", "cuda", "type_as"})
_MOVE_CHAIN = frozenset(
    {"unsqueeze", "squeeze", "view", "reshape", "expand", "expand_as", "repeat", "float", "long", "int", "half",
     "double", "bool", "t", "transpose", "permute", "flatten", "contiguous", "clone", "detach", "unfold", "flip"}
)


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
            if self_attribute(node, self.self_name) is not None:
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
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            if attr in _MOVE_METHODS and not _is_dtype_only(node):
                self._quiet_chain(func.value)
            if attr == "new_tensor":
                for a in node.args:
                    self._quiet_chain(a.value)
        if dotted_name(func) in ("len", "isinstance") or keyword_arg(node, "device") is not None:
            for a in node.args:
                self._quiet_chain(a.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in _INSPECT_ATTRS and self_attribute(node.value, self.self_name) is not None:
            self._quiet.add(id(node.value))
        name = self_attribute(node, self.self_name)
        if name is None or id(node) in self._stores:
            return
        self.loaded.add(name)
        if id(node) not in self._quiet:
            self.reads.add(name)


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


def _body_of(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    body = getattr(node, "body", None)
    if isinstance(body, (cst.IndentedBlock,)):
        return body.body
    if isinstance(body, cst.SimpleStatementSuite):
        return ()
    return ()


def _blocks_of(node: cst.CSTNode) -> List[Sequence[cst.CSTNode]]:
    blocks = [_body_of(node)]
    if isinstance(node, (cst.Try, cst.TryStar)):
        blocks += [_body_of(h) for h in node.handlers]
        if node.orelse is not None:
            blocks.append(_body_of(node.orelse))
        if node.finalbody is not None:
            blocks.append(_body_of(node.finalbody))
    elif isinstance(node, (cst.If,)):
        orelse = node.orelse
        while orelse is not None:
            blocks.append(_body_of(orelse))
            orelse = getattr(orelse, "orelse", None) if isinstance(orelse, cst.If) else None
    elif isinstance(node, (cst.For, cst.While)) and node.orelse is not None:
        blocks.append(_body_of(node.orelse))
    return blocks


def build_facts(module: cst.Module) -> FileFacts:
    """Compute the shared facts of one parsed file."""
    builder = _FactsBuilder(module)
    builder._class_nodes = {}
    builder._registered_attrs = {}
    return builder.build()
