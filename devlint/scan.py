"""The candidate scan: one walk over CPython's ``ast`` (about 12x cheaper than
the libcst parse) that summarises what a file calls, imports and defines, so
that a rule can say "I cannot fire here" before libcst parses the file.

A rule answers from the summary in :meth:`devlint.rule.Rule.candidate`. The
answer must over-approximate the rule: ``False`` only when the libcst visitor
certainly reports nothing (a wrong ``False`` drops a finding; a wrong
``True`` costs only time). A rule without the hook is always a candidate.
Names resolve through the same import-alias semantics as
:class:`devlint.facts.classes.FileFacts`, but to *every* target a name may have
(a superset of the one the semantic pass picks).
"""

from __future__ import annotations

import ast
from typing import Dict, FrozenSet, Iterator, List, NamedTuple, Optional, Set, Tuple

from devlint.torch_api import (
    FUNCTOOLS_WRAPPERS,
    BARE_CONTAINER_ANNOTATIONS,
    DEVICE_FACTORIES as _FACTORY_NAMES,
    KNOWN_MODULE_BASES,
    _LEGACY_TENSOR_CONSTRUCTORS,
    _is_torch_module_name,
    canonical,
)

#: calls that build a plain container (as ``facts.classes._container_type`` reads them)
_CONTAINER_CALLS = frozenset({"list", "dict", "tuple", "collections.OrderedDict", "OrderedDict"})


_LOCAL_HINTS = frozenset({"Tensor", "FloatTensor", "LongTensor", "BoolTensor", "shape"})


class CallSite(NamedTuple):
    """One call, where it is, and how it is called."""

    #: dotted callee (``torch.zeros``, ``T.nn.DataParallel``, ``zeros``) or None
    func: Optional[str]
    #: last attribute of the callee when it is ``<expr>.attr`` (``to``, ``cuda``)
    attr: Optional[str]
    #: keyword names; ``None`` stands for ``**kwargs``
    keywords: Tuple[Optional[str], ...]
    #: positional arguments (``*args`` counts as one)
    n_args: int
    #: the innermost enclosing class, by name
    cls: Optional[str]
    #: the outermost function inside that class (what ``Context.current_method`` names)
    method: Optional[str]
    line: int
    #: for ``<receiver>.attr(...)``: the receiver's root name and shape ("name"
    #: ``x``, "attr" ``x.a``, "subscript" ``x.a[i]``, "call" ``f(...)``, "other")
    receiver: Tuple[Optional[str], str] = (None, "")
    #: the device argument: ``device=`` if given, else (for ``.to``) the first
    #: positional one, as (kind, detail): ("str", value), ("int", ""),
    #: ("call", dotted callee), ("name", id), ("attr", "root.attr"),
    #: ("fstr", leading literal text: ``"cuda:"`` for ``f"cuda:{i}"``), ("other", "")
    device_arg: Optional[Tuple[str, str]] = None
    #: the call is a direct element of a list/tuple/set display, the element
    #: of a comprehension or a positional argument of another call (where
    #: ``nn.Sequential(a.to(d0), b.to(d1))`` places container elements)
    in_container: bool = False
    #: the ``a`` of a receiver ``x.a`` / ``x.a[i]``, else ""
    receiver_attr: str = ""
    #: the call's value is moved or only indexes on the spot: it is the
    #: receiver of ``.to/.cuda/.type_as/.cpu`` (through shape-keeping method
    #: chains, subscripts and ``.T``, as DL001 peels them) or a subscript index
    moved: bool = False
    #: the first positional argument: "empty" (``[]``, ``()``), "container"
    #: (a list/tuple display or comprehension), "name", "other", or ""
    first_arg: str = ""
    #: the first positional argument is "attribute" (``x.a``: ``a``) or
    #: "call" (``f(...)``: ``f``): that name, else ""
    first_name: str = ""
    #: the outermost enclosing ``def`` (a method or a module-level function), by name
    function: Optional[str] = None

    @property
    def has_star_kwargs(self) -> bool:
        return None in self.keywords


class ScanSummary:
    """What one ``ast`` walk of a file found; see :func:`scan_source`."""

    def __init__(self) -> None:
        #: local name -> every dotted target an import binds it to, anywhere in the file
        self.imports: Dict[str, List[str]] = {}
        self.calls: List[CallSite] = []
        #: class name -> method name -> attribute names called in it (``self.f()`` -> ``f``)
        self.methods: Dict[str, Dict[str, Set[str]]] = {}
        #: class name -> dotted base expressions (every class of that name)
        self.bases: Dict[str, List[str]] = {}
        #: every attribute name read or written anywhere (``x.device`` -> ``device``)
        self.attributes: Set[str] = set()
        #: every short (<= 64 characters) string constant in the file, f-string parts included
        self.strings: Set[str] = set()
        #: for each ``for`` statement: the dotted name it iterates, calls and
        #: subscripts peeled off (``enumerate(tqdm(loaders["train"]))`` ->
        #: ``loaders``), "" when it is not a name
        self.loops: List[str] = []
        #: loop variable -> attributes it iterates (``for b in x.blocks``,
        #: ``for i, b in enumerate(x.blocks)``: ``b`` -> ``{"blocks"}``)
        self.loop_attribute_vars: Dict[str, Set[str]] = {}
        #: name -> dotted callees of the calls assigned to it, method-call
        #: chains peeled (``model = Net(...).cuda()`` -> ``Net``; "" unnamed)
        self.call_bound: Dict[str, Set[str]] = {}
        #: names assigned outside any class (at module level or in functions)
        self.unclassed_names: Set[str] = set()
        #: attributes ``__init__`` sets to the device of the module's own
        #: weights (``self.device = next(self.parameters()).device``): a
        #: superset of ``AttributeFacts.weights_device``
        self.weights_device_attrs: Set[str] = set()
        #: parameters (of any ``def``) whose default is the CPU device
        #: (``device="cpu"``, ``device=torch.device("cpu")``)
        self.cpu_default_params: Set[str] = set()
        #: (class, method) -> the names its first parameter may have (``self``)
        self.method_self: Dict[Tuple[str, str], Set[str]] = {}
        #: names given to ``register_buffer``: ``self.alias = self.<buffer>`` holds a tensor
        self.buffer_names: Set[str] = set()
        #: class -> the names its methods register as buffers of their own
        #: (``self.register_buffer("name", ...)``, a literal name), in order
        self.class_buffers: Dict[str, List[str]] = {}
        #: (class, method) -> its parameters annotated with a ``...Tensor`` type
        self.tensor_arguments: Dict[Tuple[str, str], Set[str]] = {}
        #: attribute name -> values assigned to ``<name>.attr`` anywhere:
        #: "call:<dotted callee>", "container" (list, tuple, dict,
        #: comprehension) or "other"; see :meth:`attribute_kinds`
        self.attribute_values: Dict[str, Set[str]] = {}
        #: every ``<owner>.device`` as (class, method, owner's root name,
        #: owner's shape: "name" ``x``, "attr" ``x.a``, "subscript" ``x.a[i]``,
        #: "other", the ``a`` of the last two or "")
        self.device_reads: List[Tuple[Optional[str], Optional[str], Optional[str], str, str]] = []
        #: ``self.attr = value`` inside a method (``self``: the method's first
        #: parameter), as (class, method, attribute, value node), paired like
        #: the semantic pass pairs them
        #: (``a.x, a.y = u, v`` gives two; ``a.x, a.y = f()`` two, each with the call)
        self.attribute_stores: List[Tuple[str, str, str, ast.AST]] = []
        #: classes with a ``<first parameter>.device = ...`` in some method
        self.self_device_stores: Set[str] = set()
        #: (class, method) -> local name -> the value nodes assigned to it
        self.local_values: Dict[Tuple[str, str], Dict[str, List[ast.AST]]] = {}
        #: what may add an element to a container, as (class, method,
        #: container, element node): ``<c>.append(e)`` / ``.insert(i, e)``,
        #: ``<c>.extend(es)``, ``<c>[k] = e``; the container is ``"." + attr``
        #: for ``<name>.attr`` and the name itself for a plain name; the last
        #: item says whether it adds every element of ``es`` (``extend``)
        self.container_adds: List[Tuple[str, str, str, ast.AST, bool]] = []
        #: (class, method) -> every attribute name it uses (``x.a`` -> ``a``)
        self.method_attributes: Dict[Tuple[str, str], Set[str]] = {}
        #: (class, method) -> the attribute names it reads on its first
        #: parameter (``self.device`` -> ``device``)
        self.self_reads: Dict[Tuple[str, str], Set[str]] = {}
        #: names of every function and method defined in the file (a call of
        #: one may return a tensor: ``self.kernel = make_kernel(5)``)
        self.function_names: Set[str] = set()
        #: (class, method) pairs whose body calls the instance itself (``self(x)``)
        self.self_callers: Set[Tuple[Optional[str], Optional[str]]] = set()
        #: every name called in the file (``f(...)``, ``x.f(...)``)
        self.called_names: Set[str] = set()
        #: some ``t.type(x.type())`` (a move to the current GPU when x is on one)
        self.retypes = False
        #: some statement is a bare ``<x>.to(...)``/``<x>.cuda(...)`` call,
        #: whose result (for a tensor: the moved copy) is thrown away
        self.bare_moves = False
        #: names assigned in some class body (``_no_split_modules = [...]``)
        self.class_body_names: Set[str] = set()
        #: (class or None, name) of each outermost ``def`` -> whether it is a
        #: static or class method, and whether some parameter (``self`` apart)
        #: may hold a tensor (see :meth:`may_hold_local_tensors_in`)
        self.function_inputs: Dict[Tuple[Optional[str], str], Tuple[bool, bool]] = {}
        #: ... and the class names its parameters are annotated with
        #: (``outputs: "DetectionOutput"``, ``Optional[...]`` of one)
        self.annotated_classes: Dict[Tuple[Optional[str], str], Set[str]] = {}
        #: classes whose body annotates a field as a tensor (a model-output
        #: dataclass); in a project run also the imported project classes
        #: that do (the index knows them): a parameter annotated with one
        #: holds tensors that follow the inputs
        self.record_classes: Set[str] = set()
        #: class of this file -> the fields its body annotates as one tensor
        #: (``ClassFacts.tensor_fields``, for a summary made from the scan;
        #: ``record_classes`` is the wider bound: any annotation naming a tensor type)
        self.tensor_fields: Dict[str, List[str]] = {}
        #: in a project run: local names bound to a class or module of the
        #: project (the index knows them; this walk cannot see inside), each
        #: of which may be a module class
        self.project_names: Set[str] = set()
        #: module-level functions whose body reads some ``.module`` (a bound
        #: on the ones that return a parameter unwrapped)
        self.module_readers: Set[str] = set()
        #: (project run) the names of imported project functions that return
        #: their argument wrapped in DataParallel/DDP
        self.wrap_helpers: Set[str] = set()
        #: (project run) the names of imported project functions that return a data loader
        self.loader_helpers: Set[str] = set()
        #: (project run) imported project functions whose ``map_location`` parameter defaults to None
        self.load_helpers: Set[str] = set()
        #: in a project run: the names (as this file spells them) of project
        #: functions of other files that return a tensor made on the CPU
        self.cpu_helpers: Set[str] = set()
        #: ... and of those that take the first parameter of a module they are given
        self.parameter_helpers: Set[str] = set()
        #: ... and the properties of imported project classes (and their
        #: bases) that take ``next(self.parameters())``
        self.parameter_properties: Set[str] = set()
        #: (class, method) -> parameter name -> the dotted name its default
        #: is (``window_fn=torch.hann_window``: ``torch.hann_window``)
        self.callable_defaults: Dict[Tuple[Optional[str], str], Dict[str, str]] = {}
        self._forward: Optional[Dict[str, FrozenSet[str]]] = None
        self._forward_reads: Optional[FrozenSet[str]] = None

    # -- name resolution ---------------------------------------------------
    def resolve(self, dotted: Optional[str]) -> List[str]:
        """Every qualified (canonical) name ``dotted`` may refer to through
        the file's imports; empty when its head is not imported."""
        if not dotted:
            return []
        head, _, rest = dotted.partition(".")
        targets = self.imports.get(head)
        if not targets:
            return []
        return [canonical(f"{t}.{rest}" if rest else t) for t in targets]

    def refers_to(self, dotted: Optional[str], qualified: "Set[str] | FrozenSet[str]") -> bool:
        return any(q in qualified for q in self.resolve(dotted))

    def factory_attributes(self) -> Set[str]:
        """Attributes a method sets to a parameter whose default may be a
        torch factory (``self.window_fn = window_fn`` with
        ``window_fn=torch.hann_window``): a superset of the attributes whose
        ``AttributeFacts.factory`` is set."""
        out = set()
        for cls, method, attr, value in self.attribute_stores:
            defaults = self.callable_defaults.get((cls, method), {})
            if type(value) is ast.Name and value.id in defaults and self.torch_functions(defaults[value.id]) & _FACTORY_NAMES:
                out.add(attr)
        return out

    def torch_functions(self, dotted: Optional[str]) -> Set[str]:
        """``{"zeros"}`` when ``dotted`` may name ``torch.zeros``."""
        out = set()
        for q in self.resolve(dotted):
            if q.startswith("torch.") and q.count(".") == 1:
                out.add(q[len("torch."):])
        return out

    def attribute_kinds(self, attr: str) -> Set[str]:
        """What ``<name>.attr`` may be assigned anywhere in the file:
        "parameter" (a call that can only be ``nn.Parameter``), "call",
        "container", "other"."""
        out = set()
        for v in self.attribute_values.get(attr, ()):
            if v.startswith("call:"):
                qualified = self.resolve(v[5:])
                out.add("parameter" if qualified and all(q == "torch.nn.Parameter" for q in qualified) else "call")
            else:
                out.add(v)
        return out

    def attribute_may_be_module(self, attr: str) -> bool:
        """Whether ``<name>.attr`` is assigned, somewhere in the file, a call
        that may build a module: a class of this file or a ``torch.nn`` one
        (``.to(d)``-style chains peeled; ``nn.Parameter`` is not one)."""
        for v in self.attribute_values.get(attr, ()):
            if not v.startswith("call:"):
                continue
            callee = v[5:]
            if not callee or self.class_may_be_module(callee) or self.from_project(callee):
                return True
            if any(_is_torch_module_name(q) for q in self.resolve(callee)):
                return True
        return False

    def may_build_module(self, callee: str) -> bool:
        """Whether a call of ``callee`` may build a module: a class of this
        file, a ``torch.nn`` class, or (in a project run) a project class."""
        return (
            self.class_may_be_module(callee)
            or any(_is_torch_module_name(q) for q in self.resolve(callee))
            or self.from_project(callee)
        )

    def from_project(self, dotted: Optional[str]) -> bool:
        """``dotted`` is, or is reached through, a name imported from the
        project's own modules (a project run only)."""
        return bool(dotted) and dotted.partition(".")[0] in self.project_names  # type: ignore[union-attr]

    def class_may_be_module(self, name: str) -> bool:
        """Whether ``name`` is a class of this file that may be an
        ``nn.Module`` (a superset of ``ClassFacts.is_module``: some base, here
        or in a local base, may name a ``torch.nn`` class or a known module
        base such as ``PreTrainedModel``)."""
        seen: Set[str] = set()
        todo = [name]
        while todo:
            c = todo.pop()
            if c in seen or c not in self.bases:
                continue
            seen.add(c)
            for base in self.bases[c]:
                if base in self.bases:
                    todo.append(base)
                elif base.rsplit(".", 1)[-1] in KNOWN_MODULE_BASES or any(
                    _is_torch_module_name(q) for q in self.resolve(base)
                ) or self.from_project(base):
                    return True
        return False

    def class_may_derive(self, name: str, targets: "frozenset[str]") -> bool:
        """Whether ``name`` is a class of this file with a base, here or
        through its local bases, that may resolve to one of ``targets``
        (qualified names)."""
        seen: Set[str] = set()
        todo = [name]
        while todo:
            c = todo.pop()
            if c in seen or c not in self.bases:
                continue
            seen.add(c)
            for base in self.bases[c]:
                if base in self.bases:
                    todo.append(base)
                elif any(q in targets for q in self.resolve(base)):
                    return True
        return False

    def class_may_lack_device(self, cls: str) -> bool:
        """False only when the semantic pass certainly finds a ``device`` on
        instances of ``cls``: a ``device`` or ``__getattr__`` method, a
        ``self.device = ...``, or a base it cannot see into (imported from
        elsewhere, or one known to define it), in ``cls`` or a local base."""
        seen: Set[str] = set()
        todo = [cls]
        while todo:
            c = todo.pop()
            if c in seen:
                continue
            seen.add(c)
            methods = self.methods.get(c, {})
            if "device" in methods or "__getattr__" in methods or c in self.self_device_stores:
                return False
            for base in self.bases.get(c, ()):
                if base in self.bases:
                    todo.append(base)
                    continue
                if base == "object" or self.from_project(base):
                    continue  # a project base: the index says, and it may lack one
                known = KNOWN_MODULE_BASES.get(base.rsplit(".", 1)[-1])
                if known:
                    return False
                resolved = self.resolve(base)
                if not resolved or not all(q.startswith("torch.nn.") for q in resolved):
                    if known is None:
                        return False
        return True

    # -- classes and forward -------------------------------------------------
    def forward_methods(self) -> Dict[str, FrozenSet[str]]:
        """Class name -> method names that may run from ``forward``: ``forward``
        and, transitively, what it calls as ``<name>.<method>(...)``. A
        superset of :attr:`devlint.facts.classes.ClassFacts.forward_reachable`
        (every class counts, whatever its bases; same-named classes merge)."""
        if self._forward is None:
            found: Dict[str, Set[str]] = {}
            for cls, methods in self.methods.items():
                reach = {"forward"}
                todo = ["forward"]
                while todo:
                    for callee in methods.get(todo.pop(), ()):
                        if callee in methods and callee not in reach:
                            reach.add(callee)
                            todo.append(callee)
                found.setdefault(cls, set()).update(reach)
            # a method a class inherits from a base of this file runs in the
            # base's code: self.init_hidden(b) defined by the base class
            for cls in self.methods:
                for owner, method in self._inherited_calls(cls, found.get(cls, set())):
                    found.setdefault(owner, set()).add(method)
            self._forward = {c: frozenset(m) for c, m in found.items()}
        return self._forward

    def _owner_of(self, cls: str, method: str) -> Optional[str]:
        """The class of this file whose ``method`` instances of ``cls`` run
        (``cls`` itself or a base, depth first)."""
        seen: Set[str] = set()
        todo = [cls]
        while todo:
            c = todo.pop(0)
            if c in seen or c not in self.bases:
                continue
            seen.add(c)
            if method in self.methods.get(c, {}):
                return c
            todo[:0] = [b for b in self.bases[c] if b in self.bases]
        return None

    def _inherited_calls(self, cls: str, reach: Set[str]) -> List[Tuple[str, str]]:
        """(base, method) pairs that ``cls``'s forward-reachable methods run
        through ``self.<method>(...)`` on a base of this file, transitively."""
        out: List[Tuple[str, str]] = []
        todo = [(cls, m) for m in reach]
        seen = set(todo)
        while todo:
            owner, m = todo.pop()
            for callee in self.methods.get(owner, {}).get(m, ()):
                target = self._owner_of(cls, callee)
                if target is None or (target, callee) in seen:
                    continue
                seen.add((target, callee))
                todo.append((target, callee))
                if target != cls:
                    out.append((target, callee))
        return out

    def in_forward(self, cls: Optional[str], method: Optional[str]) -> bool:
        if cls is None or method is None:
            return False
        return method in self.forward_methods().get(cls, ())

    def calls_in_forward(self) -> Iterator[CallSite]:
        for call in self.calls:
            if self.in_forward(call.cls, call.method):
                yield call

    def forward_attribute_reads(self) -> FrozenSet[str]:
        """Every attribute name that code run by some ``forward`` or other
        public method may use: a superset of every class's
        ``ClassFacts.forward_reads`` and ``ClassFacts.entry_reads``. Methods
        link by name across all classes of the file (inherited methods,
        subclass forwards), through calls and plain attribute reads
        (properties)."""
        from devlint.torch_api import INIT_METHODS

        if self._forward_reads is None:
            by_name: Dict[str, List[Tuple[str, str]]] = {}
            for key in self.method_attributes:
                by_name.setdefault(key[1], []).append(key)
            todo = [key for name, keys in by_name.items() if name == "forward" or not name.startswith("_") and name not in INIT_METHODS
                    for key in keys]
            seen = set(todo)
            reads: Set[str] = set()
            while todo:
                used = self.method_attributes.get(todo.pop(), set())
                reads |= used
                for name in used:
                    for key in by_name.get(name, ()):
                        if key not in seen:
                            seen.add(key)
                            todo.append(key)
            self._forward_reads = frozenset(reads)
        return self._forward_reads

    def stores_outside_forward(self) -> Iterator[Tuple[str, str, str, ast.AST]]:
        """``attribute_stores`` of methods other than ``forward``."""
        for store in self.attribute_stores:
            if store[1] != "forward":
                yield store

    def may_hold_local_tensors(self) -> bool:
        """Whether the device flow can see a tensor on the inputs' device in
        this file (a bound on ``DeviceFlow``'s meetings): something annotated
        or used as a tensor (``Tensor``, ``.device``, ``.size()``, ...), a
        torch computation or collective, or a class that may be a module."""
        from devlint.facts.flow import TENSOR_ONLY_ATTRS

        if self.attributes & (TENSOR_ONLY_ATTRS | _LOCAL_HINTS):
            return True
        if any(t.endswith("Tensor") and t.startswith("torch.") for ts in self.imports.values() for t in ts):
            return True
        if any(self.class_may_be_module(c) for c in self.bases):
            return True
        if self.record_classes and any(names & self.record_classes for names in self.annotated_classes.values()):
            return True  # outputs: DetectionOutput, whose fields are tensors
        for call in self.calls:
            for q in self.resolve(call.func):
                if q.startswith(("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.", "torch.distributed.")):
                    return True
                if q.startswith("torch.") and q.count(".") == 1 and q[6:] not in _FACTORY_NAMES:
                    return True
        return False

    def may_hold_local_tensors_in(self, cls: Optional[str], function: Optional[str]) -> bool:
        """Whether the device flow can see a tensor on the inputs' device in
        the outermost ``def`` ``function`` (of ``cls``) at all (a bound on
        ``DeviceFlow``'s meetings of the tensors it creates): False only for
        a function nothing in the file calls, with no ``self`` of a class
        that may be a module, whose every parameter is annotated as
        something else than a tensor (``config: DiaConfig``), has a literal
        default, or is ``*args``/``**kwargs``. Such a function holds no
        tensor that follows the inputs, and what it returns reaches no
        caller in this file."""
        if function is None:
            return True  # module level code
        info = self.function_inputs.get((cls, function))
        if info is None or function in self.called_names:
            return True
        static, tensor_inputs = info
        if tensor_inputs or self.annotated_classes.get((cls, function), set()) & self.record_classes:
            return True
        return cls is not None and not static and self.class_may_be_module(cls)

    def may_hold_sequence(self, cls: Optional[str], attr: str) -> bool:
        """Whether ``self.<attr>`` of ``cls`` may hold a list or tuple (a
        superset of ``AttributeFacts.sequence``): some store of it outside
        ``forward`` is a display, a comprehension, ``list()``/``tuple()`` or a
        name."""
        for c, _, name, value in self.stores_outside_forward():
            if c != cls or name != attr:
                continue
            t = type(value)
            if t in (ast.List, ast.Tuple, ast.ListComp, ast.Name) or (
                t is ast.Call and (_dotted(value.func) or "") in ("list", "tuple")  # type: ignore[attr-defined]
            ):
                return True
        return False

    def may_be_tensor(self, node: Optional[ast.AST], cls: str, method: str) -> bool:
        """Whether ``node`` may be what ``SemanticBuilder._is_tensor_expr``
        calls a tensor, or a container of them (a superset): it must reach,
        through method chains, arithmetic, indexing and container elements,
        a call of a torch function or legacy tensor constructor, or a local
        name of the method assigned such a value."""
        arguments = self.tensor_arguments.get((cls, method), set())
        if type(node) is ast.IfExp:  # bounds if c else None
            return self.may_be_tensor(node.body, cls, method) or self.may_be_tensor(node.orelse, cls, method)
        if type(node) is ast.Name and node.id in arguments:  # type: ignore[union-attr]
            return True
        return self._maybe_tensor(node, self.local_values.get((cls, method), {}), set())

    def _maybe_tensor(self, node: Optional[ast.AST], local: Dict[str, List[ast.AST]], seen: Set[str]) -> bool:
        while True:
            t = type(node)
            if t is ast.Call:
                func = node.func  # type: ignore[union-attr]
                for q in self.resolve(_dotted(func)):
                    if (q.startswith("torch.") and q.count(".") == 1) or q in _LEGACY_TENSOR_CONSTRUCTORS:
                        return True
                    if q.startswith("torch.distributions."):
                        return True  # Normal(torch.zeros(d), torch.ones(d)): holds tensors
                # a helper of this file, which may return a tensor
                if type(func) is ast.Name and func.id in self.function_names:  # type: ignore[attr-defined]
                    return True
                if type(func) is ast.Name and func.id == "dict":  # type: ignore[attr-defined]
                    # dict(n_fft=512, window=torch.hann_window(512)): its values
                    return any(self._maybe_tensor(k.value, local, seen) for k in node.keywords)  # type: ignore[union-attr]
                if type(func) is not ast.Attribute:
                    return False
                if type(func.value) is ast.Name and func.attr in self.function_names:  # type: ignore[attr-defined]
                    return True
                node = func.value
            elif t is ast.BinOp:
                if self._maybe_tensor(node.left, local, seen):  # type: ignore[union-attr]
                    return True
                node = node.right  # type: ignore[union-attr]
            elif t is ast.UnaryOp:
                if type(node.op) is ast.Not:  # type: ignore[union-attr]
                    return False
                node = node.operand  # type: ignore[union-attr]
            elif t is ast.Attribute and type(node.value) is ast.Name and node.attr in self.buffer_names:  # type: ignore[union-attr]
                return True  # self.original = self.inv_freq: an alias of a buffer's tensor
            elif t is ast.Subscript or t is ast.Attribute or t is ast.Starred:
                node = node.value  # type: ignore[union-attr]
            elif t is ast.List or t is ast.Tuple or t is ast.Set:
                return any(self._maybe_tensor(e, local, seen) for e in node.elts)  # type: ignore[union-attr]
            elif t is ast.Dict:
                return any(self._maybe_tensor(v, local, seen) for v in node.values)  # type: ignore[union-attr]
            elif t is ast.ListComp or t is ast.SetComp or t is ast.GeneratorExp:
                node = node.elt  # type: ignore[union-attr]
            elif t is ast.DictComp:
                node = node.value  # type: ignore[union-attr]
            elif t is ast.Name:
                name = node.id  # type: ignore[union-attr]
                if name in seen or name not in local:
                    return False
                seen.add(name)
                return any(self._maybe_tensor(v, local, seen) for v in local[name])
            else:
                return False

    def may_be_module_container(self, node: Optional[ast.AST], cls: str, method: str, attr: str) -> bool:
        """Whether ``self.<attr> = node`` may be what the semantic pass calls a
        ``module_container`` (a superset): a plain list/tuple/dict display,
        comprehension or ``list()``/``dict()``/``tuple()``/``OrderedDict()``
        call (or a local name of the method assigned one) that holds an
        element that may be a module, or that something in the class fills
        with one (``self.<attr>.append(Block())``, ``layers[k] = nn.Linear()``),
        or a call of a function or method of this file (which may return
        such a container), or of a ``functools`` wrapper (which may hold a
        module)."""
        if type(node) is ast.Name:
            local = node.id  # type: ignore[union-attr]
            values = [v for v in self.local_values.get((cls, method), {}).get(local, ()) if _is_container(v)]
            return bool(values) and (
                any(self._holds_module(v) for v in values) or self._filled_with_module(cls, local)
            )
        if type(node) is ast.Call and not _is_container(node):
            # a helper of this file that may return a container of modules
            # (map_values(lambda n: nn.Linear(d, n), sizes))
            dotted = _dotted(node.func) or ""  # type: ignore[union-attr]
            if dotted.rpartition(".")[2] in self.function_names and dotted.count(".") <= 1:
                return True
            # a functools wrapper around a module: lru_cache(maxsize=8)(net), partial(net, k=3)
            func = node.func  # type: ignore[union-attr]
            if type(func) is ast.Call:
                func = func.func  # type: ignore[union-attr]
            return self.refers_to(_dotted(func), FUNCTOOLS_WRAPPERS)
        if not _is_container(node):
            return False
        return self._holds_module(node) or self._filled_with_module(cls, "." + attr)

    def _holds_module(self, node: ast.AST) -> bool:
        t = type(node)
        if t is ast.Call:
            # dict(rgb=Branch(), depth=Branch()): the keyword values are the elements
            if not node.args and node.keywords and (_dotted(node.func) or "") == "dict":  # type: ignore[union-attr]
                return any(self.may_be_module(k.value) for k in node.keywords)  # type: ignore[union-attr]
            args = node.args or [k.value for k in node.keywords]  # type: ignore[union-attr]
            return bool(args) and (_is_container(args[0]) or type(args[0]) is ast.GeneratorExp) and self._holds_module(args[0])
        if t is ast.Dict:
            return any(self.may_be_module(v) for v in node.values)  # type: ignore[union-attr]
        if t is ast.DictComp:
            return self.may_be_module(node.value)  # type: ignore[union-attr]
        if t is ast.ListComp or t is ast.GeneratorExp:
            return self.may_be_module(node.elt)  # type: ignore[union-attr]
        return any(self.may_be_module(e) for e in getattr(node, "elts", ()))

    def _filled_with_module(self, cls: str, container: str) -> bool:
        # an appended name may be a local module (bound in that method to
        # one); a display element may not be a name
        for c, method, name, e, many in self.container_adds:
            if c != cls or name != container:
                continue
            if many:
                if self._holds_module(e):
                    return True
            elif type(e) is ast.Name:
                values = self.local_values.get((c, method), {}).get(e.id, ())  # type: ignore[attr-defined]
                if any(self.may_be_module(v) for v in values):
                    return True
            elif self.may_be_module(e):
                return True
        return False

    def may_be_module(self, node: Optional[ast.AST]) -> bool:
        """Whether a container element may be a module (a superset of the
        semantic pass's ``_element_class``): a call of a class of this file
        that may be a module or of a ``torch.nn`` class (method chains such as
        ``.to(dev)`` peeled), a call of a function or method of this file
        (``self._make_layer(i)``, which may return a module), or a container
        call holding one."""
        t = type(node)
        if t is ast.Starred:
            return self.may_be_module(node.value)  # type: ignore[union-attr]
        if t is ast.Call:
            func = node.func  # type: ignore[union-attr]
            while type(func) is ast.Attribute and type(func.value) is ast.Call:
                func = func.value.func
            dotted = _dotted(func)
            if dotted is None:
                return False
            if self.class_may_be_module(dotted) or self.from_project(dotted):
                return True
            if dotted.rpartition(".")[2] in self.function_names and dotted.count(".") <= 1:
                return True  # a helper of this file, which may return a module: self._make_layer(i)
            if dotted in _CONTAINER_CALLS:
                return self._holds_module(node)  # type: ignore[arg-type]
            return any(q.startswith("torch.nn.") for q in self.resolve(dotted))
        return False


class _Scanner:
    """The walk. Context follows the engine's ``Context``: a class is entered
    before its bases and decorators are visited, a function before its
    decorators, defaults and annotations."""

    def __init__(self, summary: ScanSummary) -> None:
        self.s = summary

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self._bind(alias.asname, alias.name)
            else:
                head = alias.name.split(".")[0]
                self._bind(head, head)

    def _import_from(self, node: ast.ImportFrom) -> None:
        prefix = "." * (node.level or 0) + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                continue
            local = alias.asname or alias.name
            target = f"{prefix}.{alias.name}" if prefix and not prefix.endswith(".") else prefix + alias.name
            self._bind(local, target)

    def _bind(self, local: str, target: str) -> None:
        targets = self.s.imports.setdefault(local, [])
        if target not in targets:
            targets.append(target)

    @staticmethod
    def _value_kind(value: Optional[ast.AST]) -> str:
        if isinstance(value, ast.Call):
            func = value.func
            while type(func) is ast.Attribute and type(func.value) is ast.Call:  # X(...).to(d)
                func = func.value.func
            return "call:" + (_dotted(func) or "")
        if isinstance(value, (ast.List, ast.Tuple, ast.ListComp, ast.Dict, ast.DictComp, ast.GeneratorExp, ast.Set, ast.SetComp)):
            return "container"
        return "other"

    def walk(self, tree: ast.AST) -> None:
        s = self.s
        calls = s.calls
        attributes = s.attributes
        strings = s.strings
        methods = s.methods
        # (node, class name, method name, method's called-attribute set,
        # method's used-attribute set, outermost module-level def's name)
        stack: List[Tuple[ast.AST, Optional[str], Optional[str], Optional[Set[str]], Optional[Set[str]], Optional[str]]] = [
            (tree, None, None, None, None, None)
        ]
        method_attributes = s.method_attributes
        pop, push = stack.pop, stack.append
        Call, Attribute, Name, Constant = ast.Call, ast.Attribute, ast.Name, ast.Constant
        FunctionDef, AsyncFunctionDef, ClassDef = ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef
        Import, ImportFrom, Assign, AnnAssign = ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign
        For, AsyncFor = ast.For, ast.AsyncFor
        ListNode, TupleNode, SetNode, Starred = ast.List, ast.Tuple, ast.Set, ast.Starred
        ListComp, GeneratorExp, SetComp = ast.ListComp, ast.GeneratorExp, ast.SetComp
        #: ids of calls that are container elements / call arguments (see CallSite.in_container)
        elements: Set[int] = set()
        #: ids of calls whose value is moved or indexes on the spot (CallSite.moved)
        moved: Set[int] = set()
        Subscript = ast.Subscript
        iter_fields = ast.iter_fields
        AST = ast.AST
        while stack:
            node, cls, method, called, used, top = pop()
            t = type(node)
            if t is Call:
                func = node.func
                dotted = _dotted(func)
                attr = func.attr if type(func) is Attribute else None
                if attr is not None and called is not None:
                    called.add(attr)
                if attr == "type" and len(node.args) == 1 and type(node.args[0]) is Call:
                    inner_call = node.args[0]
                    if type(inner_call.func) is Attribute and inner_call.func.attr == "type" and not inner_call.args:  # type: ignore[attr-defined]
                        s.retypes = True  # t.type(x.type()): to the current GPU when x is on one
                called_names = s.called_names
                if attr is not None:
                    called_names.add(attr)
                elif type(func) is Name:
                    called_names.add(func.id)  # type: ignore[attr-defined]
                dev = next((k.value for k in node.keywords if k.arg == "device"), None)
                if dev is None and attr == "to":
                    # the first positional argument that is not *args (as the rules read it)
                    dev = next((a for a in node.args if type(a) is not Starred), None)
                for a in node.args:
                    if type(a) is Call:
                        elements.add(id(a))
                if method is not None and type(func) is Name and func.id in s.method_self.get((cls, method), ()):  # type: ignore[attr-defined]
                    s.self_callers.add((cls, method))  # self(tokens): the module runs itself
                if method is not None and type(func) is Name and func.id in ("setattr", "getattr"):  # type: ignore[attr-defined]
                    # setattr(self, f"scale_{i}", t) / getattr(self, f"scale_{i}"): as semantic names them
                    dynamic = _dynamic_attribute(node)
                    if dynamic is not None and func.id == "getattr" and used is not None:  # type: ignore[attr-defined]
                        used.add(dynamic)
                    elif dynamic is not None and len(node.args) == 3 and type(node.args[0]) is Name \
                            and node.args[0].id in s.method_self.get((cls, method), ()):  # type: ignore[attr-defined,arg-type]
                        s.attribute_stores.append((cls, method, dynamic, node.args[2]))  # type: ignore[arg-type]
                if attr == "register_buffer" and node.args and type(node.args[0]) is ast.Constant \
                        and isinstance(node.args[0].value, str):  # type: ignore[attr-defined]
                    s.buffer_names.add(node.args[0].value)  # type: ignore[attr-defined]
                    if method is not None and type(func.value) is Name \
                            and func.value.id in s.method_self.get((cls, method), ()):  # type: ignore[attr-defined]
                        s.class_buffers.setdefault(cls, []).append(node.args[0].value)  # type: ignore[arg-type,attr-defined]
                if method is not None and node.args and attr in _ADD_METHODS:
                    owner = _container_name(func.value)
                    if owner:
                        many = attr == "extend"
                        element = node.args[0] if many else node.args[-1]
                        s.container_adds.append((cls, method, owner, element, many))  # type: ignore[arg-type]
                if attr in MOVE_METHODS and (attr != "to" or _to_moves(node, s.imports)):
                    inner = func.value
                    while True:
                        ti = type(inner)
                        if ti is Call:
                            moved.add(id(inner))
                            f = inner.func
                            if type(f) is Attribute and (f.attr in CHAIN_METHODS or (f.attr == "to" and _to_casts(inner))):
                                inner = f.value
                                continue
                            break
                        if ti is ast.Subscript or (ti is Attribute and inner.attr in ("T", "mT")):
                            inner = inner.value
                            continue
                        break
                first = node.args[0] if node.args else None
                first_name = ""
                if first is None:
                    first_arg = ""
                elif type(first) in (ListNode, TupleNode):
                    first_arg = "container" if first.elts else "empty"
                elif type(first) in (ListComp, GeneratorExp):
                    first_arg = "container"
                elif type(first) is Name:
                    first_arg = "name"
                elif type(first) is Attribute and type(first.value) is Name:  # type: ignore[attr-defined]
                    first_arg, first_name = "attribute", first.attr  # type: ignore[attr-defined]  # torch.tensor(self.ratios)
                elif type(first) is Call and type(first.func) is Name:  # type: ignore[attr-defined]
                    first_arg, first_name = "call", first.func.id  # type: ignore[attr-defined]  # torch.tensor(get_slopes(n))
                else:
                    first_arg = "other"
                if attr is not None:
                    root, shape, receiver_attr = _owner_shape(func.value) if type(func.value) is not Call else (None, "call", "")
                    receiver = (root, shape)
                else:
                    receiver, receiver_attr = (None, ""), ""
                calls.append(
                    CallSite(
                        dotted,
                        attr,
                        tuple(k.arg for k in node.keywords),
                        len(node.args),
                        cls,
                        method,
                        node.lineno,
                        receiver,
                        _value_shape(dev) if dev is not None else None,
                        id(node) in elements,
                        receiver_attr,
                        id(node) in moved,
                        first_arg,
                        first_name,
                        method if cls is not None else top,
                    )
                )
            elif t is Attribute:
                attributes.add(node.attr)
                if used is not None:
                    used.add(node.attr)
                    if type(node.value) is Name and node.value.id in s.method_self.get((cls, method), ()):  # type: ignore[attr-defined]
                        s.self_reads.setdefault((cls, method), set()).add(node.attr)  # type: ignore[arg-type]
                if node.attr == "device":
                    s.device_reads.append((cls, method) + _owner_shape(node.value))
                elif node.attr == "module" and cls is None and top is not None:
                    s.module_readers.add(top)
            elif t is Constant:
                value = node.value
                if type(value) is str and len(value) <= 64:
                    strings.add(value)
                continue
            elif t is Name:
                continue
            elif t is Subscript:
                index = node.slice
                parts = index.elts if type(index) is TupleNode else (index,)
                # an index beside another index that may be a tensor may meet
                # it (mixed-device indices fail): not "only indexes"
                beside = sum(1 for part in parts if type(part) is not ast.Slice and type(part) is not Constant) > 1
                for part in parts:
                    if type(part) is Call and not beside:
                        moved.add(id(part))
            elif t is ListNode or t is TupleNode or t is SetNode:
                for a in node.elts:
                    if type(a) is Call:
                        elements.add(id(a))
            elif t is ListComp or t is GeneratorExp or t is SetComp:
                if type(node.elt) is Call:
                    elements.add(id(node.elt))
            elif t is FunctionDef or t is AsyncFunctionDef:
                s.function_names.add(node.name)
                a = node.args
                positional = a.posonlyargs + a.args
                for arg, d in list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) + list(zip(a.kwonlyargs, a.kw_defaults)):
                    if type(d) is Call and d.args:
                        d = d.args[0]  # torch.device("cpu"), th.device("cpu"), D("cpu"): a superset
                    if type(d) is ast.Constant and d.value == "cpu":
                        # def make_mask(n, device="cpu"): device=device there
                        # is a CPU tensor for a call that passes none
                        s.cpu_default_params.add(arg.arg)
                outermost = (cls is not None and method is None) or (cls is None and top is None)
                if outermost:
                    top = node.name if cls is None else top
                    s.function_inputs[(cls, node.name)] = _inputs(node, cls is not None)
                    annotated = _annotated_classes(node)
                    if annotated:
                        s.annotated_classes[(cls, node.name)] = annotated
                if outermost:
                    a = node.args
                    named = list(zip(a.args[len(a.args) - len(a.defaults):], a.defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
                    dotted_defaults = {arg.arg: _dotted(d) for arg, d in named if d is not None and type(d) is Attribute}
                    if dotted_defaults:
                        s.callable_defaults[(cls, node.name)] = {k: v for k, v in dotted_defaults.items() if v}
                if cls is not None and method is None:
                    method = node.name
                    called = methods.setdefault(cls, {}).setdefault(method, set())
                    used = method_attributes.setdefault((cls, method), set())
                    firsts = {a.arg for a in (node.args.posonlyargs[:1] + node.args.args[:1])}
                    if node.args.posonlyargs and node.args.args:
                        firsts.add(node.args.args[0].arg)  # libcst's params skip positional-only ones
                    s.method_self.setdefault((cls, method), set()).update(firsts)
                    # arguments annotated as tensors (``feature_set: Tensor``)
                    s.tensor_arguments[(cls, method)] = {
                        a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)
                        if a.annotation is not None and "Tensor" in (_annotation_text(a.annotation))
                    }
            elif t is ast.Expr:
                v = node.value
                if type(v) is Call and type(v.func) is Attribute and v.func.attr in ("to", "cuda"):
                    s.bare_moves = True
            elif t is ClassDef:
                cls, method, called, used = node.name, None, None, None
                s.bases.setdefault(cls, []).extend(filter(None, (_dotted(b) for b in node.bases)))
                methods.setdefault(cls, {})
                for stmt in node.body:
                    if type(stmt) is ast.Assign:
                        s.class_body_names.update(x.id for x in stmt.targets if type(x) is ast.Name)
                    elif type(stmt) is ast.AnnAssign and type(stmt.target) is ast.Name:
                        s.class_body_names.add(stmt.target.id)
                        if _names_tensor(stmt.annotation):
                            s.record_classes.add(cls)  # logits: Optional[torch.FloatTensor] = None
                            if _one_tensor(stmt.annotation):  # not hidden_states: Tuple[torch.FloatTensor]
                                s.tensor_fields.setdefault(cls, []).append(stmt.target.id)
            elif t is Import:
                self._import(node)
                continue
            elif t is ImportFrom:
                self._import_from(node)
                continue
            elif t is For or t is AsyncFor:
                s.loops.append(_iterated_name(node.iter))
                it, var = node.iter, node.target
                if type(it) is Call and _dotted(it.func) == "enumerate" and it.args:
                    pair = type(var) is TupleNode and len(var.elts) == 2
                    it, var = it.args[0], (var.elts[1] if pair else None)
                if type(var) is Name and type(it) is Attribute and type(it.value) is Name:
                    s.loop_attribute_vars.setdefault(var.id, set()).add(it.attr)
            elif t is Assign or t is AnnAssign:
                targets = node.targets if t is Assign else [node.target]
                value = node.value
                for target in targets:
                    if type(target) is Name and cls is None and method is None:
                        s.unclassed_names.add(target.id)
                    if type(target) is Name and type(value) is Call:
                        inner = value
                        while type(inner.func) is Attribute and type(inner.func.value) is Call:
                            inner = inner.func.value
                        s.call_bound.setdefault(target.id, set()).add(_dotted(inner.func) or "")
                    pairs: List[Tuple[ast.AST, Optional[ast.AST]]] = [(target, value)]
                    if isinstance(target, (ast.Tuple, ast.List)):
                        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                            pairs = list(zip(target.elts, value.elts))
                        else:
                            pairs = [(el, None) for el in target.elts]
                    for tgt, val in pairs:
                        if type(tgt) is Attribute:
                            s.attribute_values.setdefault(tgt.attr, set()).add(self._value_kind(val))
                    if cls is not None and method is None and value is not None and type(target) is Name:
                        # class_alpha = torch.tensor([...]) in a class body:
                        # read as self.class_alpha (ClassFacts.class_tensors)
                        s.attribute_stores.append((cls, "<class>", target.id, value))  # type: ignore[arg-type]
                    if method is not None and value is not None:
                        # as the semantic pass records them: element pairs
                        # for a tuple/list target and value, each element
                        # with the whole call for a call (``self.w, self.b =
                        # sample(n)``), else the whole
                        if isinstance(target, (ast.Tuple, ast.List)):
                            if isinstance(value, (ast.Tuple, ast.List)):
                                stores = list(zip(target.elts, value.elts))
                            elif isinstance(value, ast.Call):
                                stores = [(el, value) for el in target.elts if not isinstance(el, ast.Starred)]
                            else:
                                stores = []
                        else:
                            stores = [(target, value)]
                        for tgt, val in stores:
                            if type(tgt) is Attribute and type(tgt.value) is Name:
                                if tgt.value.id in s.method_self.get((cls, method), ()):  # type: ignore[arg-type]
                                    s.attribute_stores.append((cls, method, tgt.attr, val))  # type: ignore[arg-type]
                                    if tgt.attr == "device":
                                        s.self_device_stores.add(cls)  # type: ignore[arg-type]
                                    if method == "__init__" and _reads_weights_device(val):
                                        s.weights_device_attrs.add(tgt.attr)
                            elif type(tgt) is Name:
                                s.local_values.setdefault((cls, method), {}).setdefault(tgt.id, []).append(val)  # type: ignore[arg-type]
                            elif type(tgt) is ast.Subscript:
                                owner = _container_name(tgt.value)
                                if owner:
                                    s.container_adds.append((cls, method, owner, val, False))  # type: ignore[arg-type]
            for _, value in iter_fields(node):
                if isinstance(value, list):
                    for item in reversed(value):
                        if isinstance(item, AST):
                            push((item, cls, method, called, used, top))
                elif isinstance(value, AST):
                    push((value, cls, method, called, used, top))


_ADD_METHODS = frozenset({"append", "insert", "extend"})
#: as DL001 reads them: calls that move their receiver, and the tensor
#: methods a move looks through (``torch.arange(n).unsqueeze(0).to(d)``)
MOVE_METHODS = frozenset({"to", "cuda", "type_as", "cpu"})
CHAIN_METHODS = frozenset(
    {"unsqueeze", "squeeze", "view", "reshape", "expand", "expand_as", "repeat", "float", "long", "int",
     "half", "double", "bool", "t", "transpose", "permute", "flatten", "contiguous", "clone", "detach",
     "masked_fill", "fill_", "triu", "tril", "triu_", "tril_", "__getitem__", "unfold", "flip", "roll", "mul", "add",
     "sub", "div", "pow", "exp", "log", "sqrt", "cumsum", "sin", "cos", "requires_grad_"}
)


def _dynamic_attribute(call: ast.Call) -> Optional[str]:
    """The attribute ``setattr(x, <name>, v)`` / ``getattr(x, <name>)`` names,
    as ``syntax.dynamic_self_attribute`` spells it (``f"scale_{i}"`` ->
    ``scale_{}``), else None."""
    if len(call.args) < 2 or call.keywords or any(type(a) is ast.Starred for a in call.args):
        return None
    name = call.args[1]
    if type(name) is ast.Constant and type(name.value) is str:  # type: ignore[attr-defined]
        return name.value  # type: ignore[attr-defined]
    if type(name) is ast.JoinedStr:
        parts = []
        for part in name.values:  # type: ignore[attr-defined]
            if type(part) is ast.Constant and type(part.value) is str:  # type: ignore[attr-defined]
                parts.append(part.value)  # type: ignore[attr-defined]
            else:
                parts.append("{}")
        return "".join(parts)
    return None


def _to_moves(call: ast.Call, imports: Dict[str, List[str]]) -> bool:
    """Whether ``x.to(...)`` certainly moves (DL001 and DL008 read
    ``.to(<dtype>)`` as a cast, ``facts.classes.is_dtype_cast``): a ``device=``, a
    string or integer, a call with arguments (``torch.device(...)``), or a
    name whose last part says device (``x.device``, ``dev``) and cannot be a
    torch attribute. Anything else may be a cast and moves nothing here."""
    if not call.args:
        return any(k.arg == "device" for k in call.keywords)
    first = call.args[0]
    if any(k.arg == "device" for k in call.keywords) and type(first) is not ast.Starred:
        return True
    t = type(first)
    if t is ast.Constant:
        return isinstance(first.value, (str, int)) and not isinstance(first.value, bool)  # type: ignore[attr-defined]
    if t is ast.Call:
        return bool(first.args)  # type: ignore[attr-defined]
    dotted = _dotted(first)
    if dotted is None:
        return False
    head, _, _ = dotted.partition(".")
    last = dotted.rsplit(".", 1)[-1].lower()
    return "dev" in last and "dtype" not in last and head != "torch" and head not in imports


def _to_casts(call: ast.Call) -> bool:
    """Whether ``x.to(...)`` is certainly a dtype cast (a subset of
    ``facts.classes.is_dtype_cast``; DL001 looks through casts for a later move):
    only ``dtype=``-style keywords, or a first argument whose last name part
    says dtype (``x.dtype``, ``self.dtype``) and no ``device=``."""
    if any(type(a) is ast.Starred for a in call.args):
        return False
    if not call.args:
        return bool(call.keywords) and all(k.arg in ("dtype", "non_blocking", "copy", "memory_format") for k in call.keywords)
    dotted = _dotted(call.args[0])
    if dotted is None or "dtype" not in dotted.rsplit(".", 1)[-1].lower():
        return False
    return all(k.arg != "device" for k in call.keywords)


def _inputs(node: ast.AST, method: bool) -> Tuple[bool, bool]:
    """(a static or class method, some parameter but the first of a method
    may hold a tensor), as the device flow's ``_params`` reads them."""
    decorators = {_dotted(d) or "" for d in node.decorator_list}  # type: ignore[attr-defined]
    static = bool(decorators & {"staticmethod", "classmethod"})
    args = node.args  # type: ignore[attr-defined]
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
    for i, (a, default) in enumerate(params):
        if i == 0 and method and "staticmethod" not in decorators and a in positional[:1]:
            continue  # self, cls
        ann = ast.unparse(a.annotation) if a.annotation is not None else ""
        bare = ann.replace("typing.", "").replace(" ", "") in BARE_CONTAINER_ANNOTATIONS  # eval_imgs: list
        if ann and "Tensor" not in ann and "Any" not in ann and not bare:
            continue  # annotated as something else
        if (type(default) is ast.Constant and default.value is not None) or type(default) is ast.Name:  # type: ignore[attr-defined]
            continue  # a literal or named default: a number, a string, a constant
        return static, True
    return static, False


def _names_tensor(annotation: ast.AST) -> bool:
    """An annotation that names a tensor type somewhere (``Tensor``,
    ``Optional[torch.FloatTensor]``)."""
    for n in ast.walk(annotation):
        t = type(n)
        if (t is ast.Name and n.id.endswith("Tensor")) or (t is ast.Attribute and n.attr.endswith("Tensor")):  # type: ignore[attr-defined]
            return True
    return False


def _optional_inner(ann: ast.AST) -> ast.AST:
    """``T`` for ``Optional[T]``, ``T | None`` and their quoted spellings
    (as ``syntax.optional_inner`` reads libcst's)."""
    if type(ann) is ast.Constant and isinstance(ann.value, str):  # type: ignore[attr-defined]
        try:
            ann = ast.parse(ann.value.strip(), mode="eval").body  # type: ignore[attr-defined]
        except SyntaxError:
            return ann
    if type(ann) is ast.Subscript and (_dotted(ann.value) or "").rsplit(".", 1)[-1] == "Optional":  # type: ignore[attr-defined]
        return ann.slice  # type: ignore[attr-defined]
    if type(ann) is ast.BinOp and type(ann.op) is ast.BitOr:  # type: ignore[attr-defined]
        for a, b in ((ann.left, ann.right), (ann.right, ann.left)):  # type: ignore[attr-defined]
            if type(b) is ast.Constant and b.value is None:  # type: ignore[attr-defined]
                return a
    return ann


def _one_tensor(ann: ast.AST) -> bool:
    """One tensor, maybe None: ``torch.FloatTensor``, ``Optional[Tensor]``
    (``syntax.annotates_tensor(..., optional=True)`` on libcst's tree)."""
    d = _dotted(_optional_inner(ann)) or ""
    return d.rsplit(".", 1)[-1] in ("Tensor", "FloatTensor", "LongTensor", "BoolTensor", "IntTensor") and d.split(".", 1)[0] in ("torch", d)


def _annotated_classes(node: ast.AST) -> Set[str]:
    """The names a function's parameters are annotated with, as written or
    in quotes, ``Optional[...]`` taken off (``outputs: "DetectionOutput"``)."""
    out: Set[str] = set()
    args = node.args  # type: ignore[attr-defined]
    for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if a.annotation is not None:
            name = _dotted(_optional_inner(a.annotation))
            if name:
                out.add(name)
    return out


def _container_name(node: ast.AST) -> str:
    """``".blocks"`` for ``<name>.blocks``, ``"layers"`` for ``layers``, else ``""``."""
    if type(node) is ast.Name:
        return node.id  # type: ignore[attr-defined]
    if type(node) is ast.Attribute and type(node.value) is ast.Name:  # type: ignore[attr-defined]
        return "." + node.attr  # type: ignore[attr-defined]
    return ""


def _is_container(node: Optional[ast.AST]) -> bool:
    t = type(node)
    if t in (ast.List, ast.Tuple, ast.Dict, ast.ListComp, ast.DictComp):
        return True
    return t is ast.Call and (_dotted(node.func) or "") in _CONTAINER_CALLS  # type: ignore[union-attr]


def _owner_shape(node: ast.AST) -> Tuple[Optional[str], str, str]:
    if type(node) is ast.Name:
        return node.id, "name", ""  # type: ignore[attr-defined]
    sub = type(node) is ast.Subscript
    inner = node.value if sub else node  # type: ignore[attr-defined]
    if type(inner) is ast.Attribute and type(inner.value) is ast.Name:  # type: ignore[attr-defined]
        return inner.value.id, "subscript" if sub else "attr", inner.attr  # type: ignore[attr-defined]
    return None, "other", ""


def _value_shape(node: ast.AST) -> Tuple[str, str]:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return "str", node.value
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            return "int", ""
        return "other", ""
    if isinstance(node, ast.Call):
        return "call", _dotted(node.func) or ""
    if isinstance(node, ast.Name):
        return "name", node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return "attr", f"{node.value.id}.{node.attr}"
    if isinstance(node, ast.IfExp):
        return "other", "ifexp"
    if isinstance(node, ast.JoinedStr):
        head = node.values[0] if node.values else None
        return "fstr", head.value if isinstance(head, ast.Constant) and isinstance(head.value, str) else ""
    return "other", ""


def _iterated_name(node: ast.AST) -> str:
    while True:
        if isinstance(node, ast.Call) and (node.args or (node.keywords and node.keywords[0].arg is not None)):
            node = node.args[0] if node.args else node.keywords[0].value
        elif isinstance(node, (ast.Subscript, ast.Starred)):
            node = node.value
        else:
            return _dotted(node) or ""


def _dotted(node: ast.AST) -> Optional[str]:
    parts: List[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is ast.Name:
        parts.append(node.id)  # type: ignore[attr-defined]
        return ".".join(reversed(parts))
    return None


def scan_source(text: str) -> Optional[ScanSummary]:
    """The summary of one file, or None when CPython cannot parse it (a
    syntax error, a newer grammar, too deep): then every rule is a
    candidate and libcst decides."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    summary = ScanSummary()
    try:
        _Scanner(summary).walk(tree)
    except RecursionError:  # pragma: no cover - the walk is iterative
        return None
    return summary

def calls_a_wrapper(scan) -> bool:
    """Candidate hook: the file calls something that may be DataParallel/DDP."""
    from devlint.torch_api import WRAPPERS

    return any(scan.refers_to(c.func, WRAPPERS) or (c.func and c.func in scan.wrap_helpers) for c in scan.calls)


def _annotation_text(node: ast.AST) -> str:
    """The names an annotation mentions, joined (``Optional[Tensor]`` ->
    ``Optional Tensor``): enough to see a ``Tensor`` in it."""
    return " ".join(n.id if type(n) is ast.Name else n.attr for n in ast.walk(node) if type(n) in (ast.Name, ast.Attribute)) + (
        " " + node.value if type(node) is ast.Constant and isinstance(node.value, str) else ""
    )


def _reads_weights_device(node: ast.AST) -> bool:
    """``<x>.device`` of ``next(...parameters())`` (also through ``iter``)
    or of a ``.weight``/``.bias``: the device of some module's weights (a
    superset of ``syntax.reads_own_weights_device``)."""
    if not (isinstance(node, ast.Attribute) and node.attr == "device"):
        return False
    inner = node.value
    if isinstance(inner, ast.Attribute):
        return inner.attr in ("weight", "bias")
    return isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "next" and any(
        isinstance(n, ast.Attribute) and n.attr == "parameters" for n in ast.walk(inner)
    )
