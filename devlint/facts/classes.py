"""The ``Classes`` provider: per-file facts about imports, module-level
devices and classes, computed once per parse.

The facts are a plain, serialisable record (:class:`FileFacts`): names and
source snippets, never libcst nodes, so that a cross-file index can cache and
merge them. Name resolution is a light import-alias table (one pass over
``import`` statements), not libcst's scope analysis, which costs about seven
times the parse itself (``shared/bench/BASELINE.md``).

For each class: its bases, whether it is an ``nn.Module``, its methods
(parameters, the tensor parameters guessed from their use, what each calls on
``self``), what ``forward`` reaches, every ``self.<name> = ...`` with what it
holds (:class:`AttributeFacts`), the parameters, buffers and submodules
placed on devices, the attributes the code run by ``forward`` reads and
writes, and a path to a tensor the instance holds (a device anchor).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from devlint.facts.store import FactStore, Provider
from devlint.syntax import (
    LINES,
    reads_own_weights_device,
    annotates_tensor,
    is_device_name,
    _strip_placement,
    _uses_name,
    blocks,
    bound_parameters,
    calls_in,
    code_of,
    dotted_name,
    dynamic_self_attribute,
    is_cuda_string,
    is_number_literal,
    keyword_arg,
    param_names,
    positional_args,
    self_attribute,
    statements,
    string_value,
)
from devlint.torch_api import (
    INIT_METHODS,
    FUNCTOOLS_WRAPPERS,
    COMPLEX_DTYPES,
    COMPLEX_MAKERS,
    COMPLEX_PRESERVING,
    DISTRIBUTED_DATA_PARALLEL,
    FFT_REAL_RESULTS,
    FFT_SAME_DTYPE,
    KNOWN_MODULE_BASES,
    MODULE_CONTAINERS,
    STATELESS_MODULES,
    TENSOR_FACTORIES,
    layer_parameter,
    MODEL_FACTORY_METHODS,
    WRAPPERS,
    is_auto_model_class,
    _DTYPE_NAMES,
    _ELEMENTWISE,
    _LEGACY_TENSOR_CONSTRUCTORS,
    _NOT_FACTORIES,
    _NOT_ONE_TENSOR,
    _NOT_TENSOR_METHODS,
    _WEIGHTED_LOSSES,
    _is_torch_module_name,
    canonical,
)
from devlint.walk import walk
from devlint.project.names import absolute

if TYPE_CHECKING:  # pragma: no cover
    from devlint.project.index import ProjectContext, ProjectIndex


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
    #: ``torch.Generator()`` with no device (a ``manual_seed`` chained on it
    #: returns the generator): a CPU generator, which no ``.to()`` moves
    cpu_generator: bool = False
    #: for devices: read off the module's own weights
    #: (``next(self.parameters()).device``), while ``__init__`` builds it
    weights_device: bool = False
    #: for tensors: the argument of the method itself (``self.bounds =
    #: bounds`` with ``bounds: Optional[Tensor]``), which a caller may pass
    #: as an ``nn.Parameter`` (assigning one registers it)
    argument: bool = False
    #: for module containers: the same modules are also registered another way
    #: (``nn.Sequential(*layers)``, ``self.add_module(...)``, ``setattr(self, ...)``)
    registered_elsewhere: bool = False
    #: for module containers and devices: a method other than the one that
    #: builds the container (sets the device) reads it, of the class or of a
    #: subclass in the file; one only its builder reads is used while the
    #: module is built, never after
    read_after_build: bool = True
    #: for module containers written as a literal: every element is a
    #: ``torch.nn`` module with no parameters, buffers or train/eval
    #: behaviour (a loss without ``weight=``/``pos_weight=``, ``nn.ReLU()``)
    stateless_elements: bool = False
    #: holds a list or tuple: a display or comprehension (``(0.5, 1.0, 2.0)``,
    #: ``list(ratios)``) or an argument whose default is one
    #: (``self.ratios = ratios`` with ``ratios=(0.5, 1.0, 2.0)``), so
    #: ``torch.tensor(self.ratios)`` has dimensions
    sequence: bool = False
    #: for a dict of settings that holds some tensors among other values
    #: (``dict(n_fft=512, window=torch.hann_window(512))``): the keys holding
    #: tensors (empty when every value is one)
    tensor_keys: List[str] = field(default_factory=list)
    #: holds an argument whose default is a torch factory
    #: (``window_fn=torch.hann_window`` stored as ``self.window_fn``): calling
    #: it without ``device=`` creates a tensor on the CPU, as the factory does
    factory: str = ""
    #: for tensors: holds complex numbers (``torch.polar(...)``,
    #: ``dtype=torch.cfloat``, a ``torch.fft`` result, ``torch.exp(1j * w)``):
    #: as a buffer, ``module.to(torch.bfloat16)`` casts it to a real dtype and
    #: drops the imaginary part (``.half()`` casts only floating tensors)
    complex: bool = False
    #: for a module held inside a ``functools`` wrapper, which is no
    #: ``nn.Module`` (``lru_cache(maxsize=8)(network)``, ``partial(net, k=3)``):
    #: the wrapper's qualified name
    wrapper: str = ""


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
    #: a @classmethod every ``return`` of which gives an instance of the class
    #: it is called on (``return cls(config)``, or a local bound only to
    #: ``cls(...)``): ``Block.from_config(c)`` builds a ``Block``
    constructs: bool = False


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
    #: the submodules ``forward`` hands one of its parameters as it came in
    #: (``self.wte(input_ids)``: a token table looks up the inputs)
    input_parts: List[str] = field(default_factory=list)
    #: the methods that pin a submodule to a device (``__init__``, a
    #: ``parallelize()`` the user calls)
    pinning_methods: Set[str] = field(default_factory=set)
    #: a class a ``device_map`` may split whose own pins are all in a method
    #: other than ``__init__`` (transformers' deprecated ``parallelize()``):
    #: the map's placement is the one to check, the pins do not apply there
    pins_optional: bool = False
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
    #: attributes read by the module's other public methods, which its
    #: users call on the model wherever it is (``model.compute_loss(logits,
    #: labels)``, ``model.sample(n)``), and what they call on ``self``:
    #: attribute -> the first such method reading it
    entry_reads: Dict[str, str] = field(default_factory=dict)
    #: attributes assigned when ``forward`` runs (``self.cache = ...``)
    forward_writes: List[str] = field(default_factory=list)
    #: ... of them, those written in a way the device flow does not follow:
    #: into an item (``self.grids[i] = ...``) or augmented (``self.t += x``)
    forward_opaque_writes: List[str] = field(default_factory=list)
    #: names assigned in the class body (class attributes)
    class_attributes: List[str] = field(default_factory=list)
    #: fields the class body annotates as one tensor (a model-output
    #: dataclass: ``logits: Optional[torch.FloatTensor] = None``)
    tensor_fields: List[str] = field(default_factory=list)
    #: tensors the class body makes (``class_alpha = torch.tensor([...])``):
    #: class attributes, shared by every instance and replica, that no
    #: ``.to()`` moves (read as ``self.class_alpha`` where no method assigns it)
    class_tensors: Dict[str, "AttributeFacts"] = field(default_factory=dict)
    #: container attribute -> the device expressions its elements were placed
    #: on, one per placement site (``for i, b in enumerate(self.blocks):
    #: b.to(devices[i % n])``, ``nn.ModuleList([B().to(d0), B().to(d1)])``)
    element_placements: Dict[str, List[str]] = field(default_factory=dict)
    #: container attribute -> the index variable an element placement
    #: expression uses (``i`` above), when it uses one
    element_index: Dict[str, str] = field(default_factory=dict)
    #: every ``self.<name>`` assigned in any method, ``forward`` included
    self_assigned: List[str] = field(default_factory=list)
    #: for a class that is no module: what methods other than ``__init__``
    #: assign on ``self``
    assigned_after_init: List[str] = field(default_factory=list)
    #: a path from an instance to a tensor it holds directly or through its
    #: own submodules (``ln1.weight``, ``scale``, ``attn.proj.weight``), usable
    #: as a device anchor (``block.ln1.weight.device``); "" when none is known
    anchor_tensor: str = ""
    #: ``forward`` moves one of its own arguments (``x = x.to(self.w.device)``),
    #: so callers need not
    moves_inputs: bool = False
    #: the class names ``_no_split_modules`` lists (transformers' contract
    #: with accelerate: the blocks a ``device_map`` keeps whole)
    no_split: List[str] = field(default_factory=list)
    #: a ``device_map`` may put this module's parts on different devices
    #: (accelerate's hooks move each part's inputs to it; its output stays
    #: there): see ``FileFacts.split_units``
    dispatched: bool = False
    #: "" for a class of this file; for one read from the project index, the
    #: dotted name of the module that defines it
    origin: str = ""
    #: (from the project index) its properties that take the first of
    #: ``self.parameters()`` (``ModuleUtilsMixin.device``), which raises
    #: StopIteration in a DataParallel replica
    first_parameter_properties: List[str] = field(default_factory=list)

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
        if self.pins_optional:
            return {}
        out = {n: a.device for n, a in self.attributes.items() if a.kind in ("module", "nn_container") and a.device}
        out.update(self.placed_attributes)
        return out


#: ``nn.Module`` methods that move a module; each runs ``_apply``, and a
#: parent's move runs only its children's ``_apply``
MODULE_MOVES = ("to", "cuda", "cpu")
_MOVES_AND_CASTS = frozenset({*MODULE_MOVES, "float", "double", "half", "bfloat16", "type", "xpu"})
#: bases that add no ``_apply`` of their own to ``nn.Module``'s
_PLAIN_MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "ABC", "abc.ABC", "object"})


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
    #: class names some class's ``_no_split_modules`` lists
    split_units: Set[str] = field(default_factory=set)
    #: in a project run: this file's dotted module name (None when it has
    #: none) and the project index it consults for the classes it imports
    module: Optional[str] = None
    index: Optional["ProjectIndex"] = None

    def class_facts(self, name: str) -> Optional[ClassFacts]:
        """The facts of class ``name``: a class of this file, else (in a
        project run) a project class the name resolves to through the index;
        None for anything else (a torch class, a third-party one)."""
        cls = self.classes.get(name)
        if cls is None and self.index is not None and name:
            cls = self.index.class_facts(name, self.module)
        return cls
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
        """The DataParallel/DDP class ``func`` names: the wrapper itself, or
        the wrapper a class of this file or of the project derives from
        (``class WrappedDataParallel(DataParallel)`` forwarding attribute
        reads): building one wraps its argument all the same."""
        q = self.qualify(func)
        if q in WRAPPERS:
            return q
        cls = self.class_of_call(func)
        if cls is None or self.class_facts(cls) is None:
            return None
        for base in self.lineage(cls):
            if canonical(base) in WRAPPERS:
                return canonical(base)
        return None

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
        built = self._constructed_class(dotted)
        if built is not None:
            return built
        return self.qualify_dotted(dotted)

    def _constructed_class(self, dotted: str) -> Optional[str]:
        """``Block`` for ``Block.from_config``: the class a classmethod
        called on it builds (``FunctionFacts.constructs``, in the class or a
        base of the file or of the project); None otherwise."""
        owner, _, method = dotted.rpartition(".")
        if not owner:
            return None
        cls_name = owner if owner in self.classes else self.qualify_dotted(owner)
        if cls_name is None or cls_name.startswith("torch."):
            return None
        if method in MODEL_FACTORY_METHODS and is_auto_model_class(cls_name):
            return cls_name  # AutoModelForCausalLM.from_config(cfg): a pretrained model
        for name in self.lineage(cls_name):
            cls = self.class_facts(name)
            fn = cls.methods.get(method) if cls is not None else None
            if fn is not None:
                return cls_name if fn.constructs else None
        return None

    def project_function(self, qualified: str) -> Optional[Tuple[str, int, Dict[str, Any]]]:
        """(path, line, summary) of the project function ``qualified`` names
        (in a project run, when another file of it defines the function and
        its summary says something); None otherwise."""
        if self.index is None or not qualified or qualified.startswith("torch."):
            return None
        found = self.index.function(qualified, self.module)
        if found is None:
            return None
        mod, record = found
        return self.index.path_of(mod), int(record.get("line", 0)), record

    def class_origin(self, name: str) -> Optional[Tuple[str, int]]:
        """(path, line) of a project class read from the index; None for a
        class of this file or one the index does not know."""
        if name in self.classes or self.index is None:
            return None
        cls = self.class_facts(name)
        if cls is None or not cls.origin:
            return None
        return self.index.path_of(cls.origin), cls.line

    def shown_class(self, name: str) -> str:
        """``name`` as a message shows it, in backticks: a class of this file
        by its name; a project class by the name this file gives it, and
        where it is (```CharGPT` (models.py:24)``); any other by its
        qualified name."""
        origin = self.class_origin(name)
        if origin is None:
            return f"`{name}`"
        short = self.local_name_for(name) or name.rsplit(".", 1)[-1]
        path, line = origin
        return f"`{short}` ({path}:{line})" if line else f"`{short}` ({path})"

    def is_module_class(self, name: str) -> bool:
        if is_auto_model_class(name):
            return True  # what the auto class builds (its own class is a factory)
        cls = self.class_facts(name)
        if cls is not None:
            return cls.is_module
        return _is_torch_module_name(name)

    def holds_weights(self, class_name: str) -> bool:
        """An ``nn.Module`` class of the file (or, in a project run, of the
        project) that holds a parameter, a buffer or a submodule, itself or
        through a base class, or derives from a ``torch.nn`` layer with
        weights (``class Head(nn.Linear)``)."""
        if not self.is_module_class(class_name):
            return False
        for name in self.lineage(class_name):
            cls = self.class_facts(name)
            if cls is None:
                if layer_parameter(name) is not None:
                    return True
                continue
            if cls.parameters or cls.buffers or any(
                a.kind in ("module", "nn_container", "parameter", "buffer") for a in cls.attributes.values()
            ):
                return True
        return False

    def builds_weights(self, func: cst.CSTNode) -> bool:
        """A call of ``func`` makes a module with weights: a ``torch.nn``
        layer with a parameter (``nn.Linear``), or a module class of the
        file that holds weights (``Scorer``, :meth:`holds_weights`)."""
        if layer_parameter(self.qualify(func) or "") is not None:
            return True
        return isinstance(func, cst.Name) and func.value in self.classes and self.holds_weights(func.value)

    def lineage(self, class_name: str) -> Iterator[str]:
        """``class_name`` and its bases, breadth first, each once: classes of
        this file and (in a project run) project classes are followed to
        their own bases; any other base (a qualified name) is yielded but
        not followed."""
        seen: Set[str] = set()
        todo = [class_name]
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            yield name
            cls = self.class_facts(name)
            if cls is not None:
                todo.extend(cls.bases)

    def class_attribute(self, class_name: str, attr: str) -> Optional[AttributeFacts]:
        """``attr`` as assigned by class ``class_name`` or a base class defined
        in this file."""
        for name in self.lineage(class_name):
            cls = self.class_facts(name)
            if cls is not None and attr in cls.attributes:
                return cls.attributes[attr]
        for name in self.lineage(class_name):
            cls = self.class_facts(name)
            if cls is not None and attr in cls.class_tensors and attr not in cls.self_assigned:
                return cls.class_tensors[attr]  # a tensor the class body makes, no method replaces
        return None

    def kept_by_move_overrides(self, class_name: str) -> Dict[str, Tuple[str, ...]]:
        """Device attributes of a module class that ``__init__`` sets, that
        only its own ``to``/``cuda``/``cpu`` overrides update (directly or
        through methods of the class only they run; casts count with them)
        and that a method reads once the module is built: attribute -> those
        overrides. A parent's ``.to()`` runs its children's ``_apply``,
        never their ``to``, so as a submodule they keep the device
        ``__init__`` gave them. None for a class whose ``_apply`` or
        ``forward``'s code updates it, or with a base other than
        ``nn.Module`` that this file does not show (which may)."""
        cls = self.class_facts(class_name)
        if cls is None or not cls.is_module:
            return {}
        lineage = [c for c in (self.class_facts(n) for n in self.lineage(class_name)) if c is not None]
        if not any(m in c.methods for c in lineage for m in MODULE_MOVES):
            return {}
        if not all(b in self.classes or (self.qualify_dotted(b) or b) in _PLAIN_MODULE_BASES for c in lineage for b in c.bases):
            return {}
        callers: Dict[str, Set[str]] = {}
        for c in lineage:
            for name, fn in c.methods.items():
                for callee in fn.self_calls:
                    callers.setdefault(callee, set()).add(name)
        out: Dict[str, Tuple[str, ...]] = {}
        for c in lineage:
            for a in c.assignments:
                if a.kind != "device" or a.method != "__init__" or a.name in out or not a.read_after_build:
                    continue
                writers = {x.method for k in lineage for x in k.assignments if x.name == a.name} - {"__init__"}
                if not writers or any(a.name in k.forward_writes for k in lineage):
                    continue
                roots: Set[str] = set()  # the methods that run the writers and that nothing of the class calls
                todo, seen = list(writers), set(writers)
                while todo:
                    m = todo.pop()
                    up = callers.get(m, set())
                    if not up:
                        roots.add(m)
                    todo.extend(up - seen)
                    seen |= up
                moves = tuple(m for m in MODULE_MOVES if m in roots)
                if moves and roots <= _MOVES_AND_CASTS:
                    out[a.name] = moves
        return out

    def has_device_attribute(self, class_name: str) -> bool:
        """Whether instances of ``class_name`` have a ``device`` attribute.
        torch.nn classes have none; a class of this file has one when it (or
        a base) defines or assigns it; anything else (an external class) is
        assumed to have one rather than cry wolf."""
        cls = self.class_facts(class_name)
        if cls is None:
            # DistributedDataParallel sets ``self.device``; no other torch.nn module does
            return not _is_torch_module_name(class_name) or class_name == DISTRIBUTED_DATA_PARALLEL
        for name in self.lineage(class_name):
            c = self.class_facts(name)
            if c is not None and (c.defines_device or "device" in c.self_assigned or "__getattr__" in c.methods):
                return True
        return False

    def tensor_path_of_class(self, class_name: str) -> Optional[str]:
        """A path from an instance of ``class_name`` to a tensor it holds
        (``weight`` for ``nn.Linear``, ``ln1.weight`` for a local ``Block``),
        or None."""
        cls = self.class_facts(class_name)
        if cls is not None:
            return cls.anchor_tensor or None
        return layer_parameter(class_name)


_NON_TENSOR_ANNOTATIONS = frozenset(
    {"int", "float", "bool", "str", "bytes", "dict", "list", "tuple", "None", "Dict", "List", "Tuple", "Optional[int]", "Optional[bool]", "Optional[str]", "Optional[float]", "torch.device", "device", "torch.dtype", "dtype", "Size", "torch.Size"}
)


_TENSOR_USES = frozenset({"shape", "size", "device", "dtype", "view", "reshape", "dim", "ndim", "unsqueeze", "flatten", "transpose", "permute", "float", "contiguous", "masked_fill", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "numel", "type_as", "expand", "squeeze", "sum", "mean", "matmul", "softmax", "to"})


_DEVICE_NAME_HINTS = ("device", "dev")


def _annotation_code(param: cst.Param) -> Optional[str]:
    if param.annotation is None:
        return None
    # (``torch.Tensor``, ``int``: dotted, without rendering the node)
    return dotted_name(param.annotation.annotation) or code_of(param.annotation.annotation).replace(" ", "")


#: generic collections: ``List[Tensor]`` holds tensors but has no ``.device``
_COLLECTION_ANNOTATIONS = frozenset(
    {"list", "tuple", "sequence", "mutablesequence", "dict", "mapping", "mutablemapping", "iterable",
     "iterator", "collection", "set", "frozenset", "deque", "generator", "ordereddict", "defaultdict"}
)


#: annotations that say a parameter holds one tensor (or None)
_TENSOR_ANNOTATIONS = frozenset({"Tensor", "FloatTensor", "LongTensor", "BoolTensor", "DoubleTensor", "HalfTensor"})


def tensor_annotation(ann: Optional[str], facts: "FileFacts") -> bool:
    """``Tensor``, ``torch.Tensor``, ``Optional[Tensor]``, ``Tensor | None``:
    the parameter holds one torch tensor whenever it holds anything (the
    bare name counts when the file imports it from torch)."""
    if not ann:
        return False
    ann = ann.replace(" ", "").replace("typing.", "")
    for wrapper in ("Optional[",):
        if ann.startswith(wrapper) and ann.endswith("]"):
            ann = ann[len(wrapper):-1]
    parts = [p for p in ann.split("|") if p != "None"]
    if len(parts) != 1:
        return False
    name = parts[0].strip("'\"")
    q = facts.qualify_dotted(name) or ""
    return q.startswith("torch.") and q[len("torch."):] in _TENSOR_ANNOTATIONS


#: annotation leaves that hold no tensor: Python scalars and text, and the
#: generic containers and unions whose arguments decide
_NO_TENSOR_LEAVES = frozenset({"int", "float", "bool", "str", "bytes", "complex", "None", "NoneType", "bytearray"})
_TYPING_WRAPPERS = frozenset(
    {"Optional", "Union", "List", "Dict", "Tuple", "Set", "FrozenSet", "Sequence", "Mapping", "MutableMapping",
     "MutableSequence", "Iterable", "Collection", "DefaultDict", "OrderedDict", "Deque",
     "list", "dict", "tuple", "set", "frozenset"}
)


def annotation_holds_no_tensors(node: Optional[cst.BaseExpression], facts: "FileFacts") -> bool:
    """Whether an annotation declares a value that can hold no torch tensor:
    made only of Python scalars and text, NumPy arrays (``np.ndarray``,
    ``numpy.typing.NDArray[...]``) and the generic containers and unions of
    those (``Tuple[Dict[str, str], List[str]]``, ``Optional[int]``,
    ``str | None``, a string annotation of one). Anything else, ``Any``, a
    class of the project or a missing annotation, may hold tensors: False."""
    if node is None:
        return False
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        text = node.evaluated_value if isinstance(node, cst.SimpleString) else None
        if not isinstance(text, str):
            return False
        try:
            return annotation_holds_no_tensors(cst.parse_expression(text), facts)
        except cst.ParserSyntaxError:
            return False
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        return annotation_holds_no_tensors(node.left, facts) and annotation_holds_no_tensors(node.right, facts)
    if isinstance(node, cst.Subscript):
        outer = dotted_name(node.value) or ""
        q = facts.qualify_dotted(outer) or outer
        last = q.rsplit(".", 1)[-1]
        if q.startswith("numpy.") or (last == "NDArray" and "numpy" in q):
            return True
        if last not in _TYPING_WRAPPERS or not (q == last or q.startswith(("typing.", "collections.", "builtins."))):
            return False
        for element in node.slice:
            value = element.slice.value if isinstance(element.slice, cst.Index) else None
            if isinstance(value, cst.Ellipsis):
                continue
            if value is None or not annotation_holds_no_tensors(value, facts):
                return False
        return True
    if isinstance(node, cst.Name) and node.value == "None":
        return True
    name = dotted_name(node)
    if name is None:
        return False
    q = facts.qualify_dotted(name) or name
    if q.startswith("numpy."):
        return q.rsplit(".", 1)[-1] in ("ndarray", "NDArray", "generic", "number", "integer", "floating", "bool_")
    return q in _NO_TENSOR_LEAVES or (q.startswith("builtins.") and q[len("builtins."):] in _NO_TENSOR_LEAVES)


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
        constructs="classmethod" in decorators and bool(params) and _returns_instance(fn, params[0]),
    )


def _returns_instance(fn: cst.FunctionDef, cls_name: str) -> bool:
    """Every ``return`` of the classmethod ``fn`` gives ``cls(...)`` (its
    first parameter called), directly or through a local name every plain
    assignment of which is such a call."""

    def built(node: Optional[cst.BaseExpression]) -> bool:
        return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == cls_name

    finder = _ReturnsAndAssigns()
    walk(fn.body, finder)
    if finder.yields or not finder.returns:
        return False
    bound: Dict[str, bool] = {}
    for target, value in finder.assigns:
        bound[target] = bound.get(target, True) and built(value)
    return all(built(r) or (isinstance(r, cst.Name) and bound.get(r.value, False)) for r in finder.returns)


#: NumPy functions that give a scalar for a scalar
_NUMPY_SCALAR_MATH = frozenset({
    "radians", "degrees", "deg2rad", "rad2deg", "sqrt", "exp", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
    "arcsin", "arccos", "arctan", "tanh", "float32", "float64", "int64", "int32", "abs", "floor", "ceil", "power",
})


def _is_python_number(node: cst.BaseExpression, scalar_names: Iterable[str] = ()) -> bool:
    """An expression that evaluates to a Python number (never a list or an
    array): a literal, a name known to hold one, ``math.*``/``float()``/``int()``/
    ``len()``, a size (``K.shape[-1]``, ``x.size(0)``, ``x.ndim``, ``x.numel()``),
    arithmetic of those, and ``d ** 0.5``."""
    if is_number_literal(node):
        return True
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape" \
            and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return True  # K.shape[-1]
    if isinstance(node, cst.Attribute) and node.attr.value == "ndim":
        return True
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
        node.func.attr.value in ("numel", "dim") and not node.args or node.func.attr.value == "size" and len(node.args) == 1
    ):
        return True  # x.size(0), x.numel()
    if isinstance(node, cst.Name):
        return node.value in scalar_names
    if isinstance(node, cst.Attribute):
        return dotted_name(node) in ("math.pi", "math.e", "math.tau", "math.inf")
    if isinstance(node, cst.UnaryOperation):
        return _is_python_number(node.expression, scalar_names)
    if isinstance(node, cst.Call):
        d = dotted_name(node.func) or ""
        if d.split(".", 1)[0] in ("np", "numpy") and d.rsplit(".", 1)[-1] in _NUMPY_SCALAR_MATH and node.args:
            # np.radians(alpha) of a number: a NumPy scalar, 0-dim as a tensor
            return all(_is_python_number(a.value, scalar_names) for a in node.args if not a.star)
        return d in ("float", "int", "abs", "round", "len") or d.startswith("math.")
    if isinstance(node, cst.BinaryOperation):
        left = _is_python_number(node.left, scalar_names)
        right = _is_python_number(node.right, scalar_names)
        if left and right:
            return True
        # ``dim ** -0.5``: the usual attention scale
        return isinstance(node.operator, cst.Power) and is_number_literal(node.right)
    return False


class _FactsBuilder:
    def __init__(self, module: cst.Module, project: Optional["ProjectContext"] = None) -> None:
        self.module = module
        self.facts = FileFacts()
        self._project = project
        if project is not None:
            self.facts.module = project.module
            self.facts.index = project.index
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
        #: call node id -> returned_module_container's answer
        self._returned_container_cache: Dict[int, Tuple[str, str]] = {}
        self._module_functions: Optional[Dict[str, cst.FunctionDef]] = None
        #: module-level function name -> the parameters it registers
        self._registering_cache: Dict[str, Set[str]] = {}

    # -- imports -----------------------------------------------------------
    def _add_import(self, local: str, target: str) -> None:
        if target.startswith(".") and self._project is not None:
            # a relative import, made absolute against this file's package
            target = absolute(target, self._project.module, self._project.is_package) or target
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
            else:
                self._finish_plain_class(cls)
        self._finish_inherited_reach()
        self._finish_forward_uses()
        self._finish_container_reads()
        self._finish_anchors()
        self._finish_dispatched()
        return self.facts

    def _finish_container_reads(self) -> None:
        """Whether anything but its builder reads a plain container of
        modules, or a device attribute (``AttributeFacts.read_after_build``)."""
        for cls in self.facts.classes.values():
            records = [r for r in cls.assignments if r.kind in ("module_container", "device")]
            if not records or not cls.is_module or cls.name not in self._class_nodes:
                continue
            owners = [cls] + [
                c for c in self.facts.classes.values()
                if c is not cls and c.name in self._class_nodes and self._derives_from(c, cls.name, set())
            ]
            loaded: Dict[str, Set[str]] = {}  # method -> self attributes it reads
            for owner in owners:
                for stmt in statements(self._class_nodes[owner.name]):
                    if isinstance(stmt, cst.FunctionDef):
                        params = [p.name.value for p in stmt.params.params]
                        uses = _SelfAttributeUses(params[0] if params else "self")
                        walk(stmt.body, uses)
                        key = stmt.name.value if owner is cls else f"{owner.name}.{stmt.name.value}"
                        loaded.setdefault(key, set()).update(uses.loaded)
            for record in records:
                record.read_after_build = any(record.name in names for m, names in loaded.items() if m != record.method)

    def _finish_dispatched(self) -> None:
        """Which module classes a ``device_map`` may split: those that hold,
        as submodules, blocks named by a ``_no_split_modules`` of the file
        (the units accelerate keeps whole on one device), or classes that
        do, and classes whose own lineage declares the list and that hold
        submodules. A block itself is not split."""
        units = self.facts.split_units
        if not units:
            return
        declares = {n for n, c in self.facts.classes.items() if c.no_split}
        changed = True
        while changed:
            changed = False
            for cls in self.facts.classes.values():
                if not cls.is_module or cls.dispatched or cls.name in units:
                    continue
                parts = [a for a in cls.attributes.values() if a.kind in ("module", "nn_container")]
                if not parts:
                    continue
                held = {p.module_class.rsplit(".", 1)[-1] for p in parts} | {p.element_class.rsplit(".", 1)[-1] for p in parts}
                if held & units or any(self.facts.classes[h].dispatched for h in held if h in self.facts.classes) or any(
                    c in declares for c in self.facts.lineage(cls.name)
                ):
                    cls.dispatched = changed = True
        for cls in self.facts.classes.values():
            pins = cls.pinning_methods | {
                a.method for a in cls.attributes.values() if a.kind in ("module", "nn_container") and a.device
            }
            cls.pins_optional = cls.dispatched and bool(pins) and "__init__" not in pins

    def registered_arguments(self, name: str) -> Set[str]:
        """The parameters a module-level function of the file registers as
        submodules of something (``setattr(parent, last, new_mod)``,
        ``parent.add_module(k, m)``, ``register_module``): a module handed
        to it is registered, wherever the helper hangs it
        (``set_module_by_path(self.net, path, wrapper)``). Built once a
        function."""
        cache = self._registering_cache
        if name not in cache:
            fn = self._module_function_nodes().get(name)
            cache[name] = _registered_parameters(fn) if fn is not None else set()
        return cache[name]

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
        if isinstance(value, cst.Attribute) and value.attr.value == "device":
            # ``inv_freq.device``, ``self.weight.device``, ``config.device``:
            # where that tensor (or setting) is while the module is built
            return True
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
                            if len(targets) == 1 and isinstance(targets[0], cst.Name) and small.value is not None \
                                    and self.classify_value(small.value, ())[0] == "tensor" \
                                    and not self.is_scalar_tensor(small.value, set()):
                                name = targets[0].value
                                cls.class_tensors[name] = AttributeFacts(
                                    name=name, kind="tensor", method="", line=0, value=code_of(small.value),
                                )
                        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and annotates_tensor(
                            small.annotation.annotation, optional=True
                        ):
                            cls.tensor_fields.append(small.target.value)
                        if any(isinstance(t, cst.Name) and t.value == "_no_split_modules" for t in targets):
                            cls.no_split = _string_list(small.value)
                            self.facts.split_units.update(cls.no_split)


    def _class_is_module(self, cls: ClassFacts, seen: Set[str]) -> bool:
        if cls.name in seen:
            return False
        seen.add(cls.name)
        if cls.name in self.facts.split_units:
            return True  # a block _no_split_modules names is a module, whatever its base
        for base in cls.bases:
            if base in self.facts.classes:
                if self._class_is_module(self.facts.classes[base], seen):
                    return True
            elif self.facts.index is not None and self.facts.class_facts(base) is not None:
                if self.facts.class_facts(base).is_module:  # a project class (the index)
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
            elif self.facts.index is not None and self.facts.class_facts(base) is not None:
                if self.facts.class_facts(base).defines_device:  # a project class: what it says
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
                cls.input_parts = assigned.input_calls
        # ``self.w = v`` where the class defines ``@w.setter`` calls the
        # setter (which stores v where it likes: a parameter, a buffer); it
        # is no plain attribute
        setters = {
            d.decorator.value.value for stmt in statements(node) if isinstance(stmt, cst.FunctionDef)
            for d in stmt.decorators
            if isinstance(d.decorator, cst.Attribute) and d.decorator.attr.value == "setter" and isinstance(d.decorator.value, cst.Name)
        }
        if setters:
            cls.assignments[:] = [r for r in cls.assignments if r.name not in setters]
        registered = self._registered_attrs.get(cls.name, set())
        for record in cls.assignments:
            if record.kind == "module_container" and record.name in registered:
                record.registered_elsewhere = True

    def _finish_plain_class(self, cls: ClassFacts) -> None:
        """A class that is no module: what its ``__init__`` keeps on ``self``
        when that builds something with torch (``self.betas =
        torch.linspace(...)``), so the device flow can read it back in the
        class's other methods. Nothing moves such a tensor: no ``.to()``,
        no replica."""
        node = self._class_nodes.get(cls.name)
        if node is None:
            return
        init = next((s for s in statements(node) if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is None or not any((self.facts.qualify(call.func) or "").startswith("torch.") for call in calls_in(init.body)):
            return
        self._method_attributes(cls, init)
        # what the other methods assign on ``self`` (``self.mat =
        # self.mat.to(pred.device)`` keeps it in step)
        for stmt in statements(node):
            if isinstance(stmt, cst.FunctionDef) and stmt is not init:
                params = [p.name.value for p in stmt.params.params]
                assigned = _SelfAssignments(params[0] if params else "self", params[1:], augmented=False)
                walk(stmt.body, assigned)
                cls.assigned_after_init.extend(n for n in assigned.names if n not in cls.assigned_after_init)

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

    def _forward_uses(self, cls: ClassFacts, roots: Sequence[str] = ("forward",)) -> Tuple[Set[str], Set[str], Set[str]]:
        """(attributes read, attributes written, attributes written in ways
        the device flow does not follow) by the code ``forward`` (or the
        methods ``roots``) runs."""
        methods = self._effective_methods(cls, set())
        reads: Set[str] = set()
        writes: Set[str] = set()
        opaque: Set[str] = set()
        done: Set[str] = set()
        todo = [m for m in roots if m in methods]
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
            opaque |= uses.opaque_writes
            facts = owner.methods.get(name)
            callees = list(facts.self_calls) if facts else []
            # properties read on self run too
            callees += [r for r in uses.loaded if r in methods and methods[r][0].methods[r].is_property]
            todo.extend(c for c in callees if c in methods and c not in done)
        return reads, writes, opaque

    def _finish_forward_uses(self) -> None:
        modules = [c for c in self.facts.classes.values() if c.is_module and c.name in self._class_nodes]
        uses = {c.name: self._forward_uses(c) for c in modules}
        for cls in modules:
            reads, writes, opaque = set(uses[cls.name][0]), set(uses[cls.name][1]), set(uses[cls.name][2])
            # an attribute set up here may be read by a subclass's forward
            for other in modules:
                if other is not cls and self._derives_from(other, cls.name, set()):
                    reads |= uses[other.name][0]
                    writes |= uses[other.name][1]
                    opaque |= uses[other.name][2]
            cls.forward_reads = sorted(reads)
            public = [
                m for m in self._effective_methods(cls, set())
                if not m.startswith("_") and m != "forward" and m not in INIT_METHODS
            ]
            cls.entry_reads = {}
            for m in sorted(public):
                for attr in sorted(self._forward_uses(cls, [m])[0] - reads):
                    cls.entry_reads.setdefault(attr, m)
            cls.forward_writes = sorted(writes)
            cls.forward_opaque_writes = sorted(opaque)

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
        # a layer's plain ``weight`` reads best; an LSTM's ``weight_ih_l0`` when there is none
        params = [(name, layer_parameter(attr.module_class)) for name, attr in cls.attributes.items() if attr.kind == "module"]
        for name, param in sorted((p for p in params if p[1] is not None), key=lambda p: p[1] != "weight"):
            return f"{name}.{param}"
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
        # an argument annotated as a tensor holds one (``feature_set: Tensor``)
        collector.argument_tensors = {
            p.name.value for p in fn.params.params[1:] + fn.params.kwonly_params
            if tensor_annotation(_annotation_code(p), self.facts)
        }
        collector.local_tensors |= collector.argument_tensors
        # an argument annotated as a module holds one (``network: nn.Module``)
        collector.module_params = {
            p.name.value: c for p in fn.params.params[1:] + fn.params.kwonly_params
            if (c := self._module_annotation(_annotation_code(p)))
        }
        collector.sequence_params = {
            p.name.value for p in fn.params.params + fn.params.kwonly_params
            if p.default is not None and _is_sequence_value(p.default)
        }
        collector.factory_params = {
            p.name.value: f for p in fn.params.params + fn.params.kwonly_params
            if p.default is not None and (f := self.facts.is_factory(p.default))
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
        class whose attributes are being collected, a ``staticmethod`` or
        ``classmethod`` too: ``self`` reaches them as it reaches any other);
        None otherwise (a property is no call)."""
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
                return None if "property" in decorators else stmt
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
                c = self._module_instance_class(inner, local)
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
        result = False
        if not finder.yields and finder.returns:
            local = self._local_tensors(finder)
            result = all(r is not None and self._is_tensor_expr(r, local) for r in finder.returns)
        self._returns_tensor_cache[key] = result
        return result

    def _local_tensors(self, finder: "_ReturnsAndAssigns") -> Set[str]:
        """The local names of a helper's body bound to a tensor when its
        ``return`` runs (the last plain assignment of each decides)."""
        local: Set[str] = set()
        for target, value in finder.assigns:
            if self._is_tensor_expr(value, local):
                local.add(target)
            else:
                local.discard(target)
        return local

    def returned_tensor_positions(self, call: cst.BaseExpression) -> List[bool]:
        """For a call of a helper of this file every ``return`` of which
        gives a tuple display of one length (``return weight, bias``): for
        each position, whether every return puts a tensor there
        (``self.w, self.b = sample_params(n)``); empty otherwise."""
        fn = self._called_function(call.func) if isinstance(call, cst.Call) else None
        if fn is None:
            return []
        finder = _ReturnsAndAssigns()
        walk(fn.body, finder)
        if finder.yields or not finder.returns or not all(isinstance(r, cst.Tuple) for r in finder.returns):
            return []
        sizes = {len(r.elements) for r in finder.returns}  # type: ignore[union-attr]
        if len(sizes) != 1 or any(isinstance(e, cst.StarredElement) for r in finder.returns for e in r.elements):  # type: ignore[union-attr]
            return []
        local = self._local_tensors(finder)
        return [
            all(self._is_tensor_expr(r.elements[i].value, local) for r in finder.returns)  # type: ignore[union-attr]
            for i in range(sizes.pop())
        ]

    def _passes_tensor(self, fn: cst.FunctionDef, call: cst.Call, local_tensors: Iterable[str]) -> bool:
        """A helper that returns one of its arguments (``default(val, d)``:
        ``return val if exists(val) else d``), called with a tensor for one of
        them and, for the others, only what the caller was given
        (``default(window, torch.hann_window(n))``): what it returns is that
        tensor, or whatever the caller was handed in its place."""
        finder = _ReturnsAndAssigns()
        walk(fn.body, finder)
        if finder.yields or not finder.returns or finder.assigns:
            return False
        params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
        bound: Dict[str, cst.BaseExpression] = {}
        for i, a in enumerate(call.args):
            if a.star:
                return False
            if a.keyword is not None:
                bound[a.keyword.value] = a.value
            elif i < len(params):
                bound[params[i]] = a.value
        tensors = 0

        def returned(r: Optional[cst.BaseExpression]) -> bool:
            nonlocal tensors
            if isinstance(r, cst.IfExp):
                return returned(r.body) and returned(r.orelse)
            if isinstance(r, cst.Name) and r.value in bound:
                arg = bound[r.value]
                if self._is_tensor_expr(arg, local_tensors):
                    tensors += 1
                    return True
                return isinstance(arg, cst.Name)  # a name the caller was given: not known to be anything else
            return False

        return all(returned(r) for r in finder.returns) and tensors > 0

    def classify_value(
        self, value: cst.BaseExpression, params: Sequence[str], local_tensors: Iterable[str] = ()
    ) -> Tuple[str, str, str, str]:
        """(kind, module_class, device, element_class) for an assigned value.
        ``local_tensors``: local names known to hold tensors. ``X if c else
        None`` (either way round) is what ``X`` is: the attribute holds it
        whenever it holds anything."""
        if isinstance(value, cst.IfExp):
            body_none = isinstance(value.body, cst.Name) and value.body.value == "None"
            else_none = isinstance(value.orelse, cst.Name) and value.orelse.value == "None"
            if body_none != else_none:
                return self.classify_value(value.orelse if body_none else value.body, params, local_tensors)
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
        if self.distribution_of_tensors(inner, local_tensors):
            return "tensor_container", "", "", ""  # self.prior = Normal(torch.zeros(d), torch.ones(d))
        if self._is_fixed_device(value, params):
            return "device", "", "", ""
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.Dict, cst.DictComp)) or is_sequence_call(value) \
                or is_keyword_dict_call(value):
            elem = self._element_class(value)
            if elem:
                return "module_container", "", "", elem
            if self._container_of_tensors(value, local_tensors) or self.tensor_keys(value, local_tensors):
                return "tensor_container", "", "", ""
        _, elem = self.returned_module_container(value)
        if elem:
            return "module_container", "", "", elem  # self.heads = map_values(lambda n: nn.Linear(d, n), sizes)
        if self.returned_tensor_container(value):
            return "tensor_container", "", "", ""  # self.anchors = make_anchors(sizes), a list of tensors
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
            if q is not None and q.startswith("torch.fft.") and q.count(".") == 2:
                return True  # every torch.fft function returns one tensor (fftfreq as a factory)
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
                    if self._returns_tensor(called):
                        return True
                finally:
                    self._self_call_owner = saved
                return self._passes_tensor(called, node, local_tensors)
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

    def is_cpu_generator(self, node: cst.BaseExpression) -> bool:
        """``torch.Generator()``, also seeded on the spot
        (``torch.Generator().manual_seed(0)``): a generator on the CPU."""
        while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "manual_seed":
            node = node.func.value
        return isinstance(node, cst.Call) and self.facts.qualify(node.func) == "torch.Generator" and not node.args

    def distribution_of_tensors(self, node: cst.BaseExpression, local_tensors: Iterable[str] = ()) -> bool:
        """``Normal(torch.zeros(d), torch.ones(d))``: a ``torch.distributions``
        object built from tensors, which it keeps as plain attributes (no
        buffers: ``.to()`` does not reach them)."""
        if not isinstance(node, cst.Call):
            return False
        q = self.facts.qualify(node.func) or ""
        if not q.startswith("torch.distributions.") or not q.rsplit(".", 1)[-1][:1].isupper():
            return False
        return any(self._is_tensor_expr(a.value, local_tensors) for a in node.args if not a.star)

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

    def is_complex_tensor(self, node: cst.BaseExpression, complex_names: Iterable[str] = (), depth: int = 8) -> bool:
        """A tensor of complex numbers: made with a complex ``dtype=`` (or
        moved to one: ``.to(torch.complex64)``, ``.cfloat()``), by
        ``torch.polar``/``complex``/``view_as_complex``, a ``torch.fft``
        function with a complex result, ``stft(..., return_complex=True)``,
        arithmetic with an imaginary literal (``1j * w``), and what keeps a
        complex tensor complex (``torch.exp``, ``.conj()``, a reshape, a
        product with another tensor). ``complex_names``: local names (and
        ``self.x``) known to hold one."""
        if depth <= 0:
            return False
        again = lambda n: self.is_complex_tensor(n, complex_names, depth - 1)  # noqa: E731
        if isinstance(node, cst.Imaginary):
            return True
        if isinstance(node, (cst.Name, cst.Attribute)) and dotted_name(node) in complex_names:
            return True
        if isinstance(node, cst.Subscript):
            return again(node.value)
        if isinstance(node, cst.BinaryOperation):
            return again(node.left) or again(node.right)
        if isinstance(node, cst.UnaryOperation):
            return again(node.expression)
        if not isinstance(node, cst.Call):
            return False
        dtype = keyword_arg(node, "dtype")
        if dtype is not None and self._complex_dtype(dtype.value):
            return True
        rc = keyword_arg(node, "return_complex")
        if rc is not None and isinstance(rc.value, cst.Name) and rc.value.value == "True":
            return True
        q = self.facts.qualify(node.func) or ""
        args = positional_args(node)
        if q.startswith("torch.fft."):
            last = q.rsplit(".", 1)[-1]
            if last in FFT_SAME_DTYPE:
                return bool(args) and again(args[0].value)
            return last not in FFT_REAL_RESULTS
        name = self.facts.torch_function(node.func)
        if name in COMPLEX_MAKERS:
            return True
        if name in COMPLEX_PRESERVING:
            return any(again(a.value) for a in args)
        if name is None and isinstance(node.func, cst.Attribute):
            attr = node.func.attr.value
            if attr in ("cfloat", "cdouble", "chalf"):
                return True
            if attr in ("to", "type") and any(self._complex_dtype(a.value) for a in node.args):
                return True
            if attr in ("to", "cuda", "cpu") or attr in COMPLEX_PRESERVING:
                if attr in ("to", "type") and any(self._real_dtype(a.value) for a in node.args):
                    return False
                return again(node.func.value) or (attr in ("mul", "div", "add", "sub", "matmul") and any(again(a.value) for a in args))
        return False

    def _complex_dtype(self, node: cst.BaseExpression) -> bool:
        q = self.facts.qualify(node) or ""
        return q.startswith("torch.") and q[len("torch."):] in COMPLEX_DTYPES

    def _real_dtype(self, node: cst.BaseExpression) -> bool:
        q = self.facts.qualify(node) or ""
        return q.startswith("torch.") and q[len("torch."):] in _DTYPE_NAMES and q[len("torch."):] not in COMPLEX_DTYPES

    def _module_annotation(self, ann: Optional[str]) -> str:
        """The module class an annotation names (``nn.Module``,
        ``Optional[Encoder]``), or ``""``."""
        if not ann:
            return ""
        ann = ann.replace("typing.", "")
        if ann.startswith("Optional[") and ann.endswith("]"):
            ann = ann[len("Optional["):-1]
        parts = [p for p in ann.split("|") if p != "None"]
        if len(parts) != 1:
            return ""
        name = parts[0].strip("'\"")
        q = self.facts.qualify_dotted(name) or name
        return q if self.facts.is_module_class(q) else ""

    def module_wrapper(self, value: cst.BaseExpression, modules: Dict[str, str]) -> Tuple[str, str, Optional[cst.BaseExpression]]:
        """(wrapper, module class, wrapped expression) when ``value`` wraps a
        module instance in a ``functools`` wrapper, which is not an
        ``nn.Module`` and so registers nothing: ``lru_cache(maxsize=8)(net)``,
        ``functools.cache(net)``, ``partial(Block(d), scale=2)``. The
        instance is a call of a module class or a name in ``modules``
        (local name or argument -> module class). ``("", "", None)``
        otherwise (``partial(nn.Linear, bias=False)`` wraps a class)."""
        none: Tuple[str, str, Optional[cst.BaseExpression]] = ("", "", None)
        if not isinstance(value, cst.Call) or not value.args or value.args[0].keyword is not None or value.args[0].star:
            return none
        func = value.func
        q = self.facts.qualify(func.func) if isinstance(func, cst.Call) else self.facts.qualify(func)
        if isinstance(func, cst.Call):
            if q not in _CACHING_WRAPPERS or len(value.args) != 1:
                return none
        elif q not in FUNCTOOLS_WRAPPERS:
            return none
        wrapped = value.args[0].value
        c = self._module_instance_class(wrapped, modules)
        return (q, c, wrapped) if c else none

    def _module_instance_class(self, expr: Optional[cst.BaseExpression], names: Dict[str, str]) -> Optional[str]:
        """The module class ``expr`` is an instance of: a call of a module
        class (``Block(d)``), or a name ``names`` maps to one; else None."""
        if isinstance(expr, cst.Call):
            c = self.facts.class_of_call(expr.func)
            return c if c is not None and self.facts.is_module_class(c) else None
        if isinstance(expr, cst.Name):
            return names.get(expr.value) or None
        return None

    def returned_module_container(self, call: cst.BaseExpression) -> Tuple[str, str]:
        """(container, element class) for a call of a helper of this file
        whose every ``return`` gives a list, tuple or dict display or
        comprehension (directly or through one local name) of modules: built
        in the helper (``return [Block(d) for d in dims]``), or by a callable
        the call hands it (``map_values(lambda n: nn.Linear(d, n), sizes)``
        with ``def map_values(fn, d): return {k: fn(v) for k, v in
        d.items()}``: a lambda, a module class or a helper that builds one).
        ``("", "")`` when unknown, or when the helper registers what it
        builds itself."""
        if not isinstance(call, cst.Call) or any(a.star for a in call.args):
            return "", ""
        key = id(call)
        if key not in self._returned_container_cache:
            self._returned_container_cache[key] = ("", "")  # recursion: not known
            self._returned_container_cache[key] = self._returned_container(call)
        return self._returned_container_cache[key]

    def _returned_container(self, call: cst.Call) -> Tuple[str, str]:
        fn = self._called_function(call.func)
        if fn is None:
            return "", ""
        finder = _ReturnsAndAssigns()
        walk(fn.body, finder)
        if not finder.returns or finder.yields or finder.registers:
            return "", ""
        params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
        if params and isinstance(call.func, cst.Attribute) and self._self_call_owner is not None:
            params = params[1:]  # self._build_heads(...): the first parameter is self
        bound: Dict[str, cst.BaseExpression] = {}
        for i, a in enumerate(call.args):
            if a.keyword is not None:
                bound[a.keyword.value] = a.value
            elif i < len(params):
                bound[params[i]] = a.value
        builders = {name: c for name, arg in bound.items() if (c := self._builds_module(arg))}
        local: Dict[str, Optional[cst.BaseExpression]] = {}
        for target, value in finder.assigns:
            local[target] = value if target not in local else None  # a name bound twice: not followed
        containers: Set[str] = set()
        classes: Set[str] = set()
        for r in finder.returns:
            if isinstance(r, cst.Name) and local.get(r.value) is not None:
                r = local[r.value]
            container = _container_type(r) if r is not None else ""
            elem = self._element_class(r, builders) if container else ""
            if not elem:
                return "", ""
            containers.add(container)
            classes.add(elem)
        if len(containers) != 1:
            return "", ""
        return containers.pop(), classes.pop() if len(classes) == 1 else "torch.nn.Module"

    def returned_tensor_container(self, call: cst.BaseExpression) -> str:
        """``list``/``tuple``/``dict`` for a call of a helper of this file
        whose every ``return`` gives a display or comprehension of that
        container type whose every element is a tensor (``return
        [torch.tensor(a) for a in sizes]``, ``return cos, sin`` after ``cos =
        torch.cos(t)``); ``""`` otherwise."""
        if not isinstance(call, cst.Call):
            return ""
        fn = self._called_function(call.func)
        if fn is None:
            return ""
        finder = _ReturnsAndAssigns()
        walk(fn.body, finder)
        if not finder.returns or finder.yields:
            return ""
        local = self._local_tensors(finder)
        containers = set()
        for r in finder.returns:
            container = _container_type(r) if r is not None and not isinstance(r, cst.Call) else ""
            if not container or not self._container_of_tensors(r, local):
                return ""
            containers.add(container)
        return containers.pop() if len(containers) == 1 else ""

    def _builds_module(self, node: cst.BaseExpression) -> str:
        """The module class a callable handed to a helper builds when called:
        a lambda whose body builds one (``lambda n: nn.Linear(d, n)``), a
        module class (``nn.Linear``) or a helper of this file that returns
        one (``make_head``); ``""`` otherwise."""
        if isinstance(node, cst.Lambda):
            inner, _, _ = _strip_placement(node.body)
            if not isinstance(inner, cst.Call):
                return ""
            c = self.facts.class_of_call(inner.func)
            if c is not None and self.facts.is_module_class(c):
                return c
            return self.returned_module_class(inner.func)
        if isinstance(node, (cst.Name, cst.Attribute)):
            c = self.facts.class_of_call(node)
            if c is not None and self.facts.is_module_class(c):
                return c
            return self.returned_module_class(node)
        return ""

    def _element_class(self, node: cst.BaseExpression, builders: Optional[Dict[str, str]] = None) -> str:
        """The module class of a container display's elements (``"torch.nn.Module"``
        when they differ); ``""`` unless every element builds a module.
        ``builders``: names of callables known to build one (a helper's
        parameters bound to a module-building lambda)."""
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
            return self._element_class(node.args[0].value, builders) if node.args else ""
        classes = set()
        for e in elements:
            inner, _, _ = _strip_placement(e)
            if not isinstance(inner, cst.Call):
                return ""
            if builders and isinstance(inner.func, cst.Name) and inner.func.value in builders:
                classes.add(builders[inner.func.value])  # fn(v), fn bound to lambda n: nn.Linear(d, n)
                continue
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
        elif is_keyword_dict_call(node):
            elements = [a.value for a in node.args]  # type: ignore[attr-defined]
        return bool(elements) and all(self._is_tensor_expr(e, local_tensors) for e in elements)

    def tensor_keys(self, node: cst.BaseExpression, local_tensors: Iterable[str] = ()) -> List[str]:
        """For a dict of settings written out with constant keys that holds
        some tensors among other values (``dict(n_fft=512,
        window=torch.hann_window(512))``): the keys that hold tensors."""
        items = _constant_dict_items(node)
        if items is None:
            return []
        return [k for k, v in items if self._is_tensor_expr(v, local_tensors)]


def _registered_parameters(fn: cst.FunctionDef) -> Set[str]:
    """The parameters of ``fn`` its body registers as a submodule of some
    object: the value of ``setattr(obj, name, p)`` or the module of
    ``obj.add_module(name, p)`` / ``obj.register_module(name, p)``."""
    params = param_names(fn)
    out: Set[str] = set()
    for call in calls_in(fn.body):
        func, args = call.func, [a for a in call.args if a.keyword is None and not a.star]
        if isinstance(func, cst.Name) and func.value == "setattr" and len(args) == 3:
            value = args[2].value
        elif isinstance(func, cst.Attribute) and func.attr.value in ("add_module", "register_module") and len(args) == 2:
            value = args[1].value
        else:
            continue
        if isinstance(value, cst.Name) and value.value in params:
            out.add(value.value)
    return out


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


#: functools wrappers that keep the callable they are given: ``lru_cache(...)(f)``
_CACHING_WRAPPERS = frozenset({"functools.lru_cache"})

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
    return is_device_name(value.attr.value.lower())


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


def _constant_dict_items(node: cst.BaseExpression) -> Optional[List[Tuple[str, cst.BaseExpression]]]:
    """``{"a": x, "b": y}`` or ``dict(a=x, b=y)``: its (key, value) pairs,
    when every key is a constant string; otherwise None."""
    if is_keyword_dict_call(node):
        return [(a.keyword.value, a.value) for a in node.args]  # type: ignore[attr-defined,union-attr]
    if not isinstance(node, cst.Dict) or not node.elements:
        return None
    out: List[Tuple[str, cst.BaseExpression]] = []
    for e in node.elements:
        key = string_value(e.key) if isinstance(e, cst.DictElement) else None
        if key is None:
            return None
        out.append((key, e.value))
    return out


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
        #: arguments annotated as a module, and its class
        self.module_params: Dict[str, str] = {}
        #: records of a module kept in a functools wrapper, and the name wrapped
        self.wrapped: List[Tuple[AttributeFacts, str]] = []
        #: parameters whose default is a torch factory, and its name
        self.factory_params: Dict[str, str] = {}
        # parameters annotated as tensors, while they hold what the caller passed
        self.argument_tensors: Set[str] = set()
        # local names (and ``self.x``) holding complex tensors
        self.complex_names: Set[str] = set()

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
                name: Optional[str] = None, tensor: Optional[bool] = None) -> None:
        """``tensor``: for one target of an unpacking (``self.w, self.b =
        f()``), whether what it gets is a tensor (None: classify ``value``)."""
        name = name or self_attribute(target, self.self_name)
        if name is None:
            if isinstance(target, cst.Name) and tensor is not None:
                if tensor:
                    self.local_tensors.add(target.value)
                else:
                    self.local_tensors.discard(target.value)
            elif isinstance(target, cst.Name):
                self._bind_local(target.value, value)
            elif isinstance(target, cst.Subscript):
                self._subscript_store(target, value)
            return
        if name not in self.cls.self_assigned:
            self.cls.self_assigned.append(name)
        if isinstance(value, cst.Name) and (value.value in self.local_modules or value.value in self.module_params):
            self.registered_locals.add(value.value)
        if tensor is None:
            kind, mclass, device, elem = self.b.classify_value(value, self.params, self.local_tensors)
        else:
            kind, mclass, device, elem = ("tensor" if tensor else "other"), "", "", ""
        if kind == "other" and isinstance(value, cst.Name) and value.value in self.local_modules:
            kind, mclass = "module", self.local_modules[value.value]  # lm = Decoder(cfg); self.lm = lm
        wrapper, wrapped_class, wrapped = "", "", None
        if kind == "other":
            wrapper, wrapped_class, wrapped = self.b.module_wrapper(value, {**self.module_params, **self.local_modules})
            if wrapper:
                kind, elem = "module_container", wrapped_class
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
            record.argument = _strip_none_choice(value) in self.argument_tensors
            record.complex = self.b.is_complex_tensor(value, self.complex_names)
        if kind == "module_container":
            record.stateless_elements = self.b.stateless_elements(value)
        if kind == "other":
            record.cpu_generator = self.b.is_cpu_generator(value)
        if kind == "device":
            record.weights_device = reads_own_weights_device(value, self.self_name)
        record.sequence = _is_sequence_value(value) or (
            isinstance(value, cst.Name) and value.value in self.sequence_params
        )
        if isinstance(value, cst.Name) and value.value in self.factory_params:
            record.factory = self.factory_params[value.value]
        record.container = _container_type(value)
        if kind == "tensor_container" and self.b.distribution_of_tensors(_strip_placement(value)[0], self.local_tensors):
            record.container = "distribution"
            inner = _strip_placement(value)[0]
            assert isinstance(inner, cst.Call)
            # Normal(torch.tensor(0.0), torch.tensor(1.0)): 0-dim parameters mix with any device
            record.scalar = all(
                self.b.is_scalar_tensor(a.value, self.scalar_names) or _is_python_number(a.value, self.scalar_names)
                for a in inner.args if not a.star
            )
        if record.container == "dict":
            record.str_keys = _dict_has_str_keys(value)
        if kind == "module_container" and not record.container:
            # a helper's container: its keys are not known to be strings
            record.container = self.b.returned_module_container(value)[0]
        if kind == "tensor_container" and not record.container:
            record.container = self.b.returned_tensor_container(value)
        if kind == "tensor_container" and not self.b._container_of_tensors(value, self.local_tensors):
            record.tensor_keys = self.b.tensor_keys(value, self.local_tensors)
        if wrapper:
            record.wrapper, record.container = wrapper, ""
            if isinstance(wrapped, cst.Name):
                self.wrapped.append((record, wrapped.value))
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
        if record.complex:
            self.complex_names.add(f"{self.self_name}.{name}")
        else:
            self.complex_names.discard(f"{self.self_name}.{name}")
        if name in self.cls.attributes and self.method != "__init__" and self.cls.attributes[name].method == "__init__":
            return  # __init__ says what the attribute is
        self.cls.attributes[name] = record

    def _bind_local(self, name: str, value: cst.BaseExpression) -> None:
        # a re-bound name forgets what it held
        self.local_tensors.discard(name)
        self.argument_tensors.discard(name)
        self.scalar_names.discard(name)
        self.complex_names.discard(name)
        if self.b.is_complex_tensor(value, self.complex_names):
            self.complex_names.add(name)
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
            elif name in self.local_modules or name in self.module_params:
                self.registered_locals.add(name)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, (cst.Tuple, cst.List)) and isinstance(node.value, (cst.Tuple, cst.List)):
                for te, ve in zip(t.target.elements, node.value.elements):
                    self._record(te.value, ve.value, node)
            elif isinstance(t.target, (cst.Tuple, cst.List)) and isinstance(node.value, cst.Call):
                # self.w, self.b = sample_params(n) of a helper returning ``w, b``
                tensors = self.b.returned_tensor_positions(node.value)
                for i, te in enumerate(t.target.elements):
                    if isinstance(te, cst.StarredElement):
                        break
                    self._record(te.value, node.value, node, tensor=i < len(tensors) and tensors[i])
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
        if isinstance(func, cst.Name) and func.value != "setattr":
            registers = self.b.registered_arguments(func.value)
            if registers:  # set_module_by_path(self.net, path, wrapper): the helper registers it
                fn = self.b._module_function_nodes()[func.value]
                for param, pos in bound_parameters(fn, node.args).items():
                    if param in registers:
                        self._mark_registered(node.args[pos].value)
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
                    # self.original = self.table after registering it (a
                    # buffer holds a tensor or None): a plain alias of the
                    # buffer's tensor, left behind when .to() replaces the
                    # buffer (an alias of a Parameter registers, so it is none)
                    key = f"{self.self_name}.{name}"
                    value = node.args[1].value if len(node.args) > 1 else None
                    if attr == "register_buffer" and value is not None and not (isinstance(value, cst.Name) and value.value == "None"):
                        self.local_tensors.add(key)
                    else:
                        self.local_tensors.discard(key)
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
                self.cls.pinning_methods.add(self.method)
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
        for record, local_name in self.wrapped:
            if local_name in self.registered_locals:
                record.registered_elsewhere = True  # self.net = net beside self.cached = lru_cache()(net)
        for attr, locals_ in self.attr_element_locals.items():
            if locals_ & self.registered_locals:
                self.b._registered_attrs.setdefault(self.cls.name, set()).add(attr)


def _strip_none_choice(value: cst.BaseExpression) -> str:
    """The name ``value`` is, also as ``x if c else None`` (either way
    round); "" for anything else."""
    if isinstance(value, cst.IfExp):
        for a, b in ((value.body, value.orelse), (value.orelse, value.body)):
            if isinstance(b, cst.Name) and b.value == "None" and isinstance(a, cst.Name):
                return a.value
        return ""
    return value.value if isinstance(value, cst.Name) else ""


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
        #: writes the device flow does not follow: into an item of the
        #: attribute (``self.grid[i] = ...``), or augmented (``self.t += x``)
        self.opaque_writes: Set[str] = set()
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
            self.opaque_writes.add(self_attribute(target.value, self.self_name) or "")
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
        name = self_attribute(node.target, self.self_name)
        if name is not None:
            self.opaque_writes.add(name)

    def visit_For(self, node: cst.For) -> None:
        self._store(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._store(node.asname.name)

    def _quiet_chain(self, node: cst.BaseExpression) -> None:
        # self.pe[:, :n].float().to(x.device): the read of self.pe is moved;
        # self.table[ids].to(d) is not: indexing by what may be a tensor
        # happens before the move (the flow says whether it is one)
        while True:
            if self_attribute(node, self.self_name) is not None or dynamic_self_attribute(node, self.self_name):
                self._quiet.add(id(node))
                return
            if isinstance(node, cst.Subscript):
                if not all(_constant_index(e) for e in node.slice):
                    return
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

    def __init__(self, self_name: str, params: Sequence[str] = (), augmented: bool = True) -> None:
        self.self_name = self_name
        self.params = set(params)
        #: whether ``self.<name> += ...`` counts (on a tensor it works in place)
        self.augmented = augmented
        self.names: List[str] = []
        self.moves_inputs = False
        #: ``self.<attr>(p, ...)`` with a parameter ``p`` as it came in: the
        #: parts the method hands its inputs to (``self.wte(input_ids)``)
        self.input_calls: List[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        attr = self_attribute(func, self.self_name)
        first = node.args[0].value if node.args and node.args[0].keyword is None and not node.args[0].star else None
        if attr is not None and isinstance(first, cst.Name) and first.value in self.params and attr not in self.input_calls:
            self.input_calls.append(attr)
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
        if self.augmented:
            self._target(node.target)


def build_facts(module: cst.Module, project: Optional["ProjectContext"] = None) -> FileFacts:
    """Compute the shared facts of one parsed file (``project``: its place in
    a project run, whose index resolves the classes it imports)."""
    return _FactsBuilder(module, project).build()


class Classes(Provider):
    """:class:`FileFacts`: the import aliases, module-level devices, and every
    class with its bases, methods, attributes and forward reach."""

    @classmethod
    def build(cls, store: FactStore) -> FileFacts:
        return build_facts(store.module, store.project)


def _is_dtype_expr(facts: FileFacts, node: cst.BaseExpression) -> bool:
    """``.to(torch.float16)``/``.to(dtype)``/``.to(other_tensor)`` are no device moves."""
    dotted = dotted_name(node)
    if dotted is None:
        return False
    if "dtype" in dotted.rsplit(".", 1)[-1].lower():
        return True
    q = facts.qualify_dotted(dotted)
    return q is not None and q.startswith("torch.") and q != "torch.device"


def _string_list(node: Optional[cst.BaseExpression]) -> List[str]:
    """The strings of a list or tuple display of string literals."""
    if not isinstance(node, (cst.List, cst.Tuple)):
        return []
    out = [string_value(e.value) for e in node.elements if isinstance(e, cst.Element)]
    return [s for s in out if s]


def _constant_index(element: cst.SubscriptElement) -> bool:
    """A subscript element no tensor can be: a slice, an integer, ``None``,
    ``...``."""
    s = element.slice
    if isinstance(s, cst.Slice):
        return True
    v = s.value
    if isinstance(v, cst.UnaryOperation):
        v = v.expression
    return isinstance(v, (cst.Integer, cst.Ellipsis)) or (isinstance(v, cst.Name) and v.value == "None")
