"""The ``Training`` provider: training and evaluation code per scope.

A scope is named by the classes and functions around it: ``<module>``,
``main``, ``Trainer`` (the class: ``self.<x>`` facts of every method) and
``Trainer.fit``; :class:`ScopeStack` gives rules the same names. Per scope:
models moved to devices (:class:`Placement`), wrapped models, data loaders
and whether they place their batches, device and rank names, loaded
checkpoints and how they are used. Models and loaders passed as arguments
are carried into the functions of the same file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Dict, List, Optional, Set, Tuple

import libcst as cst

from devlint.facts.classes import Classes, FileFacts, _is_dtype_expr
from devlint.facts.store import FactStore, Provider
from devlint.syntax import (
    is_device_name,
    _mentions_name,
    code_of,
    dotted_name,
    keyword_arg,
    positional_args,
    free_names,
    rebound_names,
    ref_of,
    self_attribute,
    string_value,
)
from devlint.torch_api import (
    CTC_LOSSES,
    DATA_LOADERS,
    DATA_PARALLEL,
    ITER_WRAPPERS,
    MAP_LOCATION_INDEX,
    TORCH_LOADS,
    _CPU_COLLATORS,
    _KEEPS_PLACEMENT,
    _RNG_SETTERS,
    _SAME_DEVICE_COPIES,
)
from devlint.walk import walk


MODULE_SCOPE = "<module>"


#: names that hold the index of a CUDA device (``local_rank``, ``args.gpu``)
RANK_NAMES = frozenset({"local_rank", "rank", "gpu", "gpu_id", "device_id", "local_gpu", "gpu_index"})


#: words in a loader's binding or arguments that say batches arrive on a device
_PLACING_WORDS = ("device", "cuda", "prepare", "accelerator", "fabric", "to_gpu", "gpu")


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
    #: a function returning a data loader (``return DataLoader(ds, ...)``):
    #: what its batches are like (None: it returns no loader it builds)
    returns_loader: Optional[LoaderFacts] = None
    #: names holding a device (``device = torch.device(...)``, a ``device`` parameter)
    device_names: List[str] = field(default_factory=list)
    #: names holding a CUDA device index (``local_rank``, ``args.gpu``,
    #: the argument of ``torch.cuda.set_device``)
    rank_names: List[str] = field(default_factory=list)
    #: names bound to ``torch.load(...)``: True when every use feeds
    #: ``load_state_dict`` (which copies onto the parameters' devices)
    loaded: Dict[str, bool] = field(default_factory=dict)
    #: names bound to ``torch.load(...)`` one of whose uses (not necessarily
    #: every one) is a ``load_state_dict`` argument
    fed_to_state_dict: Set[str] = field(default_factory=set)
    #: names bound to ``torch.load(...)`` whose every use restores a random
    #: number generator (``torch.set_rng_state(state["cpu"])``): RNG states
    #: are CPU byte tensors wherever they were saved
    rng_states: List[str] = field(default_factory=list)
    #: file arguments given to ``torch.save`` here (an in-process round trip)
    saved_files: List[str] = field(default_factory=list)
    #: what the calls that write files here were given so far, in the
    #: walk's order (``trainer.save(path=out_dir)``, ``torch.save(sd, p)``,
    #: ``save_checkpoint(state, filename)``): the dotted names and path
    #: strings they mention
    written: Set[str] = field(default_factory=set)
    #: plain names -> the value last bound to them so far in the walk
    #: (read when a ``torch.load`` asks what its path is built from)
    values: Dict[str, cst.BaseExpression] = field(default_factory=dict)
    #: parameters -> the value a call of the file passes them, as the
    #: caller bound it (``evaluate(encoder, ...)`` after ``encoder =
    #: EncoderRNN(...).to(device)``): the class a model argument was built from
    passed: Dict[str, cst.BaseExpression] = field(default_factory=dict)
    #: ``torch.load`` calls here that read a file this scope wrote earlier:
    #: a round trip within one process, whose devices exist (unless the
    #: file runs distributed: every rank would load rank 0's GPU)
    round_trips: Set[cst.Call] = field(default_factory=set)
    #: names bound here to a temporary file or folder (``tempfile.*``):
    #: private to this process, even when every rank runs the same code
    temp_paths: Set[str] = field(default_factory=set)
    #: the round trips through such a temporary path (excused under DDP too)
    private_round_trips: Set[cst.Call] = field(default_factory=set)
    #: ``torch.load`` calls here that read a file shipped inside the
    #: package: it loads on every user's machine, CPU-only ones included,
    #: so it holds CPU tensors
    package_files: Set[cst.Call] = field(default_factory=set)
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


def looks_like_loader(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    return "loader" in last or last in ("dl", "train_dl", "valid_dl", "val_dl", "test_dl")


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
    node = map_location_arg(facts, value)
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


#: the pseudo-name a returned loader is bound to while it is read
_RETURNED = "<return>"


def loader_helper(facts: Any, scopes: Dict[str, ScriptScope], func: cst.BaseExpression) -> Optional[LoaderFacts]:
    """What ``func`` returns when it is a function that returns a data loader
    it builds: a module-level function of this file read before the call
    (``make_loader(cfg)``), or, in a project run, one another module defines
    (its summary says ``loader``: ``cpu`` or ``device``); else None."""
    name = dotted_name(func)
    if not name:
        return None
    if "." not in name:
        fn = scopes.get(name)
        if fn is not None and fn.kind == "function" and not fn.class_scope:
            return fn.returns_loader if fn.complete else None
    found = facts.project_function(facts.qualify_dotted(name) or "")
    if found is None or found[2].get("loader") not in ("cpu", "device"):
        return None
    places = found[2]["loader"] == "device"
    return LoaderFacts("other" if places else "dataloader", places)


def _inline_loader(training: "TrainingFacts", scope: str, call: cst.Call) -> Optional[str]:
    """``for x, y in DataLoader(ds, batch_size=64)``: the loader's spelling when
    the call builds a ``DataLoader`` that leaves its batches on the CPU (no
    ``collate_fn`` of its own, no ``pin_memory_device``, no dataset or
    argument that mentions a device); ``for x, y in make_loader(64)`` when
    the function returns such a loader."""
    cls = training.facts.class_of_call(call.func)
    if cls not in DATA_LOADERS:
        helper = loader_helper(training.facts, training.scopes, call.func)
        if helper is None or helper.places_on_device:
            return None
        return code_of(call.func)
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
        dotted is not None and (index or ((last in RANK_NAMES or how == "cuda") and "device" not in last))
    )
    if is_index:
        if dotted is None and not isinstance(node, cst.Integer):
            return None
        return f'"cuda:{device}"' if isinstance(node, cst.Integer) else f'f"cuda:{{{device}}}"'
    if dotted is not None or isinstance(node, (cst.SimpleString, cst.FormattedString)):
        return device
    return None


class _TrainingCollector(cst.CSTVisitor):
    #: devlint.walk keeps ``self.parents``: the ancestors of the node visited
    TRACKS_PARENTS = True

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
        #: the file calls torch.distributed or wraps in DDP
        self.distributed = False
        #: the file calls ``torch.cuda.set_device``: the current device is
        #: the one a rank or a flag chose, and ``.cuda()`` goes there
        self.sets_device = False

    # -- scopes --------------------------------------------------------------
    @property
    def scope(self) -> ScriptScope:
        return self.scopes[".".join(self.stack) if self.stack else MODULE_SCOPE]

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
        elif name in sf.cpu_devices or is_device_name(last):
            sf.cpu_devices[name] = False
        if is_device_name(last):
            if value is not None and _is_index_value(self.facts, value):
                if name not in sf.rank_names:
                    sf.rank_names.append(name)
            elif (value is None or _is_device_value(value)) and name not in sf.device_names:
                sf.device_names.append(name)
        elif last in RANK_NAMES and name not in sf.rank_names:
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
                if self._temporary(value):
                    sf.temp_paths.add(ref)
                sf.values[ref] = value
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
            helper = None if is_dl else loader_helper(self.facts, self.scopes, value.func)
            if helper is not None:
                # train_loader = make_loader(cfg): what the function's loader yields
                sf.loaders[ref] = LoaderFacts("dataloader" if not helper.places_on_device else "other", helper.places_on_device)
                return
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
            remembered = looks_like_loader(ref) or ref in sf.loaders
            if not remembered:
                # remember datasets built with a device (TensorDataset(x.cuda()))
                dotted = dotted_name(value.func) if isinstance(value, cst.Call) else None
                if dotted is None or "dataset" not in dotted.rsplit(".", 1)[-1].lower():
                    return  # (asked first: rendering the value to look for a device is dear)
            places = _mentions_placing(value) or self._holds_placed(sf, value)
            if not remembered and not places:
                return
        old = sf.loaders.get(ref)
        kind = "dataloader" if is_dl and (old is None or old.kind == "dataloader") else "other"
        sf.loaders[ref] = LoaderFacts(kind, places or (old.places_on_device if old else False))

    def visit_Return(self, node: cst.Return) -> None:
        sf = self.scope
        if node.value is None or sf.kind != "function" or sf.class_scope:
            return
        value = node.value
        found: Optional[LoaderFacts] = None
        ref = ref_of(value, self.self_names[-1]) if not isinstance(value, cst.Call) else None
        if ref is not None:
            found = sf.loaders.get(ref)
        elif isinstance(value, cst.Call):
            self._bind_loader(sf, _RETURNED, value)
            found = sf.loaders.pop(_RETURNED, None)
        if found is None or not (found.kind == "dataloader" or found.places_on_device) or found.wraps:
            return
        old = sf.returns_loader
        if old is None:
            sf.returns_loader = LoaderFacts(found.kind, found.places_on_device)
        else:  # one path's loader places its batches: the caller cannot count on CPU batches
            sf.returns_loader = LoaderFacts(
                "dataloader" if old.kind == found.kind == "dataloader" else "other",
                old.places_on_device or found.places_on_device,
            )

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

    def _package_path(self, sf: ScriptScope, value: cst.BaseExpression, depth: int = 0) -> bool:
        """``value`` names a path inside the installed package
        (``os.path.join(os.path.dirname(__file__), "w.pt")``,
        ``Path(__file__).parent / "w.pt"``, ``importlib.resources.files(...)``):
        it reads ``__file__``, a name bound (here or at module level) to such
        a path, or asks the package's resources. Asked only of a
        ``torch.load``'s path, so the walk pays nothing for other bindings."""
        names = free_names(value)
        if "__file__" in names:
            return True
        finder = _ResourceFinder(self.facts)
        walk(value, finder)
        if finder.found:
            return True
        if depth >= 3:
            return False
        module = self.scopes[MODULE_SCOPE]
        for n in names:
            bound = sf.values.get(n) if n in sf.values else module.values.get(n)
            if bound is not None and bound is not value and self._package_path(sf, bound, depth + 1):
                return True
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
            if isinstance(node.asname.name, cst.Name) and self._temporary(node.item):
                self.scope.temp_paths.add(node.asname.name.value)

    def _temporary(self, value: cst.BaseExpression) -> bool:
        """``tempfile.NamedTemporaryFile()``, ``tempfile.mkdtemp()``, ...:
        a path of this process's own."""
        return isinstance(value, cst.Call) and (self.facts.qualify(value.func) or "").startswith("tempfile.")

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
        if q in ("torch.cuda.set_device", "torch.cuda.device"):
            self.sets_device = True  # set_device(i), or ``with torch.cuda.device(i):``
        if q == "torch.cuda.set_device" and node.args:
            code = code_of(node.args[0].value)
            if code not in sf.rank_names and dotted_name(node.args[0].value) is not None:
                sf.rank_names.append(code)
        elif q in ("torch.save", "torch.serialization.save"):
            args = positional_args(node)
            f = args[1].value if len(args) > 1 else (keyword_arg(node, "f").value if keyword_arg(node, "f") else None)
            if f is not None:
                sf.saved_files.append(code_of(f))
                sf.written |= path_refs(f, self.facts.imports)
        elif _writes_files(node.func):
            for a in node.args:
                if not a.star:
                    sf.written |= path_refs(a.value, self.facts.imports)
        elif is_torch_load(self.facts, node.func):
            args = positional_args(node)
            f = args[0].value if args else (keyword_arg(node, "f").value if keyword_arg(node, "f") else None)
            if f is not None:
                refs = path_refs(f, self.facts.imports)
                if any(_same_file(r, w) for r in refs for w in sf.written):
                    sf.round_trips.add(node)
                    if any(r.split(".")[0] in sf.temp_paths for r in refs):
                        sf.private_round_trips.add(node)
                if self._package_path(sf, f):
                    sf.package_files.add(node)
        if q is not None and (q.startswith("torch.distributed.") or q.endswith("DistributedDataParallel")):
            self.distributed = True
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
        if _is_state_dict_argument(node, self.parents):
            sf.fed_to_state_dict.add(node.value)
        rng = self.rng_candidates.get(sf.name, {})
        if rng.get(node.value):
            rng[node.value] = _restores_rng(node, self.parents)

    def leave_Module(self, original_node: cst.Module) -> None:
        for scope, names in self.rng_candidates.items():
            self.scopes[scope].rng_states = sorted(n for n, ok in names.items() if ok)


_RESOURCE_APIS = (
    "importlib.resources.files", "importlib.resources.path", "importlib.resources.open_binary",
    "importlib_resources.files", "pkg_resources.resource_filename", "pkg_resources.resource_stream",
)


class _ResourceFinder(cst.CSTVisitor):
    """Whether an expression asks the package's own resources."""

    def __init__(self, facts: FileFacts) -> None:
        self.facts = facts
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if self.facts.qualify(node.func) in _RESOURCE_APIS:
            self.found = True


def _writes_files(func: cst.BaseExpression) -> bool:
    """A call that writes a file by its name: ``trainer.save(...)``,
    ``save_checkpoint(...)``, ``model.save_pretrained(out)``."""
    name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    return name == "save" or name.startswith("save_") or name.endswith("_save")


def path_refs(node: cst.BaseExpression, imported: Collection[str] = ()) -> Set[str]:
    """What names a file in an expression: its dotted names (``save_path``,
    ``args.out_dir``; not the functions it calls, ``os.path.join``, nor
    the ``imported`` modules it reads) and its path-like strings
    (``"ckpt/model.pt"``, ``"best.pt"``)."""
    finder = _PathRefs(imported)
    walk(node, finder)
    return finder.out


class _PathRefs(cst.CSTVisitor):
    """:func:`path_refs`' walk."""

    def __init__(self, imported: Collection[str]) -> None:
        self.imported = imported
        self.out: Set[str] = set()

    def visit_Call(self, n: cst.Call) -> bool:
        for a in n.args:
            walk(a.value, self)
        if isinstance(n.func, cst.Attribute):  # Path(p).joinpath(...): the receiver names it
            walk(n.func.value, self)
        return False

    def visit_Attribute(self, n: cst.Attribute) -> bool:
        d = dotted_name(n)
        if d is not None:
            if d.split(".")[0] not in self.imported:
                self.out.add(d)
            return False
        return True

    def visit_Name(self, n: cst.Name) -> None:
        if n.value not in ("self", "None", "True", "False") and n.value not in self.imported:
            self.out.add(n.value)

    def visit_SimpleString(self, n: cst.SimpleString) -> None:
        v = string_value(n)
        if v and (("/" in v) or ("." in v and not v.startswith("."))) and " " not in v and "{" not in v:
            self.out.add(f"'{v}")


def _same_file(ref: str, written: str) -> bool:
    """``ref`` (from a load's path) names what ``written`` (from a write's
    arguments) named: the same name, or a path string inside a directory
    string it was given."""
    if ref == written:
        return True
    if ref.startswith("'") and written.startswith("'"):
        return ref.startswith(written.rstrip("/") + "/")
    return False


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
    return is_device_name(last)


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
    if scope is not None and scope.file_bytes and code_of(node) in scope.file_bytes:
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


def map_location_parameter(facts: FileFacts, fn: cst.FunctionDef) -> Optional[Tuple[int, str]]:
    """(index, name) of the parameter of ``fn`` that defaults to ``None`` and
    is passed as ``map_location=`` to a ``torch.load`` in its body
    (``def load_checkpoint(path, map_location=None): ... torch.load(path,
    map_location=map_location)``), when the body never rebinds it: a caller
    that leaves it out loads every tensor back on the device that saved it.
    None otherwise."""
    params = list(fn.params.posonly_params) + list(fn.params.params)
    by_name = {p.name.value: i for i, p in enumerate(params)}
    for p in fn.params.kwonly_params:
        by_name.setdefault(p.name.value, -1)
    defaults = {p.name.value: p.default for p in params + list(fn.params.kwonly_params)}
    found: List[Tuple[int, str]] = []
    rebound = rebound_names(fn.body)
    calls: List[cst.Call] = []

    class _Collect(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            calls.append(node)

    walk(fn.body, _Collect())
    for node in calls:
        if is_torch_load(facts, node.func):
            arg = keyword_arg(node, "map_location")
            if arg is not None and isinstance(arg.value, cst.Name) and arg.value.value in by_name:
                name = arg.value.value
                default = defaults.get(name)
                if isinstance(default, cst.Name) and default.value == "None":
                    found.append((by_name[name], name))
    found = [f for f in found if f[1] not in rebound]
    return found[0] if found else None


def is_torch_load(facts: FileFacts, func: cst.CSTNode) -> bool:
    """``torch.load``, or a call that loads with it and passes its
    ``map_location`` on (``torch.hub.load_state_dict_from_url``)."""
    q = facts.qualify(func)
    return q in TORCH_LOADS


def map_location_arg(facts: FileFacts, call: cst.Call) -> Optional[cst.BaseExpression]:
    """The ``map_location`` a load call is given, by keyword or at its
    position (the second argument of ``torch.load``, the third of
    ``load_state_dict_from_url``); None when it is left out."""
    loc = keyword_arg(call, "map_location")
    if loc is not None:
        return loc.value
    index = MAP_LOCATION_INDEX.get(facts.qualify(call.func) or "", 1)
    args = positional_args(call)
    return args[index].value if len(args) > index else None


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
        return _is_state_dict_argument(name, parents)
    if isinstance(parent, cst.Assign) and node is not name and parent.value is node:
        # ckpt = ckpt["state_dict"]
        return all(isinstance(t.target, cst.Name) and t.target.value == name.value for t in parent.targets)
    return _rekeys(name, parents)


def _is_state_dict_argument(name: cst.Name, parents: List[cst.CSTNode]) -> bool:
    """This occurrence of a loaded object's name (possibly subscripted:
    ``ckpt["model"]``) is the state argument of a ``load_state_dict`` that
    copies it onto the parameters' devices (not ``assign=True``)."""
    verdict, i, _ = _checkpoint_use(name, parents)
    if verdict is not None or i < 1:
        return False
    parent, call = parents[i], parents[i - 1]
    if not (isinstance(parent, cst.Arg) and isinstance(call, cst.Call)):
        return False
    if not (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "load_state_dict"
        and (parent.keyword is None or parent.keyword.value == "state_dict")
        and not parent.star
    ):
        return False
    assign = keyword_arg(call, "assign")
    return assign is None or (isinstance(assign.value, cst.Name) and assign.value.value == "False")


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
    owner, _, last = dotted.rpartition(".")
    if last in ("setstate", "set_state"):
        # random.setstate, np.random.set_state, self.rng.set_state: a random
        # generator's; ``self.set_state(state)`` of an optimizer or a store
        # restores tensors
        return any(part in ("random", "np_random") or "rng" in part.lower() or "generator" in part.lower() for part in owner.split("."))
    # torch.set_rng_state, torch.cuda.set_rng_state_all, a helper set_rng_state_for_device(...)
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


def build_training_facts(module: cst.Module, facts: FileFacts) -> "TrainingFacts":
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
                    given = caller.values.get(arg, caller.passed.get(arg))
                    if given is not None and param not in callee.passed:
                        callee.passed[param] = given
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
    distributed = collector.distributed or any(
        q == "torch.distributed" or q.startswith("torch.distributed.") or q.endswith("DistributedDataParallel")
        for qs in facts.imports.values() for q in qs
    )
    return TrainingFacts(facts, scopes, distributed, collector.sets_device)


@dataclass
class TrainingFacts:
    """Training and evaluation code per scope (see :class:`ScriptScope`):
    models moved to devices, loaders, device and rank names, checkpoints."""

    facts: FileFacts
    #: scope name (``<module>``, ``main``, ``Trainer``, ``Trainer.fit``) -> its facts
    scopes: Dict[str, ScriptScope]
    #: the file imports or calls ``torch.distributed``, or wraps a model in DDP
    distributed: bool = False
    #: the file calls ``torch.cuda.set_device``
    sets_device: bool = False


class Training(Provider):
    """:class:`TrainingFacts`: a walk of the whole file that only the rules
    about scripts need (on model code it costs more than the classes)."""

    requires = (Classes,)

    @classmethod
    def build(cls, store: FactStore) -> TrainingFacts:
        facts = store[Classes]
        return build_training_facts(store.module, facts)


def _mentions_placing_code(code: str) -> bool:
    return any(w in code.lower() for w in _PLACING_WORDS)
