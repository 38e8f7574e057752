"""What the code of a ``ddp`` case meets inside one rank (docs/harness.md,
"The ddp placement"). Runs only in a rank process (``devlint.harness.ddp``);
imports torch.

Real on every path: the processes, the environment torchrun gives them, the
TCPStore rendezvous on ``MASTER_ADDR:MASTER_PORT`` and the gloo process
group the code's ``init_process_group`` creates (every stage of a case gets
a fresh group over a prefix of that store; the ``init_method`` the code
names is not used).

On the simulated path (fake ``cuda:0..N-1`` in every rank, the CPU build's
case) the code still asks for NCCL, which does not exist here, so:

* ``init_process_group("nccl")`` creates a gloo group and remembers which
  backend each device type would have on a GPU machine
  (:func:`gpu_machine_backends`): the checks NCCL makes (no backend for CPU
  tensors in an NCCL-only group, one GPU per rank) are made by
  :func:`_nccl_checks`;
* ``DistributedDataParallel`` is :class:`SimulatedDistributedDataParallel`,
  whose constructor makes the checks of PyTorch's (``distributed.py``) with
  their messages, then runs its collectives for real over gloo on CPU twins
  of the parameters (the shape check across ranks, the broadcast from rank
  0); its ``forward`` moves the inputs to ``device_ids[0]`` as the real
  ``_pre_forward`` does;
* there is no autograd on fake CUDA tensors: the case runs under
  ``torch.no_grad()`` and ``backward()`` only makes the check the reducer
  makes when the gradients arrive (every parameter still on the device its
  bucket was built on);
* collectives the code calls itself run over gloo on CPU twins of its fake
  tensors (values do not exist on this path), ``torch.save`` writes fake
  tensors as zeros tagged with their device and ``torch.load`` puts tensors
  back on the simulated device their storage names (``map_location``
  obeyed).

On the CPU (step 3) the real ``DistributedDataParallel`` runs over gloo;
the CPU stands for every rank's GPU, so the ``device_ids`` and
``output_device`` that name that GPU are dropped before its constructor sees
a CPU module (it refuses them there).
"""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as RealDDP

from devlint.harness import env as E

#: the real functions, before any stage patches them
REAL_INIT = dist.init_process_group
REAL_SAVE = torch.save
REAL_LOAD = torch.load
REAL_ALL_GATHER = dist.all_gather
#: messages of PyTorch's DistributedDataParallel constructor
#: (torch/nn/parallel/distributed.py, DistributedDataParallel.__init__)
NO_GRAD_PARAMETERS = (
    "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient."
)
ONE_DEVICE_ID = "device_ids can only be None or contain a single element."
#: reducer.cpp, Reducer::check_grad_layout: a gradient that arrives on
#: another device than its bucket (a parameter moved after wrapping)
GRAD_DEVICE_ASSERT = (
    'grad.device() == bucket_view.device() INTERNAL ASSERT FAILED at "torch/csrc/distributed/c10d/reducer.cpp":329, '
    "please report a bug to PyTorch. "
)
#: 250 MiB: DDP's broadcast_bucket_size
BROADCAST_BUCKET = 250 * 1024 * 1024
#: the collectives whose tensors a simulated rank sends as CPU twins
COLLECTIVES = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor")


@dataclass
class Rank:
    """One rank of a ``ddp`` case, and what its code did in the current stage."""

    rank: int
    world_size: int
    local_rank: int
    store: Any
    #: NCCL on real GPUs (the real path); else gloo stands in
    nccl: bool = False
    stage: str = "stage"
    #: seconds a collective may wait for another rank (None: PyTorch's default)
    collective_timeout: Optional[float] = None
    inits: int = 0
    #: the backend the code asked ``init_process_group`` for (lower case)
    backend: Optional[str] = None
    #: the DistributedDataParallel wrappers built in this stage, in order
    wrapped: List[nn.Module] = field(default_factory=list)
    #: simulated wrappers whose forward ran since the last backward
    forwarded: List["SimulatedDistributedDataParallel"] = field(default_factory=list)
    #: the simulated GPU an NCCL communicator was created on (its first use)
    nccl_device: Optional[int] = None
    #: the devices the case's outputs must be on (its output_device)
    expected: Optional[List[str]] = None

    #: the wrappers of earlier stages, never freed: freeing a real DDP after
    #: its gloo group was destroyed can deadlock in the reducer's destructor
    #: (seen on 2.13: one rank stuck for good in the next stage's start); a
    #: rank process exits without running destructors (os._exit)
    kept: List[Any] = field(default_factory=list)

    def begin(self, stage: str) -> None:
        self.stage, self.backend, self.backends, self.nccl_device, self.expected = stage, None, None, None, None
        self.kept.append((self.wrapped, self.forwarded))
        self.wrapped, self.forwarded = [], []

    #: device type -> backend, as this PyTorch sets them up on a GPU machine
    #: for what the code asked (None: not initialised)
    backends: Optional[Dict[str, str]] = None

    @property
    def nccl_for_cuda(self) -> bool:
        """CUDA tensors would go through NCCL."""
        return self.backends is not None and self.backends.get("cuda") == "nccl"


def rendezvous_store(rank: int, world_size: int, timeout: float) -> Any:
    """The TCPStore ``env://`` creates from ``MASTER_ADDR``/``MASTER_PORT``
    (rank 0 hosts it)."""
    return dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world_size,
        rank == 0,
        timeout=datetime.timedelta(seconds=timeout),
    )


def gpu_machine_backends(backend: Optional[str]) -> Dict[str, str]:
    """The backend per device type this PyTorch's ``init_process_group(backend)``
    sets up on a machine whose accelerator is CUDA (``BackendConfig``): with
    "nccl", or with no backend on 2.13 (which takes the accelerator's alone),
    CPU tensors have none."""
    c10d = dist.distributed_c10d
    saved = getattr(torch._C, "_get_accelerator", None)
    if saved is not None:
        torch._C._get_accelerator = lambda *a, **k: torch.device("cuda")  # type: ignore[attr-defined]
    try:
        config = c10d.BackendConfig(c10d.Backend(backend or c10d.Backend.UNDEFINED))
        return {k: str(v) for k, v in config.get_device_backend_map().items()}
    except Exception:  # a backend this PyTorch does not know: it refuses it at init
        return {"cpu": str(backend), "cuda": str(backend)}
    finally:
        if saved is not None:
            torch._C._get_accelerator = saved  # type: ignore[attr-defined]


def destroy_group() -> None:
    """The stage is over: its default group goes (whatever the code left)."""
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # a group broken by a failed rank: nothing left to free
        pass


# --------------------------------------------------------------------------
# init_process_group


def _init_process_group(ctx: Rank) -> Callable[..., None]:
    def init_process_group(backend: Any = None, init_method: Any = None, timeout: Any = None, world_size: int = -1,
                           rank: int = -1, store: Any = None, group_name: str = "", pg_options: Any = None,
                           device_id: Any = None, **kwargs: Any) -> None:
        ctx.inits += 1
        ctx.backend = None if backend is None else str(backend).lower()
        ctx.backends = gpu_machine_backends(ctx.backend)
        if timeout is None and ctx.collective_timeout:
            timeout = datetime.timedelta(seconds=ctx.collective_timeout)
        options: Dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
        if ctx.nccl:
            options.update(pg_options=pg_options, device_id=device_id)
        REAL_INIT(
            backend if ctx.nccl else "gloo",
            store=dist.PrefixStore(f"devlint/{ctx.stage}/{ctx.inits}/", ctx.store),
            rank=ctx.rank if rank is None or rank < 0 else rank,
            world_size=ctx.world_size if world_size is None or world_size < 0 else world_size,
            group_name=group_name,
            **options,
        )

    return init_process_group


# --------------------------------------------------------------------------
# the simulated path: NCCL's checks, collectives on CPU twins


def _cpu_twin(t: torch.Tensor, env: E.Environment) -> torch.Tensor:
    """What a simulated rank sends: zeros of a fake tensor's shape (it has no
    values), a real tensor itself."""
    if env.is_fake(t):
        with E._no_mode():
            return torch.zeros(tuple(t.shape), dtype=t.dtype)
    return t.detach() if t.requires_grad else t


def _nccl_checks(ctx: Rank, tensors: Sequence[torch.Tensor]) -> None:
    """The checks NCCL makes that gloo does not: a CPU tensor in an
    NCCL-only group has no backend, and two ranks may not share a GPU (its
    communicator is created on the device of the first collective's tensors)."""
    if ctx.nccl or ctx.backends is None:
        return
    for t in tensors:
        if t.device.type not in ctx.backends:
            raise RuntimeError(f"No backend type associated with device type {t.device.type}")
    cuda = [t.device for t in tensors if t.device.type == "cuda"]
    if not cuda or not ctx.nccl_for_cuda or ctx.nccl_device is not None:
        return
    ctx.nccl_device = cuda[0].index or 0
    with E._no_mode():  # (all_gather_object would need numpy)
        gathered = [torch.zeros(1, dtype=torch.long) for _ in range(ctx.world_size)]
        REAL_ALL_GATHER(gathered, torch.tensor([ctx.nccl_device]))
        seen = [int(t.item()) for t in gathered]
    for other, device in enumerate(seen):
        if other != ctx.rank and device == ctx.nccl_device:
            error = getattr(dist, "DistBackendError", RuntimeError)
            raise error(
                "NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details), ncclInvalidUsage: This usually "
                "reflects invalid usage of NCCL library. Last error: Duplicate GPU detected : "
                f"rank {ctx.rank} and rank {other} both on CUDA device {ctx.nccl_device}"
            )


def _flat(obj: Any, out: List[torch.Tensor]) -> List[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _flat(v, out)
    return out


def _collective(ctx: Rank, env: E.Environment, real: Callable[..., Any]) -> Callable[..., Any]:
    """``real`` (``dist.all_reduce``...) with the NCCL checks, over gloo on
    CPU twins of the fake tensors; the fake tensors keep their (absent)
    values."""

    def twin(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return _cpu_twin(obj, env)
        if isinstance(obj, list) and obj and all(isinstance(v, torch.Tensor) for v in obj):
            return [_cpu_twin(v, env) for v in obj]
        return obj

    def collective(*args: Any, **kwargs: Any) -> Any:
        _nccl_checks(ctx, _flat(list(args) + list(kwargs.values()), []))
        with E._no_mode():
            return real(*[twin(a) for a in args], **{k: twin(v) for k, v in kwargs.items()})

    collective.__name__ = getattr(real, "__name__", "collective")
    collective.__doc__ = real.__doc__
    return collective


# --------------------------------------------------------------------------
# DistributedDataParallel


class SimulatedDistributedDataParallel(RealDDP):
    """``DistributedDataParallel`` on a rank whose GPU is simulated. The
    constructor makes the real one's checks, in its order and with its
    messages, then its two collectives over gloo on CPU twins; ``forward``
    moves the inputs as the real ``_pre_forward`` does and calls the module.
    A subclass of the real class, so ``isinstance`` and the methods that only
    read attributes (``no_sync``, ``train``, ``state_dict``) are PyTorch's."""

    _devlint_rank: Optional[Rank] = None
    _devlint_env: Optional[E.Environment] = None

    def __init__(self, module: nn.Module, device_ids: Any = None, output_device: Any = None, dim: int = 0,
                 broadcast_buffers: Any = None, init_sync: bool = True, process_group: Any = None,
                 bucket_cap_mb: Any = None, find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False, **kwargs: Any) -> None:
        from torch._utils import _get_device_index
        from torch.distributed.algorithms.join import Joinable

        ctx, env = self._devlint_rank, self._devlint_env
        assert ctx is not None and env is not None
        nn.Module.__init__(self)
        Joinable.__init__(self)
        self.logger = None
        self._use_python_reducer = False
        self._delay_all_reduce_params: list = []
        self._delay_all_reduce_all_params = False
        self.process_group = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
        self.parameters_to_ignore = set(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        self._module_parameters = [p for n, p in module.named_parameters() if n not in self.parameters_to_ignore]
        if not any(p.requires_grad for p in self._module_parameters):
            raise RuntimeError(NO_GRAD_PARAMETERS)
        if device_ids is not None and len(device_ids) > 1:
            raise ValueError(ONE_DEVICE_ID)
        self.is_multi_device_module = len({p.device for p in self._module_parameters}) > 1
        types = {p.device.type for p in self._module_parameters if p.device is not None}
        if len(types) != 1:
            raise ValueError(
                "DistributedDataParallel's input module must be on "
                f"the same type of devices, but input module parameters locate in {types}."
            )
        self.device_type = next(iter(types))
        if device_ids is None or len(device_ids) == 0 or self.device_type == "cpu" or self.is_multi_device_module:
            if device_ids or output_device:
                devices = {p.device for p in self._module_parameters}
                raise ValueError(
                    "DistributedDataParallel device_ids and output_device arguments "
                    "only work with single-device/multiple-device GPU modules or CPU modules, "
                    f"but got device_ids {device_ids}, output_device {output_device}, "
                    f"and module parameters {devices}."
                )
            self.device_ids = None
            self.output_device = None
        else:
            self.device_ids = [_get_device_index(x, True) for x in device_ids]
            self.output_device = _get_device_index(device_ids[0] if output_device is None else output_device, True)
        self.static_graph = False
        self.dim = dim
        self.module = module
        self.device = next(iter(self._module_parameters)).device
        self.broadcast_buffers = True if broadcast_buffers is None else bool(broadcast_buffers)
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.mixed_precision = None
        for p in self._module_parameters:
            if isinstance(p, nn.parameter.UninitializedParameter):
                raise RuntimeError(
                    "Modules with uninitialized parameters can't be used with `DistributedDataParallel`. "
                    "Run a dummy forward pass to correctly initialize the modules"
                )
        # the parameters the reducer manages, each with the device its
        # bucket is allocated on (_build_params_for_reducer)
        self._devlint_buckets = [
            (m, name, p.device)
            for m in module.modules()
            for name, p in m._parameters.items()
            if p is not None and p.requires_grad
        ]
        if init_sync:
            self._sync(env, ctx)
        ctx.wrapped.append(self)

    def _sync(self, env: E.Environment, ctx: Rank) -> None:
        """``_verify_param_shape_across_processes`` and ``_sync_module_states``
        for real, over gloo, on CPU twins (NCCL's checks first)."""
        seen: set = set()
        parameters = []
        for m in self.module.modules():
            for name, p in m._parameters.items():
                if p is not None and p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    parameters.append(p)
        states = [p for n, p in self.module.named_parameters() if n not in self.parameters_to_ignore]
        if self.broadcast_buffers:
            states += [b for n, b in self.module.named_buffers() if n not in self.parameters_to_ignore]
        _nccl_checks(ctx, parameters)
        with E._no_mode():
            dist._verify_params_across_processes(self.process_group, [_cpu_twin(p, env) for p in parameters], None)
            twins = [_cpu_twin(t, env) for t in states]
            if twins:
                dist._broadcast_coalesced(self.process_group, twins, BROADCAST_BUCKET, 0)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        from torch.distributed.utils import _to_kwargs

        ctx = self._devlint_rank
        if ctx is not None and self not in ctx.forwarded:
            ctx.forwarded.append(self)
        if self.device_ids:
            moved, moved_kwargs = _to_kwargs(inputs, kwargs, torch.device(self.device_type, self.device_ids[0]), False)
            inputs, kwargs = moved[0], moved_kwargs[0]
        return self.module(*inputs, **kwargs)

    def register_comm_hook(self, state: object, hook: Callable) -> None:
        """A communication hook runs on gradients, which this path does not compute."""
        self._check_comm_hook(hook)


def _reducer_check(ctx: Rank) -> None:
    """``backward()`` on the simulated path: no gradient is computed, but the
    reducer of each wrapper whose forward ran would receive one per
    parameter, on the parameter's device, and its bucket lives where the
    parameter was when the wrapper was built."""
    for wrapper in ctx.forwarded:
        if not wrapper.require_backward_grad_sync:
            continue
        for m, name, device in wrapper._devlint_buckets:
            p = m._parameters.get(name)
            if p is not None and p.device != device:
                raise RuntimeError(GRAD_DEVICE_ASSERT)
    ctx.forwarded.clear()


class CpuStandInDistributedDataParallel(RealDDP):
    """The real ``DistributedDataParallel`` for step 3, where the CPU stands
    for each rank's GPU: ``device_ids``/``output_device`` name that GPU, and
    the real constructor refuses them for a CPU module."""

    _devlint_rank: Optional[Rank] = None

    def __init__(self, module: nn.Module, device_ids: Any = None, output_device: Any = None, *args: Any, **kwargs: Any) -> None:
        if all(p.device.type == "cpu" for p in module.parameters()):
            device_ids = output_device = None
        super().__init__(module, device_ids, output_device, *args, **kwargs)
        if self._devlint_rank is not None:
            self._devlint_rank.wrapped.append(self)


class RecordedDistributedDataParallel(RealDDP):
    """The real ``DistributedDataParallel`` (real GPUs), noting each wrapper."""

    _devlint_rank: Optional[Rank] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._devlint_rank is not None:
            self._devlint_rank.wrapped.append(self)


# --------------------------------------------------------------------------
# checkpoints on the simulated path


def _map(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        out = type(obj)() if type(obj) is not dict else {}
        try:
            for k, v in obj.items():
                out[k] = _map(v, fn)
        except TypeError:
            return {k: _map(v, fn) for k, v in obj.items()}
        if hasattr(obj, "_metadata"):
            out._metadata = obj._metadata  # type: ignore[attr-defined]
        return out
    if isinstance(obj, list):
        return [_map(v, fn) for v in obj]
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map(v, fn) for v in obj))
    if isinstance(obj, tuple):
        return tuple(_map(v, fn) for v in obj)
    return obj


def _simulated_save(env: E.Environment) -> Callable[..., None]:
    """``torch.save`` of fake tensors: zeros of their shape, each storage
    tagged with the (simulated) device the tensor was on, as a GPU run's
    checkpoint is."""
    from devlint.harness.worker import save_tagged

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        tags: Dict[int, str] = {}

        def twin(t: torch.Tensor) -> torch.Tensor:
            if not env.is_fake(t):
                return t
            z = _cpu_twin(t, env)
            tags[z.untyped_storage().data_ptr()] = str(t.device)
            return z

        save_tagged(_map(obj, twin), f, torch, by_pointer=tags,
                    save=lambda o, p: REAL_SAVE(o, p, *args, **kwargs))

    return save


def _where(map_location: Any, saved: str, env: E.Environment) -> torch.device:
    """Where ``torch.load`` puts a storage saved on ``saved``."""
    target: Any = saved
    if isinstance(map_location, dict):
        target = map_location.get(saved, saved)
    elif isinstance(map_location, (str, torch.device)):
        target = map_location
    device = torch.device(target) if not isinstance(target, torch.device) else target
    return env.resolve(device) or device


def _simulated_load(env: E.Environment) -> Callable[..., Any]:
    """``torch.load`` on the simulated path: storages are read on the CPU,
    then each tensor goes where PyTorch would put it (``map_location``, or
    the device its storage was saved from), a fake tensor when that is a
    simulated GPU. A callable ``map_location`` is PyTorch's business."""

    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        if callable(map_location):
            return REAL_LOAD(f, map_location, *args, **kwargs)
        saved: Dict[int, str] = {}

        def keep(storage: Any, location: str) -> Any:
            saved[storage.data_ptr()] = location
            return storage

        obj = REAL_LOAD(f, keep, *args, **kwargs)

        def place(t: torch.Tensor) -> torch.Tensor:
            location = saved.get(t.untyped_storage().data_ptr(), "cpu")
            device = _where(map_location, location, env)
            return env.move(t, device) if device.type == "cuda" else t

        return _map(obj, place)

    return load


def _resolving_load(env: E.Environment) -> Callable[..., Any]:
    """``torch.load`` where the code's ``map_location`` names a CUDA device:
    that device as the plan maps it (step 3: the CPU)."""

    def resolve(where: Any) -> Any:
        if isinstance(where, (str, torch.device)):
            device = torch.device(where) if isinstance(where, str) else where
            return env.resolve(device) or where
        return where

    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(map_location, dict):
            map_location = {k: str(resolve(v)) for k, v in map_location.items()}
        elif not callable(map_location):
            map_location = resolve(map_location)
        return REAL_LOAD(f, map_location, *args, **kwargs)

    return load


# --------------------------------------------------------------------------


@contextlib.contextmanager
def rank_environment(ctx: Rank, env: E.Environment) -> Iterator[Rank]:
    """Inside ``env.environment``: the rank's process group, its
    DistributedDataParallel and (simulated path) collectives, checkpoints
    and backward, for the duration of one stage."""
    saved: List[tuple] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    init = _init_process_group(ctx)
    patch(dist, "init_process_group", init)
    patch(dist.distributed_c10d, "init_process_group", init)
    if env.simulated:
        wrapper: type = type("DistributedDataParallel", (SimulatedDistributedDataParallel,),
                             {"_devlint_rank": ctx, "_devlint_env": env, "__module__": SimulatedDistributedDataParallel.__module__})
        for name in COLLECTIVES:
            if hasattr(dist, name):
                patch(dist, name, _collective(ctx, env, getattr(dist, name)))
        patch(torch, "save", _simulated_save(env))
        patch(torch, "load", _simulated_load(env))

        def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> None:
            _reducer_check(ctx)

        patch(torch.Tensor, "backward", backward)
        patch(torch.autograd, "backward", lambda tensors, *a, **k: _reducer_check(ctx))
    elif ctx.nccl:
        wrapper = type("DistributedDataParallel", (RecordedDistributedDataParallel,), {"_devlint_rank": ctx})
    else:
        wrapper = type("DistributedDataParallel", (CpuStandInDistributedDataParallel,), {"_devlint_rank": ctx})
        patch(torch, "load", _resolving_load(env))
    # Every DistributedDataParallel(...) builds the stage's wrapper, however
    # the code reached the class: `from torch.nn.parallel import
    # DistributedDataParallel as DDP` in a module imported before the stage
    # (by the worker, by another stage) binds the real class itself
    own_new = RealDDP.__dict__.get("__new__")  # PyTorch's defines none (object's)
    RealDDP.__new__ = staticmethod(lambda cls, *a, **k: object.__new__(wrapper if cls is RealDDP else cls))  # type: ignore[assignment]
    try:
        yield ctx
    finally:
        if own_new is None:
            del RealDDP.__new__  # back to object.__new__ (setting it would refuse arguments)
        else:
            RealDDP.__new__ = own_new  # type: ignore[assignment]
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)
