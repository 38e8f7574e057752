"""The device flow: where each value of a function lives.

One abstract interpretation of a function body, statement by statement. Every
expression gets a :class:`Value`: a *kind* (tensor, module, device, Python
number, NumPy array, sequence, shape, other, unknown) and, for tensors and
modules, a *device*:

- ``LOCAL``: follows this call's inputs (a tensor parameter, the module's own
  parameters and buffers, what a submodule returns): in a model on a GPU it is
  that GPU, in a replica the replica's;
- ``CPU``: on the CPU; a tensor *born* there (a factory without ``device=``,
  ``torch.from_numpy``, a legacy constructor) carries the calls that made it,
  a tensor taken there on purpose (``.cpu()``) carries none;
- ``CURRENT``: the current CUDA device (``.cuda()``, ``"cuda"``);
- ``FIXED``: a device named in the code (``"cuda:1"``, ``.cuda(0)``);
- ``ANY``: not known (a join of different devices, a move to a device held in
  a variable the flow cannot read, an unknown call).

Values flow through locals, tuple unpacking, comprehensions, loops (run
twice, so a value carried round the loop is seen), ``if``/``else`` (joined;
a branch that returns or raises does not reach the join), ``list.append``,
returns, and calls to module-level functions and methods of the same class,
through per-function summaries (what the function returns).

*Meetings* are where a CPU-born tensor meets a ``LOCAL`` tensor in an
operation that needs both on one device: arithmetic and comparisons (a 0-dim
CPU tensor is allowed there), torch functions over several tensors
(``cat``/``stack`` accept no 0-dim exception), tensor methods taking another
tensor (``a.index_select(0, idx)``, ``a.masked_fill(m, v)``), a submodule with
weights called on the CPU tensor, a CPU tensor indexed by a device tensor or
used as an index beside one, and a function returning a CPU-born tensor on one
path and a device tensor on another. Everything else a CPU tensor does
(``.item()``, ``len``, shapes, being moved, indexing a device tensor, being
copied into) is no meeting.

Rules ask :meth:`DeviceFlow.function` for a function's :class:`FunctionFlow`
and read its ``meetings``; each ``Meeting`` says where the fix goes (the
factory), what it met and which tensor in scope there a fix may name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Collection, Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from devlint.facts.classes import ClassFacts, Classes, FileFacts, is_dtype_cast
from devlint.facts.stages import (
    ARG, EACH, FIRST, LAST, PART, SPREAD, WHOLE, STAGE_PREFIX, Handover, NameRenamer, Stages, stage_device, stage_of,
)
from devlint.facts.store import FactStore, Provider
from devlint.facts.training import (
    MODULE_SCOPE,
    RANK_NAMES,
    Placement,
    Training,
    TrainingFacts,
    WrapFacts,
    loader_loop,
    looks_like_loader,
    lookup_scoped,
    next_loader,
    placed_on_cpu,
)
from devlint.syntax import (
    LINES,
    AssignedNames,
    annotates_tensor,
    blocks,
    bound_parameters,
    calls_in,
    code_of,
    cpu_device_only,
    current_device_only,
    annotated_name,
    dotted_name,
    free_names,
    is_device_name,
    is_explicit_device,
    keyword_arg,
    loop_over_attribute,
    param_names,
    self_attribute,
    short_code,
    statements,
    string_value,
    target_names,
)
from devlint.torch_api import (
    BARE_CONTAINER_ANNOTATIONS,
    PART_GETTERS,
    DATA_PARALLEL,
    DEVICE_FACTORIES,
    FUNCTIONAL_LOSSES,
    FX_PROXY_CLASSES,
    FX_TRACING_TESTS,
    INIT_METHODS,
    STATELESS_MODULES,
    VMAPS,
    _LEGACY_TENSOR_CONSTRUCTORS,
    _NOT_ONE_TENSOR,
    RANDOM_FILL_METHODS,
    SCALAR_FIRST,
    int_argument,
    layer_parameter,
)
from devlint.walk import walk

# -- the abstract domain ----------------------------------------------------

TENSOR = "tensor"
MODULE = "module"
DEVICE = "device"
NUMBER = "number"
NUMPY = "numpy"
SEQ = "sequence"
SHAPE = "shape"
OTHER = "other"
#: a whole batch a data loader yields (a tuple, a dict, a PyG ``Data``):
#: its items and fields are tensors where the loader left them
BATCH = "batch"
#: a DataParallel (or DDP given ``device_ids``) wrapper: it moves its
#: inputs to the devices of its replicas
WRAPPER = "wrapper"
#: ``None``: no value. A join with it is the other side (``Optional``): a
#: use where it is None fails anyway, so what matters is the other value
NONE = "none"
UNKNOWN = "unknown"

LOCAL = "local"
CPU = "cpu"
CURRENT = "current"
FIXED = "fixed"
#: a plain tensor attribute of a module (not a parameter or buffer): it stays
#: where it was built, usually the CPU, when the module is moved, and
#: DataParallel replicas share the original's
HELD = "held"
#: devices a tensor can be put on without following the inputs
PINNED = (CPU, CURRENT, FIXED, HELD)
ANY = "any"


@dataclass(frozen=True)
class Value:
    kind: str = UNKNOWN
    device: str = ANY
    #: for a tensor on the CPU, the current or a fixed device: the calls that
    #: put it there without following the inputs (a factory without
    #: ``device=``, ``.cuda()``, ``device="cuda:1"``)
    born: FrozenSet[cst.CSTNode] = frozenset()
    #: a 0-dim tensor (or a Python number), which mixes with any device
    scalar: bool = False
    #: the name that holds this very value (a parameter, ``self.w``): a fix
    #: may write ``<anchor>.device``
    anchor: Optional[str] = None
    #: a sequence's elements, when its length is known
    items: Tuple["Value", ...] = ()
    #: a sequence's elements joined (None: no element seen yet)
    elem: Optional["Value"] = None
    #: ``items`` are exactly the elements, in order (a display without
    #: ``*``); otherwise they are only some of the values it holds
    exact: bool = True
    #: a tensor by convention only (``forward``'s first parameter, or a
    #: callee's parameter it is passed to), not by evidence: no fix names it
    guessed: bool = False
    #: a module the signature declares (``model: nn.Module``), not an
    #: argument only seen called (which may be any callable)
    declared: bool = False
    #: for a tensor moved by ``.to(...)``/``.cuda()``/``type_as``: the births
    #: of what was moved (a join of it with the unmoved value is a
    #: conditional move, ``t.to(d) if c else t``, not a birth on one path)
    moved: FrozenSet[cst.CSTNode] = frozenset()
    #: None on some path (joined with ``None``): no fix may read its ``.device``
    maybe_none: bool = False
    #: a Python number on some path (``1 if first else scale(h)``): no fix
    #: may read its ``.device`` either
    maybe_number: bool = False
    #: something else than a tensor on some path: a parameter the function
    #: tests with ``isinstance`` against another type (a PIL image, a list,
    #: a NumPy array): no fix may read its ``.device``
    maybe_other: bool = False
    #: a loss module built in a method (``loss_fct = CrossEntropyLoss()``):
    #: its inputs meet when it is called
    loss: bool = False
    #: a tensor known to have two dimensions or more (``torch.eye(n)``,
    #: ``torch.zeros(a, b)``): its rows are tensors, not 0-dim ones
    matrix: bool = False
    #: a tensor on the CPU by design, not by a missing ``device=``: drawn
    #: with a CPU ``torch.Generator`` (which draws into CPU tensors only), or
    #: computed from such a tensor (a tensor put on the CPU that is combined
    #: with it has to stay there for that operation): no birth, so no
    #: meeting and no fix
    by_design: bool = False
    #: a Python value known to be false (``False``, ``0``, a parameter left
    #: at such a default): ``if flag:`` does not run its body for it
    falsy: bool = False
    #: a weight of a module a script built and has not moved yet, read
    #: through ``model.parameters()``: ``model.to(device)`` moves it in place
    #: later, so it is no CPU birth; a copy of it (``p.detach().clone()``,
    #: ``model.state_dict()``) stays on the CPU (``DeviceFlow.weight_copies``)
    live: bool = False

    @property
    def pinned(self) -> bool:
        """Put on a device that does not follow the inputs, by a call the
        flow can name."""
        return self.kind == TENSOR and self.device in PINNED and bool(self.born)

    def mixes_anywhere(self, concat: bool = False) -> bool:
        """A 0-dim CPU tensor meets tensors on any device (not in a
        concatenation)."""
        return self.device in (CPU, HELD) and self.scalar and not concat

    @property
    def on_local(self) -> bool:
        return self.kind in (TENSOR, MODULE) and self.device == LOCAL


UNKNOWN_VALUE = Value()
#: ``None`` (``if x is None:`` narrows ``x`` to it): no tensor, no anchor
NONE_VALUE = Value(NONE)
#: something that came in with the inputs (a parameter, an attribute or item
#: of one) whose kind is not known: once an operation shows it is a tensor,
#: it is a tensor on the inputs' device
LOCAL_UNKNOWN = Value(UNKNOWN, LOCAL)
NUMBER_VALUE = Value(NUMBER, scalar=True)
#: a ``device`` parameter whose default is the CPU, which a call left there
#: (``make_mask(n)`` of ``def make_mask(n, device="cpu")``): the identity
#: marks it (``_apply_summary`` binds it, ``_factory`` reads it)
LEFT_AT_CPU_DEFAULT = Value(DEVICE, CPU)
#: ``False`` or ``0``
FALSE_VALUE = Value(NUMBER, scalar=True, falsy=True)
OTHER_VALUE = Value(OTHER)


def join(a: Optional[Value], b: Optional[Value]) -> Value:
    """The value on either of two paths. A must-analysis for kinds and
    devices, with two exceptions that follow PyTorch's failure: ``None`` on
    one path is the other path's value (``carry = None`` before a loop), and
    a tensor put on the CPU (or a fixed device) by a call on one path and on
    the inputs' device on the other keeps its birth (``if mask is None: mask
    = torch.ones(n)``): on a GPU run, the path that took the call fails."""
    if a is None:
        return b if b is not None else UNKNOWN_VALUE
    if b is None or a is b or a == b:
        return a
    if a.kind == NONE:
        return replace(b, maybe_none=True)
    if b.kind == NONE:
        return replace(a, maybe_none=True)
    if {a.kind, b.kind} == {NUMBER, TENSOR}:
        # ``lengths = -1`` on one path, a tensor on the other: a number mixes
        # with a tensor on any device, so only the tensor's path can fail
        return replace(a if a.kind == TENSOR else b, maybe_number=True)
    if a.kind == NUMBER and follows(b) or b.kind == NUMBER and follows(a):
        # ``log_p = 0`` before a loop that adds inputs to it: on the inputs' side
        return replace(a if a.kind != NUMBER else b, maybe_number=True)
    if a.kind == b.kind == DEVICE and CPU in (a.device, b.device) and {a.device, b.device} & {CURRENT, FIXED}:
        # ``"cuda" if x.is_cuda else "cpu"``: on a GPU run the GPU path is
        # taken, and "cuda" is the current device, not x's
        return a if a.device != CPU else b
    if a.kind == b.kind and a.kind in (MODULE, UNKNOWN, WRAPPER) and is_placed(a.device) != is_placed(b.device):
        # if use_cuda: model.cuda(): a GPU run takes the path that moves it
        return a if is_placed(a.device) else b
    if a.pinned and b.pinned and {a.device, b.device} == {CPU, HELD}:
        # ``self.mask`` (a plain attribute, built on the CPU) on one path, a
        # tensor made on the CPU on the other: on the CPU either way, each
        # birth kept (a held one is the attribute's read, see _meet_all)
        return Value(TENSOR, CPU, a.born | b.born, a.scalar and b.scalar)
    if a.pinned and b.pinned and CPU in (a.device, b.device) and {a.device, b.device} & {CURRENT, FIXED}:
        # ``t = t.cuda() if x.is_cuda else t``: the GPU path is what a GPU run takes
        return replace(a if a.device != CPU else b, anchor=None)
    if a.pinned != b.pinned and a.kind in (TENSOR, UNKNOWN) and b.kind in (TENSOR, UNKNOWN):
        # (an input of unknown kind joined with a tensor is that input's tensor)
        pinned, other = (a, b) if a.pinned else (b, a)
        if other.device == LOCAL and not (other.moved & pinned.born):
            return replace(pinned, anchor=None)  # on its own path it is what it was born (0-dim or not)
    if a.kind == b.kind == TENSOR and LOCAL in (a.device, b.device) and any(
        d == stage_device(LAST) or d.startswith((stage_device(WHOLE), stage_device(PART))) for d in (a.device, b.device)
    ):
        # in a model a device_map splits: moved past the blocks on one path
        # (``mask.to(inputs_embeds.device)`` where the model embeds the ids
        # itself), with the inputs on the other: the path that moved it
        # meets the inputs on another GPU
        return replace(a if a.device != LOCAL else b, anchor=None)
    if a.kind == b.kind == TENSOR and {a.device, b.device} == {LOCAL, stage_device(FIRST)}:
        # in a model a device_map splits: the inputs, or what its first part
        # made of them (``inputs_embeds`` given, or ``self.wte(input_ids)``):
        # the map's first device either way
        return replace(a if a.device != LOCAL else b, anchor=None)
    kind = a.kind if a.kind == b.kind else UNKNOWN
    device = a.device if a.device == b.device else ANY
    born = a.born | b.born if device in PINNED and a.born and b.born else frozenset()
    items: Tuple[Value, ...] = ()
    exact = a.exact and b.exact and len(a.items) == len(b.items)
    if kind == SEQ and exact:
        items = tuple(join(x, y) for x, y in zip(a.items, b.items))
    elem = join(a.elem, b.elem) if kind == SEQ and (a.elem is not None or b.elem is not None) else None
    return Value(kind, device, born, a.scalar and b.scalar, a.anchor if a.anchor == b.anchor else None, items, elem, exact,
                 by_design=a.by_design and b.by_design)


def _tensor(device: str, born: Iterable[cst.CSTNode] = (), scalar: bool = False, anchor: Optional[str] = None) -> Value:
    return Value(TENSOR, device, frozenset(born), scalar, anchor)


#: a tensor on the CPU by design (:attr:`Value.by_design`)
CPU_BY_DESIGN = Value(TENSOR, CPU, by_design=True)


def _by_design(*values: Value) -> bool:
    """Whether an operation over ``values`` that needs them on one device
    keeps its result on the CPU by design: one of them is a tensor there by
    design that has dimensions (a 0-dim one mixes with any device)."""
    return any(v.kind == TENSOR and v.by_design and not v.scalar for v in values)


def _key_of(v: Value, depth: int = 0) -> tuple:
    """What tells two values apart for a specialised flow: kind, device,
    births and 0-dim-ness, and those of a sequence's elements (a tuple of
    CPU-born tensors is not any tuple)."""
    key: tuple = (v.kind, v.device, v.born, v.scalar)
    if v.kind == SEQ and depth < 3:
        key += (tuple(_key_of(i, depth + 1) for i in v.items), _key_of(v.elem, depth + 1) if v.elem is not None else None)
    return key


def _seq(items: Sequence[Value] = (), elem: Optional[Value] = None, known: bool = True) -> Value:
    e = elem
    for v in items:
        e = join(e, v)
    return Value(SEQ, items=tuple(items), elem=e, exact=known)


def _settings(values: Sequence[Value]) -> Value:
    """A dict display or ``dict(k=v, ...)``: a mapping of settings. One
    that holds a tensor put somewhere by a call (``window=
    torch.hann_window(n)``) is kept as the sequence of its tensors, which
    meet what it is unpacked into (``torch.stft(x, **kwargs)``); any other
    is no value the flow follows."""
    tensors = [t for v in values for t in ([v] if v.kind == TENSOR else v.items if v.kind == SEQ else ())]
    if not any(t.pinned for t in tensors):
        return OTHER_VALUE
    elem: Optional[Value] = None
    for t in tensors:
        elem = join(elem, t) if elem is not None else t
    return _seq(elem=elem, known=False)


def _tensors_in(v: Value, depth: int = 0) -> Iterator[Value]:
    """The tensors ``v`` is or holds (a sequence's items and elements)."""
    if v.kind == TENSOR:
        yield v
    elif v.kind == SEQ and depth < 3:
        for item in (*v.items, *((v.elem,) if v.elem is not None and not v.exact else ())):
            yield from _tensors_in(item, depth + 1)


def _unmoved_model(v: Value) -> bool:
    """A module the code built on the CPU and has not moved (or a copy of
    one): a script's ``model = Net()`` before ``model.to(device)``."""
    return v.kind == MODULE and v.device == CPU and bool(v.born)


def _holds_pinned(v: Value) -> bool:
    """A pinned tensor, or a sequence holding one (``[torch.linspace(...)]``),
    a module built on the CPU, or a CPU generator the code made."""
    return v.pinned or (v.kind == SEQ and any(t.pinned for t in _tensors_in(v))) or (
        v.kind == MODULE and v.device == CPU and bool(v.born) and not v.loss
    ) or (_cpu_generator(v) and bool(v.born))


def element_of(v: Value) -> Value:
    """What iterating ``v`` gives."""
    if v.kind == SEQ:
        return v.elem if v.elem is not None else UNKNOWN_VALUE
    if v.kind == TENSOR:
        # the rows of a tensor; of a 1-D one, 0-dim tensors that mix with any device
        return replace(v, scalar=not v.matrix, anchor=None, items=(), elem=None, matrix=False)
    if v.kind == SHAPE:
        return NUMBER_VALUE
    if follows(v):
        return Value(UNKNOWN, v.device)
    if v.kind == MODULE:
        return Value(MODULE, v.device)  # for block in self.blocks
    return UNKNOWN_VALUE


def _is_builtin_call(func: cst.BaseExpression, env: "Env") -> bool:
    """``print(t)``, ``list(t)``, ``zip(a, b)``: a Python builtin, not a
    function computing a tensor."""
    import builtins

    return isinstance(func, cst.Name) and func.value not in env and hasattr(builtins, func.value)


def follows(v: Value) -> bool:
    """Of unknown kind, but on the model's side: what came in with the
    inputs (a parameter, an attribute or item of one), or a script's model's
    output (``outputs.logits``), or what a part of a model split over
    devices returned (``outputs[0]``, on its stage); used as a tensor, it is
    one there."""
    return v.kind == UNKNOWN and (v.device == LOCAL or is_placed(v.device) or v.device.startswith(STAGE_PREFIX))


def as_tensor(v: Value) -> Value:
    """``v`` where only a tensor can be: an input of unknown kind is a tensor
    on the inputs' device (a model's output, on the model's)."""
    if follows(v):
        return _tensor(v.device)
    if v.kind == UNKNOWN and v.device == CPU and not v.born:
        # out.cpu() of something of unknown kind: where a tensor must be,
        # a tensor taken to the CPU on purpose (torch.cat of such rows)
        return _tensor(CPU)
    if v.kind == UNKNOWN and v.device == CPU:
        # what an unseen function computed from CPU-born tensors, where
        # only a tensor can be: a CPU-born tensor
        return replace(v, kind=TENSOR)
    return v


# -- PyTorch vocabulary the flow needs ---------------------------------------

#: attributes and methods only a tensor has (a NumPy array or a list has
#: none of them): reading one on a parameter says it holds a tensor
TENSOR_ONLY_ATTRS = frozenset(
    {
        "device", "is_cuda", "dim", "size", "view", "view_as", "unsqueeze", "permute", "contiguous",
        "masked_fill", "masked_fill_", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor",
        "numel", "type_as", "expand", "expand_as", "to", "float", "long", "half", "bfloat16", "bool",
        "detach", "cpu", "cuda", "clone", "softmax", "log_softmax", "matmul", "unbind", "narrow",
        "index_select", "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "sigmoid",
        "repeat_interleave", "masked_select", "topk", "element_size", "requires_grad", "grad",
        "bmm", "mm", "reshape_as", "unfold", "is_floating_point", "get_device", "index_add",
        "index_add_", "index_fill", "index_fill_", "masked_scatter", "new", "pin_memory", "norm",
        # elementwise math as methods: a number or a NumPy array has none
        # (``np.sqrt(a)``, ``math.exp(x)`` are functions)
        "sqrt", "rsqrt", "exp", "log", "log1p", "expm1", "tanh", "relu", "reciprocal", "sin", "cos",
    }
)
#: tensor methods whose tensor arguments must be on the receiver's device
_BINARY_METHODS = frozenset(
    {
        "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "true_divide", "floor_divide",
        "matmul", "mm", "bmm", "mv", "dot", "masked_fill", "masked_fill_", "index_select", "gather",
        "scatter", "scatter_", "scatter_add", "scatter_add_", "index_add", "index_add_", "index_fill",
        "index_fill_", "index_put", "index_put_", "masked_scatter", "masked_scatter_", "masked_select",
        "where", "eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum", "pow", "fmod", "remainder",
        "lerp", "lerp_", "addmm", "baddbmm", "take_along_dim", "atan2",
        "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "clamp", "clamp_",
    }
)
#: tensor methods whose first argument is a boolean mask tensor
_MASK_METHODS = frozenset({"masked_fill", "masked_fill_", "masked_scatter", "masked_scatter_", "masked_select"})
#: tensor methods that reshape a mask without computing on it
_MASK_SHAPING = frozenset({"unsqueeze", "expand", "expand_as", "view", "reshape", "repeat", "bool", "all", "any"})
#: module methods that hand out its tensors
_WEIGHT_VIEWS = frozenset({"parameters", "buffers", "state_dict"})
_NAMED_WEIGHT_VIEWS = frozenset({"named_parameters", "named_buffers"})
#: module methods that return the module itself, where it is
_KEEPS_MODULE = frozenset({"eval", "train", "requires_grad_", "float", "half", "double", "bfloat16"})
#: torch functions that take several tensors with no 0-dim exception
_CONCAT = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "block_diag"})
#: torch names whose tensor arguments need not share a device, or that are
#: not computations: no meeting, unknown result
_NO_MEETING = frozenset(
    {
        "save", "load", "is_tensor", "is_storage", "manual_seed", "from_numpy", "numel", "device",
        "dtype", "Size", "no_grad", "set_grad_enabled", "enable_grad", "inference_mode", "typename",
        "get_default_dtype", "set_default_dtype", "broadcast_shapes", "is_floating_point", "is_complex",
        "get_rng_state", "set_rng_state", "equal", "allclose", "isclose", "seed", "initial_seed",
        "compile", "jit", "autocast", "finfo", "iinfo", "result_type", "promote_types", "can_cast",
        "ctc_loss", "pack_padded_sequence", "pad_sequence", "pack_sequence", "pad_packed_sequence",
        # a nested tensor's sizes, strides and offsets are CPU metadata beside
        # its buffer wherever that is
        "_nested_view_from_buffer", "_nested_view_from_buffer_copy", "_nested_compute_contiguous_strides_offsets",
    }
)
#: functions outside torch that return their first argument's tensor, reshaped
#: or repeated, on its device
_SAME_DEVICE_FUNCTIONS = frozenset(
    {
        "einops.rearrange", "einops.repeat", "einops.reduce", "torch.nn.Parameter", "torch.nn.parameter.Parameter",
        "torch.nn.Buffer", "torch.autograd.Variable", "torch.autograd.variable.Variable",
    }
)
#: collectives whose tensor must be on the process group's device (a CUDA
#: device under NCCL)
_COLLECTIVES = frozenset(
    f"torch.distributed.{f}" for f in (
        "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
        "reduce_scatter_tensor", "all_to_all_single",
    )
)
#: functions and methods whose result can have more dimensions than their
#: tensor inputs (of 0-dim inputs, a tensor with dimensions); any other of
#: a 0-dim tensor is 0-dim
_SHAPE_MAKERS = frozenset(
    {
        "unsqueeze", "expand", "expand_as", "broadcast_to", "repeat", "tile", "reshape", "view", "view_as",
        "reshape_as", "flatten", "ravel", "atleast_1d", "atleast_2d", "atleast_3d", "meshgrid", "one_hot", "diag",
        "diag_embed", "diagflat", "outer", "ger", "kron", "cartesian_prod", "combinations", "unfold",
        "repeat_interleave", "stack", "cat", "concat", "concatenate", "hstack", "vstack", "dstack", "column_stack",
        "block_diag", "index_select", "masked_select", "nonzero", "argwhere", "pad", "new_zeros", "new_ones",
        "new_empty", "new_full", "new_tensor", "multinomial", "bincount", "histc", "unique", "tensor_split",
    }
)
#: torch namespaces whose functions compute on tensors
_COMPUTE_NAMESPACES = ("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.")
#: autograd entry points whose tensors must share a device: each gradient in
#: ``grad_outputs``/``grad_tensors`` with its output ("Mismatch in device")
_AUTOGRAD = frozenset({"torch.autograd.grad", "torch.autograd.backward"})

#: the base of custom autograd operations: their static ``forward(ctx, ...)``
#: and ``backward(ctx, *grads)`` run on whatever device the inputs are on
_AUTOGRAD_FUNCTIONS = frozenset({
    "torch.autograd.Function", "torch.autograd.function.Function", "torch.autograd.function.InplaceFunction",
})
#: tensor methods that return the receiver's tensor, reduced to 0-dim when
#: called with no argument
_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod", "norm", "all", "any", "std", "var", "amax", "amin", "logsumexp"})
_VALUE_METHODS = {
    "item": NUMBER_VALUE, "tolist": OTHER_VALUE, "dim": NUMBER_VALUE, "numel": NUMBER_VALUE,
    "nelement": NUMBER_VALUE, "element_size": NUMBER_VALUE,
    "data_ptr": NUMBER_VALUE, "is_contiguous": NUMBER_VALUE, "is_floating_point": NUMBER_VALUE,
    "stride": OTHER_VALUE, "backward": OTHER_VALUE, "register_hook": OTHER_VALUE, "type": OTHER_VALUE,
    "__len__": NUMBER_VALUE, "equal": NUMBER_VALUE, "allclose": NUMBER_VALUE,
}
#: methods of ``str`` that ``torch.Tensor`` and ``nn.Module`` lack: a value
#: they are called on is text, and text is on no device
#: (``prompt = template.format(name=name.lower())``)
_TEXT_METHODS = frozenset({
    "lower", "upper", "strip", "lstrip", "rstrip", "format", "format_map", "capitalize", "casefold", "title", "zfill",
    "ljust", "rjust", "center", "removeprefix", "removesuffix", "splitlines", "expandtabs", "swapcase", "translate",
    "partition", "rpartition", "rsplit",
})
#: ... and those that test it (a bool)
_TEXT_TESTS = frozenset({
    "startswith", "endswith", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric",
    "isdecimal", "isidentifier", "istitle",
})
_NUMBER_BUILTINS = frozenset({"len", "int", "float", "bool", "round", "isinstance", "issubclass", "hasattr", "callable", "id", "hash", "ord"})
_OTHER_BUILTINS = frozenset({"str", "repr", "print", "format", "type", "dict", "set", "frozenset", "open", "vars", "dir", "super", "object", "Exception", "ValueError", "TypeError", "RuntimeError", "NotImplementedError", "AssertionError", "KeyError", "IndexError"})
_SAME_DEVICE_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag", "grad"})


# -- records -----------------------------------------------------------------


@dataclass(frozen=True)
class Meeting:
    """A CPU-born tensor meets a tensor on the model's device."""

    #: the call that created the CPU tensor (where a fix adds ``device=``)
    origin: cst.CSTNode
    #: the expression where the two meet
    at: cst.CSTNode
    #: how they meet: "operator", "torch.cat", "method index_select",
    #: "submodule", "index", "return"
    how: str
    #: the tensor it meets, as the code names it ("" when it has no name)
    partner: str = ""
    #: where the origin put its tensor: "cpu", "current" or "fixed"
    device: str = CPU
    #: where the tensor it meets is: ``local`` (the inputs' device), a stage,
    #: or ``placed:<model>`` (where a script moved its model)
    against: str = "local"
    #: the expression that carries the origin's tensor there, when the flow
    #: knows it (the argument of a model call, an operand)
    arg: Optional[cst.CSTNode] = None
    #: the function of the file it meets in, when that is a callee the
    #: tensor was handed to (``partner`` is that function's name for it)
    within: str = ""


#: a device a script chose and moved its model (and, often, its data) to:
#: ``.to(device)``, ``.cuda()`` on a model. ``placed:<model>`` is where the
#: outputs of the model the code calls ``<model>`` are
PLACED = "placed:"
#: ``Meeting.how`` of the CPU weights a loss module holds (its ``partner``
#: is the loss) meeting a moved model's output it is called on
LOSS_WEIGHTS = "loss weights"


def is_placed(device: str) -> bool:
    return device.startswith(PLACED)


def model_side(device: str) -> bool:
    """Where the model's own tensors are: the inputs' device in its code, a
    stage of a split model, or where a script moved it."""
    return device == LOCAL or device.startswith(("stage:", PLACED))


@dataclass
class FunctionFlow:
    node: cst.FunctionDef
    meetings: List[Meeting] = field(default_factory=list)
    #: what the function returns (joined over its returns)
    returns: Value = UNKNOWN_VALUE
    #: origin call -> the names holding a device tensor in scope there, in
    #: order of preference (parameters first): the anchors a fix may name
    anchors: Dict[cst.CSTNode, List[str]] = field(default_factory=dict)
    #: origin call -> the factory's short name (``zeros``, ``from_numpy``)
    origin_names: Dict[cst.CSTNode, str] = field(default_factory=dict)
    #: origin call -> the name holding the device it placed its tensor on,
    #: when that device was fixed outside the call (``self.device``,
    #: ``DEVICE``, ``self.gpu``)
    placed_by: Dict[cst.CSTNode, str] = field(default_factory=dict)
    #: callee -> the arguments each of this function's calls binds to its
    #: parameters (calls to functions and methods of the same file)
    call_sites: Dict[cst.FunctionDef, List[Dict[str, Value]]] = field(default_factory=dict)
    #: in a module that pins its parts to devices: activations handed from
    #: one stage to another without a move (``devlint.facts.stages``)
    handovers: List[Handover] = field(default_factory=list)
    #: in a module split by a ``device_map``: the function calls a part of
    #: it (``generate`` running the language model's embedding): its
    #: handovers happen when the model runs, as forward's do
    runs_parts: bool = False
    #: what the names hold where the function ends (kept for the
    #: module-level constants only: :meth:`DeviceFlow.module_tensor`)
    exit_env: Dict[str, "Value"] = field(default_factory=dict)
    #: ``torch.tensor(x)`` of data the flow cannot see: maybe 0-dim
    maybe_scalar: Set[cst.CSTNode] = field(default_factory=set)
    #: tensors a data loader yields, by the node that names them first (a
    #: loop target, ``batch["x"]``, ``data.x``, an unpacked name)
    loader_items: Dict[cst.CSTNode, "LoaderItem"] = field(default_factory=dict)
    #: the function hands its inputs' tensors to NumPy (``x.numpy()``,
    #: ``np.linalg.lstsq(x, y)``), which works on CPU tensors only: its inputs
    #: are on the CPU, and its own CPU tensors meet nothing on a device
    cpu_only: bool = False
    #: origin call -> (path, line, factory, returns a sequence) of the
    #: project function in another file that made its tensor on the CPU
    #: (``create_grid(n)``; ``rand_angles()``, a tuple of them)
    helper_births: Dict[cst.CSTNode, Tuple[str, int, str, bool]] = field(default_factory=dict)
    #: origin call (``x.cuda()``) -> the model it is fed to and the GPU the
    #: script chose for that model: (model, device expression, "to"/"cuda",
    #: whether the expression can be written in this function)
    model_gpus: Dict[cst.CSTNode, Tuple[str, str, str, bool]] = field(default_factory=dict)
    #: ``self.<attr>`` -> a tensor the function stores there that a call did
    #: not put on the inputs' device (``self.grid = torch.linspace(...)``,
    #: ``setattr(self, "grid", g)``): after a call of this method, the
    #: caller's ``self.<attr>`` holds it
    stores: Dict[str, Value] = field(default_factory=dict)
    #: ``batch[k].to(device)`` alone on a line, of a batch a data loader
    #: yields: ``Tensor.to`` returns a moved copy and it is thrown away
    #: (the statement, the loader item it was read from)
    discarded_moves: List[Tuple[cst.Expr, "LoaderItem"]] = field(default_factory=list)
    #: ``t.to(device)`` alone on a line, of any value known to be a tensor
    #: (not guessed; ``isinstance(t, torch.Tensor)`` tested counts): the
    #: moved copy is thrown away, ``t`` stays where it was; with whether
    #: ``t`` is the name an enclosing ``for`` binds (``for k, v in
    #: batch.items(): v.to(d)``: rebinding it keeps nothing)
    discarded_tensor_moves: List[Tuple[cst.Expr, bool]] = field(default_factory=list)
    #: a call of a function of the file that returns a tensor the function
    #: creates on the CPU (``prob_mask_like(x, p)``): an origin of its own,
    #: beside the factory in that function -> (the function as a message
    #: names it, the factory's short name)
    relayed: Dict[cst.CSTNode, Tuple[str, str]] = field(default_factory=dict)
    #: the relaying calls whose function returns a tuple or list holding
    #: such tensors (``init_hidden`` returning ``(h, c)``): no ``.to()``
    #: moves what they return whole
    relayed_several: Set[cst.CSTNode] = field(default_factory=set)
    #: False for the empty flow a recursive call gets while the function's
    #: own flow is still being computed: its ``returns`` says nothing
    complete: bool = True


@dataclass(frozen=True)
class LoaderItem:
    """A tensor as a data loader yields it, on the CPU."""

    #: how the code names the loader (``train_loader``)
    loader: str
    #: how the code names the tensor (``x``, ``batch["input_ids"]``, ``data.x``)
    key: str
    #: "name" (a name the loop binds), "key" / "index" (a constant key or
    #: index of a whole batch), "attr" (a field of a batch object)
    kind: str
    #: the name the loop binds to the batch it comes from
    base: str
    #: the loop (``for``/``while``) or comprehension it comes from
    loop: cst.CSTNode
    #: where the loop binds it, or the batch it is part of (a loop target,
    #: an unpacking, ``next(it)``): a move goes after it
    bound_at: Optional[cst.CSTNode] = None


@dataclass(frozen=True)
class OriginMeeting:
    """The first meeting of one origin, with what a rule needs to report it."""

    origin: cst.CSTNode
    meeting: Meeting
    #: the function whose body holds the origin, and how a message names it
    home: cst.FunctionDef
    where: str
    #: the origin's short name (``zeros``, ``from_numpy``, ``cuda``, ``to``)
    name: str
    #: names holding a tensor on the inputs' device in scope at the origin
    anchors: Tuple[str, ...]
    #: the name holding the device the origin placed its tensor on, when it
    #: was fixed outside the call (``self.device``, ``DEVICE``); else ""
    source: str = ""
    #: for a call of a project function of another file that returns a
    #: tensor it made on the CPU: (path, line, factory) of that function
    helper: Optional[Tuple[str, int, str, bool]] = None
    #: for a call of a function of this file that returns a tensor it
    #: creates on the CPU: (that function, the factory it calls)
    relay: Optional[Tuple[str, str]] = None
    #: the relaying function returns a tuple or list of such tensors
    relay_several: bool = False
    #: the function the meeting is in, when it is not ``home`` (a caller
    #: that gets the tensor back from ``home``); else ""
    met_in: str = ""

    @property
    def partner_text(self) -> str:
        if not self.meeting.partner:
            if self.meeting.against == CURRENT:
                return "a tensor on the GPU the code chose"
            return "a tensor on the inputs' device"
        if self.meeting.within:
            return f"`{self.meeting.partner}` in `{self.meeting.within}`"  # a helper's name for it
        return f"`{self.meeting.partner}`"

    @property
    def how_text(self) -> str:
        return how_text(self.meeting.how)


def how_text(how: str) -> str:
    """How a message names a meeting's operation (``Meeting.how``)."""
    return _HOW_TEXT.get(how, f"`{how}`")


_HOW_TEXT = {
    "operator": "an operation", "submodule": "a submodule's weights", "index": "an index", "return": "the other returns",
    "output": "`forward`'s output", "collective": "a collective (NCCL takes CUDA tensors only)",
    "model argument": "its weights (a model the caller hands over, wherever the caller put it)",
}

#: packages whose dataset classes read their items from disk, as host data
HOST_DATASET_PACKAGES = ("torchvision.datasets.", "torchaudio.datasets.", "torchtext.datasets.")

#: classes whose methods run in the data loader, on the CPU
LOADER_BASES = frozenset(
    f"torch.utils.data.{m}{c}"
    for m in ("", "dataset.", "sampler.")
    for c in ("Dataset", "IterableDataset", "TensorDataset", "Sampler", "BatchSampler")
)

#: methods of a module that run while it is built, before it is moved


Env = Dict[str, Value]


class DeviceFlow:
    """The device flow of one file, built lazily per function."""

    def __init__(self, facts: FileFacts, module: cst.Module, store: Optional[FactStore] = None) -> None:
        self.facts = facts
        self.module = module
        #: script semantics (models a script moved, batches its loaders
        #: yield) read the ``Training`` facts, built when first needed (a
        #: flow made without a store, in tests, has none)
        self._store = store
        self.scripts = store is not None
        self._module_function: Optional[cst.FunctionDef] = None
        #: flows by (how they were asked for, the function, the binding):
        #: ``function``, ``base``, ``specialised`` and ``function_as`` share
        #: one memo and one recursion guard (see :meth:`_interpret`)
        self._memo: Dict[tuple, FunctionFlow] = {}
        self._in_progress: Set[tuple] = set()
        self._body: Dict[cst.FunctionDef, _BodyFacts] = {}
        #: annotation name -> the tensor fields of its class (``tensor_fields``)
        self._tensor_fields: Dict[str, FrozenSet[str]] = {}
        self._held: Dict[str, Dict[str, Tuple[str, Meeting]]] = {}
        #: every loader item any function's flow has seen, by the node that
        #: names it (a helper handed a caller's batch reads its items here)
        self.loader_items: Dict[cst.CSTNode, "LoaderItem"] = {}
        self._none_guards: Dict[cst.FunctionDef, Dict[int, FrozenSet[str]]] = {}
        self._hints: Dict[cst.FunctionDef, Dict[str, Value]] = {}
        self._takes_inputs: Dict[cst.FunctionDef, bool] = {}
        self._tested: Dict[cst.FunctionDef, Set[str]] = {}
        #: module-level functions and each class's methods, by name
        self.functions: Dict[str, cst.FunctionDef] = {}
        self.methods: Dict[str, Dict[str, cst.FunctionDef]] = {}
        #: function node -> its class (None for a function outside classes)
        self.owner: Dict[cst.FunctionDef, Optional[str]] = {}
        #: a function defined in another's body -> that function (seen as
        #: the enclosing one's flow runs)
        self.nested: Dict[cst.FunctionDef, cst.FunctionDef] = {}
        #: a nested function -> what the enclosing function's names held
        #: where the ``def`` ran (its free names read them: a closure)
        self.closures: Dict[cst.FunctionDef, Env] = {}
        self._free: Dict[cst.FunctionDef, Set[str]] = {}
        #: (class, self name) -> the stage device expressions its methods
        #: can all write (:attr:`Stages.portable`)
        self.stage_names: Dict[Tuple[str, str], Dict[str, str]] = {}
        self._class_stages: Dict[str, Tuple[Stages, FrozenSet[str]]] = {}
        self._cpu_default_params: Dict[cst.FunctionDef, FrozenSet[str]] = {}
        #: copies of the weights of a module a script built, made before it
        #: moves it (``copy.deepcopy(model)``, ``p.detach()``/``clone()`` of its
        #: parameters, its ``state_dict()``) -> the function that makes it,
        #: as a message names it
        self.weight_copies: Dict[cst.CSTNode, str] = {}
        #: a plain object a script builds -> what its ``__init__`` left in
        #: ``self.<attr>`` given the constructor's arguments
        self.object_states: Dict[cst.CSTNode, Dict[str, Value]] = {}
        #: module-level tensors (:meth:`module_tensor`), found when first read
        self._module_tensors: Optional[Dict[str, Value]] = None
        self._module_tensor_names: Optional[FrozenSet[str]] = None
        self._constants_function: Optional[cst.FunctionDef] = None
        self.module = module
        self._gloo: Optional[bool] = None
        self._collate_fns: Optional[Set[str]] = None
        self._index(module.body, None)
        self.numpy_imported = any(
            t == "numpy" or t.startswith("numpy.") for ts in facts.imports.values() for t in ts
        )

    def _index(self, body: Sequence[cst.CSTNode], cls: Optional[str]) -> None:
        for stmt in body:
            if isinstance(stmt, cst.FunctionDef):
                if cls is None:
                    self.functions[stmt.name.value] = stmt
                else:
                    self.methods.setdefault(cls, {})[stmt.name.value] = stmt
                self.owner[stmt] = cls
            elif isinstance(stmt, cst.ClassDef):
                self._index(statements(stmt.body), stmt.name.value)
            elif isinstance(stmt, (cst.If, cst.Try, cst.TryStar)):
                for block in blocks(stmt):
                    self._index(block, cls)

    def names_gloo(self) -> bool:
        """Whether the file names the gloo backend (``backend="gloo"``,
        ``dist.Backend.GLOO``), under which collectives take CPU tensors."""
        if self._gloo is None:
            finder = _GlooFinder()
            walk(self.module, finder)
            self._gloo = finder.found
        return self._gloo

    def all_functions(self) -> List[cst.FunctionDef]:
        return list(self.owner)

    @property
    def training(self) -> "TrainingFacts":
        assert self._store is not None
        return self._store[Training]

    def module_function(self) -> cst.FunctionDef:
        """The module's own statements (outside its functions and classes)
        as one function, so script code runs through the same flow; its
        scope is ``<module>``."""
        if self._module_function is None:
            body = [s for s in self.module.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef))]
            self._module_function = cst.FunctionDef(
                name=cst.Name("__module__"), params=cst.Parameters(), body=cst.IndentedBlock(body=body or [cst.SimpleStatementLine([cst.Pass()])]),
            )
        return self._module_function

    def module_tensor(self, name: str) -> Optional[Value]:
        """The tensor a module-level name holds when the module binds it
        once, at import, to a tensor it makes on the CPU (``MEAN =
        torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)``): a function
        reading it gets that CPU tensor, which no ``.to()`` of a model moves.
        None for any other name (bound more than once, declared ``global``
        somewhere, or not a CPU tensor of more than one element)."""
        if name not in self.module_tensor_names():
            return None
        if self._module_tensors is None:
            self._module_tensors = {}  # (a read while they are found: none yet)
            self._module_tensors = self._find_module_tensors()
        return self._module_tensors.get(name)

    def module_tensor_names(self) -> FrozenSet[str]:
        """The module-level names :meth:`module_tensor` may know: bound once,
        by a simple assignment whose value calls into torch, and declared
        ``global`` nowhere (a syntactic bound, cheap to ask)."""
        if self._module_tensor_names is None:
            candidates = []
            for stmt in self.module.body:
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
                            targets = small.targets if isinstance(small, cst.Assign) else [small]
                            if len(targets) == 1 and isinstance(targets[0].target, cst.Name) and any(
                                (self.facts.qualify(c.func) or "").startswith("torch.") for c in calls_in(small.value)
                            ):
                                candidates.append(targets[0].target.value)
            names: FrozenSet[str] = frozenset()
            if candidates:
                bindings = _ModuleBindings()
                walk(self.module, bindings)
                names = frozenset(n for n in candidates if bindings.count.get(n) == 1 and n not in bindings.declared)
            self._module_tensor_names = names
        return self._module_tensor_names

    def _find_module_tensors(self) -> Dict[str, Value]:
        names = self.module_tensor_names()
        if not names:
            return {}
        lines = [stmt for stmt in self.module.body if isinstance(stmt, cst.SimpleStatementLine)]
        fn = self._constants_function = cst.FunctionDef(name=cst.Name("__constants__"), params=cst.Parameters(),
                                                        body=cst.IndentedBlock(body=lines))
        found = self._interpret(("function", fn), fn, lambda: {"hinted": False})
        out: Dict[str, Value] = {}
        for name in names:
            v = found.exit_env.get(name)
            if v is not None and v.kind == TENSOR and v.device == CPU and v.pinned and not v.scalar:
                out[name] = replace(v, anchor=None)
        return out

    def scope_name(self, fn: cst.FunctionDef) -> str:
        """The ``Training`` scope of ``fn``: ``<module>``, ``main``,
        ``Trainer.fit``, ``main.evaluate``."""
        if fn is self._module_function or (fn is self._constants_function and fn is not None):
            return MODULE_SCOPE
        parent = self.nested.get(fn)
        if parent is not None and parent is not self._module_function:
            return f"{self.scope_name(parent)}.{fn.name.value}"
        owner = self.owner.get(fn)
        return f"{owner}.{fn.name.value}" if owner else fn.name.value

    def outermost(self, fn: cst.FunctionDef) -> cst.FunctionDef:
        """The method or module-level function whose body holds ``fn``
        (``fn`` itself when it is one)."""
        seen = {fn}
        while fn in self.nested and self.nested[fn] not in seen:
            fn = self.nested[fn]
            seen.add(fn)
        return fn

    def free_names(self, node: cst.FunctionDef) -> Set[str]:
        """The plain names a function's body mentions that are not its
        parameters (a nested function's closure reads the enclosing
        function's ones among them)."""
        found = self._free.get(node)
        if found is None:
            params = node.params
            found = free_names(node.body) - param_names(node) - {
                p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)
            }
            self._free[node] = found
        return found

    def may_meet(self, node: cst.FunctionDef) -> bool:
        """Whether the function can hold a CPU-born tensor at all: it creates
        one, or calls (by name, or on its first parameter) a function of the
        file that may return one. A cheap bound on ``function(node).meetings``."""
        return self._may_hold(node, set())

    def _may_hold(self, node: cst.FunctionDef, seen: Set[cst.FunctionDef]) -> bool:
        found = self.body_facts(node)
        if found.source:
            return True
        if self.module_tensor_names() and self.module_tensor_names() & self.free_names(node):
            return True  # it reads a tensor the module made at import
        seen.add(node)
        cls = self.owner.get(node)
        if cls is not None and any(
            (a := self.facts.class_attribute(cls, name)) is not None and a.factory for name in found.called
        ):
            return True  # self.window_fn(n), holding a torch factory
        callees = [self.functions.get(name) or (self.method(cls, name) if cls else None) for name in found.called]
        for _, attr, m in found.attribute_calls:  # self.rnn.init_hidden(b)
            a = self.facts.class_attribute(cls, attr) if cls else None
            if a is not None and a.kind == "module" and a.module_class in self.facts.classes:
                callees.append(self.method(a.module_class, m))
        for callee in callees:
            if callee is not None and callee not in seen and self._may_hold(callee, seen):
                return True
        return False

    def _interpret(self, key: tuple, node: cst.FunctionDef, how: Callable[[], Dict[str, Any]]) -> FunctionFlow:
        """The flow of ``node`` interpreted with the settings ``how()``
        gives (memoised under ``key``); a call that recurses into a flow
        still being computed gets an empty one (nothing known yet)."""
        flow = self._memo.get(key)
        if flow is None:
            if key in self._in_progress:
                return FunctionFlow(node, complete=False)
            self._in_progress.add(key)
            try:
                flow = _Interpreter(self, node, **how()).run()
            finally:
                self._in_progress.discard(key)
            self._memo[key] = flow
        return flow

    def function(self, node: cst.FunctionDef) -> FunctionFlow:
        """The flow of ``node``, its parameters of unknown kind taken from
        what every call site in the file passes (see :meth:`parameter_hints`)."""
        return self._interpret(("function", node), node, lambda: {"hints": self.parameter_hints(node)})

    def base(self, node: cst.FunctionDef) -> FunctionFlow:
        """The flow of ``node`` from its own text only (no call-site hints);
        what the hints are computed from."""
        return self._interpret(("base", node), node, lambda: {"hinted": False})

    def parameter_hints(self, node: cst.FunctionDef) -> Dict[str, Value]:
        """Parameters of unknown kind that every call site of the file passes
        a tensor on the inputs' device (``self.q_sample(x0, t, noise)`` from
        forward): there they are such tensors too. Call sites are found by
        name (``f(...)``, ``self.f(...)``) in the file's functions and read
        from their own flows."""
        hints = self._hints.get(node)
        if hints is not None:
            return hints
        # a function nested in another is called by that one (a closure
        # over its names): hinted like a method from its enclosing function
        method = self.owner.get(node) is not None or node in self.nested
        if not method and not self.may_meet(node):
            # a module-level function's hints matter only where a CPU-born
            # tensor could meet its parameters
            self._hints[node] = {}
            return self._hints[node]
        if node in self.nested:
            callers = [self.nested[node]]
        else:
            callers = [c for c in (self._method_callers(node) if method else self._function_callers(node)) if c is not node]
        own = _Interpreter(self, node, hinted=False)._params() if callers else {}
        # parameters read as following the inputs: by default (unknown), or
        # a tensor by its use or annotation (whose device only callers show)
        unknown = [k for k, v in own.items() if v.device == LOCAL and v.kind in (TENSOR, UNKNOWN)]
        name = node.name.value
        private = name.startswith("_") and not name.endswith("__")
        # (only where a branch can hold a tensor put on a device: a cheap bound)
        tested = self.tested_names(node) if private and callers and self.may_meet(node) else set()
        if not unknown and not tested:
            self._hints[node] = {}
            return self._hints[node]
        sites: List[Dict[str, Value]] = []
        for caller in callers:
            sites.extend(self.base(caller).call_sites.get(node, ()))
        hints = {}
        for p in tested if sites else ():
            # a private method every call of the file leaves at its default
            # None or False (or passes it): the branches that need another
            # value do not run (``_attention(q, k, v)`` with ``is_causal=False``)
            vals = {(v.kind, v.falsy) if v is not None else None for v in (site.get(p) for site in sites)}
            if vals == {(NONE, False)}:
                hints[p] = NONE_VALUE
            elif vals == {(NUMBER, True)}:
                hints[p] = FALSE_VALUE
        owner = self.owner.get(node) if method else None
        cf = self.facts.class_facts(owner) if owner else None
        split = cf is not None and cf.dispatched and not cf.pinned_devices() and self.takes_inputs(node, cf)
        if sites:
            for p in unknown:
                vals = [site.get(p) for site in sites]
                if split:
                    # a method of a split model that forward hands the
                    # inputs: a parameter every caller passes a tensor on one
                    # stage is on it; one given the inputs is an input; any
                    # other (stages or kinds that differ) names no stage
                    keys = {stage_of(v.device) if v is not None and v.kind == TENSOR else None for v in vals}
                    if len(keys) == 1 and None not in keys:
                        hints[p] = Value(TENSOR, stage_device(keys.pop()), anchor=p)  # type: ignore[arg-type]
                        continue
                    if not all(v is not None and v.device == LOCAL for v in vals):
                        hints[p] = Value(own[p].kind, ANY)
                        continue
                if method and own[p] == LOCAL_UNKNOWN and all(
                    v is not None and v.device == LOCAL and v.kind in (TENSOR, UNKNOWN) for v in vals
                ) and any(v.kind == TENSOR for v in vals):
                    # some caller passes a tensor on the inputs' device, the
                    # others pass on what came in with their own inputs: one
                    # kind of value throughout (``_tukey(x)`` from forward and
                    # from ``apply_transforms(features)``)
                    # a guess stays a guess in the callee: no fix names it
                    hints[p] = Value(TENSOR, LOCAL, anchor=p, guessed=any(v.guessed or v.kind != TENSOR for v in vals))
                elif (not method or (cf is not None and not cf.is_module)) and all(
                    v is not None and v.kind == TENSOR and not v.guessed and (
                        is_placed(v.device) or v.device == LOCAL or (v.pinned and v.device in (CURRENT, FIXED))
                    )
                    for v in vals
                ):
                    # every call of the file hands it a tensor on a device: a
                    # model's output, or a tensor the caller's inputs are on
                    # (``f1(probs, targets)`` of ``probs = model(x)``), or one
                    # a script put on its GPU (``t = torch.randint(..., device=
                    # device)``, to a plain object's method too), which a CPU
                    # tensor made in it (or kept by its object) meets
                    hints[p] = Value(TENSOR, LOCAL, anchor=p)
                elif not method and self.scripts and all(v is not None and v.kind == OTHER and v.born for v in vals) and len(
                    {b.func.value for v in vals for b in v.born if isinstance(b, cst.Call) and isinstance(b.func, cst.Name)}  # type: ignore[attr-defined]
                ) == 1:
                    # an object of one plain class of the file at every call
                    # (``optimize(policy, buffer)`` of ``buffer = ReplayBuffer()``):
                    # its methods run as the script's own calls of them do
                    hints[p] = Value(OTHER, born=frozenset().union(*(v.born for v in vals)))
                elif not method and all(v is not None and v.kind == SEQ and element_of(v).kind == NUMBER for v in vals):
                    # a Python list or tuple of numbers at every call
                    # (``torch.tensor(thresholds)`` of one is a tensor of one
                    # dimension or more, not a 0-dim one; a list of anything
                    # else keeps following the inputs, as an argument does)
                    hints[p] = _seq(elem=NUMBER_VALUE, known=False)
                elif all(v is not None and v.kind in (TENSOR, UNKNOWN) and v.device == CPU for v in vals):
                    # every caller here hands it a CPU tensor (a CPU data
                    # helper, a test's inputs): nothing shows it on a GPU,
                    # so a CPU tensor made beside it does not meet the
                    # inputs' device there (a CPU-born argument's own
                    # meetings are still the caller's, see _pass_pinned)
                    hints[p] = Value(TENSOR, CPU, anchor=p)
        self._hints[node] = hints
        return hints

    def takes_inputs(self, node: cst.FunctionDef, cls: ClassFacts) -> bool:
        """In a model a ``device_map`` splits: whether a method's parameters
        are the model's inputs, where the user put them (the device of the
        map's first part): ``forward``, a method no other method of the class
        calls, or one that only such methods call (``self.get_image_features(
        pixel_values, mask)`` from ``forward``); what its callers pass from
        elsewhere, each parameter's hint says (:meth:`parameter_hints`)."""
        known = self._takes_inputs.get(node)
        if known is not None:
            return known
        self._takes_inputs[node] = False  # recursion: not known to take them
        found = node.name.value == "forward" or not any(
            node.name.value in f.self_calls
            for c in self.facts.lineage(cls.name) if c in self.facts.classes
            for f in self.facts.classes[c].methods.values()
        )
        if not found and self.owner.get(node) == cls.name:
            callers = [c for c in self._method_callers(node) if c is not node]
            found = bool(callers) and all(
                (owner := self.owner.get(c)) is not None and (cf := self.facts.class_facts(owner)) is not None
                and cf.dispatched and not cf.pinned_devices() and self.takes_inputs(c, cf)
                for c in callers
            )
        self._takes_inputs[node] = found
        return found

    def tested_names(self, node: cst.FunctionDef) -> Set[str]:
        """Names whose ``None``-ness or truth an ``if`` (or a conditional
        expression) of ``node``'s body tests: ``if x is None``, ``if not
        flag``, ``a if mask is not None else b``."""
        found = self._tested.get(node)
        if found is None:
            found = self._tested[node] = set()
            for test in _if_tests(node.body):
                then_none, else_none = _none_tests(test)
                found.update(then_none, else_none)
                name, _ = _truth_test(test)
                if name is not None:
                    found.add(name)
        return found

    def tensor_fields(self, annotation: cst.BaseExpression) -> FrozenSet[str]:
        """The fields a parameter's annotated class declares as one tensor
        (``outputs: "DetectionOutput"``, ``Optional[...]`` of it; its bases'
        too), for a class of the file or of the project; empty for anything
        else."""
        name = annotated_name(annotation)
        if not name:
            return frozenset()
        if name not in self.facts.classes:
            name = self.facts.qualify_dotted(name) or name  # a class another module defines
        found = self._tensor_fields.get(name)
        if found is None:
            fields: Set[str] = set()
            if self.facts.class_facts(name) is not None:
                for c in self.facts.lineage(name):
                    cf = self.facts.class_facts(c)
                    if cf is not None:
                        fields.update(cf.tensor_fields)
            found = self._tensor_fields[name] = frozenset(fields)
        return found

    def body_facts(self, node: cst.FunctionDef) -> "_BodyFacts":
        found = self._body.get(node)
        if found is None:
            found = self._body[node] = _BodyFacts(self.facts, self.numpy_imported)
            walk(node.body, found)
            if found.layers_built and found.layer_names & found.called_names:
                found.source = True  # head = nn.Linear(d, k); head(x): its CPU weights meet x
            elif found.layers_built and any(
                names & found.layer_names for callee, names in found.passed.items() if callee in self.functions
            ):
                found.source = True  # net = Scorer(); score(x, net): the helper calls it on x
        return found

    def _function_callers(self, node: cst.FunctionDef) -> List[cst.FunctionDef]:
        """For a module-level function: the functions and methods of the
        file that call it by name (``f(...)``). The module's own statements
        (demo code under ``__main__``) are asked only where they place
        something on a device (a script, whose statements are the program);
        else a function they call once with made-up inputs is still the
        library's."""
        name = node.name.value
        if self.functions.get(name) is not node:
            return []
        out = [fn for fn in self.owner if name in self.body_facts(fn).called_names]
        script = self.module_function()
        if self.scripts and name in self.body_facts(script).called_names and self.body_facts(script).places:
            out.append(script)  # a script's own statements (they move things to a device): the program itself
        return out

    def _method_callers(self, node: cst.FunctionDef) -> List[cst.FunctionDef]:
        """For a method: the methods of its class, and of the file's classes
        that derive from it, that call it by name (``self.f(...)``). Hints
        are not computed for module-level functions, whose callers may be
        anywhere."""
        cls = self.owner.get(node)
        if cls is None:
            return []
        name = node.name.value
        out = []
        for c, methods in self.methods.items():
            if cls in self.facts.lineage(c):
                out.extend(fn for fn in methods.values() if name in self.body_facts(fn).called)
        facts = self.facts.class_facts(cls)
        if self.scripts and facts is not None and not facts.is_module:
            # a plain class's method, called by the script on an object it
            # built (``schedule.add_noise(x0, noise, t)``)
            scripts = [*self.functions.values(), self.module_function()]
            out.extend(fn for fn in scripts if name in self.body_facts(fn).called)
        return out

    def specialised(self, node: cst.FunctionDef, passed: Dict[str, Value], depth: int) -> FunctionFlow:
        """The flow of ``node`` with some parameters bound to CPU-born
        tensors a caller passes (memoised per binding)."""
        key = ("specialised", node, tuple(sorted((k, _key_of(v)) for k, v in passed.items())))
        return self._interpret(
            key, node, lambda: {"overrides": passed, "depth": depth, "hints": self.parameter_hints(node)}
        )

    def held_meetings(self, cls_name: str) -> Set[str]:
        """Plain tensor attributes of ``cls_name`` that meet a tensor on the
        inputs' device in a method of it (or of a subclass in this file) that
        runs once the module is built, or in a method such a class inherits
        from a base class of the file, run for it (a base's ``forward``
        reading what the subclass's ``__init__`` set)."""
        return set(self.held_readers(cls_name))

    def held_readers(self, cls_name: str) -> Dict[str, Tuple[str, "Meeting"]]:
        """:meth:`held_meetings`, each attribute with the first method (in
        the class's order) where it meets such a tensor, and that meeting."""
        found = self._held.get(cls_name)
        if found is None:
            found = {}
            for c, methods in self.methods.items():
                if cls_name not in self.facts.lineage(c):
                    continue
                flows = [(fn, self.function(fn)) for fn in methods.values() if not self.init_time(fn)]
                flows += [(fn, self.function_as(fn, c)) for fn in self._inherited(c) if not self.init_time(fn)]
                for fn, flow in flows:
                    for m in flow.meetings:
                        if m.device == HELD and isinstance(m.origin, cst.Attribute):
                            found.setdefault(m.origin.attr.value, (fn.name.value, m))
            self._held[cls_name] = found
        return found

    def _inherited(self, cls: str) -> List[cst.FunctionDef]:
        """The methods module class ``cls`` inherits from base classes of
        this file and does not override."""
        c = self.facts.classes.get(cls)
        if c is None or not c.is_module:
            return []
        own = self.methods.get(cls, {})
        out: Dict[str, cst.FunctionDef] = {}
        for base in list(self.facts.lineage(cls))[1:]:
            for name, fn in self.methods.get(base, {}).items():
                if name not in own and name not in out:
                    out[name] = fn
        return list(out.values())

    def function_as(self, node: cst.FunctionDef, receiver: str) -> FunctionFlow:
        """The flow of method ``node`` of a base class, run for an instance
        of its subclass ``receiver``."""
        return self._interpret(
            ("as", node, receiver), node, lambda: {"hints": self.parameter_hints(node), "receiver": receiver}
        )

    def runs_in_replica(self, fn: cst.FunctionDef) -> bool:
        """A method that runs when a module's ``forward`` runs (in a
        DataParallel replica, on the replica's device): forward-reachable in
        its class, or called on a submodule holding its class
        (``self.cell.init_hidden(b)``) by a method of another module class
        of the file that is."""
        cls = self.class_facts(fn)
        if cls is None or not cls.is_module:
            return False
        name = fn.name.value
        if name in cls.forward_reachable:
            return True
        for outer in self.facts.classes.values():
            holders = [
                attr for attr, a in outer.attributes.items()
                if a.kind == "module" and a.module_class in self.facts.classes and cls.name in self.facts.lineage(a.module_class)
            ]
            if not holders:
                continue
            for m in outer.forward_reachable:
                caller = self.method(outer.name, m)
                if caller is None:
                    continue
                params = [*caller.params.posonly_params, *caller.params.params]
                me = params[0].name.value if params else "self"
                if any((me, h, name) in self.body_facts(caller).attribute_calls for h in holders):
                    return True
        return False

    def host_dataset(self, q: str, name: str) -> bool:
        """A call that builds a dataset whose items are host data on the
        CPU: a ``torchvision``/``torchaudio`` dataset (read from disk), or a
        ``torch.utils.data`` dataset class of the file whose methods put
        nothing on a device (its ``__getitem__`` runs in the loader)."""
        if q.startswith(HOST_DATASET_PACKAGES):
            return True
        if name not in self.facts.classes:
            return False
        methods = self.methods.get(name, {})
        return any(
            (base if "." in base else self.facts.qualify_dotted(base) if base not in self.facts.classes else None) in LOADER_BASES
            for base in self.facts.lineage(name)
        ) and not any(self.body_facts(fn).places for fn in methods.values())

    def runs_in_loader(self, fn: cst.FunctionDef) -> bool:
        """A method of a ``torch.utils.data`` dataset or sampler, or collate
        code: it runs in the data loader, on the CPU, before the batch is
        moved."""
        cls = self.owner.get(fn)
        if cls is None:
            return self._collates(fn, fn.name.value)
        for name in self.facts.lineage(cls):
            q = name if "." in name and name.startswith("torch.") else self.facts.qualify_dotted(name) if name not in self.facts.classes else None
            if q in LOADER_BASES:
                return True
        return self._collates(fn, cls)

    def _collates(self, fn: cst.FunctionDef, name: str) -> bool:
        """Collate code: a function or class named for the ``DataLoader``'s
        ``collate_fn`` (``collate``, ``pad_collate``, ``FastCollateMixup``,
        ``DataCollatorForLM``), or a function the file passes as
        ``collate_fn=``; it batches the CPU samples a loader's workers read,
        unless it places tensors on a device itself."""
        if "collat" not in name.lower() and name not in self.collate_fns():
            return False
        cls = self.owner.get(fn)
        scope = [fn] if cls is None else list(self.methods.get(cls, {}).values())
        return not any(self.body_facts(f).places for f in scope)

    def collate_fns(self) -> Set[str]:
        """Names the file passes as ``collate_fn=`` (``DataLoader(ds,
        collate_fn=pad_batch)``), read from the function bodies' facts."""
        if self._collate_fns is None:
            found: Set[str] = set()
            for fn in (*self.owner, self.module_function()):
                found |= self.body_facts(fn).collate_fns
            self._collate_fns = found
        return self._collate_fns

    def init_time(self, fn: cst.FunctionDef) -> bool:
        """A method of a module class that runs while the module is built,
        before it is moved to a device (``__init__``, ``reset_parameters``,
        and methods only those call)."""
        cls = self.class_facts(fn)
        if cls is None or not cls.is_module:
            return False
        name = fn.name.value
        if name in INIT_METHODS:
            return True
        callers = [m for m, f in cls.methods.items() if name in f.self_calls]
        return bool(callers) and all(m in INIT_METHODS for m in callers)

    def replica_skips(self, fn: cst.FunctionDef, node: cst.CSTNode) -> bool:
        """Whether ``node`` is in the body of ``if <param> is None:`` in ``fn``
        (``if device is None: device = next(self.parameters()).device``) for
        a parameter every call from replica code passes a value that cannot
        be None: a replica never runs it."""
        guards = self._none_guards.get(fn)
        if guards is None:
            finder = _NoneGuards()
            walk(fn.body, finder)
            guards = self._none_guards[fn] = finder.guards
        params = param_names(fn)
        names = guards.get(id(node), frozenset()) & params
        return bool(names) and self.replica_calls_pass(fn, names)

    def replica_calls_pass(self, fn: cst.FunctionDef, names: Set[str]) -> bool:
        """Whether ``fn`` is called from code that runs in a replica, and
        every such call of the file passes each parameter in ``names`` a
        value that cannot be None (``self.init_hidden(b, device=x.device)``):
        a branch of ``fn`` for those left at None never runs there."""
        calls = [
            bound
            for caller in self.all_functions()
            if caller is not fn and self.runs_in_replica(caller)
            for bound in self.function(caller).call_sites.get(fn, [])
        ]
        return bool(calls) and all(
            name in bound and bound[name].kind in (TENSOR, DEVICE, NUMBER, MODULE) and not bound[name].maybe_none
            for bound in calls
            for name in names
        )

    def home_of(self, origin: cst.CSTNode, asker: cst.FunctionDef) -> Optional[cst.FunctionDef]:
        """The function whose body holds ``origin``."""
        if origin in self.function(asker).origin_names:
            return asker
        for fn in (*self.owner, *self.nested):
            if fn is not asker and origin in self.function(fn).origin_names:
                return fn
        constants = self._constants_function
        if constants is not None and constants is not asker and origin in self.function(constants).origin_names:
            return constants  # a module-level tensor (:meth:`module_tensor`)
        return None

    def origin_meetings(self, devices: Sequence[str], skip: Set[int]) -> Iterator[OriginMeeting]:
        """The first meeting of each origin that put a tensor on one of
        ``devices``, over every function that does not run while a module
        is built; origins whose id is in ``skip`` (and each one yielded,
        which is added to it) are passed over."""
        script = self.module_function()
        # the module's own statements only where they place something (a script)
        scopes = [*self.owner, script] if self.body_facts(script).places else list(self.owner)
        seen = set(scopes)
        for fn in _growing(scopes, seen, self.nested):
            top = self.outermost(fn)
            if fn is not script and (self.init_time(top) or self.runs_in_loader(top) or not self.may_meet(fn)):
                continue
            for meeting in self.function(fn).meetings:
                origin = meeting.origin
                if meeting.device not in devices or id(origin) in skip:
                    continue
                if is_placed(meeting.against) and meeting.device != CURRENT:
                    continue  # a script's GPU tensor is where its device puts it; .cuda() may be elsewhere
                if fn is script and not is_placed(meeting.against) and meeting.how != "generator":
                    # the module's own statements: only a batch put on the
                    # current GPU for a model the script put on a chosen one
                    # (a CPU tensor fed to a moved model there is DL011's)
                    continue
                home = self.home_of(origin, fn)
                if home is None or self.init_time(home):
                    continue
                skip.add(id(origin))
                home_flow = self.function(home)
                yield OriginMeeting(
                    origin, meeting, home, self._display_name(home),
                    home_flow.origin_names.get(origin, "tensor"), tuple(home_flow.anchors.get(origin, ())),
                    home_flow.placed_by.get(origin, ""), home_flow.helper_births.get(origin),
                    home_flow.relayed.get(origin), origin in home_flow.relayed_several,
                    "" if fn is home else self._display_name(fn),
                )

    def _display_name(self, fn: cst.FunctionDef) -> str:
        """How a message names ``fn``: ``Class.method`` for a method, else
        its scope name."""
        owner = self.owner.get(fn)
        return self.scope_name(fn) if owner is None else f"{owner}.{fn.name.value}"

    def cpu_default_params(self, fn: cst.FunctionDef) -> FrozenSet[str]:
        """The parameters of ``fn`` whose default is the CPU device
        (``device="cpu"``, ``device=torch.device("cpu")``)."""
        found = self._cpu_default_params.get(fn)
        if found is None:
            names = set()
            for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params):
                d = p.default
                if isinstance(d, cst.Call) and self.facts.qualify(d.func) == "torch.device" and d.args:
                    d = d.args[0].value
                if d is not None and string_value(d) == "cpu":
                    names.add(p.name.value)
            found = self._cpu_default_params[fn] = frozenset(names)
        return found

    def staged_class(self, v: Value) -> Optional[ClassFacts]:
        """The module class of the file an instance ``v`` was built from
        (``model = SplitLM(...)``, not moved or wrapped since) when that
        class pins its own parts to devices: a model-parallel model, whose
        outputs are on the stages its ``forward`` returns them from."""
        if v.kind != MODULE or v.device != CPU or not v.born:
            return None
        for b in v.born:
            if isinstance(b, cst.Call) and isinstance(b.func, cst.Name):
                cls = self.facts.classes.get(b.func.value)
                if cls is not None and cls.is_module and not cls.dispatched and cls.pinned_devices():
                    return cls
        return None

    def class_stages(self, cls: ClassFacts) -> Tuple[Stages, FrozenSet[str]]:
        """The stages of a class that pins its parts, as its ``forward``
        names them, and the stage keys of its pinned parts."""
        found = self._class_stages.get(cls.name)
        if found is None:
            forward = self.method(cls.name, "forward")
            params = [*forward.params.posonly_params, *forward.params.params] if forward is not None else []
            self_name = params[0].name.value if params else "self"
            stages = Stages(self.facts, cls, self_name, self.stage_names.setdefault((cls.name, self_name), {}))
            keys = frozenset(k for a in stages.pinned for k in (stages.of_attribute(a),) if k is not None)
            found = self._class_stages[cls.name] = (stages, keys)
        return found

    def method(self, cls: str, name: str) -> Optional[cst.FunctionDef]:
        for c in self.facts.lineage(cls):
            fn = self.methods.get(c, {}).get(name)
            if fn is not None:
                return fn
        return None

    def class_facts(self, node: cst.FunctionDef) -> Optional[ClassFacts]:
        cls = self.owner.get(node)
        return self.facts.classes.get(cls) if cls else None


def _decorators(node: cst.FunctionDef) -> Set[str]:
    return {dotted_name(d.decorator) or "" for d in node.decorators}


def _parametrized_constants(node: cst.FunctionDef, facts: FileFacts) -> Set[str]:
    """Parameters a ``@pytest.mark.parametrize`` decorator gives only Python
    constants (``@pytest.mark.parametrize("center", [True, False])``, also
    through ``itertools.product`` of literal lists): numbers, strings,
    booleans and ``None``, never a tensor, whatever device the test runs on."""
    out: Set[str] = set()
    for d in node.decorators:
        call = d.decorator
        if not isinstance(call, cst.Call) or len(call.args) < 2 or any(a.star for a in call.args[:2]):
            continue
        if (facts.qualify(call.func) or "") != "pytest.mark.parametrize":
            continue
        names = string_value(call.args[0].value)
        if names is not None:
            listed = [n.strip() for n in names.split(",") if n.strip()]
        elif isinstance(call.args[0].value, (cst.List, cst.Tuple)):
            listed = [string_value(e.value) or "" for e in call.args[0].value.elements]
        else:
            continue
        if listed and all(listed) and _constant_rows(call.args[1].value, facts):
            out.update(listed)
    return out


def _constant_rows(node: cst.BaseExpression, facts: FileFacts) -> bool:
    """A literal list or tuple of constants (or of tuples of constants), or
    ``itertools.product`` of such lists."""
    if isinstance(node, cst.Call) and (facts.qualify(node.func) or "") == "itertools.product":
        return bool(node.args) and all(not a.star and _constant_rows(a.value, facts) for a in node.args)
    if not isinstance(node, (cst.List, cst.Tuple)):
        return False
    return all(_constant(e.value) for e in node.elements)


def _constant(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _constant(node.expression)
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(_constant(e.value) for e in node.elements)
    return False


def _asks_for_torch_tensors(node: cst.Call) -> bool:
    """``return_tensors="pt"``: the keyword with which tokenizers, processors
    and feature extractors are asked to convert their host data into
    PyTorch tensors (on the CPU: they are never told a device)."""
    arg = keyword_arg(node, "return_tensors")
    return arg is not None and string_value(arg.value) == "pt"


def _annotation(param: cst.Param) -> str:
    if param.annotation is None:
        return ""
    try:
        return cst.Module(body=[]).code_for_node(param.annotation.annotation)
    except Exception:  # pragma: no cover - libcst renders any annotation
        return ""


_TENSOR_KEYWORDS = frozenset({"input", "index", "other", "tensors", "mask", "weight"})


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: Set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return False  # x.shape, x.size(0): x is used as a tensor there


def _names_in(args: Sequence[cst.Arg]) -> Set[str]:
    finder = _Names()
    for a in args:
        if a.keyword is None or a.keyword.value != "device":
            walk(a.value, finder)
    return finder.names


def retyped_like(call: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """``x`` for ``t.type(x.type())`` (``t`` given ``x``'s type string), else None."""
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "type" and len(call.args) == 1:
        inner = call.args[0].value
        if isinstance(inner, cst.Call) and not inner.args and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "type":
            return inner.func.value
    return None


#: tensor methods whose result has the rank of the tensor they are called on
#: (or more: ``unsqueeze``)
_RANK_KEEPING = frozenset({
    "float", "double", "half", "bfloat16", "long", "int", "bool", "clone", "detach", "contiguous", "t",
    "transpose", "permute", "unsqueeze", "flip", "abs", "exp", "log", "sqrt", "sigmoid", "tanh", "neg", "clamp",
})


#: tensor methods whose sizes (``x.view(b, -1)``, ``x.repeat(2, 1)``) give
#: the result's number of dimensions, at least
_RESHAPING = frozenset({"view", "reshape", "repeat", "expand", "new_zeros", "new_ones", "new_empty", "new_full"})


#: torch functions that pick or place a tensor's elements by an index: what
#: they return is on the indexed tensor's device
_INDEXING = frozenset({
    "index_select", "gather", "take_along_dim", "take", "masked_select", "index_add", "index_copy", "index_fill",
    "scatter", "scatter_add", "scatter_reduce", "index_put", "index_reduce",
})

#: torch functions that put 1-D tensors side by side as the rows or columns of a matrix
_STACKING = frozenset({"stack", "vstack", "dstack", "column_stack", "block_diag"})


def _two_sizes(call: cst.Call) -> bool:
    """``x.view(b, -1)``, ``x.repeat((2, 1))``: two sizes or more, so two
    dimensions or more (no ``*sizes``)."""
    sizes = [a.value for a in call.args if a.keyword is None]
    if any(a.star for a in call.args):
        return False
    if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
        return len(sizes[0].elements) >= 2 and not any(isinstance(e, cst.StarredElement) for e in sizes[0].elements)
    return len(sizes) >= 2


def _two_dimensional(name: str, call: cst.Call) -> bool:
    """A factory call that certainly makes a tensor of two dimensions or
    more: ``torch.eye(n)``, ``torch.zeros(a, b)``, ``torch.rand((a, b))``."""
    if name == "eye":
        return True
    if name not in ("zeros", "ones", "empty", "rand", "randn", "full"):
        return False
    sizes = [a.value for a in call.args if a.keyword is None and not a.star]
    if name == "full":
        sizes = sizes[:1]
        return bool(sizes) and isinstance(sizes[0], (cst.Tuple, cst.List)) and len(sizes[0].elements) >= 2
    if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
        return len(sizes[0].elements) >= 2 and not any(isinstance(e, cst.StarredElement) for e in sizes[0].elements)
    return len(sizes) >= 2


#: torch.linalg decompositions that return a tuple of tensors
_DECOMPOSITIONS = frozenset(
    {"eigh", "eig", "lstsq", "cholesky_ex", "inv_ex", "lu_factor", "lu_factor_ex", "ldl_factor", "ldl_factor_ex", "solve_ex"}
)


def _returns_several(name: str, call: cst.Call) -> bool:
    """Whether ``torch.<name>(...)`` returns a tuple rather than a tensor:
    ``torch.where(c)`` (not ``torch.where(c, a, b)``), ``torch.max(t, dim)``
    (not ``torch.max(a, b)`` or ``torch.max(t)``), ``nonzero(as_tuple=True)``,
    ``unique(return_counts=True)``, and the functions that always do."""
    if name in _DECOMPOSITIONS:
        return True
    if name not in _NOT_ONE_TENSOR:
        return False
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if name == "where":
        return len(positional) == 1 and not keywords
    if name in ("max", "min", "median", "nanmedian"):
        second = positional[1].value if len(positional) > 1 else None
        return "dim" in keywords or isinstance(second, (cst.Integer, cst.UnaryOperation))
    if name == "nonzero":
        flag = keywords.get("as_tuple")
        return flag is not None and not (isinstance(flag, cst.Name) and flag.value == "False")
    if name in ("unique", "unique_consecutive"):
        return bool(set(keywords) & {"return_inverse", "return_counts"})
    return True


#: torch functions whose positional arguments after the first (an equation
#: string) are all tensors. (``torch.mm(a, b)``'s ``b`` is one too, but a
#: parameter of no other tensor use that is ``b`` is as often host data a
#: function hands a NumPy library beside it: only the first operand is read
#: as a tensor there, as before)
_TENSOR_OPERANDS = frozenset({"einsum"})


def _tensor_arguments(call: cst.Call, name: str) -> List[cst.BaseExpression]:
    """The arguments of a torch computation that can only be tensors: the
    first positional one (the elements of a sequence for ``cat``/``stack``;
    not for a function that also takes a number there, ``torch.pow(2, t)``),
    and ``input=``/``index=``/``other=``/``mask=``/``weight=``."""
    out: List[cst.BaseExpression] = []
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if positional:
        first = positional[0].value
        if name in _CONCAT and isinstance(first, (cst.List, cst.Tuple)):
            out.extend(e.value for e in first.elements if not isinstance(e, cst.StarredElement))
        elif name not in _CONCAT and name not in SCALAR_FIRST:  # torch.remainder(n, t): n may be a number
            out.append(first)
        if name in _TENSOR_OPERANDS:
            # torch.einsum(eq, a, b): every operand is one
            out.extend(a.value for a in positional[1:] if not isinstance(a.value, (cst.SimpleString, cst.Integer, cst.Float)))
    out.extend(a.value for a in call.args if a.keyword is not None and a.keyword.value in _TENSOR_KEYWORDS)
    return out


class _GlooFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "gloo" in node.value.lower():
            self.found = True

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "GLOO":
            self.found = True


#: what ``isinstance(x, T)`` tests a tensor with
_TENSOR_TYPES = frozenset({"torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _growing(scopes: List[cst.FunctionDef], seen: Set[cst.FunctionDef],
             nested: Dict[cst.FunctionDef, cst.FunctionDef]) -> Iterator[cst.FunctionDef]:
    """``scopes``, then the functions nested in them that running them
    found (and those nested in those), each once: the enclosing function's
    flow runs before its nested ones are known."""
    i = 0
    while True:
        while i < len(scopes):
            yield scopes[i]
            i += 1
        more = [fn for fn, parent in list(nested.items()) if fn not in seen and parent in seen]
        if not more:
            return
        seen.update(more)
        scopes.extend(more)


class _BodyFacts(cst.CSTVisitor):
    """One walk of a function body: whether it creates or places a tensor
    (a CPU-born or GPU-placed source), the names it calls, and the names it
    uses the way only a tensor is used (``x.device``, ``x.view(...)``, the
    input of a torch computation)."""

    def __init__(self, facts: FileFacts, numpy_imported: bool) -> None:
        self.facts = facts
        self.numpy_imported = numpy_imported
        self.source = False
        self.called: Set[str] = set()
        #: plain names called as functions (``model(x)``): no tensors
        self.called_names: Set[str] = set()
        #: ``a.b.m(...)`` as (a, b, m): ``self.cell.init_hidden(b)``
        self.attribute_calls: Set[Tuple[str, str, str]] = set()
        #: names used as only a tensor is, while they still hold what the
        #: function was given (a use after ``x = torch.Tensor(x)`` says what
        #: the new binding is, not what the caller passed)
        self.tensors: Set[str] = set()
        #: names a statement has rebound so far, in source order
        self.rebound: Set[str] = set()
        #: depth of the branches, loops and nested scopes being walked: a
        #: name rebound there may still hold what the caller passed after
        self._nested = 0
        #: names an arithmetic operator combines with something that is no
        #: literal (``x + torch.zeros(3)``, ``x * mask``): a tensor or a
        #: number, and for forward's input (or what it passes on) a tensor
        self.operands: Set[str] = set()
        #: names handed to a torch computation in any position
        #: (``torch.addmm(b, x, w)``): a tensor there when the caller has one
        self.computed: Set[str] = set()
        #: it puts something on a device (``.to(...)``, ``.cuda()``, ``device=``)
        self.places = False
        #: the names it passes as ``collate_fn=``
        self.collate_fns: Set[str] = set()
        #: it builds a torch.nn layer with weights; ``layer_names``: the
        #: plain names it binds one to
        self.layers_built = False
        self.layer_names: Set[str] = set()
        #: plain names handed to a function called by its name:
        #: ``score(x, net)`` -> ``{"score": {"x", "net"}}``
        self.passed: Dict[str, Set[str]] = {}
        #: names it tests with ``isinstance`` against a type that is not a
        #: tensor (``isinstance(img, Image.Image)``, ``(list, tuple)``): they
        #: may hold something else than a tensor
        self.maybe_other: Set[str] = set()

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value == "device":
            self.places = True
        elif node.keyword is not None and node.keyword.value == "collate_fn":
            d = dotted_name(node.value)
            if d is not None:
                self.collate_fns.add(d.rsplit(".", 1)[-1])

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if isinstance(a, cst.Name) and isinstance(b, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.BinaryOperation)):
                self.operands.add(a.value)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        # after the value: ``x = torch.Tensor(x)`` reads the argument first
        for t in original_node.targets:
            self._rebind(t.target, original_node.value)
        value = original_node.value
        if isinstance(value, cst.Call) and self.facts.builds_weights(value.func):
            self.layer_names.update(n for t in original_node.targets for n in target_names(t.target) if "." not in n)

    def leave_AnnAssign(self, original_node: cst.AnnAssign) -> None:
        if original_node.value is not None:
            self._rebind(original_node.target, original_node.value)

    def visit_If(self, node: cst.If) -> None:
        self._nested += 1

    def leave_If(self, original_node: cst.If) -> None:
        self._nested -= 1

    visit_For = visit_While = visit_Try = visit_FunctionDef = visit_ClassDef = visit_If  # type: ignore[assignment]
    leave_For = leave_While = leave_Try = leave_FunctionDef = leave_ClassDef = leave_If  # type: ignore[assignment]

    def _rebind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """Names the assignment gives a new value. A value computed from the
        name itself (``x = x * scale``, ``x = x.view(b, -1)``) is still what
        the caller passed, transformed: uses after it still tell what that
        was; one converted from raw data (``x = torch.tensor(x)``,
        ``np.asarray(x)``) or unrelated to it is not."""
        if self._nested:
            return
        reads = free_names(value)
        converted = self._converts(value)
        for n in target_names(target):
            if "." not in n and (n not in reads or n in converted):
                self.rebound.add(n)

    def _converts(self, value: cst.BaseExpression) -> Set[str]:
        """The names ``value`` hands to a constructor that builds a tensor or
        an array from data (``torch.tensor(x)``, ``torch.Tensor(x).long()``,
        ``np.array(x)``)."""
        out: Set[str] = set()
        for call in calls_in(value):
            q = self.facts.qualify(call.func) or ""
            if q in ("torch.tensor", "torch.as_tensor", "torch.from_numpy") or q in _LEGACY_TENSOR_CONSTRUCTORS or q.startswith("numpy."):
                for a in call.args:
                    out |= free_names(a.value)
        return out

    def _tensor_use(self, name: str) -> None:
        if name not in self.rebound:
            self.tensors.add(name)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name):
            a = node.attr.value
            if a in TENSOR_ONLY_ATTRS or (a == "shape" and not self.numpy_imported):
                self._tensor_use(node.value.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda"):
            self.places = True
        if isinstance(func, cst.Name) and func.value == "isinstance" and len(node.args) == 2 and isinstance(node.args[0].value, cst.Name):
            types = node.args[1].value
            elements = [e.value for e in types.elements] if isinstance(types, (cst.Tuple, cst.List)) else [types]
            if any(self.facts.qualify(t) not in _TENSOR_TYPES for t in elements):
                self.maybe_other.add(node.args[0].value.value)
        if isinstance(func, cst.Name):
            self.called.add(func.value)
            self.called_names.add(func.value)
            names = {a.value.value for a in node.args if isinstance(a.value, cst.Name)}
            if names:
                self.passed.setdefault(func.value, set()).update(names)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            self.called.add(func.attr.value)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute) and isinstance(func.value.value, cst.Name):
            self.attribute_calls.add((func.value.value.value, func.value.attr.value, func.attr.value))
        if self.facts.builds_weights(func):
            # nn.Linear(8, 4), Scorer(): a module whose weights are made on
            # the CPU; a source only where the function calls it (``head =
            # nn.Linear(..); head(x)``) or hands it to a helper, not where it
            # builds layers for a model (``return nn.Sequential(...)``,
            # ``layers.append(nn.Conv2d(...))``)
            self.layers_built = True
            return
        dotted = dotted_name(func)
        q = (self.facts.qualify_dotted(dotted) or "") if dotted and dotted.split(".", 1)[0] in self.facts.imports else ""
        if not q.startswith("torch."):
            if not self.source and isinstance(func, cst.Attribute) and func.attr.value in ("cuda", "to"):
                self.source = True
            if not self.source and q and self.facts.index is not None:
                helper = self.facts.project_function(q)
                if helper is not None and helper[2].get("returns") == "cpu":
                    self.source = True  # a project function of another file that makes a CPU tensor
            return
        if q == "torch.from_numpy" or q in _LEGACY_TENSOR_CONSTRUCTORS or (q.count(".") == 1 and q[6:] in DEVICE_FACTORIES):
            self.source = True  # a factory: without device= on the CPU, with one maybe on a named GPU
            return
        name = q.rsplit(".", 1)[-1]
        if name in _NO_MEETING or not (q.count(".") == 1 or q.startswith(_COMPUTE_NAMESPACES)):
            return
        for e in _tensor_arguments(node, name):
            if isinstance(e, cst.Name):
                self._tensor_use(e.value)
        self.computed.update(a.value.value for a in node.args if isinstance(a.value, cst.Name))


class _Interpreter:
    def __init__(self, flows: DeviceFlow, node: cst.FunctionDef, overrides: Optional[Dict[str, Value]] = None,
                 depth: int = 0, hints: Optional[Dict[str, Value]] = None, hinted: bool = True,
                 receiver: Optional[str] = None) -> None:
        self.flows = flows
        self.hints = hints or {}
        #: ``self.<attr>`` keys this method assigns -> the first target node
        self._stored_attributes: Dict[str, cst.Attribute] = {}
        #: False while computing hints: callees' flows are their base flows
        self.hinted = hinted
        self.overrides = overrides or {}
        self.depth = depth
        #: the body hands an input's tensor to NumPy, which only takes CPU
        #: tensors: in this function the inputs are on the CPU
        self.cpu_only = False
        #: functions defined in this one's body, by name
        self.local_functions: Dict[str, cst.FunctionDef] = {}
        #: local names bound to ``torch.vmap`` (``vmap = functorch.vmap``),
        #: and names bound to a map of a function of the file (``per_row =
        #: vmap(score)``: ``per_row`` -> ``score``)
        self.vmap_names: Set[str] = set()
        self.mapped: Dict[str, str] = {}
        #: parameter -> (its first value, the tensor fields its annotated
        #: class declares): see ``DeviceFlow.tensor_fields``
        self._records: Dict[str, Tuple[Value, FrozenSet[str]]] = {}
        self.facts = flows.facts
        self.node = node
        #: a method inherited from a base class of the file, run for an
        #: instance of a subclass (``self`` holds that subclass's attributes)
        self.cls = flows.facts.classes.get(receiver) if receiver else flows.class_facts(node)
        self.result = FunctionFlow(node)
        self.returns: List[Tuple[cst.CSTNode, Value]] = []
        self._seen: Set[Tuple[int, int]] = set()
        decorators = _decorators(node)
        self.static = "staticmethod" in decorators
        self.classmethod = "classmethod" in decorators
        params = [p for p in (*node.params.posonly_params, *node.params.params)]
        self.self_name = ""
        if self.flows.owner.get(node) and params and not self.static:
            self.self_name = params[0].name.value
        # a module's method with its ``self`` (not a static or class method)
        self.is_module = self.cls is not None and self.cls.is_module and bool(self.self_name) and not self.classmethod
        #: ``ctx`` of a ``torch.autograd.Function``'s ``forward``/``backward``
        #: (whose ``saved_tensors`` are what forward saved, on the inputs' device)
        self.ctx_name = ""
        if self.cls is not None and self.static and params and node.name.value in ("forward", "backward", "jvp", "vjp") and any(
            (self.facts.qualify_dotted(b) or b) in _AUTOGRAD_FUNCTIONS for c in self.facts.lineage(self.cls.name)
            for b in ([c] if c not in self.facts.classes else self.facts.classes[c].bases)
        ):
            self.ctx_name = params[0].name.value
        #: a method of a module that pins its parts to devices: each tensor
        #: is on a stage (``stage:<key>``); what crosses stages unmoved is a
        #: handover. ``arrival``: the stage the model's inputs enter on (the
        #: first pinned part given one)
        self.stages: Optional[Stages] = None
        if self.is_module and self.cls is not None and (self.cls.pinned_devices() or self.cls.dispatched):
            self.stages = Stages(self.facts, self.cls, self.self_name, flows.stage_names.setdefault((self.cls.name, self.self_name), {}))
        #: in a model a device_map splits, a tensor on the inputs' device is
        #: on a stage of its own only where the parameters are the model's
        #: inputs: a method no other method of the class calls (``forward``)
        self.inputs_stage = self.stages is not None and self.stages.dispatched and self.cls is not None and (
            self.flows.takes_inputs(node, self.cls)
        )
        self.arrival: Optional[str] = None
        #: outside the methods of a module that pins its parts: the last
        #: model-parallel model of the file this function called or read a
        #: device of (``logits, state = model(x)``, ``y.to(model.dev0)``),
        #: as (the name holding it, its class's stages, their keys): its
        #: outputs and the devices it names are on its stages, and two of
        #: them meeting unmoved is a handover here too
        self._script_stages: Optional[Tuple[str, Stages, FrozenSet[str]]] = None
        #: loop variable or index -> the container attribute its loop walks
        self.loop_names: Dict[str, str] = {}
        #: loop variable -> the module class of the file each element of the
        #: container it walks is (see ``_element_loop``)
        self.element_classes: Dict[str, str] = {}
        #: names the enclosing ``if isinstance(x, torch.Tensor):`` tests show to be tensors
        self._narrowed: List[Set[str]] = []
        self._handed: Set[int] = set()
        #: the loops around the statement being run (``next(it)`` batches belong to the innermost)
        self._loops: List[cst.CSTNode] = []
        self._scope: Optional[str] = None
        #: the flow of the function the last summary application used
        self._callee: Optional[FunctionFlow] = None
        #: the last call whose callee's flow (a function of the file) gave
        #: its value: what that function returns is known, not guessed
        self._summarised: Optional[cst.Call] = None

    # -- set-up ---------------------------------------------------------------
    def _params(self) -> Env:
        node = self.node
        params = [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]
        ev = self.flows.body_facts(node)
        env: Env = {}
        # a module's forward takes its input first: a tensor on the model's device
        first_input = next((p.name.value for p in params if p.name.value != self.self_name), None)
        if not (self.is_module and node.name.value == "forward"):
            first_input = None
        constants = _parametrized_constants(node, self.facts) if node.decorators else set()
        for p in params:
            name = p.name.value
            if name in constants:
                env[name] = OTHER_VALUE  # a value pytest.mark.parametrize lists: a Python constant
                continue
            if name in ev.called_names and name != self.self_name and p.annotation is None:
                env[name] = Value(MODULE, LOCAL, anchor=name)  # model(x): a model (or a callable) that came in as an argument
                continue
            if name == self.self_name:
                env[name] = Value(MODULE, LOCAL) if self.is_module else OTHER_VALUE
                continue
            if self.ctx_name:
                # backward(ctx, grad_output): autograd hands each gradient on
                # the device of the output it belongs to, the inputs' device
                if name == self.ctx_name:
                    env[name] = OTHER_VALUE
                    continue
                if node.name.value == "backward" and not p.annotation:
                    env[name] = _tensor(LOCAL, anchor=name)
                    continue
            if name == first_input and p.default is None and p.annotation is None and name not in ev.tensors:
                # forward's input, by convention a tensor; combined with a
                # torch result by an operator it is one (a number is no input)
                env[name] = Value(TENSOR, LOCAL, anchor=name, guessed=name not in ev.operands)
                continue
            ann = _annotation(p)
            base = ann.replace("torch.", "").replace("typing.", "").replace(" ", "")
            if is_device_name(name) and p.default is None and base in ("", "device", "Device", "Optional[device]", "device|None", "str"):
                # f(x, device): where the caller wants the tensors, the inputs' device
                env[name] = Value(DEVICE, LOCAL)
                continue
            if base in ("Tensor", "Optional[Tensor]", "FloatTensor", "LongTensor", "BoolTensor", "Tensor|None") or name in ev.tensors and not ann:
                env[name] = _tensor(LOCAL, anchor=name)
            elif base.startswith(("List[Tensor", "Tuple[Tensor", "Sequence[Tensor", "list[Tensor", "tuple[Tensor", "Iterable[Tensor")):
                env[name] = _seq(elem=_tensor(LOCAL), known=False)
            elif base in ("int", "float", "bool", "Optional[int]", "Optional[float]", "int|None", "float|None"):
                env[name] = NUMBER_VALUE
            elif base.startswith(("np.", "numpy.")):
                env[name] = Value(NUMPY)
            elif base in ("str", "Optional[str]"):
                env[name] = OTHER_VALUE
            elif name in ev.tensors and "Tensor" in ann:
                env[name] = _tensor(LOCAL, anchor=name)
            elif base in BARE_CONTAINER_ANNOTATIONS:
                # eval_imgs: list, ious: dict: a container of what the
                # callers pass, which the annotation does not say: its items
                # follow the inputs as an unannotated argument's do
                env[name] = LOCAL_UNKNOWN
            elif ann and self._annotates_module(p.annotation.annotation):
                # model: nn.Module: a model the caller hands over, wherever it put it
                env[name] = Value(MODULE, LOCAL, anchor=name, declared=True)
            elif ann and "Tensor" not in ann and "Any" not in ann:
                fields = self.flows.tensor_fields(p.annotation.annotation)
                if fields:
                    # outputs: DetectionOutput, a class whose body annotates
                    # tensors: an object of what the caller passes, its
                    # tensor fields with the inputs (identity marks it: a
                    # rebinding drops the fields)
                    env[name] = replace(LOCAL_UNKNOWN, anchor=name)
                    self._records[name] = (env[name], fields)
                else:
                    env[name] = OTHER_VALUE  # annotated as something else: tuple[int, int], Config, ...
            elif p.default is not None and (isinstance(p.default, (cst.Integer, cst.Float, cst.SimpleString, cst.Name)) or (
                isinstance(p.default, cst.Call) and self.facts.qualify(p.default.func) == "torch.device"
            )) and not (
                isinstance(p.default, cst.Name) and p.default.value == "None"
            ):
                # a device named by the default (device="cuda") is the one
                # used when a caller passes none
                env[name] = NUMBER_VALUE if not isinstance(p.default, (cst.SimpleString, cst.Call)) else self._expr(p.default, {})
            else:
                env[name] = LOCAL_UNKNOWN  # whatever the caller passes: what it holds follows the inputs
        if node.params.star_arg is not None and isinstance(node.params.star_arg, cst.Param):
            # *xs: a tuple of what the callers pass, each following the inputs as any parameter does
            env[node.params.star_arg.name.value] = _seq(elem=LOCAL_UNKNOWN, known=False)
        if node.params.star_kwarg is not None:
            env[node.params.star_kwarg.name.value] = OTHER_VALUE
        return env

    def _annotates_module(self, node: cst.BaseExpression) -> bool:
        """An annotation naming an ``nn.Module`` class (``nn.Module``,
        ``Optional[Encoder]`` for a module class of the file or project)."""
        dotted = annotated_name(node)
        if dotted is None:
            return False
        q = self.facts.qualify_dotted(dotted) or dotted
        return q in ("torch.nn.Module", "torch.nn.modules.module.Module") or (
            dotted in self.facts.classes and self.facts.classes[dotted].is_module
        )

    def run(self) -> FunctionFlow:
        env = self._params()
        for k, v in self.flows.closures.get(self.node, {}).items():
            env.setdefault(k, v)  # a closure reads the enclosing function's names (its parameters shadow them)
        operands = self.flows.body_facts(self.node).operands
        env.update(
            (k, replace(v, guessed=False) if v.guessed and k in operands else v)  # forward's input, used as a tensor
            for k, v in self.hints.items()
            # (a stage every caller's tensor is on holds for a parameter
            # annotated as a tensor too: the annotation names no device)
            if k in env and (env[k] == LOCAL_UNKNOWN or v.device == CPU or v.kind == NONE or v.falsy or (
                stage_of(v.device) and env[k].kind == TENSOR and env[k].device == LOCAL
            ))
        )
        env.update((k, v) for k, v in self.overrides.items() if k in env or "." in k)
        for k in self.flows.body_facts(self.node).maybe_other:
            if k in env and env[k].kind == TENSOR:
                env[k] = replace(env[k], maybe_other=True)
        local_inputs = any(v.kind == TENSOR and v.device == LOCAL for v in env.values())
        try:
            end = self._block(statements(self.node.body), env)
        except RecursionError:  # pragma: no cover - absurdly deep code
            end = None
        if end is not None and self.node is self.flows._constants_function:
            self.result.exit_env = dict(end)
        if self._returns_to_the_caller() and (local_inputs or self._holds_weights()):
            # forward hands its result to the model's caller: a CPU tensor
            # there comes back from a model on a GPU (and DataParallel
            # cannot gather it); one on the current or a fixed GPU comes
            # back from a model on another GPU on that one
            for at, v in self.returns:
                for t in _tensors_in(v):
                    if t.pinned and t.device in (CPU, CURRENT, FIXED) and not t.scalar:
                        self._meet_all(t, at, "output", "")
        if self.cpu_only:
            self.result.meetings = [m for m in self.result.meetings if m.origin not in self.result.origin_names]
            self.result.cpu_only = True
        values = [v for _, v in self.returns]
        ret: Optional[Value] = None
        for v in values:
            ret = join(ret, v)
        self.result.returns = ret if ret is not None else OTHER_VALUE
        return self.result

    def _returns_to_the_caller(self) -> bool:
        """A module's own ``forward``, run for itself (not for a caller that
        passed it CPU tensors, nor while computing hints)."""
        return (
            self.is_module and self.node.name.value == "forward" and self.depth == 0
            and not self.overrides and self.hinted
        )

    def _holds_weights(self) -> bool:
        return self.cls is not None and self.facts.holds_weights(self.cls.name)

    # -- statements -------------------------------------------------------------
    def _block(self, stmts: Sequence[cst.CSTNode], env: Env) -> Optional[Env]:
        """Run ``stmts``; None when the block cannot fall through."""
        for stmt in stmts:
            out = self._stmt(stmt, env)
            if out is None:
                return None
            env = out
        return env

    def _branch(self, stmts: Sequence[cst.CSTNode], env: Env) -> Optional[Env]:
        return self._block(stmts, dict(env))

    def _stmt(self, stmt: cst.CSTNode, env: Env) -> Optional[Env]:
        if isinstance(stmt, LINES):  # a line, or a one-line suite: `if c: t = t.cuda()`
            for small in stmt.body:
                if self._small(small, env) is None:
                    return None
            return env
        if isinstance(stmt, cst.If):
            self._expr(stmt.test, env)
            none_then, none_else = _none_tests(stmt.test)
            then_env = dict(env)
            then_env.update((n, NONE_VALUE) for n in none_then if n in env)
            else_env = dict(env)
            else_env.update((n, NONE_VALUE) for n in none_else if n in env)
            seq_then, seq_else = _sequence_tests(stmt.test)
            for names, branch in ((seq_then, then_env), (seq_else, else_env)):
                for n in names:
                    # if isinstance(sizes, list): torch.tensor(sizes) makes a tensor there
                    v = env.get(n)
                    if v is not None and v.kind != SEQ:
                        branch[n] = _seq(elem=LOCAL_UNKNOWN if v.device == LOCAL else UNKNOWN_VALUE, known=False)
            for n in self._tensor_tests(stmt.test):
                # if isinstance(value, torch.Tensor): a tensor there, wherever it is
                v = env.get(n)
                if v is not None and v.kind in (UNKNOWN, OTHER):
                    then_env[n] = _tensor(v.device if follows(v) else ANY, anchor=n)
            then_dead, else_dead = _decided(stmt.test, env)
            if not (then_dead or else_dead):
                then_dead, else_dead = self._type_decided(stmt.test, env)
            tracing = self._tracing_test(stmt.test)
            if tracing is not None:
                then_dead, else_dead = not tracing, tracing
            self._narrowed.append(set(self._tensor_tests(stmt.test)))
            try:
                a = self._block(statements(stmt.body), then_env) if not then_dead else None
            finally:
                self._narrowed.pop()
            if else_dead:
                b = None
            elif isinstance(stmt.orelse, cst.If):
                b = self._stmt(stmt.orelse, else_env)
            elif stmt.orelse is not None:
                b = self._block(statements(stmt.orelse.body), else_env)
            else:
                b = else_env
            return self._join_envs(a, b)
        if isinstance(stmt, (cst.For, cst.While)):
            if isinstance(stmt, cst.For):
                it = self._expr(stmt.iter, env)
            else:
                self._expr(stmt.test, env)
            start = dict(env)
            cur: Optional[Env] = dict(env)
            block = self._pinned_loop(stmt) if isinstance(stmt, cst.For) else None
            batches = self._loader_batches(stmt, stmt.target) if isinstance(stmt, cst.For) else {}
            walked = self._element_loop(stmt) if isinstance(stmt, cst.For) and block is None else None
            self._loops.append(stmt)
            for _ in range(2):
                body_env = dict(cur if cur is not None else start)
                if isinstance(stmt, cst.For):
                    self._bind(stmt.target, element_of(it), body_env)
                    body_env.update(batches)
                if block is not None:
                    body_env[block[0]] = block[1]
                out = self._block(statements(stmt.body), body_env)
                # continue/break end a path early but the loop goes on; a
                # loop over the module's own pinned blocks runs at least once
                ended = out if out is not None else body_env
                cur = ended if block is not None else self._join_envs(start, ended)
            after = cur if cur is not None else start
            self._loops.pop()
            if block is not None:
                self.loop_names = {k: v for k, v in self.loop_names.items() if v != block[2]}
            if walked is not None:
                self.element_classes.pop(walked, None)
            if stmt.orelse is not None:
                after = self._block(statements(stmt.orelse.body), dict(after)) or after
            return after
        if isinstance(stmt, cst.Try):
            body = self._branch(statements(stmt.body), env)
            out = body
            for h in stmt.handlers:
                henv = dict(env)
                if h.name is not None and isinstance(h.name.name, cst.Name):
                    henv[h.name.name.value] = OTHER_VALUE
                out = self._join_envs(out, self._block(statements(h.body), henv))
            if stmt.orelse is not None and body is not None:
                out = self._join_envs(out, self._block(statements(stmt.orelse.body), dict(body)))
            if stmt.finalbody is not None:
                fin = self._block(statements(stmt.finalbody.body), dict(out if out is not None else env))
                return fin if out is not None else None
            return out
        if isinstance(stmt, cst.With):
            for item in stmt.items:
                v = self._expr(item.item, env)
                if item.asname is not None:
                    self._bind(item.asname.name, UNKNOWN_VALUE if v.kind != TENSOR else v, env)
            return self._block(statements(stmt.body), env)
        if isinstance(stmt, cst.FunctionDef):
            # a function defined in this one: calls to it run its flow
            self.local_functions[stmt.name.value] = stmt
            self.flows.nested.setdefault(stmt, self.node)
            if not self.overrides and self.hinted:
                # what the names held here, for the free names of its body
                # (the enclosing function's own flow, not a caller's variant)
                self.flows.closures.setdefault(stmt, {k: v for k, v in env.items() if "." not in k})
            env.pop(stmt.name.value, None)
            return env
        if isinstance(stmt, cst.ClassDef):
            env[stmt.name.value] = OTHER_VALUE
            return env
        if isinstance(stmt, cst.Match):
            out: Optional[Env] = None
            self._expr(stmt.subject, env)
            for case in stmt.cases:
                out = self._join_envs(out, self._branch(statements(case.body), env)) if out is not None else self._branch(statements(case.body), env)
            return self._join_envs(out, env)
        return env

    def _tensor_tests(self, test: cst.BaseExpression) -> List[str]:
        """Names ``isinstance(x, torch.Tensor)`` shows to be tensors in an
        ``if`` body (one test, or one of an ``and``)."""
        parts = [test]
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            parts = [test.left, test.right]
        out = []
        for t in parts:
            found = _isinstance_test(t)
            if found is not None and not found[2] and all(self.facts.qualify(k) in _TENSOR_TYPES for k in found[1]):
                out.append(found[0])
        return out

    def _type_decided(self, test: cst.BaseExpression, env: Env) -> Tuple[bool, bool]:
        """``if isinstance(h, torch.Tensor):`` for an ``h`` the flow holds as a
        tuple or list (an LSTM's ``(h, c)`` handed to ``repackage_hidden``),
        or ``isinstance(h, (list, tuple))`` for one it holds as a tensor, and
        ``isinstance(h, torch.Tensor)`` for one it knows is a tensor: the
        branch that cannot run, as ``_decided`` says."""
        found = _isinstance_test(test)
        if found is None or found[0] not in env:
            return False, False
        subject, types, negated = found
        v = env[subject]
        tensor_test = all(self.facts.qualify(t) in _TENSOR_TYPES for t in types)
        sequence_test = all((dotted_name(t) or "").rsplit(".", 1)[-1] in _SEQUENCE_TYPES for t in types)
        fails = (tensor_test and v.kind == SEQ) or (sequence_test and v.kind == TENSOR and not v.guessed)
        holds = tensor_test and v.kind == TENSOR and not v.guessed and not v.maybe_other and not v.maybe_none
        if fails:
            return (False, True) if negated else (True, False)
        if holds:
            return (True, False) if negated else (False, True)
        return False, False

    def _tracing_test(self, test: cst.BaseExpression) -> Optional[bool]:
        """``if is_torch_fx_proxy(x):`` (``isinstance(x, torch.fx.Proxy)``,
        ``torch.fx._symbolic_trace.is_fx_tracing()``): a branch that runs only
        while ``torch.fx`` traces the code symbolically, where tensors are
        proxies holding no data and no device. None for any other test;
        else whether the test is negated (``if not is_torch_fx_proxy(x):``,
        whose *else* branch is the tracing one)."""
        inner, negated = _negation(test)
        if not isinstance(inner, cst.Call):
            return None
        q = self.facts.qualify(inner.func) or ""
        if q.rsplit(".", 1)[-1] == "is_torch_fx_proxy" or q in FX_TRACING_TESTS:
            return negated
        if q == "isinstance" or dotted_name(inner.func) == "isinstance":
            if len(inner.args) == 2 and (self.facts.qualify(inner.args[1].value) or "") in FX_PROXY_CLASSES:
                return negated
        return None

    def _element_loop(self, stmt: cst.For) -> Optional[str]:
        """``for layer in self.layers`` over a container of the module whose
        elements are of one module class of the file (``nn.ModuleList(
        GCNLayer(a, b) for ...)``): the loop variable, now known to hold that
        class (``layer(x, edge_index)`` runs its ``forward``), else None."""
        if self.cls is None or not self.is_module:
            return None
        found = loop_over_attribute(stmt, self.self_name)
        if found is None:
            return None
        a = self.facts.class_attribute(self.cls.name, found[1])
        if a is None or a.kind not in ("nn_container", "module_container") or not a.element_class:
            return None
        if self.flows.method(a.element_class, "forward") is None:
            return None
        self.element_classes[found[0]] = a.element_class
        return found[0]

    def _pinned_loop(self, stmt: cst.For) -> Optional[Tuple[str, Value, str]]:
        """``for block in self.blocks`` (or ``enumerate``) over a pinned
        container of a stage method: the loop variable, the part it holds
        (on the block's own device when the blocks are spread), and the
        attribute."""
        if self.stages is None:
            return None
        found = loop_over_attribute(stmt, self.self_name)
        if found is None or found[1] not in self.stages.pinned:
            return None
        var, attr, index = found
        key = EACH + attr if self.stages.spread(attr) else self.stages.of_attribute(attr)
        if key is None:
            return None
        self.loop_names[var] = attr
        if index:
            self.loop_names[index] = attr
        return var, Value(MODULE, stage_device(key)), attr

    def _small(self, small: cst.BaseSmallStatement, env: Env) -> Optional[Env]:
        if isinstance(small, cst.Assign):
            v = self._expr(small.value, env)
            for t in small.targets:
                self._note_map(t.target, small.value)
                if not self._bind_tail(t.target, small.value, v, env):
                    self._store(t.target, v, env, value_node=small.value)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                v = self._expr(small.value, env)
                if v.kind == UNKNOWN and annotates_tensor(small.annotation.annotation):
                    v = as_tensor(v)  # scores: torch.Tensor = critic(x): the author says it is one
                self._store(small.target, v, env)
        elif isinstance(small, cst.AugAssign):
            cur = self._expr(small.target, env)
            v = self._expr(small.value, env)
            res = self._binary(cur, v, small, small.target, small.value)
            self._store(small.target, res, env, augmented=True)
        elif isinstance(small, cst.Expr):
            self._discarded_move(small, env)
            v = self._expr(small.value, env)
            root, moves = _moved_root(small.value)
            if moves and root is not None and root in env and env[root].kind != TENSOR:
                # model.to(device), teacher.cuda().eval(), batch.to(device): a
                # module (a PyG Data, a BatchEncoding) moves in place; a
                # tensor's moved copy is thrown away
                env[root] = v
        elif isinstance(small, cst.Return):
            value = small.value
            if isinstance(value, cst.IfExp):  # return a if c else b: two returns
                self._expr(value.test, env)
                for branch in (value.body, value.orelse):
                    self.returns.append((branch, self._expr(branch, env)))
                return None
            v = self._expr(value, env) if value is not None else OTHER_VALUE
            self.returns.append((value if value is not None else small, v))
            return None
        elif isinstance(small, cst.Raise):
            if small.exc is not None:
                self._expr(small.exc, env)
            return None
        elif isinstance(small, (cst.Continue, cst.Break)):
            return None
        elif isinstance(small, cst.Del):
            for el in _targets(small.target):
                if isinstance(el, cst.Name):
                    env.pop(el.value, None)
        elif isinstance(small, (cst.Global, cst.Nonlocal)):
            for n in small.names:
                # global device: the module-level value (a device fixed at import)
                env[n.name.value] = self._module_device(n.name.value) if isinstance(small, cst.Global) else UNKNOWN_VALUE
        elif isinstance(small, cst.Assert):
            self._expr(small.test, env)
        return env

    def _bind_tail(self, target: cst.BaseExpression, value: cst.BaseExpression, v: Value, env: Env) -> bool:
        """``b, n, _, device = *x.shape, x.device``: the elements after the
        last ``*`` of the value are the last targets, whatever its length."""
        if not (isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List))):
            return False
        elems = value.elements
        stars = [i for i, e in enumerate(elems) if isinstance(e, cst.StarredElement)]
        if not stars or any(isinstance(e, cst.StarredElement) for e in target.elements):
            return False
        tail = elems[stars[-1] + 1:]
        if len(tail) > len(target.elements):
            return False
        head = target.elements[: len(target.elements) - len(tail)]
        rest = element_of(v)
        for e in head:
            self._bind(e.value, rest, env)
        for e, val in zip(target.elements[len(head):], tail):
            self._bind(e.value, self._expr(val.value, env), env)
        return True

    def _store(self, target: cst.BaseExpression, v: Value, env: Env, augmented: bool = False,
               value_node: Optional[cst.BaseExpression] = None) -> None:
        if isinstance(target, cst.Subscript):
            base = self._expr(target.value, env)
            idx = [self._index_value(e, env) for e in target.slice]
            if self.stages is not None and value_node is not None and base.kind == TENSOR and v.kind == TENSOR \
                    and not v.scalar and stage_of(base.device) and stage_of(v.device) and any(
                        i.kind == TENSOR and not i.scalar or self._mask(e.slice.value, i, env).kind == TENSOR
                        for e, i in zip(target.slice, idx) if isinstance(e.slice, cst.Index)
                    ):
                # x[mask] = v of tensors on two stages: an index_put_, whose
                # values must be on x's device (its indices are moved there)
                self._stage_mix([(target.value, base), (value_node, v)], target)
            # x[0] = v is a copy_, which crosses devices, and so is x[i] = v of
            # a 0-dim index (``for i in torch.arange(n)``: PyTorch takes
            # ``i.item()`` and selects); x[tensor] = v is an index_put_, whose
            # values must be on x's device (a 0-dim one is moved)
            advanced = base.kind == TENSOR and any(i.kind == TENSOR and not i.scalar for i in idx)
            if advanced and base.device == LOCAL and v.pinned and not v.mixes_anywhere():
                self._meet_all(v, target, "index", base.anchor or "")  # x[mask] = cpu_values
            elif advanced and base.pinned and not base.mixes_anywhere() and v.kind == TENSOR and v.device == LOCAL and not v.scalar:
                self._meet_all(base, target, "index", v.anchor or "")  # cpu_table[i] = x: values from the GPU
            if augmented:  # x[i] += v reads x[i] first: an index read
                self._index_meetings(base, idx, target)
            # a plain write (index_put_) takes its indices to the written
            # tensor's device, from the CPU or from another GPU; only the
            # values must be there (above)
            if base.kind == SEQ and isinstance(target.value, cst.Name):
                env[target.value.value] = _seq(elem=join(base.elem, v), known=False)
            if base.kind == BATCH and isinstance(target.value, cst.Name):
                if _constant_key(target):
                    env[code_of(target)] = v  # batch["x"] = ...: that key is what was stored
                else:
                    env[target.value.value] = UNKNOWN_VALUE  # batch[k] = ...: moved in place
            return
        self._bind(target, v, env)

    def _bind(self, target: cst.BaseExpression, v: Value, env: Env) -> None:
        if isinstance(target, cst.Name):
            env[target.value] = replace(v, anchor=None) if v.anchor and v.anchor != target.value and "." not in v.anchor else v
        elif isinstance(target, (cst.Tuple, cst.List)):
            elems = target.elements
            starred = any(isinstance(e, cst.StarredElement) for e in elems)
            for i, e in enumerate(elems):
                if isinstance(e, cst.StarredElement):
                    self._bind(e.value, _seq(elem=element_of(v), known=False), env)
                    continue
                if v.kind == SEQ and v.exact and len(v.items) == len(elems) and not starred:
                    part = v.items[i]
                elif v.kind == BATCH and isinstance(e.value, cst.Name):
                    # x, y = batch: each a tensor as the loader left it
                    item = self._item_of(v)
                    name = e.value.value
                    part = self._record_item(e.value, item.loader, name, "name", name, item.loop, e.value) if item else UNKNOWN_VALUE
                else:
                    part = element_of(v)
                self._bind(e.value, part, env)
        elif isinstance(target, cst.Attribute):
            key = dotted_name(target)
            if key:
                self._stored_attributes.setdefault(key, target)
                env[key] = replace(v, anchor=None)
                self._stored(key, env[key])
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, v, env)

    def _discarded_move(self, small: cst.Expr, env: Env) -> None:
        """``batch[k].to(device)`` as a statement, of a batch (or a field of
        one) a loader yields: the moved copy is lost, the batch stays put."""
        call = small.value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "cuda") \
                and isinstance(call.func.value, (cst.Name, cst.Attribute)):
            recv = call.func.value
            item = self._item_of(env[recv.value]) if isinstance(recv, cst.Name) and recv.value in env else None
            if item is not None and item.kind == "name" and not any(item.loop is loop for loop in self._loops):
                # images.to(device) of ``images, targets = batch`` in a
                # helper a loop hands its batch: a loader's tensor, whose
                # moved copy is thrown away (in the loop itself, the use
                # that meets the model is the finding, and says so)
                self.result.discarded_moves.append((small, item))
                return
            if self._surely_tensor(recv, env):
                looped = isinstance(recv, cst.Name) and any(
                    isinstance(loop, cst.For) and recv.value in target_names(loop.target) for loop in self._loops
                )
                self.result.discarded_tensor_moves.append((small, looped))
            return
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                and call.func.attr.value in ("to", "cuda") and isinstance(call.func.value, cst.Subscript)):
            return
        base = call.func.value.value
        if not isinstance(base, cst.Name) or base.value not in env:
            return
        item = self._item_of(env[base.value])
        if item is not None:
            self.result.discarded_moves.append((small, item))

    def _surely_tensor(self, node: cst.BaseExpression, env: Env) -> bool:
        """A tensor by evidence, not by how it is used: a name an enclosing
        ``isinstance(x, torch.Tensor)`` test shows, a parameter annotated as
        one, a tensor a torch call made here (it has a birth), or a plain
        tensor attribute of the module (a ``.to()`` on a module moves it in
        place, so a use that only suggests a tensor is no evidence)."""
        v = self._expr(node, env)
        if v.kind != TENSOR or v.maybe_other or v.maybe_none or self._item_of(v) is not None:
            return False  # (a loader's item: DL011 says where the batch goes unmoved)
        if isinstance(node, cst.Name):
            if any(node.value in names for names in self._narrowed):
                return True
            params = {p.name.value: p for p in (*self.node.params.posonly_params, *self.node.params.params, *self.node.params.kwonly_params)}
            p = params.get(node.value)
            if p is not None:
                return p.annotation is not None and annotates_tensor(p.annotation.annotation)
        # a birth by a torch call that makes a tensor, not by a move of
        # something of unknown kind (``model.to("cuda")`` is no evidence)
        # (a birth a caller handed in is named by its own call: ``full`` of
        # ``torch.full(...)``, ``to`` of ``x.to("cuda")``)
        made = any(
            (self.result.origin_names.get(b)
             or (b.func.attr.value if isinstance(b, cst.Call) and isinstance(b.func, cst.Attribute) else "made"))
            not in ("to", "cuda", "type") for b in v.born
        )
        return made or v.device == HELD

    def _stored(self, key: str, v: Value) -> None:
        """``self.<attr> = v``: what a call of this method leaves in the
        module's state (the last store wins; only a tensor a call pinned
        matters to the caller)."""
        if not self.self_name or not key.startswith(self.self_name + ".") or key.count(".") != 1:
            return
        if not self.is_module and self.node.name.value != "__init__":
            return  # (a plain class's state is its own bookkeeping: only what __init__ makes is read, by _plain_attribute)
        attr = key[len(self.self_name) + 1:]
        old = self.result.stores.get(attr)
        if old is None or any(t.pinned for t in _tensors_in(v)):
            self.result.stores[attr] = v
            return
        # a pinned store on some path stays (``if c: self.g = torch.ones(n)``),
        # unless this one moves that very tensor (``self.g = self.g.to(x.device)``)
        born = frozenset().union(*(t.born for t in _tensors_in(old)))
        if not born or any(t.moved & born for t in _tensors_in(v)):
            self.result.stores[attr] = v

    # -- meetings -----------------------------------------------------------------
    def _meet(self, origin: cst.CSTNode, at: cst.CSTNode, how: str, partner: str, device: str = CPU,
              against: str = LOCAL, arg: Optional[cst.CSTNode] = None, within: str = "") -> None:
        key = (id(origin), id(at))
        if key in self._seen:
            return
        self._seen.add(key)
        self.result.meetings.append(Meeting(origin, at, how, partner, device, against, arg, within))

    def _meet_all(self, v: Value, at: cst.CSTNode, how: str, partner: str, against: str = LOCAL,
                  arg: Optional[cst.CSTNode] = None) -> None:
        for origin in v.born:
            if origin in self.result.maybe_scalar and how not in ("model input", "collective"):
                continue
            # a plain attribute's read (its birth is the ``self.x`` node) is
            # held wherever a join left the value (see join)
            device = HELD if v.device == CPU and isinstance(origin, cst.Attribute) else v.device
            self._meet(origin, at, how, partner, device, against, arg)

    def _check(self, values: Sequence[Value], at: cst.CSTNode, how: str, scalars_meet: bool = False,
               nodes: Optional[Sequence[Optional[cst.CSTNode]]] = None) -> None:
        """Tensors put somewhere that meet a tensor on the model's side. A
        script's model (``placed:``) is met by CPU tensors only: a GPU one
        is where a script's device puts it."""
        sides = [v for v in values if v.kind == TENSOR and model_side(v.device)]
        if not sides and self.flows.scripts and self.cls is None and self.node is not self.flows.module_function():
            # a function of a script: a tensor it put on the GPU it chose
            # (``ys = torch.full(..., device=device)``) is met by a CPU one
            # (``torch.cat([ys, torch.full((1, 1), tok)])``) on a GPU run
            sides = [v for v in values if v.kind == TENSOR and v.pinned and v.device == CURRENT and not v.scalar]
        if self.stages is None:
            # a model-parallel model's output in the code that runs it is on
            # a device that code names too: only another stage mismatches it
            # (a handover), not a tensor put on a device (``masks.to(dev1)``)
            sides = [v for v in sides if not stage_of(v.device)]
        if not sides:
            return
        local = next((v for v in sides if not is_placed(v.device)), sides[0])
        for i, v in enumerate(values):
            if v.pinned and not v.mixes_anywhere(scalars_meet):
                arg = nodes[i] if nodes is not None and i < len(nodes) else None
                if is_placed(local.device) and v.device == CURRENT:
                    # labels.cuda() against the output of a model the script
                    # put on a GPU it chose by index: the current GPU is cuda:0
                    ref = local.device[len(PLACED):]
                    gpu = self._chosen_gpu(ref) if ref else None
                    if gpu is not None:
                        for origin in v.born:
                            self.result.model_gpus.setdefault(origin, (ref, gpu.device, gpu.how, gpu.known))
                        self._meet_all(v, at, how, ref, local.device, arg)
                    continue
                if is_placed(local.device) and v.device != CPU:
                    continue
                if local.device == CURRENT and (v.device != CPU or v is local):
                    continue  # (a script's GPU tensor: only a CPU one meets it)
                partner = local.anchor or ""
                if not partner and local.device == CURRENT and nodes is not None:
                    # (the name that holds the script's GPU tensor)
                    j = next((k for k, w in enumerate(values) if w is local), None)
                    held = nodes[j] if j is not None and j < len(nodes) else None
                    partner = held.value if isinstance(held, cst.Name) else ""
                self._meet_all(v, at, how, partner, local.device, arg)

    # -- stages (a module that pins its parts to devices) --------------------------------
    def _hand(self, arg: cst.CSTNode, at: cst.CSTNode, source: str, target: str, receiver: str,
              expression: Optional[str], arrival: bool = False) -> None:
        if id(arg) in self._handed or (self.stages is None and self._script_stages is None):
            return
        self._handed.add(id(arg))
        kind = "into" if target.startswith((EACH, SPREAD)) else "out of" if source.startswith((EACH, SPREAD)) else "between"
        spread = target if kind == "into" else source if kind == "out of" else ""
        self.result.handovers.append(Handover(
            arg, at, kind, self._describe(source), receiver, self._describe(target), expression, arrival,
            spread.split(":", 1)[1] if spread else "", self.stages is not None and self.stages.dispatched,
            source.startswith(ARG) or target.startswith(ARG),
        ))

    def _describe(self, key: str) -> str:
        if self.stages is not None:
            return self.stages.describe(key)
        assert self._script_stages is not None
        name, stages, _ = self._script_stages
        # the class's own expression, as this function reaches it (``model.dev1``)
        return stages.describe(key).replace(f"`{stages.self_name}.", f"`{name}.")

    def _script_stage_device(self, node: cst.BaseExpression, env: Env) -> Optional[Value]:
        """``model.dev0``, ``model.devices[1]`` of a model-parallel model
        this function holds: the device of one of its stages."""
        root = node
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        if not isinstance(root, cst.Name) or root is node:
            return None
        held = self._model_stages(root.value, env.get(root.value))
        if held is None:
            return None
        stages, keys = held
        named = node if root.value == stages.self_name else node.visit(NameRenamer(root.value, stages.self_name))
        key = stages.key(named)  # type: ignore[arg-type]
        return Value(DEVICE, stage_device(key)) if key in keys else None

    def _model_stages(self, name: str, v: Optional[Value]) -> Optional[Tuple[Stages, FrozenSet[str]]]:
        """The stages of the model-parallel model ``name`` holds (``v``),
        from now on this function's (None: it holds none)."""
        cls = self.flows.staged_class(v) if v is not None else None
        if cls is None:
            return None
        stages, keys = self.flows.class_stages(cls)
        self._script_stages = (name, stages, keys)
        return stages, keys

    def _script_stage_key(self, node: cst.BaseExpression, env: Env) -> Optional[str]:
        """A device written out (``"cuda:1"``, ``1``) that names a stage of
        the model-parallel model this function holds."""
        if self._script_stages is None and not any(self._model_stages(name, v) for name, v in env.items()):
            return None
        assert self._script_stages is not None
        _, stages, keys = self._script_stages
        key = stages.key(node) if isinstance(node, (cst.SimpleString, cst.Integer, cst.Call)) else None
        return key if key in keys else None

    def _staged_model_call(self, name: str, model: Value, args: List[Tuple[cst.Arg, Value]]) -> Optional[Value]:
        """``model(x)`` of a model-parallel model of the file: what its
        ``forward`` returns, on its stages."""
        cls = self.flows.staged_class(model)
        forward = self.flows.method(cls.name, "forward") if cls is not None else None
        if forward is None:
            return None
        out = self._translate(self.flows.function(forward).returns, args, module_method=True)
        if not any(stage_of(t.device) for t in _tensors_in(out)):
            return None
        self._model_stages(name, model)
        return out

    def _stage_args(self, args: List[Tuple[cst.Arg, Value]]) -> List[Tuple[cst.CSTNode, Value]]:
        """Each argument with its value, the elements of a tuple or list
        display one by one (``self.dec(x, (h, c))``)."""
        out: List[Tuple[cst.CSTNode, Value]] = []
        for a, v in args:
            if isinstance(a.value, (cst.Tuple, cst.List)) and v.kind == SEQ and v.exact and len(v.items) == len(a.value.elements):
                out.extend((e.value, item) for e, item in zip(a.value.elements, v.items))
            else:
                out.append((a.value, v))
        return out

    def _expect(self, arg: cst.CSTNode, v: Value, target: str, at: cst.CSTNode, receiver: str, expression: Optional[str]) -> None:
        """``arg`` is handed to a part on stage ``target``."""
        key = stage_of(v.device)
        if key is None:
            if v.device != LOCAL or v.kind not in (TENSOR, UNKNOWN) or target.startswith(EACH):
                return
            # an input of the model: it enters on the stage of the first
            # part given one, and is there when a later part takes it
            if self.arrival is None:
                if isinstance(arg, cst.Name):
                    self.arrival = target
            elif self.arrival != target:
                self._hand(arg, at, self.arrival, target, receiver, expression, arrival=True)
            return
        if key != target:
            self._hand(arg, at, key, target, receiver, expression)

    def _stage_mix(self, operands: Sequence[Tuple[cst.CSTNode, Value]], at: cst.CSTNode, loss: bool = False) -> Value:
        """Tensors combined in one operation share a stage (an input only
        counts as on the stage the inputs enter on inside a loss, where
        every argument is a tensor); the result is on it."""
        first: Optional[Tuple[cst.CSTNode, str, bool]] = None
        dispatched = self.stages is not None and self.stages.dispatched
        # an operand that may be None or a number on some path names no device a fix can read
        unsure = {id(node) for node, v in operands if v.maybe_none or v.maybe_number or v.maybe_other}
        for node, v in operands:
            if v.kind != TENSOR and not (loss and v.kind == UNKNOWN and v.device == LOCAL):
                continue
            key, arrival = stage_of(v.device), False
            if key is None and self.inputs_stage and v.device == LOCAL and not v.scalar:
                key, arrival = FIRST, True  # on the inputs' device: where the user put them, with the map's first part
            if key is None:
                if not (loss and v.device == LOCAL and self.arrival is not None):
                    continue
                key, arrival = self.arrival, True
            if first is None:
                first = (node, key, arrival)
                continue
            if key == first[1]:
                continue
            (a_node, a_key, a_arrival), (o_node, o_key, o_arrival) = first, (node, key, arrival)
            if a_arrival and not isinstance(at, cst.AugAssign):  # name the stage that is known, move the input
                (a_node, a_key, a_arrival), (o_node, o_key, o_arrival) = (o_node, o_key, o_arrival), (a_node, a_key, a_arrival)
            if dispatched:
                root = _device_root(a_node, {self.self_name, *self.facts.imports})
            elif self.stages is None:
                # code running a model-parallel model: ``logits.view(-1, n)``
                # names ``logits``; an item of a tuple or list (``outs[0]``)
                # names no tensor a fix can read ``.device`` of
                root = _device_root(a_node, set(self.facts.imports), through_items=False)
            else:
                root = a_node.value if isinstance(a_node, cst.Name) else None
            expression = f"{root}.device" if root else (
                None if a_key.startswith((EACH, SPREAD)) else self.stages.shown_as(a_key) if self.stages else None
            )
            if id(a_node) in unsure and root:
                expression = None
            self._hand(o_node, at, o_key, a_key, f"`{short_code(a_node)}`", expression, arrival=o_arrival)
            if a_key != first[1] and first[2]:
                # an input met a stage: the fix moves the input, so what
                # comes out is on that stage (``torch.where(mask, embeds, x)``)
                first = (a_node, a_key, a_arrival)
        if first is None or (first[1] == FIRST and first[2]):
            return _tensor(LOCAL)
        return _tensor(stage_device(first[1]))

    def _into_stage(self, node: cst.Call, attr: str, args: List[Tuple[cst.Arg, Value]]) -> Value:
        """``self.<attr>(...)`` for a pinned part: its arguments must be on
        its stage; its output is."""
        stages = self.stages
        assert stages is not None and self.cls is not None
        if stages.spread(attr):
            return _tensor(stage_device(SPREAD + attr))
        target = stages.of_attribute(attr)
        if target is None:
            return _tensor(ANY)
        a = self.facts.class_attribute(self.cls.name, attr)
        receiving = self.facts.classes.get(a.module_class) if a is not None else None
        if not (receiving is not None and receiving.moves_inputs):  # a part that moves its own inputs takes any
            expression = stages.expression(attr)
            for arg, v in self._stage_args(args):
                self._expect(arg, v, target, node, f"`{self.self_name}.{attr}`", expression)
        inputs = [t for arg, v in args if not _cpu_by_convention(arg) for t in _tensors_in(v)]
        self._check([_tensor(stage_device(target)), *inputs], node, "submodule")
        return _tensor(stage_device(target))

    def _block_call(self, node: cst.Call, name: str, block: Value, args: List[Tuple[cst.Arg, Value]]) -> Value:
        """``block(x)`` for the loop variable of a loop over a pinned
        container: on its block's own device when the blocks are spread."""
        stages = self.stages
        target = stage_of(block.device)
        attr = self.loop_names.get(name)
        if stages is None or target is None or attr is None:
            return _tensor(block.device)
        a = self.facts.class_attribute(stages.cls.name, attr)
        receiving = self.facts.classes.get(a.element_class) if a is not None and a.element_class else None
        index = next((n for n, at in self.loop_names.items() if at == attr and n != name), None)
        expression = stages.block_expression(attr, name, index) or (None if target.startswith(EACH) else stages.expression(attr))
        if not (receiving is not None and receiving.moves_inputs) and not stages.dispatched:
            for arg, v in self._stage_args(args):
                self._expect(arg, v, target, node, f"`{name}`", expression)
        if stages.dispatched:
            return _tensor(stage_device(LAST))  # out of the blocks a device_map spreads
        return _tensor(stage_device(SPREAD + attr if target.startswith(EACH) else target))

    def _move_stage(self, node: cst.Call, m: str, recv: Value, args: List[Tuple[cst.Arg, Value]]) -> Optional[str]:
        """The stage ``.to(...)``/``.cuda(...)``/``.cpu()`` moves to; "" for
        a cast that keeps the receiver's; None when it names none; LOCAL, in
        a module a device_map splits, for the inputs' device."""
        stages = self.stages
        assert stages is not None
        if m == "cpu":
            return "cpu"
        given = [(a, v) for a, v in args if a.keyword is None or a.keyword.value == "device"]
        if m == "cuda":
            return None if stages.dispatched else "cuda:0" if not given else stages.name(given[0][0].value)
        if not given:
            return ""  # .to(dtype=...)
        arg, v = given[0]
        if arg.keyword is None and is_dtype_cast(self.facts, node):
            return ""  # .to(x.dtype), .to(torch.float16): a cast, not a transfer
        for name in free_names(arg.value):
            attr = self.loop_names.get(name)
            if attr is not None and stages.spread(attr):
                return EACH + attr  # x.to(devices[i % n]) in a loop over spread blocks
        if v.kind in (TENSOR, DEVICE, MODULE) and stage_of(v.device):
            return stage_of(v.device)  # .to(h.device), .to(block.ln1.weight.device)
        if v.kind in (TENSOR, DEVICE) and v.device == LOCAL:
            # .to(x.device) of an input: where it arrives (a split model's
            # inputs are where the user put them)
            return LOCAL if stages.dispatched else None
        if isinstance(arg.value, cst.Attribute) and arg.value.attr.value == "device":
            return None  # moved somewhere devlint cannot name: trust it
        return stages.name(arg.value)

    # -- scripts: models a script moved, batches its loaders yield ---------------------
    @property
    def scope(self) -> str:
        if self._scope is None:
            self._scope = self.flows.scope_name(self.node)
        return self._scope

    def _module_moved(self, node: cst.Call, m: str, recv: Value, kind: str, args: List[Tuple[cst.Arg, Value]]) -> Value:
        """``model.to(device)``, ``model.cuda()``: a model moved to the CPU
        stays there; moved anywhere else it is on the script's device
        (``placed:``). A cast moves nothing."""
        if m == "cpu":
            return Value(kind, CPU)
        if m == "to":
            given = [(a, v) for a, v in args if a.keyword is None or a.keyword.value == "device"]
            if not given or (given[0][0].keyword is None and is_dtype_cast(self.facts, node)):
                return replace(recv, anchor=None)  # model.to(torch.float16)
            a, v = given[0]
            s = string_value(a.value)
            if (s is not None and s.startswith("cpu")) or (v.kind == DEVICE and v.device == CPU):
                return Value(kind, CPU)
        return Value(kind, PLACED)

    def _may_be_loader(self, it: cst.BaseExpression) -> bool:
        """Cheap, before reading the script facts: the file imports a data
        loader or a progress bar, or the iterable is named like a loader."""
        if any(t.rsplit(".", 1)[-1] == "DataLoader" or t.startswith(("torch.utils.data", "tqdm")) for ts in self.facts.imports.values() for t in ts):
            return True
        while isinstance(it, cst.Call):
            name = dotted_name(it.func) or ""
            if name.rsplit(".", 1)[-1] in ("DataLoader", "DataLoader2") or looks_like_loader(name):
                return True  # DataLoader(ds), make_loader(cfg)
            found = self.facts.project_function(self.facts.qualify_dotted(name) or "") if name else None
            if found is not None and "loader" in found[2]:
                return True  # a function of another module that returns a loader
            parts = [a.value for a in it.args if not a.star]
            if name == "zip":
                return any(self._may_be_loader(p) for p in parts)
            if not parts:
                return False
            it = parts[0]
        if isinstance(it, cst.Subscript):
            it = it.value
        name = dotted_name(it)
        return name is not None and looks_like_loader(name)

    def _record_item(self, node: cst.CSTNode, loader: str, key: str, kind: str, base: str, loop: cst.CSTNode,
                     bound_at: Optional[cst.CSTNode] = None) -> Value:
        self._add_loader_item(node, LoaderItem(loader, key, kind, base, loop, bound_at or node))
        return _tensor(CPU, [node])

    def _item_of(self, v: Value) -> Optional[LoaderItem]:
        """The loader item a value was born as, if any (in this function or,
        for a batch a caller handed over, in the caller)."""
        for origin in v.born:
            item = self.result.loader_items.get(origin) or self.flows.loader_items.get(origin)
            if item is not None:
                return item
        return None

    def _add_loader_item(self, node: cst.CSTNode, item: "LoaderItem") -> None:
        self.result.loader_items.setdefault(node, item)
        self.flows.loader_items.setdefault(node, item)

    def _loader_batches(self, loop: cst.CSTNode, target: cst.BaseExpression) -> Env:
        """``for x, y in loader`` / ``for batch in loader`` over a loader that
        leaves its batches on the CPU: the names the loop binds, as CPU
        tensors (or a whole batch) born at the loop's target."""
        it = getattr(loop, "iter", None)
        if not self.flows.scripts or it is None or not self._may_be_loader(it):
            return {}
        found = loader_loop(self.flows.training, self.scope, loop, self.self_name or "self")  # type: ignore[arg-type]
        if found is None:
            return {}
        names = {n.value: n for n in _name_nodes(target)}
        env: Env = {}
        for name in found.batches if found.whole_batch else [*found.items, *found.batches]:
            at = names.get(name)
            if at is None:
                continue
            loader = found.loader_of.get(name, found.loader)
            if name in found.batches:
                self._add_loader_item(at, LoaderItem(loader, name, "batch", name, loop, at))
                env[name] = Value(BATCH, CPU, frozenset({at}))
            else:
                env[name] = self._record_item(at, loader, name, "name", name, loop)
        return env

    def _next_batch(self, node: cst.Call) -> Optional[Value]:
        """``next(it)`` over an iterator of a loader that leaves its batches
        on the CPU: a whole batch."""
        if not self.flows.scripts or len(node.args) != 1 or node.args[0].star or not self._may_be_loader(node.args[0].value):
            return None
        loader = next_loader(self.flows.training, self.scope, node.args[0].value, self.self_name or "self")
        if loader is None:
            return None
        self._add_loader_item(node, LoaderItem(loader, "", "batch", "", self._loops[-1] if self._loops else node, node))
        return Value(BATCH, CPU, frozenset({node}))

    def _batch_part(self, base: Value, node: cst.CSTNode, key: str, kind: str, base_name: str) -> Value:
        """``batch["x"]``, ``batch[0]``, ``data.x``: a tensor of a whole batch."""
        item = self._item_of(base)
        if item is None:
            return UNKNOWN_VALUE
        return self._record_item(node, item.loader, key, kind, base_name or item.base, item.loop, item.bound_at)

    def _placed_ref(self, ref: str) -> Optional[Value]:
        """A model this scope did not bind (a global, an argument, ``self.model``)
        that the script facts say was moved to a device: on the script's device
        (a DataParallel wrapper, or a DDP given ``device_ids``, moves its inputs)."""
        if not self.flows.scripts:
            return None
        training = self.flows.training
        p = lookup_scoped(training, self.scope, ref, "placements")
        if not isinstance(p, Placement) or placed_on_cpu(training, self.scope, p):
            return None
        w = lookup_scoped(training, self.scope, ref, "wrapped")
        return Value(WRAPPER if isinstance(w, WrapFacts) and w.moves_inputs else MODULE, PLACED)

    def _model_call(self, node: cst.Call, ref: str, model: Value, args: List[Tuple[cst.Arg, Value]]) -> Value:
        """A model the script moved, called: every CPU tensor it is given
        meets its weights (a wrapper that moves its inputs takes any); its
        outputs are where it is."""
        against = PLACED + ref
        if model.kind != WRAPPER:
            other_gpu = self._chosen_gpu(ref)
            for a, v in args:
                if a.star or _cpu_by_convention(a):
                    continue
                for t in _tensors_in(v):
                    if t.pinned and t.device == CPU and (not t.scalar or t.born & self.result.maybe_scalar):
                        self._meet_all(t, node, "model input", ref, against, a.value)
                    elif t.pinned and t.device == CURRENT and other_gpu is not None:
                        # x.cuda() for a model on cuda(args.gpu): the current
                        # device is cuda:0 unless the script sets it
                        for origin in t.born:
                            self.result.model_gpus.setdefault(origin, (ref, other_gpu.device, other_gpu.how, other_gpu.known))
                        self._meet_all(t, node, "model input", ref, against, a.value)
        return Value(UNKNOWN, against)

    def _chosen_gpu(self, ref: str) -> Optional[Placement]:
        """The script moved ``ref`` to a GPU it chose by index (``.cuda(args.gpu)``,
        ``.to(f"cuda:{local_rank}")``, ``.to(device)`` with ``device =
        torch.device("cuda", 1)``) and never calls ``torch.cuda.set_device``:
        the current device, where ``.cuda()`` puts a tensor, is another one
        whenever that index is not 0. The model's placement, else None."""
        training = self.flows.training
        if not self.flows.scripts or training.sets_device:
            return None
        p = lookup_scoped(training, self.scope, ref, "placements")
        if not isinstance(p, Placement) or p.conditional or not p.device:
            return None
        code = p.device
        scope = training.scopes.get(self.scope)
        bound = scope.values.get(code) if scope is not None and code.isidentifier() else None
        if bound is not None:
            code = code_of(bound)
        if is_explicit_device(code) or code.rsplit(".", 1)[-1] in RANK_NAMES:
            return p
        if bound is None and code.isidentifier() and self._chosen_by_callers(code):
            return p  # train(model, loader, device) with device = torch.device(f"cuda:{args.gpu}") at every call
        return None

    def _chosen_by_callers(self, param: str) -> bool:
        """Every call of this function in the file passes for ``param`` a
        device that names a GPU index (``torch.device(f"cuda:{args.gpu}")``)."""
        if param not in {p.name.value for p in (*self.node.params.posonly_params, *self.node.params.params,
                                                  *self.node.params.kwonly_params)}:
            return False
        training = self.flows.training
        name = self.node.name.value
        codes: List[str] = []
        for c in self.flows._function_callers(self.node):
            if c is self.node:
                continue
            scope = training.scopes.get(self.flows.scope_name(c))
            for call in calls_in(c.body):
                if not (isinstance(call.func, cst.Name) and call.func.value == name):
                    continue
                pos = bound_parameters(self.node, call.args).get(param)
                if pos is None:
                    return False
                arg = call.args[pos].value
                bound = scope.values.get(arg.value) if scope is not None and isinstance(arg, cst.Name) else None
                codes.append(code_of(bound if bound is not None else arg))
        return bool(codes) and all(is_explicit_device(code) or code.rsplit(".", 1)[-1] in RANK_NAMES for code in codes)

    def _wrapped(self, node: cst.Call, args: List[Tuple[cst.Arg, Value]]) -> Value:
        """``nn.DataParallel(model)``: it moves its inputs (so does a DDP
        given ``device_ids``); its outputs are on the model's device."""
        wrapper = self.facts.is_wrapper(node.func)
        inner = args[0][1] if args and args[0][0].keyword is None else UNKNOWN_VALUE
        ids = keyword_arg(node, "device_ids") or (node.args[1] if len(node.args) > 1 and node.args[1].keyword is None else None)
        moves = wrapper == DATA_PARALLEL or (ids is not None and not (isinstance(ids.value, cst.Name) and ids.value.value == "None"))
        placed = is_placed(inner.device) or wrapper == DATA_PARALLEL
        return Value(WRAPPER if moves else MODULE, PLACED if placed else inner.device)

    def _mixes_with_output(self, node: cst.Call, args: List[Tuple[cst.Arg, Value]]) -> None:
        """A call the flow cannot follow given a model's output and a CPU
        tensor (``criterion(out, y)``): they meet there, unless the call only
        shows or stores them, or is a CTC loss (CPU targets are fine)."""
        side = next((v.device for _, v in args if v.kind in (TENSOR, UNKNOWN) and is_placed(v.device)), None)
        if side is None:
            return
        cpu = [(a, t) for a, v in args if not a.star and not _cpu_by_convention(a) for t in _tensors_in(v) if t.pinned and t.device == CPU and not t.scalar]
        if not cpu or _only_shows(node):
            return
        ref = _ref(node.func, self.self_name)
        if ref is not None and lookup_scoped(self.flows.training, self.scope, ref, "ctc_losses"):
            return
        for a, t in cpu:
            self._meet_all(t, node, f"`{short_code(node.func)}`", side[len(PLACED):], side, a.value)

    def _moves_batches(self, node: cst.Call, args: List[Tuple[cst.Arg, Value]], env: Env) -> None:
        """``to_device(batch, device)``, ``prepare(batch, device=dev)``: a
        helper given a batch and a device moves the batch (in place, or
        into what it returns)."""
        names = [a.value.value for a, v in args if isinstance(a.value, cst.Name) and self._item_of(v) is not None and a.value.value in env]
        if not names:
            return
        fname = (dotted_name(node.func) or "").lower()
        words = " ".join(_device_argument(a) for a, _ in args).lower()
        if any(w in fname for w in _MOVING_WORDS) or any(w in words for w in _MOVING_WORDS) or any(v.kind == DEVICE for _, v in args):
            for n in names:
                env[n] = UNKNOWN_VALUE

    def _binary(self, a: Value, b: Value, at: cst.CSTNode, an: Optional[cst.CSTNode] = None, bn: Optional[cst.CSTNode] = None) -> Value:
        # a script's model's output combined with a tensor is a tensor (an
        # input of unknown kind may be a float: it stays unknown)
        a = as_tensor(a) if a.kind == UNKNOWN and is_placed(a.device) and b.kind == TENSOR else a
        b = as_tensor(b) if b.kind == UNKNOWN and is_placed(b.device) and a.kind == TENSOR else b
        if a.kind == TENSOR and b.kind == TENSOR:
            self._check((a, b), at, "operator", nodes=(an, bn))
            if (self.stages is not None or self._script_stages is not None) and (stage_of(a.device) or stage_of(b.device)):
                return self._stage_mix([(an or at, a), (bn or at, b)], at)
            if a.device == b.device == CPU and _by_design(a, b):
                return CPU_BY_DESIGN  # a CPU tensor combined with one on the CPU by design is there by design
            if a.device == b.device:
                return _tensor(a.device, a.born | b.born, a.scalar and b.scalar, None)
            if LOCAL in (a.device, b.device):
                return _tensor(LOCAL)
            placed = next((v.device for v in (a, b) if is_placed(v.device)), None)
            return _tensor(placed or ANY)
        if a.kind == TENSOR and a.scalar and a.device != LOCAL and b.kind == UNKNOWN:
            # a 0-dim tensor put on the CPU (or a GPU) with something of
            # unknown kind: a tensor there makes the result live where it
            # is, a number keeps it 0-dim; never a CPU tensor that meets
            # anything (a tensor on the inputs' device that may be 0-dim
            # stays where it is)
            return Value(UNKNOWN, b.device)
        if b.kind == TENSOR and b.scalar and b.device != LOCAL and a.kind == UNKNOWN:
            return Value(UNKNOWN, a.device)
        if a.kind == TENSOR:
            return replace(a, scalar=a.scalar and b.kind == NUMBER, anchor=None)
        if b.kind == TENSOR:
            return replace(b, scalar=b.scalar and a.kind == NUMBER, anchor=None)
        if a.kind == NUMBER and b.kind == NUMBER:
            return NUMBER_VALUE
        if (follows(a) or follows(b)) and {a.kind, b.kind} <= {UNKNOWN, NUMBER} and (
            a.device == b.device or NUMBER in (a.kind, b.kind)
        ):
            # two things that came in with the inputs (``log_p - log_q``),
            # or one and a number: still on the inputs' side; a torch
            # function that takes the result shows it is a tensor there
            return Value(UNKNOWN, a.device if follows(a) else b.device)
        if a.kind == SEQ and b.kind == SEQ:
            return _seq(elem=join(a.elem, b.elem), known=False)
        if NUMPY in (a.kind, b.kind):
            return Value(NUMPY)
        return UNKNOWN_VALUE

    # -- expressions ----------------------------------------------------------------
    def _expr(self, node: Optional[cst.BaseExpression], env: Env) -> Value:
        if node is None:
            return UNKNOWN_VALUE
        if isinstance(node, cst.Name):
            if node.value in env:
                return env[node.value]
            if node.value == "False":
                return FALSE_VALUE
            if node.value == "True":
                return NUMBER_VALUE
            if node.value == "None":
                return NONE_VALUE
            if self.node is not self.flows._constants_function:
                held = self.flows.module_tensor(node.value)
                if held is not None:
                    return held
            return self._module_device(node.value)
        if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
            return NUMBER_VALUE
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
            s = string_value(node)
            return Value(DEVICE, _named_device(s)) if s is not None and _is_device_string(s) else OTHER_VALUE
        if isinstance(node, cst.FormattedString):
            indices = [self._expr(part.expression, env) for part in node.parts if isinstance(part, cst.FormattedStringExpression)]
            head = node.parts[0] if node.parts else None
            if isinstance(head, cst.FormattedStringText) and head.value == "cuda:" and len(node.parts) == 2 and indices:
                literal = isinstance(node.parts[1].expression, cst.Integer)  # type: ignore[attr-defined]
                where = FIXED if literal else _index_device(indices[0])  # f"cuda:{self.gpu}", f"cuda:{x.get_device()}"
                return Value(DEVICE, where, anchor=indices[0].anchor if where == FIXED else None)
            return OTHER_VALUE
        if isinstance(node, cst.Attribute):
            return self._attribute(node, env)
        if isinstance(node, cst.Call):
            return self._call(node, env)
        if isinstance(node, cst.Subscript):
            return self._subscript(node, env)
        if isinstance(node, cst.BinaryOperation):
            a = self._expr(node.left, env)
            b = self._expr(node.right, env)
            return self._binary(a, b, node, node.left, node.right)
        if isinstance(node, cst.UnaryOperation):
            v = self._expr(node.expression, env)
            return NUMBER_VALUE if isinstance(node.operator, cst.Not) else replace(v, anchor=None)
        if isinstance(node, cst.BooleanOperation):
            return join(self._expr(node.left, env), self._expr(node.right, env))
        if isinstance(node, cst.Comparison):
            left = self._expr(node.left, env)
            left_node: cst.CSTNode = node.left
            out = NUMBER_VALUE
            for c in node.comparisons:
                right = self._expr(c.comparator, env)
                if isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)):
                    left, left_node = right, c.comparator
                    continue
                res = self._binary(left, right, node, left_node, c.comparator)
                if res.kind == TENSOR:
                    out = replace(res, anchor=None)
                left, left_node = right, c.comparator
            return out
        if isinstance(node, cst.IfExp):
            self._expr(node.test, env)
            then_dead, else_dead = _decided(node.test, env)
            if then_dead:
                return self._expr(node.orelse, env)
            if else_dead:
                return self._expr(node.body, env)
            return join(self._expr(node.body, env), self._expr(node.orelse, env))
        if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
            items: List[Value] = []
            known = True
            for e in node.elements:
                if isinstance(e, cst.StarredElement):
                    inner = self._expr(e.value, env)
                    known = False
                    items.extend(inner.items if inner.kind == SEQ and inner.items else [element_of(inner)])
                else:
                    items.append(self._expr(e.value, env))
            return _seq(items, known=known)
        if isinstance(node, cst.Dict):
            values = []
            for el in node.elements:
                if isinstance(el, cst.DictElement):
                    self._expr(el.key, env)
                values.append(self._expr(el.value, env))
            return _settings(values)
        if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            inner = self._comprehension(node.for_in, env)
            return _seq(elem=self._expr(node.elt, inner), known=False)
        if isinstance(node, cst.DictComp):
            inner = self._comprehension(node.for_in, env)
            v = self._expr(node.value, inner)
            if v.kind == TENSOR and v.born and all(b in self.flows.weight_copies for b in v.born):
                # {n: p.detach().clone() for n, p in model.named_parameters()}:
                # a shadow copy of a model's weights, read back by name
                return _seq(elem=v, known=False)
            return OTHER_VALUE
        if isinstance(node, cst.NamedExpr):
            v = self._expr(node.value, env)
            self._bind(node.target, v, env)
            return v
        if isinstance(node, cst.Lambda):
            return OTHER_VALUE
        if isinstance(node, cst.StarredElement):
            return self._expr(node.value, env)
        if isinstance(node, (cst.Await, cst.Yield)):
            inner = getattr(node, "expression", None) or getattr(node, "value", None)
            if isinstance(inner, cst.BaseExpression):
                self._expr(inner, env)
            return UNKNOWN_VALUE
        return UNKNOWN_VALUE

    def _comprehension(self, for_in: cst.CompFor, env: Env) -> Env:
        inner = dict(env)
        cur: Optional[cst.CompFor] = for_in
        while cur is not None:
            it = self._expr(cur.iter, inner)
            self._bind(cur.target, element_of(it), inner)
            if cur is for_in and cur.inner_for_in is None:
                inner.update(self._loader_batches(cur, cur.target))  # [model(x) for x, _ in loader]
            for cond in cur.ifs:
                self._expr(cond.test, inner)
            cur = cur.inner_for_in
        return inner

    def _join_envs(self, a: Optional[Env], b: Optional[Env]) -> Optional[Env]:
        return _join_envs(a, b, self._entry_attribute)

    def _entry_attribute(self, key: str) -> Optional[Value]:
        """What ``self.<attr>`` held when the method began, for an attribute
        the method assigns on some path only (a tensor held since
        ``__init__``, read where the branch that reassigns it was not taken)."""
        node = self._stored_attributes.get(key)
        prefix = f"{self.self_name}." if self.self_name else ""
        if node is None or not prefix or not key.startswith(prefix) or "." in key[len(prefix):]:
            return None
        v = self._self_attribute(key[len(prefix):], node)
        return v if v.kind != UNKNOWN else None

    def _attribute(self, node: cst.Attribute, env: Env) -> Value:
        key = dotted_name(node)
        if key and key in env:
            return env[key]
        if self.stages is None:
            named = self._script_stage_device(node, env)
            if named is not None:
                return named
        attr = node.attr.value
        if isinstance(node.value, cst.Name) and node.value.value == self.self_name and self.self_name:
            return self._self_attribute(attr, node)
        if attr == "saved_tensors" and self.ctx_name and isinstance(node.value, cst.Name) and node.value.value == self.ctx_name:
            # x, w = ctx.saved_tensors: what forward saved, by convention its
            # inputs and what it computed from them
            return _seq(elem=Value(TENSOR, LOCAL, guessed=True), known=False)
        base = self._expr(node.value, env)
        record = self._records.get(node.value.value) if isinstance(node.value, cst.Name) and self._records else None
        if record is not None and base is record[0] and attr in record[1]:
            return _tensor(LOCAL, anchor=key)  # outputs.logits of outputs: DetectionOutput
        if base.kind == TENSOR:
            if attr in _SAME_DEVICE_ATTRS:
                return replace(base, anchor=None)
            if attr == "device":
                return Value(DEVICE, base.device, base.born if base.device == CPU else frozenset(), anchor=base.anchor)
            if attr == "shape":
                return Value(SHAPE)
            if attr in ("dtype", "layout"):
                return OTHER_VALUE
            if attr in ("is_cuda", "requires_grad", "ndim", "is_leaf"):
                return NUMBER_VALUE
            return UNKNOWN_VALUE
        if base.kind == BATCH:
            # data.x of a PyG batch: a field of a whole batch object
            name = node.value.value if isinstance(node.value, cst.Name) else ""
            return self._batch_part(base, node, code_of(node), "attr", name) if _is_field(attr) else UNKNOWN_VALUE
        if base.kind == DEVICE and attr == "index":
            return Value(NUMBER, base.device, scalar=True)
        if base.kind == SEQ and attr in ("values", "indices", "eigenvalues", "eigenvectors", "U", "S", "Vh", "L", "Q", "R"):
            return element_of(base)  # x.topk(k).indices, torch.linalg.eigh(a).eigenvalues
        if follows(base):
            if attr == "device":
                return Value(DEVICE, base.device)
            if attr == "shape":
                return Value(SHAPE)
            if attr in ("dtype", "layout"):
                return OTHER_VALUE
            return Value(UNKNOWN, base.device)  # outputs.logits
        if base.kind == MODULE and stage_of(base.device):
            # block.ln1.weight.device: a part of a part on a stage is on it
            if attr == "device":
                return Value(DEVICE, base.device)
            is_tensor = attr.startswith(("weight", "bias")) or attr.endswith(("weight", "bias"))
            return Value(TENSOR if is_tensor else MODULE, base.device)
        if base.kind == MODULE and attr in ("weight", "bias"):
            return _tensor(base.device, anchor=f"{key}" if key and base.device == LOCAL else None)
        if base.kind == NUMPY:
            return Value(NUMPY) if attr in ("T", "real", "imag", "flat") else UNKNOWN_VALUE
        return UNKNOWN_VALUE

    def _self_attribute(self, attr: str, node: Optional[cst.CSTNode] = None) -> Value:
        cls = self.cls
        if cls is not None and not self.is_module and node is not None:
            return self._plain_attribute(cls, attr, node)
        if cls is None or not self.is_module:
            return UNKNOWN_VALUE
        name = f"{self.self_name}.{attr}"
        own = LOCAL if self.stages is None or not self.stages.dispatched else stage_device(FIRST)
        if attr in cls.parameters or attr in cls.buffers:
            return _tensor(own, anchor=name)
        a = self.facts.class_attribute(cls.name, attr)
        if a is None:
            prop = self.flows.method(cls.name, attr)
            if prop is not None and _decorators(prop) & {"property", "functools.cached_property", "cached_property"}:
                return self._apply_summary(prop, [], module_method=True)  # self.scaled: what the property returns
            return UNKNOWN_VALUE
        if a.kind in ("parameter", "buffer"):
            return _tensor(own, anchor=name)
        if a.kind in ("module", "nn_container"):
            stage = self.stages.of_attribute(attr) if self.stages is not None and self.stages.dispatched else None
            if stage is not None:
                return Value(MODULE, stage_device(stage))  # self.embed.weight: on the part's stage
            return Value(MODULE, LOCAL)
        if a.kind == "device":
            # self.device = device in __init__: fixed when the module was
            # built (a replica on another GPU keeps the original's)
            return Value(DEVICE, self._captured(attr, a.value), anchor=name)
        if a.sequence and a.kind not in ("tensor", "tensor_container", "module_container"):
            return _seq(known=False)  # self.weights = (10.0, 10.0, 5.0, 5.0): torch.tensor of it has dimensions
        if a.kind == "other" and node is not None and self._generator_attribute(cls, attr):
            # self.gen = torch.Generator() in __init__: a CPU generator that
            # no .to() moves (its read is the origin, as for a plain tensor)
            self.result.origin_names[node] = "Generator"
            self.result.anchors[node] = []
            return Value(OTHER, CPU, frozenset({node}))
        if a.kind == "other" and self._captured(attr, "") == FIXED:
            # self.gpu = gpu: used as a CUDA index it names a fixed device
            return Value(UNKNOWN, FIXED, anchor=name)
        if a.kind in ("tensor", "tensor_container") and node is not None:
            if any(x.kind in ("parameter", "buffer", "module", "nn_container") for x in cls.assignments_of(attr)):
                return UNKNOWN_VALUE
            held = Value(TENSOR, HELD, frozenset({node}), scalar=a.scalar)
            if a.kind == "tensor":
                return held
            return replace(_seq(elem=held, known=False), anchor=name if a.tensor_keys else None)
        return UNKNOWN_VALUE

    def _generator_attribute(self, cls: ClassFacts, attr: str) -> bool:
        """Every assignment of ``self.<attr>`` is a CPU ``torch.Generator()``
        (``AttributeFacts.cpu_generator``)."""
        records = cls.assignments_of(attr)
        return bool(records) and all(r.cpu_generator for r in records)

    def _plain_attribute(self, cls: ClassFacts, attr: str, node: cst.CSTNode) -> Value:
        """``self.mat`` of a class that is no module: a tensor its
        ``__init__`` built without a device, assigned nowhere else, is held
        where it was built (nothing moves a plain object); in its other
        methods it meets the tensors they are given. A class with a move
        method of its own (``to``, ``cuda``) keeps its tensors in step."""
        if self.node.name.value in INIT_METHODS:
            return UNKNOWN_VALUE
        records = cls.assignments_of(attr)
        if records and all(r.kind == "device" and r.method in INIT_METHODS for r in records) and attr not in cls.assigned_after_init:
            # self.device = device: the device the object was told, a GPU
            # that does not follow its CPU tensors
            return Value(DEVICE, FIXED, anchor=f"{self.self_name}.{attr}")
        if not records or attr in cls.assigned_after_init or any(r.kind != "tensor" or r.method not in INIT_METHODS or r.scalar for r in records):
            return UNKNOWN_VALUE
        if any(self.flows.method(cls.name, m) is not None for m in ("to", "cuda", "_apply")):
            return UNKNOWN_VALUE  # (another method that reassigns it is assigned_after_init)
        if any(c.is_module for c in map(self.facts.class_facts, self.facts.lineage(cls.name)) if c is not None):
            return UNKNOWN_VALUE
        init = self.flows.method(cls.name, "__init__")
        made = self.flows.function(init).stores.get(attr) if init is not None and init is not self.node else None
        if made is None or not (made.pinned and made.device == CPU and not made.scalar):
            # what __init__ was given (``self.A = A``) or computed from it is
            # where the caller's tensors are; only a CPU birth is held
            return UNKNOWN_VALUE
        return Value(TENSOR, HELD, frozenset({node}))

    def _tensor_keys(self, anchor: Optional[str]) -> Optional[Sequence[str]]:
        """For the value of ``self.<attr>`` (``anchor``), a dict of settings
        holding some tensors: the keys that hold them (None otherwise: any
        key may)."""
        prefix = self.self_name + "."
        attr = anchor[len(prefix):] if anchor and self.self_name and anchor.startswith(prefix) else None
        a = self.facts.class_attribute(self.cls.name, attr) if attr is not None and self.cls is not None else None
        if a is None or a.kind != "tensor_container" or not a.tensor_keys:
            return None
        return a.tensor_keys

    def _captured(self, attr: str, value: str) -> str:
        """Where a device (or CUDA index) held in ``self.<attr>`` points:
        ``FIXED`` (or ``CURRENT`` for ``torch.device("cuda")``) when it is
        set only while the module is built, ``ANY`` when the class keeps it
        in step (``forward`` or a ``to``/``_apply`` override assigns it)."""
        cls = self.cls
        if cls is None:
            return ANY
        lineage = [c for c in (self.facts.class_facts(n) for n in self.facts.lineage(cls.name)) if c is not None]
        if any(attr in c.forward_writes for c in lineage):
            return ANY
        assigned = [x for c in lineage for x in c.assignments_of(attr)]
        if not assigned or any(x.method not in INIT_METHODS for x in assigned):
            return ANY
        if any(m in c.methods for c in lineage for m in ("_apply", "to", "cuda")):
            return ANY
        if cls.is_module and all(x.weights_device for x in assigned) and not self._init_moves_self(cls):
            # self.device = next(self.parameters()).device in __init__: a
            # module is built on the CPU, so that is the CPU, for good
            return CPU
        return CURRENT if current_device_only(value) else FIXED

    def _init_moves_self(self, cls: ClassFacts) -> bool:
        """Whether the class's ``__init__`` moves the module itself
        (``self.to(device)``, ``self.cuda()``), after which its weights are
        no longer where the module was built."""
        init = self.flows.method(cls.name, "__init__")
        return init is None or any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value in ("to", "cuda")
            and isinstance(c.func.value, cst.Name) and c.func.value.value == "self"
            for c in calls_in(init.body)
        )

    def _module_device(self, name: str) -> Value:
        """A module-level device (``DEVICE = torch.device("cuda")``) read
        in a module's method: fixed at import, not the replica's. Read by a
        script's function it is the process's device: the CPU when it can
        only name the CPU, else one the flow does not know."""
        value = self.facts.module_devices.get(name)
        if value is None:
            return UNKNOWN_VALUE
        if not self.is_module:
            # the process's device: the CPU, the GPU it picks when it has one
            # (``torch.device("cuda" if torch.cuda.is_available() else
            # "cpu")``, as a local of the script would be), or unknown
            return Value(DEVICE, CPU if cpu_device_only(value) else CURRENT if current_device_only(value) and self.cls is None else ANY)
        return Value(DEVICE, CURRENT if current_device_only(value) else FIXED, anchor=name)

    def _index_value(self, el: cst.SubscriptElement, env: Env) -> Value:
        s = el.slice
        if isinstance(s, cst.Index):
            return self._expr(s.value, env)
        for part in (s.lower, s.upper, s.step):
            if part is not None:
                self._expr(part, env)
        return OTHER_VALUE

    def _index_meetings(self, base: Value, idx: Sequence[Value], at: cst.CSTNode) -> None:
        """A CPU tensor indexed by a device tensor fails, and so does a device
        tensor indexed by a tensor on another GPU; CPU index tensors into a
        device tensor, alone or beside device ones, do not."""
        if base.kind != TENSOR:
            return
        tensors = [i for i in idx if i.kind == TENSOR]
        if base.device == LOCAL:
            for i in tensors:  # a device tensor indexed by a tensor on another GPU
                if i.pinned and i.device not in (CPU, HELD):  # a plain attribute stays where it was built: the CPU
                    self._meet_all(i, at, "index", base.anchor or "")
        local = next((i for i in tensors if i.device == LOCAL), None)
        if local is None:
            if base.device == HELD and base.pinned and not base.mixes_anywhere():
                # a plain CPU table indexed by a tensor put on a GPU the code
                # names (idx drawn on self.device): "indices should be either
                # on cpu or on the same device as the indexed tensor"
                gpu = next((i for i in tensors if i.pinned and i.device in (CURRENT, FIXED)), None)
                if gpu is not None:
                    source = next((self.result.placed_by[b] for b in gpu.born if b in self.result.placed_by), "")
                    self._meet_all(base, at, "index", source, gpu.device)
            return
        if base.pinned and not base.mixes_anywhere():
            self._meet_all(base, at, "index", local.anchor or "")
        # CPU index tensors beside device ones into a device tensor are fine:
        # PyTorch takes each index from the CPU or from the indexed tensor's device

    def _subscript(self, node: cst.Subscript, env: Env) -> Value:
        if isinstance(node.value, cst.Name):
            # batch["x"] = batch["x"].to(device): that key was replaced (the
            # text is rendered only where some key of that name was stored)
            prefix = node.value.value + "["
            if any(k.startswith(prefix) for k in env):
                key = code_of(node)
                if key in env:
                    return env[key]
        if self.stages is None:
            named = self._script_stage_device(node, env)
            if named is not None:
                return named
        base = self._expr(node.value, env)
        idx = [self._index_value(e, env) for e in node.slice]
        if base.kind == BATCH:
            item = self._item_of(base)
            if item is not None and item.kind == "dataset":
                # test_data[0]: one sample (an image and its label), as a
                # loader would yield it, on the CPU
                name = dotted_name(node.value) or short_code(node.value)
                self._add_loader_item(node, LoaderItem(name, code_of(node), "batch", code_of(node), node, node))
                return Value(BATCH, CPU, frozenset({node}))
            kind = _constant_key(node)
            name = node.value.value if isinstance(node.value, cst.Name) else ""
            return self._batch_part(base, node, code_of(node), kind, name) if kind else UNKNOWN_VALUE
        if base.kind == TENSOR and self.stages is not None and self.stages.dispatched:
            # logits[arange, lengths]: an index on the inputs' device into a
            # part's output
            tensors = [(e.slice.value, v) for e, v in zip(node.slice, idx) if isinstance(e.slice, cst.Index) and v.kind == TENSOR]
            if tensors and any(stage_of(v.device) for v in (base, *(v for _, v in tensors))):
                # what a tensor indexes has dimensions (a row of the inputs too)
                self._stage_mix([(node.value, replace(base, scalar=False)), *tensors], node)
        if base.kind == TENSOR:
            self._index_meetings(base, idx, node)
            # schedule[epoch]: one row, as iterating gives it (of a 1-D tensor, a 0-dim one)
            row = len(idx) == 1 and idx[0].kind == NUMBER and isinstance(node.slice[0].slice, cst.Index)
            return replace(base, scalar=row and not base.matrix, anchor=None, items=(), elem=None, matrix=False)
        if base.kind == SHAPE:
            return NUMBER_VALUE if not isinstance(node.slice[0].slice, cst.Slice) else Value(SHAPE)
        if base.kind == SEQ:
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                i = node.slice[0].slice.value
                key, keys = string_value(i), self._tensor_keys(base.anchor)
                if key is not None and keys is not None and key not in keys:
                    return UNKNOWN_VALUE  # self.stft_kwargs["n_fft"]: a setting next to the tensors
                if isinstance(i, cst.Integer) and base.exact and base.items:
                    try:
                        return base.items[int(i.value, 0)]
                    except (IndexError, ValueError):
                        return element_of(base)
                if isinstance(i, cst.UnaryOperation) and isinstance(i.expression, cst.Integer) and base.exact and base.items:
                    try:
                        return base.items[-int(i.expression.value, 0)]
                    except (IndexError, ValueError):
                        return element_of(base)
                return element_of(base)
            return _seq(elem=base.elem, known=False)
        if base.kind == MODULE:
            return Value(MODULE, base.device)
        if base.kind == NUMPY:
            return Value(NUMPY)
        if follows(base):
            return Value(UNKNOWN, base.device)  # outputs["logits"]
        return UNKNOWN_VALUE

    # -- calls ------------------------------------------------------------------------
    def _call(self, node: cst.Call, env: Env) -> Value:
        func = node.func
        q = self.facts.qualify(func) or ""
        factory = self.facts.is_factory(func)
        if factory is not None:
            return self._factory(node, factory, env)
        args = [(a, self._expr(a.value, env)) for a in node.args]
        mapped = self._vmapped(func)
        if mapped is not None and mapped not in env:
            # torch.vmap(f)(x): f runs on slices of x, on x's device
            return self._name_call(node, mapped, args, env)
        if _asks_for_torch_tensors(node):
            # tokenizer(texts, return_tensors="pt"), processor(images=...,
            # return_tensors="pt"): host data (text, images, lists) turned
            # into new tensors, which such converters make on the CPU; they
            # follow none of the inputs' tensors
            return UNKNOWN_VALUE
        if q == "copy.deepcopy" and len(args) == 1 and not self.is_module and _unmoved_model(args[0][1]):
            # ema = copy.deepcopy(model) before model.to(device): a copy the
            # move leaves on the CPU
            return self._weight_copy(node, "deepcopy", MODULE)
        if q == "torch.from_numpy" or q in _LEGACY_TENSOR_CONSTRUCTORS:
            if keyword_arg(node, "device") is not None:
                return _tensor(ANY)  # torch.Tensor(..., device=d): not a CPU birth
            if q.startswith("torch.cuda."):
                # torch.cuda.FloatTensor(*shape): on the current GPU, not the inputs'
                return self._born(node, q.rsplit(".", 1)[-1], env, device=CURRENT)
            data = args[0][1] if args and args[0][0].keyword is None else UNKNOWN_VALUE
            if data.kind == TENSOR and (q in ("torch.from_numpy", "torch.Tensor") or data.device in (CPU, HELD)):
                return replace(data, anchor=None)  # torch.Tensor(t): t itself, wherever it is
            # torch.LongTensor(t), torch.FloatTensor(t): typed CPU
            # constructors, which refuse a tensor of another device (or
            # dtype); what they return is on the CPU
            if q != "torch.from_numpy" and (not args or all(v.kind == NUMBER for _, v in args)):
                return _tensor(CPU)  # torch.Tensor(3, 4): an uninitialised shape
            return self._born(node, q.rsplit(".", 1)[-1], env)
        if q and self.facts.index is not None and not q.startswith("torch."):
            helper = self.facts.project_function(q)
            if helper is not None and helper[2].get("follows"):
                # a function of another module computing on its arguments:
                # on the CPU when every tensor given is a CPU-born one, on
                # the inputs' device when every one is there
                # (given a device, or tensors from both sides: what the
                # rest of this method makes of an unknown call)
                given = [v for _, v in args if v.kind == TENSOR or follows(v)]
                placed = any(v.kind == DEVICE for _, v in args)
                if given and not placed and all(v.pinned and v.device == CPU for v in given):
                    born = frozenset().union(*(v.born for v in given))
                    return Value(TENSOR, CPU, born, scalar=all(v.scalar for v in given))
                if given and not placed and all(v.device == LOCAL and not v.guessed for v in given):
                    return _tensor(LOCAL)
            if helper is not None and helper[2].get("returns") == "cpu":
                # create_grid(n) of another module of the project: a tensor
                # made there on the CPU, whatever it was given
                items, elem_scalar = helper[2].get("items"), helper[2].get("elem_scalar")
                made_by = str(helper[2].get("made_by", ""))
                self.result.helper_births[node] = (helper[0], helper[1], made_by, items is not None)
                if items is None:
                    return self._born(node, dotted_name(func) or q, env)
                # ``alpha, beta, gamma = rand_angles()``: a sequence of them
                born = [self._born(node, dotted_name(func) or q, env, scalar=bool(x)) for x in items]
                if born:
                    return Value(SEQ, items=tuple(born))
                return Value(SEQ, elem=self._born(node, dotted_name(func) or q, env, scalar=bool(elem_scalar)), exact=False)
        if q in _SAME_DEVICE_FUNCTIONS and args and args[0][0].keyword is None:
            # einops.rearrange(x, "b c h w -> b (h w) c"): x, reshaped
            first = as_tensor(args[0][1])
            return replace(first, anchor=None, scalar=False) if first.kind == TENSOR else UNKNOWN_VALUE
        if q in _COLLECTIVES:
            # dist.all_reduce(t): NCCL, the backend of multi-GPU training,
            # takes CUDA tensors only (a file that names the gloo backend
            # may be running its collectives there, where CPU tensors are fine)
            if not self.flows.names_gloo():
                for a, v in args[:1]:
                    if v.pinned and v.device == CPU:
                        self._meet_all(v, node, "collective", "")
            return OTHER_VALUE
        if q == "numpy" or q.startswith("numpy."):
            if any(v.kind == TENSOR and v.device == LOCAL for _, v in args):
                self.cpu_only = True  # np.linalg.lstsq(x, y): works on CPU tensors only
            return Value(NUMPY)
        if self.flows.scripts and q == "torch.load" and keyword_arg(node, "map_location") is not None:
            # model = torch.load(path, map_location=device): loaded onto that device
            loc = keyword_arg(node, "map_location").value  # type: ignore[union-attr]
            s, v = string_value(loc), self._expr(loc, env)
            on_cpu = (s is not None and s.startswith("cpu")) or (v.kind == DEVICE and v.device == CPU)
            return Value(UNKNOWN, CPU if on_cpu else PLACED)
        if self.flows.scripts and self.flows.host_dataset(q, dotted_name(func) or ""):
            # test_data = datasets.MNIST(root, transform=ToTensor()): its
            # items are samples of host data, on the CPU
            self._add_loader_item(node, LoaderItem("", "", "dataset", "", node, node))
            return Value(BATCH, CPU, frozenset({node}))
        if self.flows.scripts and q in _MODEL_COPIES and args and args[0][0].keyword is None:
            return replace(args[0][1], anchor=None)  # ema = copy.deepcopy(model): where the model is
        if self.flows.scripts and self.facts.is_wrapper(func) is not None:
            return self._wrapped(node, args)
        if q.startswith("torch."):
            return self._torch_call(node, q, args, env)
        if isinstance(func, cst.Attribute):
            out = self._method_call(node, func, args, env)
        elif isinstance(func, cst.Name):
            out = self._name_call(node, func.value, args, env)
        elif self.stages is not None and self.stages.dispatched and isinstance(func, cst.Call):
            # self.get_input_embeddings()(ids): a part of a split model,
            # called, puts out on its stage (its hook moves what it is given)
            callee = self._expr(func, env)
            out = _tensor(callee.device) if callee.kind == MODULE and stage_of(callee.device) else UNKNOWN_VALUE
            if stage_of(out.device):
                self.result.runs_parts = True
        else:
            out = UNKNOWN_VALUE
        if self.flows.scripts and (out == UNKNOWN_VALUE or follows(out)):
            self._mixes_with_output(node, args)
            self._moves_batches(node, args, env)
        if out == UNKNOWN_VALUE and self._summarised is not node:
            # (a function of the file whose flow says what it returns, not
            # computed from its arguments: ``self._to_pil(x)``, a PIL image)
            side = next((v.device for _, v in args if v.kind in (TENSOR, UNKNOWN, DEVICE) and model_side(v.device) and not stage_of(v.device)), None)
            if side is not None:
                # stable_cholesky(b), gaussian_kernel(n, device): a function
                # the flow cannot see, given a tensor (or a device) on the
                # inputs' device (or a model's output), computes there
                return Value(UNKNOWN, side)
            given = [v for _, v in args if v.kind in (TENSOR, UNKNOWN, DEVICE)]
            if (
                given and all(v.kind == TENSOR and v.pinned and v.device == CPU for v in given)
                and not any(a.star for a, _ in args) and not _is_builtin_call(func, env)
            ):
                # rotation_matrix(torch.rand(3)), self.rep.matrix(angles): a
                # function the flow cannot see, given only tensors born on
                # the CPU (and no device), computes there; of unknown kind
                # until it is used where only a tensor can be
                born = frozenset().union(*(v.born for v in given))
                return Value(UNKNOWN, CPU, born, scalar=all(v.scalar for v in given))
            keys = {stage_of(v.device) for _, v in args if v.kind in (TENSOR, UNKNOWN) and model_side(v.device)}
            if len(keys) == 1 and None not in keys:
                # Output(**hidden), pack(h): given what one stage made, and
                # nothing from the inputs or another stage, it is there too
                return Value(UNKNOWN, stage_device(keys.pop()))  # type: ignore[arg-type]
        return out

    def _factory(self, node: cst.Call, name: str, env: Env) -> Value:
        args = [(a, self._expr(a.value, env)) for a in node.args]
        dev = keyword_arg(node, "device")
        if dev is not None and self.stages is not None:
            v = self._expr(dev.value, env)
            if self.stages.dispatched and v.kind in (DEVICE, TENSOR) and v.device == LOCAL:
                return _tensor(LOCAL)  # device=input_ids.device in a model a device_map splits
            key = stage_of(v.device) if v.kind in (DEVICE, TENSOR) else self.stages.name(dev.value)
            return _tensor(stage_device(key) if key else ANY)
        if dev is not None:
            where, born, source = self._device_of(dev.value, env)
            if isinstance(dev.value, cst.Name) and env.get(dev.value.value) is LEFT_AT_CPU_DEFAULT:
                # device=device of a parameter this call left at its "cpu"
                # default (see _apply_summary): a CPU tensor, as from a
                # factory without one (the function's own flow, for callers
                # it does not know, reads the default as a device)
                return self._born(node, name, env)
            gen = _keyword_value(args, "generator")
            if _cpu_generator(gen) and gen.born and (where == LOCAL or where in (CURRENT, FIXED) or is_placed(where)):
                # torch.rand(n, device=x.device, generator=g) of a CPU
                # generator: "Expected a 'cuda' device type for generator"
                arg = keyword_arg(node, "generator")
                partner = code_of(dev.value)
                for origin in gen.born:
                    self._meet(origin, node, "generator", partner, CPU, where, arg.value if arg is not None else None)
            if where in (CURRENT, FIXED):  # device="cuda", device="cuda:1", device=self.device
                return self._born(node, name, env, device=where, source=source)
            if where == CPU and source:
                return self._born(node, name, env, source=source)  # device=self.device, the CPU it was built on
            return _tensor(where, born)  # device=t.device: where t is (with its birth, if t was born there)
        if keyword_arg(node, "out") is not None or any(a.star == "**" for a, _ in args):
            return _tensor(ANY)
        if _cpu_generator(_keyword_value(args, "generator")):
            return CPU_BY_DESIGN  # torch.randn(n, generator=torch.Generator()): on the CPU by design
        positional = [v for a, v in args if a.keyword is None and not a.star]
        if name in ("tensor", "as_tensor"):
            data = positional[0] if positional else UNKNOWN_VALUE
            if data.kind == TENSOR:
                return replace(data, anchor=None)
            if data.kind == NUMBER:
                return self._born(node, name, env, scalar=True)
            if data.kind in (SEQ, NUMPY, SHAPE) or (data.kind == UNKNOWN and isinstance(node.args[0].value, (cst.List, cst.Tuple, cst.ListComp))):
                if data.kind == SEQ and data.elem is not None and data.elem.kind == TENSOR and data.elem.device != CPU:
                    return _tensor(ANY)
                return self._born(node, name, env)
            # torch.tensor(x) of an unknown x: maybe a 0-dim copy, which
            # mixes with any device; only a model given it as an input fails
            born = self._born(node, name, env, scalar=True)
            self.result.maybe_scalar.add(node)
            return born
        if name.startswith("sparse_"):
            # torch.sparse_coo_tensor(indices, values): on the device of its data
            data = [v for v in positional if v.kind == TENSOR]
            if data:
                return _tensor(data[0].device if all(v.device == data[0].device for v in data) else ANY)
        if name == "scalar_tensor":
            return self._born(node, name, env, scalar=True)
        if name in ("zeros", "ones", "empty", "rand", "randn", "full") and node.args:
            first = node.args[0].value
            if isinstance(first, (cst.List, cst.Tuple)) and not first.elements:
                return self._born(node, name, env, scalar=True)  # torch.zeros(()): 0-dim
            if _has_zero_size(node, name):
                return _tensor(CPU)  # torch.empty(0), torch.empty([0]): holds nothing, an unused placeholder
        born = self._born(node, name, env)
        return replace(born, matrix=True) if _two_dimensional(name, node) else born

    def _module_built(self, node: cst.Call, name: str, env: Env) -> Value:
        """``proj = nn.Linear(8, 4)`` in code that runs on the inputs
        (``forward``, a helper, a functional metric): its weights are made on
        the CPU, and nothing moves them with the model (it is no submodule),
        so they meet whatever it is given. Built while a module is built
        (``__init__``), it is moved with it; built with ``device=``, it is
        there."""
        if keyword_arg(node, "device") is not None or any(a.star for a in node.args):
            return UNKNOWN_VALUE
        if self.flows.init_time(self.node) or self.node is self.flows.module_function():
            if self.node is self.flows.module_function() and self.flows.staged_class(Value(MODULE, CPU, frozenset({node}))):
                # a model-parallel model the script runs: its parts are
                # where its class pins them (no birth: nothing moves it whole)
                return Value(MODULE, CPU, frozenset({node}))
            return UNKNOWN_VALUE  # (a script's own model: where the script moves it is its question)
        return replace(self._born(node, name, env), kind=MODULE)

    def _born(self, node: cst.Call, name: str, env: Env, scalar: bool = False, device: str = CPU, source: str = "") -> Value:
        self.result.origin_names[node] = name
        if source:
            self.result.placed_by[node] = source
        if self.cls is not None and (self.cls.placed_attributes or self.cls.pinned_devices()):
            # model parallelism: the stages are on different devices, and
            # which one this tensor meets is not the inputs' device
            self.result.anchors[node] = []
            return _tensor(device, [node], scalar=scalar)
        # nor a name whose data the call converts (``torch.tensor(float(nu))``: a number there)
        converted = _names_in(node.args) if name in ("tensor", "as_tensor") or name[:1].isupper() else set()
        self.result.anchors[node] = self._anchors_here(env, converted)
        return _tensor(device, [node], scalar=scalar)

    def _anchors_here(self, env: Env, skip: Collection[str] = ()) -> List[str]:
        """The names holding a tensor on the inputs' device here, which a
        fix may name (never one that may be None or is only guessed to be a
        tensor, nor one in ``skip``): parameters first, then the module's
        own tensors."""
        held = [
            n for n, v in env.items()
            if v.kind == TENSOR and v.device == LOCAL and not v.guessed and not v.maybe_none and not v.maybe_number
            and not v.maybe_other and "." not in n and n not in skip
        ]
        anchors = [n for n in held if env[n].anchor == n] + [n for n in held if env[n].anchor != n]
        if self.is_module and self.cls is not None:
            own = [f"{self.self_name}.{p}" for p in (*self.cls.parameters, *self.cls.buffers)]
            if self.cls.anchor_tensor:
                own.append(f"{self.self_name}.{self.cls.anchor_tensor}")
            anchors.extend(a for a in own if a not in anchors)
        return anchors

    def _device_of(self, node: cst.BaseExpression, env: Env) -> Tuple[str, FrozenSet[cst.CSTNode], str]:
        """Where a ``device=`` argument puts a tensor; for ``t.device``
        with ``t`` put on the CPU by a call, that call; and the name holding
        a device fixed outside the call (``self.device``, a module-level
        ``DEVICE``), for messages."""
        s = string_value(node)
        if s is not None:
            return _named_device(s), frozenset(), ""
        v = self._expr(node, env)
        if isinstance(node, cst.Integer):
            return FIXED, frozenset(), ""  # device=0
        if v.kind == NUMBER and v.device == LOCAL:
            return LOCAL, frozenset(), ""  # device=x.get_device()
        if v.kind in (DEVICE, TENSOR) and (v.device in (LOCAL, CURRENT, FIXED) or is_placed(v.device)):
            return v.device, frozenset(), (v.anchor or "") if v.kind == DEVICE else ""
        if v.kind in (DEVICE, TENSOR) and v.device == CPU and v.born:
            return CPU, v.born, ""
        if v.kind == DEVICE and v.device == CPU and v.anchor:
            return CPU, frozenset(), v.anchor  # self.device read off the weights while the module was built
        return ANY, frozenset(), ""

    def _torch_call(self, node: cst.Call, q: str, args: List[Tuple[cst.Arg, Value]], env: Env) -> Value:
        name = q.rsplit(".", 1)[-1]
        if q == "torch.device":
            return self._torch_device(node, args)
        if name.startswith("sparse_") and name.endswith("_tensor") and keyword_arg(node, "device") is not None:
            # torch.sparse_csr_tensor(crow, col, values, device=d) converts its parts to d
            where, born, _ = self._device_of(keyword_arg(node, "device").value, env)  # type: ignore[union-attr]
            return _tensor(where, born)
        if self.stages is not None and self.stages.dispatched and q.startswith("torch.nn.") and name.endswith("Loss"):
            return Value(MODULE, LOCAL, loss=True)  # loss_fct = CrossEntropyLoss(): its inputs meet when it is called
        if self.flows.scripts and q.startswith("torch.nn.") and name.endswith("Loss"):
            # nn.CrossEntropyLoss(weight=torch.tensor(w)): the loss holds its
            # weights as buffers, on the CPU until the loss itself is moved
            positional = [v for a, v in args if a.keyword is None][:1]  # nn.NLLLoss(w): the first is ``weight``
            weights = positional + [v for a, v in args if a.keyword is not None and a.keyword.value in _LOSS_WEIGHTS]
            born = frozenset().union(*(v.born for v in weights if v.pinned and v.device == CPU and not v.scalar))
            if born and not any(a.star for a, _ in args):
                return Value(MODULE, CPU, born, loss=True)
        if q.startswith("torch.nn.") and layer_parameter(q) is not None:
            return self._module_built(node, name, env)
        if name == "Generator" and q.count(".") == 1:
            # torch.Generator(): a CPU generator, which draws into CPU tensors only
            dev = keyword_arg(node, "device") or next((a for a in node.args if a.keyword is None), None)
            if dev is not None:
                return Value(OTHER, self._device_of(dev.value, env)[0])
            self.result.origin_names[node] = "Generator"
            self.result.anchors[node] = self._anchors_here(env)
            return Value(OTHER, CPU, frozenset({node}))
        # (a torch.distributions object computes with the tensors it is
        # built from: Normal(mu, sigma) is where they are, and
        # kl_divergence(p, q) mixes both distributions' tensors)
        compute = q.count(".") == 1 or q.startswith(_COMPUTE_NAMESPACES) or q in _AUTOGRAD or q.startswith("torch.distributions.")
        if not compute or name in _NO_MEETING:
            return UNKNOWN_VALUE
        if name == "where" and len(args) == 3 and args[0][0].keyword is None:
            args = [(args[0][0], self._mask(args[0][0].value, args[0][1], env)), *args[1:]]  # torch.where(ids > 0, a, b)
        values: List[Value] = []
        nodes: List[Optional[cst.CSTNode]] = []
        sure = {id(e) for e in _tensor_arguments(node, name)}
        position = -1
        for a, v in args:
            position += a.keyword is None and not a.star
            if int_argument(name, position if a.keyword is None else -1, a.keyword.value if a.keyword is not None else ""):
                continue  # torch.multinomial(w, n.max()): a number, wherever the 0-dim tensor lives
            if id(a.value) in sure:
                if follows(v) and isinstance(a.value, cst.Name) and env.get(a.value.value) is v:
                    # torch.argsort(diff) succeeds only for a tensor: from
                    # here on ``diff`` is one (a fix may name its device)
                    env[a.value.value] = _tensor(v.device, anchor=a.value.value)
                v = as_tensor(v)
            elif v.kind == SEQ and name in _CONCAT and v.elem is not None:
                v = replace(v, items=tuple(as_tensor(i) for i in v.items), elem=as_tensor(v.elem))
            if v.kind == SEQ:
                parts = v.items if v.exact else (*v.items, *([v.elem] if v.elem is not None else []))
                values.extend(parts)
                shown = a.value.elements if isinstance(a.value, (cst.List, cst.Tuple)) and v.exact else ()
                if len(shown) == len(parts):
                    nodes.extend(e.value for e in shown)  # torch.cat([ys, t]): each element's own node
                else:
                    nodes.extend([None] * len(parts))
            else:
                values.append(v)
                nodes.append(a.value)
        tensors = [(v, n) for v, n in zip(values, nodes) if v.kind == TENSOR]
        self._check([v for v, _ in tensors], node, dotted_name(node.func) or q, scalars_meet=name in _CONCAT, nodes=[n for _, n in tensors])
        tensors = [v for v, _ in tensors]
        several = _returns_several(name, node)
        staged = self.stages is not None or self._script_stages is not None and any(stage_of(v.device) for v in tensors)
        if staged and (any(stage_of(v.device) for v in tensors) or name in FUNCTIONAL_LOSSES):
            pairs = [
                (n, v) for n, v in self._stage_args(args)
                if v.kind == TENSOR or (name in FUNCTIONAL_LOSSES and v.kind == UNKNOWN and v.device == LOCAL)
            ]
            mixed = self._stage_mix(pairs, node, loss=name in FUNCTIONAL_LOSSES)
            if stage_of(mixed.device):
                return _seq(elem=mixed, known=False) if several else mixed
        if name in _INDEXING and not several:
            # torch.index_select(x, 0, idx), torch.gather(x, 1, idx): the
            # result is on x's device (the index had to be there, or raised)
            base = as_tensor(args[0][1]) if args and args[0][0].keyword is None else UNKNOWN_VALUE
            if base.kind != TENSOR:
                return _tensor(ANY)
            tensors = [base]
        if not tensors:
            return _tensor(ANY) if not several else UNKNOWN_VALUE
        devices = {v.device for v in tensors}
        if len(devices) == 1:
            dev = devices.pop()
        elif len(devices) == 2 and CURRENT in devices and self.cls is None and any(is_placed(d) for d in devices):
            # a script's model output with a tensor it put on its GPU
            # (``F.cross_entropy(model(x), y.to(device))``): where the model is
            dev = next(d for d in devices if is_placed(d))
        else:
            dev = LOCAL if LOCAL in devices else ANY
        born = frozenset().union(*(v.born for v in tensors)) if dev in PINNED else frozenset()
        reduced = name in _REDUCTIONS and len(args) == 1 and args[0][0].keyword is None  # torch.prod(t): 0-dim
        scalar = reduced or (name not in _SHAPE_MAKERS and all(v.scalar for v in tensors))  # torch.mvlgamma(nu / 2, n) of a 0-dim nu
        out = _tensor(dev, born, scalar)
        if name in _CONCAT and tensors and (
            any(v.matrix for v in tensors) or name in _STACKING and not any(v.scalar for v in tensors)
        ):
            # torch.cat keeps the number of dimensions; torch.stack of 1-D tensors adds one
            out = replace(out, matrix=True)
        if dev == CPU and _by_design(*tensors):
            out = replace(out, born=frozenset(), by_design=True)  # torch.bmm(ls, z) of a z on the CPU by design
        if several:
            return _seq(elem=out, known=False)
        return out

    def _torch_device(self, node: cst.Call, args: List[Tuple[cst.Arg, Value]]) -> Value:
        """``torch.device("cuda")``, ``torch.device("cuda", 1)``,
        ``torch.device("cuda:1")``, ``torch.device(d)`` of a device value
        (``torch.device("cuda" if x.is_cuda else "cpu")``)."""
        positional = [v for a, v in args if a.keyword is None]
        first = positional[0] if positional else UNKNOWN_VALUE
        if first.kind != DEVICE:
            return Value(DEVICE, LOCAL if first.kind == NUMBER and first.device == LOCAL else ANY)
        if first.device == CURRENT and len(positional) > 1:
            index = [a.value for a in node.args if a.keyword is None][1]
            return Value(DEVICE, FIXED if isinstance(index, cst.Integer) else _index_device(positional[1]))
        return replace(first, anchor=None) if first.device not in (CURRENT, FIXED) else first

    def _weight_copy(self, node: cst.Call, how: str, kind: str) -> Value:
        """A copy of an unmoved model's weights (or of the model): made on
        the CPU, and the script's later ``model.to(device)`` leaves it there."""
        self.flows.weight_copies[node] = self.flows._display_name(self.node)
        self.result.origin_names[node] = how
        self.result.anchors.setdefault(node, [])
        return Value(kind, CPU, frozenset({node}))

    def _object_state(self, node: cst.Call, cls: str, args: List[Tuple[cst.Arg, Value]]) -> None:
        """``ema = EMA(model)`` in a script, given a model it has not moved
        yet: what ``__init__`` stores from it (a copy of its weights), kept
        for the object's methods the script calls later."""
        init = self.flows.method(cls, "__init__")
        if init is None or self.depth >= _MAX_DEPTH:
            return
        bound = _bind_arguments(init, _spread(args), method=True)
        passed = {k: v for k, v in bound.items() if _unmoved_model(v) or _holds_pinned(v)}
        if not passed:
            return
        stores = self.flows.specialised(init, passed, self.depth + 1).stores
        given = frozenset().union(*(t.born for v in passed.values() for t in (v, *_tensors_in(v))))
        # a copy of the model's weights it made, or something pinned it was
        # handed and keeps (``self.generator = generator`` of a CPU generator)
        held = {a: v for a, v in stores.items()
                if any(b in self.flows.weight_copies or b in given for t in (v, *_tensors_in(v)) for b in t.born)}
        if held:
            self.flows.object_states[node] = held

    def _object_method_call(self, node: cst.Call, fn: cst.FunctionDef, recv: Value,
                            args: List[Tuple[cst.Arg, Value]], env: Env) -> Value:
        """A method of a plain object the script built, run with what the
        script hands it and what its constructor kept (:meth:`_object_state`)."""
        params = [*fn.params.posonly_params, *fn.params.params]
        me = params[0].name.value if params else "self"
        state = {f"{me}.{a}": v for b in recv.born for a, v in self.flows.object_states.get(b, {}).items()}
        return self._apply_summary(fn, args, module_method=False, state=state or None, call=node, env=env)

    def _instance_method(self, recv: Value, m: str) -> Optional[cst.FunctionDef]:
        """Method ``m`` (its own or inherited from a class of the file) of the
        plain class an instance the script built belongs to; None where the
        script built it to run on the CPU (``Predictor(net)`` of ``def
        __init__(self, model, device="cpu")``, or given ``"cpu"``): its
        ``model.to(device)`` is then no GPU."""
        built = next((b for b in recv.born if isinstance(b, cst.Call) and isinstance(b.func, cst.Name)), None)
        if built is None:
            return None
        fn = self.flows.method(built.func.value, m)  # type: ignore[attr-defined]
        if fn is None or _decorators(fn) & {"property", "staticmethod", "classmethod"}:
            return None
        init = self.flows.method(built.func.value, "__init__")  # type: ignore[attr-defined]
        if init is not None:
            bound = _bind_arguments(init, [(a, OTHER_VALUE) for a in built.args], method=True)  # (names only)
            if any(k not in bound and not any(a.star for a in built.args) for k in self.flows.cpu_default_params(init)):
                return None  # left at its "cpu" default
        if any(string_value(a.value) == "cpu" for a in built.args):
            return None
        return fn

    def _method_call(self, node: cst.Call, func: cst.Attribute, args: List[Tuple[cst.Arg, Value]], env: Env) -> Value:
        m = func.attr.value
        recv_node = func.value
        if self.self_name and isinstance(recv_node, cst.Name) and recv_node.value == self.self_name:
            return self._self_call(node, m, args, env)
        if isinstance(recv_node, cst.Name) and recv_node.value not in env and recv_node.value in self.flows.methods:
            # Head.offsets(h, w): a static or class method called by its class's name
            fn = self.flows.method(recv_node.value, m)
            if fn is not None and _decorators(fn) & {"staticmethod", "classmethod"}:
                return self._apply_summary(fn, args, module_method=False, call=node, env=env)
        recv = self._expr(recv_node, env)
        if recv.kind == OTHER and recv.born and self.cls is None:
            fn = self._instance_method(recv, m)
            if fn is not None:
                # trainer.train_step(batch): that method of the file run with
                # what the script hands it (a CPU batch meets the model
                # there), and with what the constructor left in the object
                # (a copy of the model made before the script moved it)
                return self._object_method_call(node, fn, recv, args, env)
        if not self.is_module and not node.args and m in _WEIGHT_VIEWS | _NAMED_WEIGHT_VIEWS and _unmoved_model(recv):
            # the weights of a model the script built and has not moved yet:
            # references the move will update (live), or copies it will not
            if m == "state_dict" or all(b in self.flows.weight_copies for b in recv.born):
                t = self._weight_copy(node, m, TENSOR) if m == "state_dict" else _tensor(CPU, recv.born)
            else:
                t = Value(TENSOR, CPU, live=True)
            return _seq(elem=_seq((OTHER_VALUE, t)) if m in _NAMED_WEIGHT_VIEWS else t, known=False)
        if recv.kind == TENSOR and recv.live and m in ("clone", "detach") and not self.is_module:
            return self._weight_copy(node, m, TENSOR)  # p.detach().clone(): a copy the move leaves behind
        if recv.kind == MODULE and recv.device == CPU and recv.born and m in _KEEPS_MODULE and not self.is_module:
            return recv  # copy.deepcopy(model).eval(): the same module
        if m in _WEIGHT_VIEWS and not node.args and recv.kind in (MODULE, UNKNOWN, WRAPPER):
            # model.parameters(), self.ema.state_dict(): a module's tensors,
            # on its device (a part pinned to a stage: on that stage)
            attr = self_attribute(recv_node, self.self_name) if self.self_name else None
            stage = self.stages.of_attribute(attr) if attr and self.stages is not None and not self.stages.dispatched else None
            if stage is None and self.stages is not None and not self.stages.dispatched and recv.device == LOCAL \
                    and isinstance(recv_node, cst.Name) and recv_node.value in param_names(self.node):
                # update(self, model) of a module that pins a part (an EMA
                # copy on its own device): the weights of a model handed
                # over are wherever the caller put it, a stage of their own
                stage = ARG + recv_node.value
            where = stage_device(stage) if stage is not None else recv.device
            if stage is not None or recv.device == LOCAL or is_placed(recv.device):
                return _seq(elem=_tensor(where), known=False)
        if m in _NAMED_WEIGHT_VIEWS and not node.args and recv.kind in (MODULE, WRAPPER) and is_placed(recv.device):
            # for n, p in model.named_parameters() of a model the script moved
            return _seq(elem=_seq((OTHER_VALUE, _tensor(recv.device))), known=False)
        if m == "values" and recv.kind == SEQ and not node.args:
            return _seq(elem=recv.elem, known=False)  # state_dict().values()
        if recv.kind in (MODULE, WRAPPER) and m in ("to", "cuda", "cpu") and self.flows.scripts:
            return self._move(node, m, recv, args, env)  # model.to(device)
        if recv.kind in (MODULE, UNKNOWN, WRAPPER) and is_placed(recv.device) and isinstance(recv_node, cst.Name) and m not in ("forward", "__call__"):
            fn = self._submodule_method(recv_node, m)
            if fn is not None and not _decorators(fn) & {"property", "staticmethod", "classmethod"}:
                # model.init_hidden(b) on a model the script moved: what
                # that method of the file returns (a tensor it builds on the
                # CPU stays there; one it computes from the weights is placed)
                # (the call's own tensors are not passed in: where they meet
                # the weights is the model call's question, on the model's device)
                callee = self.flows.function(fn)
                out = self._relay(node, fn, callee, self._translate(callee.returns, args, True), env)
                return Value(out.kind, recv.device) if out.kind in (TENSOR, MODULE, UNKNOWN) and out.device == LOCAL else out
        if recv.kind == MODULE:
            # self.sub(x) is func=self.sub, handled in _name_call's sibling below;
            # self.sub.method(x): a submodule's method, on the module's device
            if m in ("forward", "__call__"):
                return _tensor(recv.device)
            fn = self._submodule_method(recv_node, m)
            if fn is not None:
                # self.cell.init_hidden(b): what that method of the file returns
                return self._apply_summary(fn, args, module_method=True, call=node, env=env)
            if stage_of(recv.device) and self.stages is not None and self.stages.dispatched and self._holds_part(recv_node, m):
                # self.model.embed_tokens(ids): a part of a part on a stage
                # is on it (its hook moves what it is given)
                return _tensor(recv.device)
            if stage_of(recv.device) and self.stages is not None and self.stages.dispatched and m in PART_GETTERS and not node.args:
                # self.language_model.get_input_embeddings(): a part of a
                # part on a stage is on it
                return Value(MODULE, recv.device)
            return UNKNOWN_VALUE
        if recv.kind == SEQ:
            if m in ("append", "add") and args and isinstance(recv_node, cst.Name):
                env[recv_node.value] = _seq(elem=join(recv.elem, args[0][1]), known=False)
                return OTHER_VALUE
            if m in ("extend", "insert") and args and isinstance(recv_node, cst.Name):
                v = args[-1][1]
                env[recv_node.value] = _seq(elem=join(recv.elem, element_of(v) if m == "extend" else v), known=False)
                return OTHER_VALUE
            if m == "pop":
                return element_of(recv)
            if m in ("index", "count"):
                return NUMBER_VALUE
            return UNKNOWN_VALUE
        if recv.kind == NUMPY:
            return Value(NUMPY) if m not in ("item", "tolist", "sum") or args else NUMBER_VALUE
        if m == "manual_seed" and _cpu_generator(recv):
            return recv  # torch.Generator().manual_seed(0): the generator itself
        if recv.kind not in (TENSOR, UNKNOWN):
            return UNKNOWN_VALUE
        if recv.kind == UNKNOWN and (m in _TEXT_METHODS or m in _TEXT_TESTS):
            return NUMBER_VALUE if m in _TEXT_TESTS else OTHER_VALUE
        if follows(recv):
            if m in TENSOR_ONLY_ATTRS or m in _BINARY_METHODS and m not in ("add", "index", "count", "pop"):
                recv = _tensor(recv.device)  # x.softmax(-1): x is a tensor
            elif m not in ("to", "cuda", "cpu", "type_as", "type"):
                return Value(UNKNOWN, recv.device) if m not in _VALUE_METHODS else _VALUE_METHODS[m]
        tensor = recv.kind == TENSOR
        if m in ("to", "cuda", "cpu", "type_as", "type"):
            return self._move(node, m, recv, args, env)
        if not tensor:
            return UNKNOWN_VALUE
        if m == "backward" and args:
            # loss.backward(gradient): the gradient on the loss's device
            grads = [(a.value, v) for a, v in args if v.kind == TENSOR and (a.keyword is None or a.keyword.value == "gradient")]
            if grads:
                self._check([recv, *(v for _, v in grads)], node, "method backward", nodes=[func.value, *(n for n, _ in grads)])
        if m == "get_device":
            return Value(NUMBER, recv.device, scalar=True)  # an index naming the tensor's own device
        if m in _VALUE_METHODS:
            return _VALUE_METHODS[m]
        if m == "numpy":
            if recv.device == LOCAL:
                self.cpu_only = True  # x.numpy() raises for a CUDA tensor
            return Value(NUMPY)
        if m == "size":
            return NUMBER_VALUE if node.args else Value(SHAPE)
        if m.startswith("new_") or m == "new":
            return _tensor(recv.device, recv.born if recv.device in PINNED else ())
        if m in ("copy_", "set_"):
            return replace(recv, anchor=None)
        if m in RANDOM_FILL_METHODS and recv.device == CPU:
            if _cpu_generator(_keyword_value(args, "generator")):
                # u = torch.empty(n); u.uniform_(generator=g): u is on the CPU by design
                if isinstance(recv_node, cst.Name) and recv_node.value in env:
                    env[recv_node.value] = replace(CPU_BY_DESIGN, anchor=env[recv_node.value].anchor, matrix=recv.matrix)
                return CPU_BY_DESIGN
        others = [(a.value, v) for a, v in args if v.kind == TENSOR]
        if m in _MASK_METHODS and args and args[0][0].keyword is None and args[0][1].kind != TENSOR:
            mask = self._mask(args[0][0].value, args[0][1], env)
            if mask.kind == TENSOR:
                others.insert(0, (args[0][0].value, mask))
        if m in _BINARY_METHODS and others:
            self._check([recv, *(v for _, v in others)], node, f"method {m}", nodes=[func.value, *(n for n, _ in others)])
            if (self.stages is not None or self._script_stages is not None) and any(
                stage_of(v.device) for v in (recv, *(v for _, v in others))
            ):
                # x.masked_fill(mask, v), x.masked_scatter(mask, src),
                # x.index_select(0, idx): the tensors it is given meet x on
                # its device, as an operator's operands do
                self._stage_mix([(func.value, recv), *others], node)
        # what a tensor on the CPU by design computes is there by design, and
        # so is ls.bmm(z) of a z there by design: ls has to be on the CPU too
        design = recv.device == CPU and (_by_design(recv) or m in _BINARY_METHODS and _by_design(*(v for _, v in others)))
        born = recv.born if recv.device in PINNED and not design else frozenset()
        if m in ("split", "chunk", "unbind", "tensor_split", "sort", "topk", "max", "min", "median", "mode", "unique", "kthvalue") and (args or m not in _REDUCTIONS):
            return _seq(elem=replace(_tensor(recv.device, born), by_design=design), known=False)
        if m in _REDUCTIONS and not node.args:
            return replace(_tensor(recv.device, born, scalar=True), by_design=design)
        # ``torch.eye(n).unsqueeze(0).float()``: still two dimensions or more,
        # so a row of it is a tensor, not a 0-dim one
        matrix = (recv.matrix and m in _RANK_KEEPING) or (m == "unsqueeze" and recv.kind == TENSOR and not recv.scalar) or (
            m in _RESHAPING and _two_sizes(node)  # e.repeat(2, 1), x.view(b, -1): two dimensions or more
        )
        return replace(_tensor(recv.device, born, recv.scalar and m not in _SHAPE_MAKERS), by_design=design, matrix=matrix)

    def _mask(self, node: cst.BaseExpression, v: Value, env: Env) -> Value:
        """``v``, the value of ``node`` where only a boolean tensor can be
        (``x.masked_fill(token_type_ids == 0, 0)``, ``torch.where(m > 0, a,
        b)``): a comparison of an input of unknown kind is a tensor on the
        inputs' device."""
        if v.kind == TENSOR:
            return v
        inner = node
        while isinstance(inner, (cst.Comparison, cst.Subscript)) or (
            isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value in _MASK_SHAPING
        ):
            # (ids == k).unsqueeze(-1).expand_as(h): the comparison's operand
            inner = inner.left if isinstance(inner, cst.Comparison) else inner.value if isinstance(
                inner, cst.Subscript) else inner.func.value  # type: ignore[union-attr]
        seen = self._expr(inner, env) if inner is not node else v
        if seen.kind in (TENSOR, UNKNOWN) and (seen.device == LOCAL or stage_of(seen.device)):
            return _tensor(seen.device)
        return v

    def _move(self, node: cst.Call, m: str, recv: Value, args: List[Tuple[cst.Arg, Value]], env: Env) -> Value:
        out = self._moved(node, m, recv, args, env)
        if out.kind == TENSOR and (recv.born or recv.moved) and out.device not in PINNED:
            return replace(out, moved=recv.born | recv.moved)
        return out

    def _moved(self, node: cst.Call, m: str, recv: Value, args: List[Tuple[cst.Arg, Value]], env: Env) -> Value:
        # what is moved keeps its kind; something of unknown kind that did
        # not come with the inputs (``Net().to(device)``, a batch) may be a
        # model or a container, so its move is no tensor's birth
        kind = recv.kind if recv.kind in (TENSOR, MODULE, WRAPPER) else TENSOR if recv.device == LOCAL else UNKNOWN
        if self.stages is None and m in ("to", "cuda") and kind in (TENSOR, UNKNOWN):
            # y.to(model.dev0), y.cuda(1): onto a stage of the script's
            # model-parallel model (.cuda() is the current GPU, cuda:0)
            given = [(a, v) for a, v in args if a.keyword is None or a.keyword.value == "device"]
            if given and stage_of(given[0][1].device) and given[0][1].kind in (DEVICE, TENSOR):
                return Value(TENSOR, given[0][1].device)
            written = given[0][0].value if given else cst.SimpleString('"cuda"') if m == "cuda" else None
            # (a device written out moves something of unknown kind that may
            # be another model: ``resnet18().cuda()``, not a stage's tensor)
            key = self._script_stage_key(written, env) if written is not None and kind == TENSOR else None
            if key is not None:
                return Value(TENSOR, stage_device(key))
        if kind in (MODULE, UNKNOWN, WRAPPER) and m in ("to", "cuda", "cpu") and self.stages is None:
            return self._module_moved(node, m, recv, kind, args)
        key = self._move_stage(node, m, recv, args) if self.stages is not None and m in ("to", "cuda", "cpu") else None
        if self.stages is not None and self.stages.dispatched and key not in (FIRST, LAST, LOCAL, "") and not (
            key or ""
        ).startswith((PART, WHOLE)):
            pass  # a split model's code names no stage: .cpu(), .cuda(), .to(device) move as anywhere else
        elif self.stages is not None and m in ("to", "cuda", "cpu"):
            if key == "":
                return replace(recv, anchor=None)
            if key == LOCAL:
                return Value(kind if kind != UNKNOWN else TENSOR, LOCAL)
            return Value(kind if kind != UNKNOWN else TENSOR, stage_device(key) if key else ANY)
        if m == "cuda":
            index = [(a, v) for a, v in args if a.keyword is None or a.keyword.value == "device"]
            if not index:
                where, source = CURRENT, ""
            else:
                where, source = _index_device(index[0][1]), index[0][1].anchor or ""
                if isinstance(index[0][0].value, cst.Integer):
                    where = FIXED
            if where in (CURRENT, FIXED) and kind == TENSOR:
                return self._born(node, "cuda", env, device=where, source=source)
            return Value(kind, where)
        if m == "cpu":
            return Value(kind, CPU)
        if m == "type":
            if not args:
                return OTHER_VALUE
            v = args[0][1]
            source = retyped_like(node)
            if source is not None and kind == TENSOR:
                # t.type(x.type()): "torch.cuda.FloatTensor" names CUDA but no
                # index, so a CPU t goes to the current GPU, not to x's (a t
                # already on x's device keeps it: the device type is the same)
                other = self._expr(source, env)
                if other.kind in (TENSOR, UNKNOWN) and other.device == LOCAL:
                    if recv.device == LOCAL:
                        return replace(recv, anchor=None)
                    return self._born(node, "type", env, device=CURRENT)
                return Value(kind, other.device if other.kind == TENSOR else ANY)
            return Value(kind, v.device if v.kind == TENSOR else ANY)
        if m == "type_as":
            v = args[0][1] if args else UNKNOWN_VALUE
            return Value(kind, v.device if v.kind == TENSOR else ANY)
        # .to(...)
        if is_dtype_cast(self.facts, node):
            return replace(recv, kind=kind, anchor=None)
        for a, v in args:
            if a.keyword is not None and a.keyword.value not in ("device", "other"):
                continue
            s = string_value(a.value)
            where = _named_device(s) if s is not None else (v.device if v.kind == DEVICE else None)
            if isinstance(a.value, cst.Integer):
                where = FIXED  # .to(0)
            elif v.kind == NUMBER and v.device == LOCAL:
                where = LOCAL  # .to(x.get_device())
            if where in (CURRENT, FIXED) and kind == TENSOR:
                # .to("cuda"), .to(torch.device("cuda:1")), .to(self.device)
                return self._born(node, "to", env, device=where, source=v.anchor if v.kind == DEVICE and v.anchor else "")
            if s is not None:
                return Value(kind, where or ANY)
            if v.kind in (TENSOR, DEVICE) and v.device == CPU and v.born and kind == TENSOR:
                return _tensor(CPU, v.born)  # .to(t.device) with t born on the CPU: still there
            if v.kind in (TENSOR, DEVICE):
                return Value(kind, v.device if v.device in (LOCAL, CURRENT) else ANY)
            if a.keyword is None:
                return Value(kind, ANY)
        return Value(kind, ANY)

    def _self_call(self, node: cst.Call, m: str, args: List[Tuple[cst.Arg, Value]], env: Env) -> Value:
        cls = self.cls
        if cls is None:
            return UNKNOWN_VALUE
        own = env.get(f"{self.self_name}.{m}")
        if own is not None and own.kind in (MODULE, UNKNOWN, WRAPPER) and is_placed(own.device):
            return self._model_call(node, f"self.{m}", own, args)
        if not self.is_module and own is None:
            placed = self._placed_ref(f"self.{m}")  # self.model moved in __init__
            if placed is not None:
                return self._model_call(node, f"self.{m}", placed, args)
        if m in ("forward", "__call__") and self.is_module:
            return _tensor(LOCAL)
        if m == "register_buffer" and self.is_module and len(args) > 1 and string_value(args[0][0].value):
            # self.register_buffer("inv_freq", t): self.inv_freq is t from
            # here on, wherever t is (a plain attribute's CPU tensor too)
            key = f"{self.self_name}.{string_value(args[0][0].value)}"
            v = args[1][1]
            if v.kind == TENSOR:
                env[key] = replace(v, anchor=None)
                self._stored(key, env[key])
            return NONE_VALUE
        held = self._self_attribute(m)
        if held.kind == MODULE and self.stages is not None and self.stages.dispatched:
            # a part of a split model meets its inputs as any submodule does
            # (its hook moves them first); its output is on its stage, and
            # a part with no weights follows its inputs
            out = self._submodule_call(node, m, args)
            stage = self.stages.output_of(m)
            if stage is not None:
                self.result.runs_parts = True
                on = _tensor(stage_device(stage))
                if out.kind == SEQ:
                    # a part whose forward returns a tuple (``(hidden,
                    # attn)``): its tensors are on the stage; the tuple is
                    # no tensor an operator mixes (``outputs + out[1:]``)
                    return _seq([on if i.kind in (TENSOR, UNKNOWN) else i for i in out.items], on, known=out.exact)
                return on
            mixed = self._stage_mix(self._stage_args(args), node)
            return mixed if stage_of(mixed.device) else out
        if held.kind == MODULE and self.stages is not None:
            if m in self.stages.pinned:
                return self._into_stage(node, m, args)
            # a part not pinned follows its inputs (a loss compares them)
            a = self.facts.class_attribute(cls.name, m)
            loss = a is not None and a.module_class.startswith("torch.nn.") and a.module_class.endswith("Loss")
            inputs = [t for arg, v in args if not _cpu_by_convention(arg) for t in _tensors_in(v)]
            self._check([_tensor(LOCAL, anchor=f"{self.self_name}.{m}"), *inputs], node, "submodule")
            return self._stage_mix(self._stage_args(args), node, loss=loss)
        if held.kind == MODULE:
            return self._submodule_call(node, m, args)
        fn = self.flows.method(cls.name, m)
        if fn is None:
            a = self.facts.class_attribute(cls.name, m)
            if a is not None and a.factory:
                # self.window_fn(n) holding torch.hann_window by default: that factory's tensor
                return self._factory(node, a.factory, env)
            return UNKNOWN_VALUE
        self._callee = None
        out = self._apply_summary(fn, args, module_method=self.is_module, state=self._pinned_state(fn, env), call=node, env=env)
        if self._callee is not None and self.self_name and self.is_module:
            # self.update_grid(grid): what the method left in self.<attr>
            for attr, v in self._callee.stores.items():
                env[f"{self.self_name}.{attr}"] = replace(v, anchor=None)
                self._stored(f"{self.self_name}.{attr}", v)
        return out

    def _file_module_call(self, forward: cst.FunctionDef, args: List[Tuple[cst.Arg, Value]]) -> Value:
        """A submodule of a class of this file called: what its ``forward``
        does with what it is given, and what it returns (a CPU tensor it
        builds comes back)."""
        flow = self._pass_pinned(forward, args)
        ret = (flow if flow is not None else self.flows.function(forward)).returns
        out = self._translate(ret, args, module_method=True)
        return out if out.kind != UNKNOWN else _tensor(LOCAL)

    def _submodule_call(self, node: cst.Call, m: str, args: List[Tuple[cst.Arg, Value]]) -> Value:
        """``self.<m>(...)`` for a submodule: its weights meet its input."""
        cls = self.cls
        assert cls is not None
        a = self.facts.class_attribute(cls.name, m)
        stateless = a is not None and a.module_class.rsplit(".", 1)[-1] in STATELESS_MODULES
        if stateless:
            inputs = [v for arg, v in args if arg.keyword is None]
            return replace(inputs[0], anchor=None) if inputs and inputs[0].kind == TENSOR else UNKNOWN_VALUE
        forward = self.flows.method(a.module_class, "forward") if a is not None and a.module_class else None
        if forward is not None:
            return self._file_module_call(forward, args)
        # any other module: every tensor it is given meets its weights
        # (LSTM's (h, c) state, keyword masks), except lengths, which
        # PyTorch wants on the CPU (pack_padded_sequence). A module class of
        # another file of the project runs a forward devlint does not see,
        # which may move or rebuild what it is given (a mask handed to a mask
        # builder): only its main input, the first positional one, surely
        # meets its weights
        given = args
        if a is not None and a.module_class and self.facts.class_origin(a.module_class) is not None:
            given = [(arg, v) for arg, v in args if arg.keyword is None and not arg.star][:1]
        inputs = [t for arg, v in given if not _cpu_by_convention(arg) for t in _tensors_in(v)]
        self._check([_tensor(LOCAL, anchor=f"{self.self_name}.{m}"), *inputs], node, "submodule")
        return _tensor(LOCAL)

    def _holds_part(self, recv_node: cst.BaseExpression, m: str) -> bool:
        """Whether ``self.<attr>.<m>`` is a submodule (not a method) of the
        class the part ``self.<attr>`` holds."""
        if self.cls is None or not (
            isinstance(recv_node, cst.Attribute) and isinstance(recv_node.value, cst.Name) and recv_node.value.value == self.self_name
        ):
            return False
        a = self.facts.class_attribute(self.cls.name, recv_node.attr.value)
        if a is None or a.kind != "module" or not a.module_class:
            return False
        held = self.facts.class_attribute(a.module_class, m)
        return held is not None and held.kind in ("module", "nn_container")

    def _submodule_method(self, recv_node: cst.BaseExpression, m: str) -> Optional[cst.FunctionDef]:
        """``m`` of the class a submodule attribute ``self.<attr>`` holds,
        when that class is defined in the file; in a script, of the class a
        model name was built from (``model = RNN(4, 8).to(device)``, then
        ``model.init_hidden(b)``)."""
        if isinstance(recv_node, cst.Name) and self.flows.scripts:
            bound = lookup_scoped(self.flows.training, self.scope, recv_node.value, "values") or lookup_scoped(
                self.flows.training, self.scope, recv_node.value, "passed"
            )
            while isinstance(bound, cst.Call) and isinstance(bound.func, cst.Attribute) and bound.func.attr.value in _MODEL_CHAIN:
                bound = bound.func.value  # RNN(4, 8).to(device).eval()
            if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name):
                c = self.facts.classes.get(bound.func.value)
                if c is not None and c.is_module:
                    return self.flows.method(c.name, m)
            return None
        if self.cls is None or not (
            isinstance(recv_node, cst.Attribute) and isinstance(recv_node.value, cst.Name) and recv_node.value.value == self.self_name
        ):
            return None
        a = self.facts.class_attribute(self.cls.name, recv_node.attr.value)
        if a is None or a.kind != "module" or not a.module_class or a.module_class not in self.facts.classes:
            return None
        return self.flows.method(a.module_class, m)

    def _pinned_state(self, fn: cst.FunctionDef, env: Env) -> Dict[str, Value]:
        """``self.<attr>`` bindings this call made to CPU-born tensors, as
        the method ``fn`` names them (``self.factors = torch.full(...)``
        then ``self.scale(x)`` reading ``self.factors``)."""
        params = [*fn.params.posonly_params, *fn.params.params]
        if not params or _decorators(fn) & {"staticmethod", "classmethod"} or not self.self_name:
            return {}
        callee_self = params[0].name.value
        prefix = self.self_name + "."
        return {
            callee_self + k[len(prefix) - 1:]: v
            for k, v in env.items()
            if k.startswith(prefix) and k.count(".") == 1 and v.pinned
        }

    def _pass_pinned(self, fn: cst.FunctionDef, args: List[Tuple[cst.Arg, Value]],
                     state: Optional[Dict[str, Value]] = None) -> Optional[FunctionFlow]:
        """Run ``fn`` with the CPU-born (or pinned) arguments a call passes
        (and ``state``: ``self.<attr>`` bindings it reads), taking the
        meetings of those tensors inside it as this function's own; the
        specialised flow, or None when nothing pinned is passed."""
        bound = _bind_arguments(fn, args, method=self.flows.owner.get(fn) is not None)
        # (a list or tuple of such tensors too: ``self.update_grid([t])``)
        passed = {k: v for k, v in bound.items() if _holds_pinned(v)}
        if self.flows.scripts:
            # a whole batch a loader left on the CPU, handed to a helper
            # (``prepare_batch(batch, device)``): its items are tensors there
            passed.update((k, v) for k, v in bound.items() if v.kind == BATCH and v.device == CPU and v.born)
        passed.update(state or {})
        if self.stages is not None and self.flows.owner.get(fn) == self.stages.cls.name:
            # self._merge(h, y) of a module whose parts are on stages: the
            # tensors it is handed keep their stages in the helper, where
            # they may meet (its handovers are this call's)
            passed.update((k, replace(v, anchor=k)) for k, v in bound.items() if v.kind == TENSOR and stage_of(v.device))
        decided = self._decided_arguments(fn, args, bound) if self.hinted else {}
        if decided and not passed:
            # a branch ruled out matters only where the callee puts a
            # tensor somewhere (or hands back one put there): else its
            # flow for this call is the one it has for every call
            own = self.flows.function(fn)
            if not own.origin_names and not any(t.pinned for t in _tensors_in(own.returns)):
                decided = {}
        if not (passed or decided) or not self.hinted or self.depth >= _MAX_DEPTH:
            return None
        passed.update(decided)
        # the other tensors this call passes that it knows are on the CPU
        # (``.cpu()`` results) are on the CPU in the callee too, whatever its
        # annotations say (one the caller cannot place keeps the callee's
        # own reading: an annotated tensor parameter follows the inputs)
        passed.update((k, v) for k, v in bound.items() if k not in passed and v.kind == TENSOR and v.device == CPU)
        # and the tensors it passes on the inputs' device are tensors there,
        # even where the callee's own text does not show it (rate * x), as
        # the devices it passes are that device (device=x.device)
        passed.update(
            (k, replace(v, anchor=k, moved=frozenset(), items=(), elem=None))
            for k, v in bound.items() if k not in passed and v.kind == TENSOR and v.device == LOCAL and not v.guessed
        )
        passed.update((k, replace(v, anchor=k)) for k, v in bound.items() if k not in passed and v.kind == DEVICE and v.device == LOCAL)
        if any(_cpu_generator(v) for v in passed.values()):
            # sample(model, n, device, generator=g) of a CPU generator: the
            # GPU the caller names is where the callee draws with it
            passed.update((k, replace(v, anchor=k)) for k, v in bound.items()
                          if k not in passed and v.kind == DEVICE and v.device in (CURRENT, FIXED))
        # and what a script's model gave (or a tensor the script put where
        # its model is) stays there: ``auc(scores, labels.to(device))`` of a
        # model moved with ``.to(device)`` hands the callee two tensors on
        # the model's device, not the inputs' device and the current GPU
        passed.update(
            (k, replace(v, anchor=k)) for k, v in bound.items()
            if k not in passed and v.kind in (TENSOR, UNKNOWN) and is_placed(v.device)
        )
        if state and any(b in self.flows.weight_copies for v in state.values() for t in (v, *_tensors_in(v)) for b in t.born):
            # ema.update(model) of an object holding a copy of the model's
            # weights: the model handed over is where the script moved it
            passed.update((k, replace(v, anchor=k)) for k, v in bound.items()
                          if k not in passed and v.kind in (MODULE, WRAPPER) and is_placed(v.device))
        # forward's input, a tensor only by convention here, is one where the
        # callee computes with it beside a plain tensor attribute it is also
        # handed (``features(x, self.w, self.b)`` doing ``torch.addmm(b, x,
        # w)``): the attribute's meeting, DL006's question (elsewhere the
        # guess is not followed: it specialises many more callees)
        if any(v.device == HELD for v in passed.values()):
            facts = self.flows.body_facts(fn)
            operands = facts.operands | facts.computed
            passed.update(
                (k, replace(v, anchor=k, moved=frozenset(), items=(), elem=None))
                for k, v in bound.items() if k not in passed and v.kind == TENSOR and v.device == LOCAL and k in operands
            )
        flow = self.flows.specialised(fn, passed, self.depth + 1)
        for moved in flow.discarded_moves:
            # prepare_batch(batch, device) throwing away a move of the batch
            # this call hands it: a finding in the helper, found from here
            if moved not in self.result.discarded_moves:
                self.result.discarded_moves.append(moved)
        for tensor_moved in flow.discarded_tensor_moves:
            # feats.to(device) of a tensor this call hands it: the moved copy is lost
            if tensor_moved not in self.result.discarded_tensor_moves:
                self.result.discarded_tensor_moves.append(tensor_moved)
        born = frozenset().union(*(t.born for v in passed.values() for t in _tensors_in(v)),
                                 *(v.born for v in passed.values() if v.kind == MODULE or _cpu_generator(v)))
        for m in flow.meetings:
            if m.origin in born:
                self._meet(m.origin, m.at, m.how, m.partner, m.device, m.against, m.arg, m.within or fn.name.value)
        for h in flow.handovers:
            if id(h.arg) not in self._handed:
                self._handed.add(id(h.arg))
                self.result.handovers.append(h)
        return flow

    def _decided_arguments(self, fn: cst.FunctionDef, args: List[Tuple[cst.Arg, Value]],
                           bound: Dict[str, Value]) -> Dict[str, Value]:
        """The parameters of ``fn`` that its body tests for ``None`` or for
        truth and that this call decides: passed ``None`` or ``False``, or
        left at such a default (``make_mask(input=x)`` leaves ``shape=None``:
        the callee's ``elif shape is not None:`` branch does not run for
        it)."""
        tested = self.flows.tested_names(fn)
        if not tested:
            return {}
        out: Dict[str, Value] = {}
        starred = any(a.star for a, _ in args)
        for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params):
            name = p.name.value
            if name not in tested:
                continue
            if name in bound:
                v = bound[name]
                if v.kind == NONE and not v.maybe_none:
                    out[name] = NONE_VALUE
                elif v.falsy:
                    out[name] = FALSE_VALUE
            elif not starred and p.default is not None:
                d = p.default
                if isinstance(d, cst.Name) and d.value == "None":
                    out[name] = NONE_VALUE
                elif isinstance(d, cst.Name) and d.value == "False" or isinstance(d, cst.Integer) and d.value == "0":
                    out[name] = FALSE_VALUE
        return out

    def _note_map(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``vmap = torch.func.vmap`` and ``per_row = vmap(score)``: what a
        later call of the name runs (any other binding forgets it)."""
        if not isinstance(target, cst.Name):
            return
        name = target.value
        self.vmap_names.discard(name)
        self.mapped.pop(name, None)
        if (self.facts.qualify(value) or "") in VMAPS:
            self.vmap_names.add(name)
            return
        mapped = self._vmapped(value)
        if mapped is not None:
            self.mapped[name] = mapped

    def _vmapped(self, func: cst.BaseExpression) -> Optional[str]:
        """The function of the file (or nested in this one) that
        ``torch.vmap(f, ...)`` maps, through nested maps
        (``vmap(vmap(f, 0), 1)``) and names bound to a map; None for
        anything else."""
        if isinstance(func, cst.Name) and func.value in self.mapped:
            return self.mapped[func.value]
        peeled = False
        while isinstance(func, cst.Call) and func.args and (
            (self.facts.qualify(func.func) or "") in VMAPS
            or isinstance(func.func, cst.Name) and func.func.value in self.vmap_names
        ):
            func, peeled = func.args[0].value, True
        if peeled and isinstance(func, cst.Name) and (func.value in self.local_functions or func.value in self.flows.functions):
            return func.value
        return None

    def _apply_summary(self, fn: cst.FunctionDef, args: List[Tuple[cst.Arg, Value]], module_method: bool,
                       state: Optional[Dict[str, Value]] = None, call: Optional[cst.Call] = None,
                       env: Optional[Env] = None) -> Value:
        args = _spread(args)
        bound = _bind_arguments(fn, args, method=self.flows.owner.get(fn) is not None)
        # what the callee's tests read, defaults left by the call included
        self.result.call_sites.setdefault(fn, []).append({**self._decided_arguments(fn, args, bound), **bound})
        if not self.hinted:
            self._callee = self.flows.base(fn)
            if self._callee.complete:
                self._summarised = call
            return self._translate(self._callee.returns, args, module_method)
        # a CPU-born argument: run the callee with it (one context per call
        # site), so a meeting inside the callee is the caller's finding
        defaults = self.flows.cpu_default_params(fn)
        if defaults:
            # ``def make_mask(n, device="cpu")``: make_mask(n) runs with the
            # CPU default, make_mask(n, x.device) with the device it passes
            starred = any(a.star for a, _ in args)  # f(n, **opts) may pass it
            given = {k: bound[k] if k in bound else LEFT_AT_CPU_DEFAULT for k in defaults if k in bound or not starred}
            if given:
                state = {**(state or {}), **given}
        flow = self._pass_pinned(fn, args, state)
        self._callee = flow if flow is not None else self.flows.function(fn)
        if self._callee.complete:
            self._summarised = call
        out = self._translate(self._callee.returns, args, module_method)
        if call is not None and env is not None:
            out = self._relay(call, fn, self._callee, out, env)
        return out

    def _relay(self, call: cst.Call, fn: cst.FunctionDef, callee: FunctionFlow, out: Value, env: Env) -> Value:
        """``mask = make_mask(x)`` of a function of the file that returns a
        tensor it creates on the CPU: the call is a birth too (where the
        caller can name a device: ``.to(x.device)``), beside the factory in
        the helper. Births the helper only passes through (a CPU tensor its
        caller gave it) stay the caller's own; a helper's own relay (a
        helper calling a helper) gives way to this call. A tuple or list of
        them (``return (torch.zeros(...), torch.zeros(...))``, an LSTM's
        ``(h, c)``): each such element."""
        if out.kind == SEQ and out.exact and out.items:
            items = tuple(self._relay(call, fn, callee, i, env) for i in out.items)
            if items == out.items:
                return out
            self.result.relayed_several.add(call)
            return replace(out, items=items, elem=_seq(items).elem)
        if out.kind != TENSOR or out.device != CPU or not out.born:
            return out
        made = [b for b in out.born if b in callee.origin_names]
        if not made:
            return out
        name = dotted_name(call.func) or fn.name.value
        first = made[0]
        where = fn.name.value if self.flows.owner.get(fn) is None else f"{self.flows.owner[fn]}.{fn.name.value}"
        self._born(call, name, env)
        # where the tensor was made: the innermost helper, when this one relays another's
        made_by = callee.relayed[first] if first in callee.relayed else (where, callee.origin_names[first])
        earlier = self.result.relayed.get(call)
        if earlier is not None and earlier != made_by:
            made_by = (made_by[0], "")  # the elements of a tuple made by different factories: name none
        self.result.relayed[call] = made_by
        if all(b in callee.maybe_scalar for b in made):
            self.result.maybe_scalar.add(call)
        born = frozenset(b for b in out.born if b not in callee.relayed) | {call}
        return replace(out, born=born)

    def _translate(self, ret: Value, args: List[Tuple[cst.Arg, Value]], module_method: bool) -> Value:
        if ret.kind == SEQ:
            items = tuple(self._translate(i, args, module_method) for i in ret.items)
            elem = self._translate(ret.elem, args, module_method) if ret.elem is not None else None
            return Value(SEQ, items=items, elem=elem, exact=ret.exact)
        if ret.kind in (TENSOR, MODULE) and ret.device == LOCAL:
            if module_method or any(v.kind in (TENSOR, DEVICE) and v.device == LOCAL for _, v in args):
                return Value(ret.kind, LOCAL)
            given = [v for _, v in args if v.kind in (TENSOR, DEVICE) or follows(v)]
            if ret.kind == TENSOR and given and all(v.kind == TENSOR and v.device == CPU for v in given):
                # scores(a.cpu(), b.cpu()): a function computing on its
                # arguments, given only CPU tensors, computes on the CPU
                return Value(TENSOR, CPU)
            return Value(ret.kind, ANY)
        return replace(ret, anchor=None)

    def _name_call(self, node: cst.Call, name: str, args: List[Tuple[cst.Arg, Value]], env: Env) -> Value:
        local = self.local_functions.get(name)
        if local is not None and name not in env:
            # the CPU-born (or pinned) tensors its closure reads are handed
            # over like arguments: their meetings in it are this function's
            closure = {k: env[k] for k in self.flows.free_names(local) if k in env and _holds_pinned(env[k])}
            return self._apply_summary(local, args, module_method=False, state=closure or None, call=node, env=env)
        if name == "next" and name not in env:
            batch = self._next_batch(node)
            if batch is not None:
                return batch
        if name in env:
            callee = env[name]
            if callee.kind == OTHER and callee.born and self.cls is None:
                fn = self._instance_method(callee, "__call__")
                if fn is not None:
                    # mixer(images, targets): the plain object's __call__
                    return self._object_method_call(node, fn, callee, args, env)
            if callee.kind == MODULE and self.stages is not None and stage_of(callee.device):
                return self._block_call(node, name, callee, args)
            if callee.kind == MODULE and self.stages is None and callee.born and self.flows.staged_class(callee):
                out = self._staged_model_call(name, callee, args)
                return out if out is not None else UNKNOWN_VALUE
            if callee.kind == MODULE and name in self.element_classes:
                forward = self.flows.method(self.element_classes[name], "forward")
                if forward is not None:
                    return self._file_module_call(forward, args)  # for layer in self.layers: layer(x, edge_index)
            if callee.kind in (MODULE, UNKNOWN, WRAPPER) and is_placed(callee.device):
                return self._model_call(node, name, callee, args)
            if callee.kind == MODULE and callee.device == LOCAL and callee.anchor == name:
                placed = self._placed_ref(name)  # a model argument the callers moved
                if placed is not None:
                    return self._model_call(node, name, placed, args)
                # model(torch.randn(1, *shape)) for a model the caller hands
                # over (``model: nn.Module``; an argument only called, not
                # annotated, may be any callable): its weights are where the
                # caller put it, which a CPU-born input meets
                for a, v in args if callee.declared else ():
                    if a.star or _cpu_by_convention(a):
                        continue
                    for t in _tensors_in(v):
                        if t.pinned and t.device == CPU and not t.scalar:
                            self._meet_all(t, node, "model argument", name, LOCAL, a.value)
            if callee.kind == MODULE and callee.loss and self._script_stages is not None:
                # a loss given a model-parallel model's output: its inputs meet
                mixed = self._stage_mix(self._stage_args(args), node, loss=True)
                if stage_of(mixed.device):
                    return mixed
            if callee.kind == MODULE and callee.loss and callee.device == CPU and callee.born:
                # a loss built with CPU weights, never moved, given a model's output
                side = next((v.device for _, v in args if v.kind in (TENSOR, UNKNOWN) and is_placed(v.device)), None)
                if side is not None and self._placed_ref(name) is None:
                    self._meet_all(Value(TENSOR, CPU, callee.born), node, LOSS_WEIGHTS, name, side)
                return UNKNOWN_VALUE if side is None else Value(UNKNOWN, side)
            if callee.kind == MODULE and not callee.loss and callee.device == CPU and callee.born:
                # proj = nn.Linear(8, 4); proj(x): its CPU weights meet x, a
                # tensor on the inputs' device (what a layer is given is a
                # tensor: a parameter of unknown kind too)
                inputs = [
                    t for arg, v in args if not _cpu_by_convention(arg)
                    for t in (_tensors_in(v) if v.kind != UNKNOWN or v.device != LOCAL or arg.keyword else [_tensor(LOCAL)])
                    if t.device == LOCAL
                ]
                self._check([Value(TENSOR, CPU, callee.born), *inputs], node, "submodule")
                return UNKNOWN_VALUE
            if callee.kind == MODULE and callee.loss:
                # a loss built here: its inputs meet
                mixed = self._stage_mix(self._stage_args(args), node, loss=True)
                if stage_of(mixed.device):
                    return mixed
            if callee.kind == MODULE:
                # a block of the module's own: its output is a tensor where
                # the block is; a callable argument's, whatever it returns
                return _tensor(callee.device) if not callee.anchor else UNKNOWN_VALUE
            return UNKNOWN_VALUE
        if name in _NUMBER_BUILTINS:
            return NUMBER_VALUE
        if name == "dict" and name not in env and all(a.keyword is not None or a.star == "**" for a, _ in args):
            return _settings([v for _, v in args])  # dict(n_fft=n, window=torch.hann_window(n))
        if name in _OTHER_BUILTINS:
            return OTHER_VALUE
        first = args[0][1] if args else UNKNOWN_VALUE
        if name == "map" and len(args) >= 2 and isinstance(node.args[0].value, cst.Lambda) and name not in env:
            # map(lambda t: torch.ones(t.size()).cuda(), outputs): the body on each element
            lam = node.args[0].value
            inner = dict(env)
            for p, (_, v) in zip(lam.params.params, args[1:]):
                inner[p.name.value] = element_of(v)
            return _seq(elem=self._expr(lam.body, inner), known=False)
        if name in ("list", "tuple", "sorted", "reversed"):
            if first.kind == SEQ:
                return _seq(elem=first.elem, known=False) if name != "tuple" else first
            return _seq(elem=element_of(first), known=False)
        if name == "range":
            return _seq(elem=NUMBER_VALUE, known=False)
        if name == "enumerate":
            return _seq(elem=_seq([NUMBER_VALUE, element_of(first)]), known=False)
        if name == "zip":
            return _seq(elem=_seq([element_of(v) for _, v in args]), known=False)
        if name in ("max", "min", "sum", "abs"):
            if len(args) == 1 and first.kind == SEQ:
                return element_of(first)
            out: Optional[Value] = None
            for _, v in args:
                out = join(out, v)
            return out if out is not None else UNKNOWN_VALUE
        if name == "next" and args:
            return element_of(first)
        if name in ("getattr", "iter"):
            return first if name == "iter" else UNKNOWN_VALUE
        if name == "setattr" and len(args) == 3 and self.self_name and isinstance(args[0][0].value, cst.Name) \
                and args[0][0].value.value == self.self_name:
            attr = string_value(args[1][0].value)
            if attr is not None and attr.isidentifier():
                # setattr(self, "grid", g): self.grid = g
                self._bind(cst.Attribute(value=cst.Name(self.self_name), attr=cst.Name(attr)), args[2][1], env)
            return NONE_VALUE
        fn = self.flows.functions.get(name)
        if fn is not None and (fn is not self.node or self.overrides and any(_holds_pinned(v) for _, v in args)):
            # (a recursive call, ``tuple(repackage_hidden(v) for v in h)``, is
            # followed for the CPU-born tensors it hands on, depth-bounded)
            return self._apply_summary(fn, args, module_method=False, call=node, env=env)
        if self.facts.builds_weights(node.func):
            # net = Scorer(net="alex") in code that runs on the inputs: a
            # module of the file with weights, made on the CPU as a torch.nn
            # layer is (see _module_built)
            return self._module_built(node, name, env)
        if name not in self.flows.functions and name not in self.facts.classes and name not in self.facts.imports:
            placed = self._placed_ref(name)  # a model the module (or an enclosing function) moved
            if placed is not None:
                return self._model_call(node, name, placed, args)
        cls = self.facts.classes.get(name)
        if cls is not None and not cls.is_module and self.flows.scripts and self.cls is None and name in self.flows.methods:
            # trainer = Trainer(model, device) in a script: an instance of a
            # plain class of the file, whose methods the script calls
            self._object_state(node, name, args)
            return Value(OTHER, born=frozenset({node}))
        return UNKNOWN_VALUE


_MAX_DEPTH = 3


#: tensor methods whose result may be somewhere else than their receiver
_MOVING_METHODS = frozenset({"to", "cuda", "cpu", "type", "type_as", "pin_memory", "numpy", "tolist", "item"})


def _keyword_value(args: List[Tuple[cst.Arg, Value]], name: str) -> Value:
    return next((v for a, v in args if a.keyword is not None and a.keyword.value == name), UNKNOWN_VALUE)


def _cpu_generator(v: Value) -> bool:
    """``torch.Generator()`` (or one given ``device="cpu"``)."""
    return v.kind == OTHER and v.device == CPU


def _device_root(node: cst.CSTNode, skip: Collection[str] = (), through_items: bool = True) -> Optional[str]:
    """The name whose ``.device`` is ``node``'s, where ``node`` is a tensor
    of a stage the flow found: ``logits`` for ``logits``,
    ``logits.view(-1, n)``, ``logits[:, -1]``, ``(h * m).sum(1)`` (an
    operation is on its first operand's stage); None for a name in ``skip``
    (``self``, an imported module: ``torch.cat(...)`` is no method of a tensor)."""
    while True:
        if isinstance(node, cst.Name):
            return node.value if node.value not in skip else None
        if isinstance(node, cst.Subscript) and through_items:
            node = node.value
        elif isinstance(node, cst.BinaryOperation):
            node = node.left
        elif (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
              and node.func.attr.value not in _MOVING_METHODS):
            node = node.func.value
        else:
            return None


def _named_device(s: str) -> str:
    """``"cpu"`` -> CPU, ``"cuda"`` -> CURRENT, ``"cuda:1"`` -> FIXED."""
    if s.startswith("cpu"):
        return CPU
    if s == "cuda":
        return CURRENT
    if s.startswith("cuda:"):
        return FIXED
    return ANY


def _is_device_string(s: str) -> bool:
    return s in ("cpu", "cuda") or s.startswith("cuda:") and s[5:].isdigit()


def _index_device(v: Value) -> str:
    """The device a value used as a CUDA index names: ``x.get_device()``
    names x's (``LOCAL``), an index fixed when the module was built
    (``self.gpu``) or a literal names a ``FIXED`` one."""
    if v.kind in (NUMBER, UNKNOWN, DEVICE) and v.device in (LOCAL, FIXED):
        return v.device
    return ANY



def _moved_root(expr: cst.BaseExpression) -> Tuple[Optional[str], bool]:
    """For a chain of method calls on a name (``teacher.to(device).eval()``):
    the name, and whether a call of the chain moves it."""
    moves = False
    node = expr
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        moves = moves or node.func.attr.value in ("to", "cuda", "cpu")
        node = node.func.value
    return (node.value if isinstance(node, cst.Name) else None), moves


def _name_nodes(target: cst.CSTNode) -> List[cst.Name]:
    """The names a target binds, in order."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _name_nodes(e.value)]
    if isinstance(target, cst.StarredElement):
        return _name_nodes(target.value)
    return []


def _ref(node: cst.CSTNode, self_name: str) -> Optional[str]:
    """``model`` for a name, ``self.model`` for an attribute of self (spelt
    ``self.`` whatever the method calls it), as the script facts name them."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and self_name and node.value.value == self_name:
        return f"self.{node.attr.value}"
    return None


#: calls whose result is the model they are given, where it is (a copy, a
#: compiled module sharing its parameters)
_MODEL_COPIES = frozenset({"copy.deepcopy", "torch.compile"})

#: calls that show or collect values without combining them
_SHOWING_CALLS = frozenset({"print", "len", "str", "repr", "format", "isinstance", "id", "type", "zip", "list", "tuple"})
_SHOWING_METHODS = frozenset(
    {"append", "extend", "insert", "info", "debug", "warning", "warn", "error", "write", "set_postfix", "set_description", "format"}
)


def _only_shows(call: cst.Call) -> bool:
    """``print(y, out.shape)``, ``log.info("%s", out, y)``, ``rows.append(...)``."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in _SHOWING_CALLS
    return isinstance(func, cst.Attribute) and func.attr.value in _SHOWING_METHODS


#: words in a helper's name or arguments that say it moves a batch
_MOVING_WORDS = ("device", "cuda", "gpu", "move", "to_", "transfer")


def _device_argument(arg: cst.Arg) -> str:
    """The text of an argument that may hand a device to a helper: its
    keyword, a name or attribute (``device``, ``args.gpu``), a string, or a
    ``torch.device(...)`` call; "" for other expressions."""
    value = arg.value
    words = [arg.keyword.value] if arg.keyword is not None else []
    dotted = dotted_name(value)
    if dotted is not None or isinstance(value, cst.SimpleString):
        words.append(code_of(value))
    elif isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("device"):
        words.append(code_of(value))
    return " ".join(words)


def _is_field(attr: str) -> bool:
    """A tensor field of a batch object, not a count (``num_graphs``, ``batch_size``)."""
    return attr not in ("shape", "device", "dtype", "ndim", "to", "keys", "items", "values", "get") and not attr.startswith(
        ("num_", "n_")
    ) and not attr.endswith(("_size", "_count"))


def _constant_key(node: cst.Subscript) -> str:
    """``"key"`` for ``batch["x"]``, ``"index"`` for ``batch[0]``, else ""."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return ""
    value = node.slice[0].slice.value
    if isinstance(value, cst.SimpleString):
        return "key"
    if isinstance(value, cst.Integer) or (
        isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) and isinstance(value.expression, cst.Integer)
    ):
        return "index"
    return ""


def _has_zero_size(call: cst.Call, name: str = "") -> bool:
    """``torch.empty(0)``, ``torch.zeros((b, 0))``: a size with a zero
    dimension (for ``torch.full(size, fill_value)`` only the size counts:
    ``torch.full((b, 1), 0)`` holds zeros)."""
    positional = [a for a in call.args if a.keyword is None]
    for a in positional[:1] if name == "full" else positional:
        if a.star:
            continue
        v = a.value
        dims = [e.value for e in v.elements] if isinstance(v, (cst.List, cst.Tuple)) else [v]
        if any(isinstance(d, cst.Integer) and d.value == "0" for d in dims):
            return True
    return False


#: argument names PyTorch code keeps on the CPU on purpose: sequence lengths
#: (``pack_padded_sequence`` takes them on the CPU only)
_CPU_ARGUMENT_SUFFIXES = ("lengths", "lens", "length")


def _cpu_by_convention(arg: cst.Arg) -> bool:
    name = arg.keyword.value if arg.keyword is not None else (arg.value.value if isinstance(arg.value, cst.Name) else "")
    return name.lower().endswith(_CPU_ARGUMENT_SUFFIXES)


def _spread(args: List[Tuple[cst.Arg, Value]]) -> List[Tuple[cst.Arg, Value]]:
    """``rotate(*angles, x)`` of a sequence whose elements are known (``angles
    = rand_angles()`` returning ``alpha, beta``): its elements as positional
    arguments, each under an ``Arg`` of the starred expression (what a
    finding points at); any other ``*args``/``**kw`` stays as it is."""
    if not any(a.star == "*" for a, _ in args):
        return args
    out: List[Tuple[cst.Arg, Value]] = []
    for a, v in args:
        if a.star == "*" and v.kind == SEQ and v.exact and v.items:
            out.extend((cst.Arg(value=a.value), item) for item in v.items)
        else:
            out.append((a, v))
    return out


def _bind_arguments(fn: cst.FunctionDef, args: List[Tuple[cst.Arg, Value]], method: bool) -> Dict[str, Value]:
    """Parameter name -> the value a call passes to it (positional and
    keyword arguments; ``*args``/``**kw`` are not followed)."""
    bound = bound_parameters(fn, [a for a, _ in args], method)
    return {name: args[pos][1] for name, pos in bound.items()}


def _none_tests(test: cst.BaseExpression) -> Tuple[List[str], List[str]]:
    """Names an ``if`` test shows to be None in its body and in its else
    branch: ``x is None`` / ``x is not None``."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
        c = test.comparisons[0]
        if isinstance(c.comparator, cst.Name) and c.comparator.value == "None":
            if isinstance(c.operator, cst.Is):
                return [test.left.value], []
            if isinstance(c.operator, cst.IsNot):
                return [], [test.left.value]
    return [], []


class _NoneGuards(cst.CSTVisitor):
    """For each node in the body of ``if x is None:`` statements: the names
    those tests show to be None there (by node id)."""

    def __init__(self) -> None:
        self.guards: Dict[int, FrozenSet[str]] = {}
        self._stack: List[FrozenSet[str]] = []

    def visit_If_body(self, node: cst.If) -> None:
        self._stack.append(frozenset(_none_tests(node.test)[0]))

    def leave_If_body(self, node: cst.If) -> None:
        self._stack.pop()

    def on_visit(self, node: cst.CSTNode) -> bool:
        names = frozenset().union(*self._stack) if self._stack else frozenset()
        if names:
            self.guards[id(node)] = names
        return super().on_visit(node)


class _Tests(cst.CSTVisitor):
    """The tests of ``if`` statements and conditional expressions, not
    those of functions and classes defined inside."""

    def __init__(self) -> None:
        self.tests: List[cst.BaseExpression] = []

    def visit_If(self, node: cst.If) -> None:
        self.tests.append(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self.tests.append(node.test)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False


def _if_tests(body: cst.CSTNode) -> List[cst.BaseExpression]:
    """The tests of the ``if`` statements and conditional expressions in
    ``body`` (not those of functions and classes defined in it)."""
    found = _Tests()
    walk(body, found)
    return found.tests


#: module methods that return the module itself (a chain after its constructor)
_MODEL_CHAIN = frozenset({"to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16", "requires_grad_"})

#: keyword names of a loss module's constructor that hold tensors it keeps
#: (a positional first argument is the ``weight`` of the weighted losses)
_LOSS_WEIGHTS = frozenset({"weight", "pos_weight"})


def _decided(test: cst.BaseExpression, env: Env) -> Tuple[bool, bool]:
    """Whether the body, or the else branch, of an ``if`` on ``test`` cannot
    run, because the test reads a name known to hold ``None`` or a false
    value (``x = None`` before it; a parameter a call leaves at its default,
    see :meth:`_Interpreter._decided_arguments`). A name only *maybe* None
    decides nothing."""
    none_then, none_else = _none_tests(test)
    if any(env.get(n, UNKNOWN_VALUE).kind == NONE for n in none_else):
        return True, False  # ``if x is not None:`` with x None
    if any(env.get(n, UNKNOWN_VALUE).kind == NONE for n in none_then):
        return False, True  # ``if x is None:`` with x None: the else branch cannot run
    name, negated = _truth_test(test)
    if name is not None and name in env:
        v = env[name]
        if v.kind == NONE or v.falsy:
            return (False, True) if negated else (True, False)
    return False, False


def _negation(test: cst.BaseExpression) -> Tuple[cst.BaseExpression, bool]:
    """``not <e>`` -> (e, True); any other test -> (test, False)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return test.expression, True
    return test, False


#: what ``isinstance(x, T)`` tests a Python sequence with
_SEQUENCE_TYPES = frozenset({"list", "tuple", "List", "Tuple", "Sequence"})


def _sequence_tests(test: cst.BaseExpression) -> Tuple[List[str], List[str]]:
    """Names an ``if`` test shows to be a Python list or tuple in its body
    and in its else branch: ``isinstance(x, list)``, ``isinstance(x, (list,
    tuple))``, ``not isinstance(x, List)``."""
    found = _isinstance_test(test)
    if found is None or not all((dotted_name(t) or "").rsplit(".", 1)[-1] in _SEQUENCE_TYPES for t in found[1]):
        return [], []
    subject, _, negated = found
    return ([], [subject]) if negated else ([subject], [])


def _isinstance_test(test: cst.BaseExpression) -> Optional[Tuple[str, List[cst.BaseExpression], bool]]:
    """``isinstance(x, T)`` / ``isinstance(x, (T, U))`` / ``not isinstance(...)``
    of a plain name: (the name, the type expressions, whether negated);
    None for any other test."""
    inner, negated = _negation(test)
    if not (isinstance(inner, cst.Call) and dotted_name(inner.func) == "isinstance" and len(inner.args) == 2):
        return None
    subject, kinds = inner.args[0].value, inner.args[1].value
    types = [e.value for e in kinds.elements] if isinstance(kinds, (cst.Tuple, cst.List)) else [kinds]
    if not isinstance(subject, cst.Name) or not types:
        return None
    return subject.value, types, negated


def _truth_test(test: cst.BaseExpression) -> Tuple[Optional[str], bool]:
    """The name an ``if`` tests for truth (``if flag``, ``if not flag``),
    and whether the test negates it."""
    inner, negated = _negation(test)
    return (inner.value if isinstance(inner, cst.Name) else None), negated


class _ModuleBindings(AssignedNames):
    """How often the module's own statements bind each name (assignments,
    loop and ``with`` targets, imports, ``def`` and ``class``), and the
    names a function declares ``global`` (which it may rebind)."""

    def __init__(self) -> None:
        super().__init__()
        self.count: Dict[str, int] = {}
        self.declared: Set[str] = set()
        self._depth = 0

    def _add(self, target: cst.BaseExpression) -> None:
        self._bind(target)

    def _bind(self, target: Optional[cst.CSTNode]) -> None:
        if self._depth or target is None:
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._bind(el.value)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value)
        elif isinstance(target, cst.Name):
            self.count[target.value] = self.count.get(target.value, 0) + 1

    def _enter(self, node: Union[cst.FunctionDef, cst.ClassDef]) -> bool:
        self._bind(node.name)
        self._depth += 1
        return True

    def _leave(self, node: cst.CSTNode) -> None:
        self._depth -= 1

    visit_FunctionDef = visit_ClassDef = _enter  # type: ignore[assignment]
    leave_FunctionDef = leave_ClassDef = _leave  # type: ignore[assignment]

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self._depth += 1
        return True

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self._depth -= 1

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        return False  # its target is the comprehension's own

    def visit_Global(self, node: cst.Global) -> None:
        self.declared.update(n.name.value for n in node.names)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind(node.name)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        if node.asname is None:
            self._bind(cst.Name(dotted_name(node.name).split(".")[0]) if dotted_name(node.name) else None)


def _targets(node: cst.BaseExpression) -> List[cst.BaseExpression]:
    if isinstance(node, (cst.Tuple, cst.List)):
        return [e.value for e in node.elements]
    return [node]


def _join_envs(a: Optional[Env], b: Optional[Env], entry: Optional[Callable[[str], Optional[Value]]] = None) -> Optional[Env]:
    """Two paths' bindings joined. A name bound on one path only keeps that
    binding, unless ``entry`` knows what it held before either path (the
    attribute ``self.table`` a branch reassigns: on the other path it is
    still what it was when the method began)."""
    if a is None:
        return b
    if b is None:
        return a
    out: Env = {}
    for k in a.keys() | b.keys():
        va, vb = a.get(k), b.get(k)
        if (va is None) != (vb is None) and entry is not None:
            # (a value the branch pinned to a device itself is kept: it is
            # what that path puts there, and the join of two pinned
            # tensors would keep neither birth; but a CPU tensor the branch
            # made and the plain attribute's own, on the CPU too, keep both)
            mine: Value = va or vb  # type: ignore[assignment]
            before = entry(k) if not mine.pinned or mine.device == CPU else None
            if before is not None and (not mine.pinned or (before.pinned and before.device == HELD)):
                va, vb = (before, vb) if va is None else (va, before)
        out[k] = join(va, vb) if va is not None and vb is not None else (va if va is not None else vb)  # type: ignore[assignment]
    # keep parameters first (anchors are chosen in insertion order)
    ordered: Env = {k: out[k] for k in a if k in out}
    ordered.update((k, v) for k, v in out.items() if k not in ordered)
    return ordered


class Flow(Provider):
    """:class:`DeviceFlow`, whose functions are analysed on first question."""

    requires = (Classes, Training)

    @classmethod
    def build(cls, store: FactStore) -> DeviceFlow:
        return DeviceFlow(store[Classes], store.module, store)
