"""The devices a case runs on, and the context that makes user code see them.

Runs only in the harness's child process (this module imports torch). Three
device paths:

* ``real`` with two or more CUDA GPUs: ``cuda:0..N-1`` as they are, the real
  ``nn.DataParallel``;
* ``real`` with one GPU: ``cuda:0`` paired with the CPU as the second device
  (named ``cuda:1`` in user code is mapped onto the CPU);
* ``simulated``: ``cuda:0..N-1`` are PyTorch fake tensors
  (``torch._subclasses.fake_tensor.FakeTensorMode``), which carry device and
  shape but no data and raise PyTorch's own device-mismatch errors.

On the CPU-only and one-GPU paths DataParallel is emulated by
:class:`EmulatedDataParallel`, which keeps the real ``DataParallel.forward``
(its device check and message) and mirrors ``scatter``, ``replicate``
(through ``Module._replicate_for_data_parallel``, so parameters become plain
attributes and ``parameters()`` is empty inside a replica) and ``gather``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

SIMULATED, REAL = "simulated", "real"


@dataclass
class DevicePlan:
    """Where logical CUDA device ``i`` (as user code names it) really lives."""

    kind: str  # SIMULATED or REAL
    targets: List[torch.device]
    label: str
    #: the real nn.DataParallel can run (two or more real GPUs)
    real_data_parallel: bool = False

    @property
    def count(self) -> int:
        return len(self.targets)


def real_gpu_count() -> int:
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken driver is "no GPU" for the harness
        return 0


def make_plan(devices: int, simulate: bool) -> DevicePlan:
    """The device path for a case that wants ``devices`` CUDA devices."""
    devices = max(1, int(devices))
    gpus = 0 if simulate else real_gpu_count()
    if gpus >= 2:
        n = min(devices, gpus)
        names = {torch.cuda.get_device_name(i) for i in range(n)}
        name = names.pop() if len(names) == 1 else " / ".join(sorted(names))
        return DevicePlan(
            REAL,
            [torch.device("cuda", i) for i in range(n)],
            f"real ({n}x {name})",
            real_data_parallel=n == devices,
        )
    if gpus == 1:
        targets = [torch.device("cuda", 0), torch.device("cpu")]
        return DevicePlan(REAL, targets[: max(devices, 1)], "real (cuda:0 + cpu)")
    return DevicePlan(
        SIMULATED,
        [torch.device("cuda", i) for i in range(devices)],
        f"simulated ({devices} fake CUDA device{'s' if devices != 1 else ''})",
    )


CPU_PLAN = DevicePlan(REAL, [torch.device("cpu")], "real (cpu)")


def _as_device(value: Any) -> Optional[torch.device]:
    if isinstance(value, torch.device):
        return value
    if isinstance(value, str):
        try:
            return torch.device(value)
        except RuntimeError:
            return None
    if isinstance(value, int) and not isinstance(value, bool):
        return torch.device("cuda", value)
    return None


def _is_device_like(value: Any) -> bool:
    return isinstance(value, (torch.device, str)) or (isinstance(value, int) and not isinstance(value, bool))


class Environment:
    """The state of one run of user code: the plan, the simulated current
    device, and (simulated path) the fake tensor mode."""

    def __init__(self, plan: DevicePlan, cuda_visible: bool = True, no_grad_only: bool = False) -> None:
        self.plan = plan
        self.cuda_visible = cuda_visible
        #: every line of user code runs under torch.no_grad() (ddp ranks)
        self.no_grad_only = no_grad_only
        self.current = 0
        #: the stream torch.cuda.set_stream made current, per simulated device
        self.streams: Dict[int, Any] = {}
        self.fake_mode = None
        if plan.kind == SIMULATED:
            from torch._subclasses.fake_tensor import FakeTensorMode

            self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True)

    @property
    def simulated(self) -> bool:
        return self.fake_mode is not None

    @property
    def driverless(self) -> bool:
        """User code is told CUDA is there (``is_available()``) but no real
        GPU backs its CUDA devices: the simulated path, and the CPU standing
        for every GPU (a ``ddp`` case's step 3). ``torch.cuda``'s queries of
        the driver are answered by the harness there."""
        return self.simulated or (self.cuda_visible and all(t.type == "cpu" for t in self.plan.targets))

    def target(self, index: int) -> torch.device:
        return self.plan.targets[index % self.plan.count]

    def resolve(self, value: Any) -> Optional[torch.device]:
        """The device a CUDA name in user code maps to; None when ``value``
        names no CUDA device (CPU, meta, a dtype...)."""
        dev = _as_device(value)
        if dev is None or dev.type != "cuda":
            return None
        if not self.cuda_visible:
            return torch.device("cpu")
        if dev.index is None:
            if self.plan.real_data_parallel:  # real DataParallel sets the current device per replica
                return torch.device("cuda", torch.cuda.current_device())
            return self.target(self.current)
        if dev.index >= self.plan.count:
            # what CUDA says of an index past device_count() (a physical GPU
            # id used inside a process that sees fewer GPUs)
            raise RuntimeError(f"CUDA error: invalid device ordinal (cuda:{dev.index} with {self.plan.count} visible devices)")
        return self.target(dev.index)

    # -- tensors -------------------------------------------------------------

    def is_fake(self, t: Any) -> bool:
        if self.fake_mode is None:
            return False
        from torch._subclasses.fake_tensor import FakeTensor

        return isinstance(t, FakeTensor)

    def move(self, t: torch.Tensor, device: torch.device, **kwargs: Any) -> torch.Tensor:
        """``t.to(device)`` where ``device`` is already a target; on the
        simulated path a real tensor bound for a CUDA device becomes fake."""
        with _no_mode():
            if self.simulated and device.type == "cuda" and not self.is_fake(t):
                with torch.no_grad():
                    fake = self.fake_mode.from_tensor(t.detach())  # type: ignore[union-attr]
                    return fake.to(device, **kwargs)
            return t.to(device, **kwargs)

    def place_module(self, module: nn.Module, device: torch.device) -> None:
        """Simulated ``module.to(cuda:i)``: fake parameters and buffers on the
        device (module ``.to`` does not work on fake parameters). Plain tensor
        attributes are left behind, as the real ``.to()`` leaves them."""
        for m in module.modules():
            for key, p in list(m._parameters.items()):
                if p is not None:
                    moved = self.move(p, device)
                    # autograd on fake CUDA tensors aborts a CPU-only build:
                    # a placed parameter requires no gradient unless all the
                    # code runs under no_grad (the ddp placement's ranks),
                    # where the flag the code sets is DDP's to read
                    m._parameters[key] = nn.Parameter(moved, requires_grad=self.no_grad_only and p.requires_grad)
            for key, b in list(m._buffers.items()):
                if b is not None:
                    m._buffers[key] = self.move(b, device)


def _cuda_index(args: tuple, kwargs: dict) -> tuple:
    """``Module.to`` arguments with a bare device index (``model.to(local_rank)``)
    made a CUDA device: PyTorch parses an index as the accelerator's, which a
    CPU-only build does not have."""
    if args and isinstance(args[0], int) and not isinstance(args[0], bool):
        args = (torch.device("cuda", args[0]),) + tuple(args[1:])
    if isinstance(kwargs.get("device"), int) and not isinstance(kwargs["device"], bool):
        kwargs = dict(kwargs, device=torch.device("cuda", kwargs["device"]))
    return args, kwargs


@contextlib.contextmanager
def _no_mode() -> Iterator[None]:
    """Run without our function mode (used from inside patched methods)."""
    global _DEPTH
    _DEPTH += 1
    try:
        yield
    finally:
        _DEPTH -= 1


_DEPTH = 0
_CURRENT: Optional[Environment] = None
#: this process made the CUDA device guard a no-op (see :func:`environment`)
_GUARD_SET = False
#: whether a forked child of this process could not run backward() (None: not asked yet)
_FORK_REFUSED: Optional[bool] = None


def _start_autograd() -> None:
    """A first ``backward()`` in this process, before the CUDA device guard
    becomes a no-op. Autograd's engine counts the devices of every guard
    once, at its first backward, and starts a thread per device beside the
    CPU; a process with such threads marks its forked children, where
    ``backward()`` is then refused ("Unable to handle autograd's threading
    in combination with fork-based multiprocessing"). The no-op guard counts
    one CUDA device; the real one, with no GPU visible, none."""
    with _no_mode(), torch.enable_grad():
        torch.ones(1, requires_grad=True).sum().backward()


def fork_breaks_autograd() -> bool:
    """A process forked from this one could not run ``backward()`` (seen on
    a CUDA build, 2026-12-04, before :func:`_start_autograd`: a ddp case's
    ranks, forked from the worker, failed step 3 at ``loss.backward()``).
    Asked once, by a forked child, and only where the guard was made a
    no-op (a CUDA build's simulated path); a CPU build never sets it."""
    global _FORK_REFUSED
    if not _GUARD_SET:
        return False
    if _FORK_REFUSED is None:
        _FORK_REFUSED = not _backward_survives_fork()
    return _FORK_REFUSED


def _backward_survives_fork() -> bool:
    with _no_mode(), torch.enable_grad():
        torch.ones(1, requires_grad=True).sum().backward()  # the worker's own autograd, as cases use it
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                torch.ones(1, requires_grad=True).sum().backward()
                code = 0
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def current_environment() -> Environment:
    if _CURRENT is None:
        raise RuntimeError("devlint harness: no device environment is active")
    return _CURRENT


class _DeviceMap(TorchFunctionMode):
    """Maps the CUDA devices user code names onto the plan's targets, for
    tensors (``.to``, ``.cuda``) and factories (``device=``)."""

    def __init__(self, env: Environment) -> None:
        super().__init__()
        self.env = env

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: C901
        kwargs = dict(kwargs or {})
        if _DEPTH:
            return func(*args, **kwargs)
        env = self.env
        name = getattr(func, "__name__", "")
        self_tensor = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if name == "cuda" and self_tensor is not None and _is_tensor_method(func):
            dev = args[1] if len(args) > 1 else kwargs.get("device")
            target = env.resolve(torch.device("cuda") if dev is None else dev)
            return torch.Tensor.to(
                self._fake_if_needed(self_tensor, target), target or torch.device("cpu"),
                non_blocking=bool(kwargs.get("non_blocking", False)),
            )
        if name == "pin_memory" and self_tensor is not None and env.driverless and _is_tensor_method(func):
            # page-locked memory is the driver's; without a GPU behind the
            # CUDA devices, a tensor's own memory serves as well
            return self_tensor
        if name in ("__getitem__", "__setitem__") and env.is_fake(self_tensor) and self_tensor.device.type == "cuda":
            return _fake_cuda_indexing(func, name, self_tensor, args[1], args[2:], kwargs)
        if env.simulated:
            _check_simulated_devices(name, self_tensor, args)
            if name == "copy_" and env.is_fake(self_tensor) and len(args) > 1 and isinstance(args[1], torch.Tensor):
                # copy_ takes a source on any device (load_state_dict into a
                # placed model); fake tensors check devices as for other ops
                if args[1].device != self_tensor.device:
                    args = (self_tensor, env.move(args[1], self_tensor.device)) + tuple(args[2:])
        if name == "to" and self_tensor is not None and _is_tensor_method(func):
            args = list(args)
            if len(args) > 1 and _is_device_like(args[1]):
                target = env.resolve(args[1])
                if target is not None:
                    args[1] = target
            elif "device" in kwargs:
                target = env.resolve(kwargs["device"])
                if target is not None:
                    kwargs["device"] = target
            else:
                target = None
            if target is not None:
                args[0] = self._fake_if_needed(self_tensor, target)
            return self._call(func, args, kwargs)
        if env.simulated and name in _CONV_OPS and len(args) > 1:
            _check_conv_devices(args[0], args[1], args[2] if len(args) > 2 else kwargs.get("bias"))
        if "device" in kwargs:
            target = env.resolve(kwargs["device"])
            if target is not None:
                if env.simulated and target.type == "cuda":
                    _check_generator(kwargs.get("generator"), target)
                    kwargs["device"] = torch.device("cpu")
                    out = func(*args, **kwargs)
                    return env.move(out, target) if isinstance(out, torch.Tensor) else out
                kwargs["device"] = target
        return self._call(func, args, kwargs)

    def _call(self, func, args, kwargs):
        try:
            return func(*args, **kwargs)
        except (RuntimeError, NotImplementedError) as exc:
            if not self.env.simulated or not _needs_cpu_twins(exc):
                raise
        return _on_cpu_twins(func, args, kwargs)



    def _fake_if_needed(self, t: torch.Tensor, target: Optional[torch.device]) -> torch.Tensor:
        env = self.env
        if env.simulated and target is not None and target.type == "cuda" and not env.is_fake(t):
            with torch.no_grad():
                return env.fake_mode.from_tensor(t.detach())  # type: ignore[union-attr]
        return t


def _flat_tensors(obj: Any, out: list) -> list:
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _flat_tensors(v, out)
    elif isinstance(obj, dict):
        for v in obj.values():
            _flat_tensors(v, out)
    return out


def _map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_map_tensors(v, fn) for v in obj)
    if isinstance(obj, list):
        return [_map_tensors(v, fn) for v in obj]
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    return obj


_CONV_OPS = frozenset(
    ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution", "_convolution", "conv_tbc"]
)
_LEGACY = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16"}


def _legacy_type(t: torch.Tensor) -> str:
    kind = _LEGACY.get(t.dtype, str(t.dtype).replace("torch.", "").capitalize())
    return f"torch.cuda.{kind}Tensor" if t.device.type == "cuda" else f"torch.{kind}Tensor"


def _check_conv_devices(inp: Any, weight: Any, bias: Any) -> None:
    """Fake tensors propagate devices through convolution without checking
    them; raise what PyTorch's convolution raises."""
    if not (isinstance(inp, torch.Tensor) and isinstance(weight, torch.Tensor)):
        return
    for other, what in ((weight, "weight"), (bias, "bias")):
        if not isinstance(other, torch.Tensor) or other.device == inp.device:
            continue
        if inp.device.type == other.device.type == "cuda":
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, {inp.device} and {other.device}!"
            )
        raise RuntimeError(f"Input type ({_legacy_type(inp)}) and {what} type ({_legacy_type(other)}) should be the same")


class NoFakeKernelError(RuntimeError):
    """An op without a fake-tensor kernel reached PyTorch's fallback, which
    would run it for real on its tensors' devices; a simulated CUDA device has
    no memory to run it on (raised instead of the fallback, see
    :func:`environment`)."""


def _needs_cpu_twins(exc: BaseException) -> bool:
    """The op failed because the simulation cannot follow fake CUDA tensors:
    a binding that sets a CUDA device guard on a CPU-only build, an op
    without a fake kernel whose fallback would allocate real CUDA memory
    (``nn.GRU``), or (CUDA build) an op that reached the real driver."""
    if isinstance(exc, NoFakeKernelError):
        return True
    text = str(exc)
    return "not linked with support for cuda" in text or "from the 'CUDA' backend" in text or any(
        message in text for message in _NO_DRIVER
    )


#: what a CUDA build says when an op reaches the real driver without a
#: usable GPU: a composite op (``F.one_hot``, ``F.embedding_bag``'s offsets)
#: makes a CUDA tensor with a factory that has no fake argument, outside the
#: fake mode, so the real CUDA backend initialises (on a CPU build the same
#: factory says "not linked with support for cuda")
_NO_DRIVER = (
    "Found no NVIDIA driver",
    "No CUDA GPUs are available",
    "no CUDA-capable device is detected",
    "CUDA driver version is insufficient",
)


_RNN_OPS = ("gru", "lstm", "rnn_tanh", "rnn_relu")


def _on_cpu_twins(func, args: tuple, kwargs: dict) -> Any:
    """Run an op the simulation cannot follow on CPU twins of its fake
    tensors, after the device check PyTorch makes: one device, CPU 0-dim
    tensors allowed beside it (and, for recurrent layers, PyTorch's own
    input/hidden check)."""
    name = getattr(func, "__name__", "")
    if name in _RNN_OPS and len(args) > 1:
        hx = args[1][0] if isinstance(args[1], (tuple, list)) and args[1] else args[1]
        inp = args[0]
        if isinstance(inp, torch.Tensor) and isinstance(hx, torch.Tensor) and inp.device != hx.device:
            raise RuntimeError(
                f"Input and hidden tensors are not at the same device, found input tensor at {inp.device} "
                f"and hidden tensor at {hx.device}"
            )
    device = None
    for t in _flat_tensors((args, kwargs), []):
        if t.device.type == "cpu" and t.dim() == 0:
            continue
        if device is None:
            device = t.device
        elif t.device != device:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, {device} and {t.device}!"
            )
    cpu = torch.device("cpu")
    out = func(*_map_tensors(args, lambda t: t.to(cpu)), **_map_tensors(kwargs, lambda t: t.to(cpu)))
    if device is None or device.type == "cpu":
        return out
    return _map_tensors(out, lambda t: t.to(device))


_CONCATENATIONS = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack"})


def _check_simulated_devices(name: str, self_tensor: Optional[torch.Tensor], args: tuple) -> None:
    """Two device checks real CUDA makes that fake tensors let pass: a
    concatenation takes no CPU tensor beside CUDA ones, not even a 0-dim one
    (``stack`` unsqueezes it first), and a CPU tensor cannot be indexed by
    a CUDA index tensor."""
    if name in _CONCATENATIONS and args and isinstance(args[0], (list, tuple)):
        devices = {t.device for t in args[0] if isinstance(t, torch.Tensor)}
        if len(devices) > 1 and any(d.type == "cpu" for d in devices):
            a, b = sorted(devices, key=str)[:2]
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, {a} and {b}!")
    if name in ("__getitem__", "__setitem__") and self_tensor is not None and self_tensor.device.type == "cpu" and len(args) > 1:
        index = args[1]
        parts = index if isinstance(index, (tuple, list)) else (index,)
        if any(isinstance(p, torch.Tensor) and p.device.type == "cuda" for p in parts):
            raise RuntimeError("indices should be either on cpu or on the same device as the indexed tensor (cpu)")


def _fake_cuda_indexing(func, name: str, t: torch.Tensor, index: Any, rest: tuple, kwargs: dict) -> Any:
    """Indexing a fake CUDA tensor: PyTorch's indexing binding sets a CUDA
    device guard, which a CPU-only build does not have; index a CPU twin
    instead, after PyTorch's own check on where index tensors may live."""
    device = t.device
    parts = index if isinstance(index, (tuple, list)) else (index,)
    moved = []
    for part in parts:
        if isinstance(part, torch.Tensor):
            if part.device.type != "cpu" and part.device != device:
                raise RuntimeError(
                    f"indices should be either on cpu or on the same device as the indexed tensor ({device})"
                )
            part = part.to("cpu")
        moved.append(part)
    index = tuple(moved) if isinstance(index, tuple) else (moved if isinstance(index, list) else moved[0])
    if name == "__setitem__":
        return None  # fake tensors hold no data to write
    return func(t.to("cpu"), index, *rest, **kwargs).to(device)


def _is_tensor_method(func: Callable) -> bool:
    return getattr(torch.Tensor, getattr(func, "__name__", ""), None) is func


@contextlib.contextmanager
def environment(env: Environment) -> Iterator[Environment]:
    """Make user code see the plan's devices for the duration: CUDA queries,
    device names, module placement and DataParallel."""
    global _CURRENT
    saved: List = []

    def patch(owner: Any, name: str, value: Any) -> None:
        if hasattr(owner, name):
            saved.append((owner, name, getattr(owner, name)))
        else:
            saved.append((owner, name, _MISSING))
        setattr(owner, name, value)

    visible = env.cuda_visible
    n = env.plan.count if visible else 0
    if env.plan.kind == REAL and visible and any(t.type == "cuda" for t in env.plan.targets):
        # Initialise CUDA for real before device_count is patched: its lazy
        # init checks the capability of every device it counts, and one real
        # GPU plus the CPU counts as two (seen on an H200: "device=1, num_gpus=1")
        torch.cuda.init()
        # cuDNN's first use checks the capability of every counted device too
        torch.backends.cudnn.version()
    if (
        env.plan.kind == REAL
        and visible
        and any(t.type == "cpu" for t in env.plan.targets)
        and any(t.type == "cuda" for t in env.plan.targets)
    ):
        real_properties = torch.cuda.get_device_properties

        def properties(device=None):
            # a logical CUDA device that lives on the CPU reports cuda:0's
            index = _index(device, env) if device is not None else env.current
            target = env.target(index)
            return real_properties(target if target.type == "cuda" else torch.device("cuda", 0))

        patch(torch.cuda, "get_device_properties", properties)
    patch(torch.cuda, "is_available", lambda: visible)
    patch(torch.cuda, "device_count", lambda: n)
    if env.simulated or (visible and not env.plan.real_data_parallel):
        # the current device is the harness's: fake, or cuda:0 + cpu
        patch(torch.cuda, "current_device", lambda: env.current)
        patch(torch.cuda, "set_device", lambda d: setattr(env, "current", _index(d, env)))
        if not env.simulated:
            real_module_to = nn.Module.to

            def module_to_index(self, *args, **kwargs):
                args, kwargs = _cuda_index(args, kwargs)
                return real_module_to(self, *args, **kwargs)

            patch(nn.Module, "to", module_to_index)
    if env.simulated:
        from torch.nn.modules import transformer as transformer_module

        if hasattr(transformer_module, "_detect_is_causal_mask"):
            # it compares the mask's values with a causal mask only to pick a
            # fast path; fake tensors have no values, and "not known to be
            # causal" is always correct (the mask itself is still applied)
            patch(
                transformer_module,
                "_detect_is_causal_mask",
                lambda mask, is_causal=None, size=None: bool(is_causal),
            )
        if torch.cuda._is_compiled() and hasattr(torch._C, "_ensureCUDADeviceGuardSet"):
            # A CUDA build: the CUDA device guard that Python bindings set
            # (`.contiguous()`, `~x`, `copy_`) calls the real driver. PyTorch
            # makes it a no-op when no GPU is usable (what FakeTensorMode's
            # __enter__ does when torch.cuda.is_available() is False, which
            # here it reads patched to True). The C++ side keeps a visible
            # GPU's guard; the change lasts for the process (no undo exists)
            global _GUARD_SET
            if not _GUARD_SET:
                _start_autograd()  # first: see fork_breaks_autograd
                torch._C._ensureCUDADeviceGuardSet()
                _GUARD_SET = True
        from torch._subclasses import fake_tensor as fake_module

        real_fallback = getattr(fake_module, "run_fallback_kernel", None)
        if real_fallback is not None:

            def fallback(fake_mode, func, flat_args, *rest, **kw):
                # stands in for the fallback of an op without a fake kernel,
                # which runs it on real zeros allocated on a (here simulated)
                # CUDA device: _DeviceMap runs such ops on CPU twins instead
                if any(isinstance(a, torch.Tensor) and a.device.type == "cuda" for a in flat_args):
                    error = NoFakeKernelError(f"{func} has no fake-tensor kernel and cannot run on a simulated CUDA device")
                    error.func = func  # type: ignore[attr-defined]  # named in a "cannot simulate" verdict
                    raise error
                return real_fallback(fake_mode, func, flat_args, *rest, **kw)

            patch(fake_module, "run_fallback_kernel", fallback)

        if hasattr(fake_module, "init_gpu_context"):
            # a fake CUDA tensor's constructor allocates a real one on its
            # device when CUDA is (or, patched, looks) available: on a machine
            # with fewer real GPUs than simulated ones that is a real error
            patch(fake_module, "init_gpu_context", lambda device: None)
        from torch.backends import cudnn as cudnn_module

        # cuDNN's checks (RNN flatten_parameters, the C++ RNN and convolution
        # dispatch) load the real library and query every counted device; a
        # simulated device has no cuDNN, as on a CPU build
        patch(cudnn_module, "enabled", False)
        original_to = nn.Module.to

        def module_to(self, *args, **kwargs):
            args, kwargs = _cuda_index(args, kwargs)
            device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
            target = env.resolve(device) if device is not None else None
            if target is None or target.type != "cuda":
                return original_to(self, *args, **kwargs)
            if dtype is not None:
                original_to(self, dtype)
            env.place_module(self, target)
            return self

        def module_cuda(self, device=None):
            target = env.resolve(torch.device("cuda") if device is None else _as_device(device))
            env.place_module(self, target)  # type: ignore[arg-type]
            return self

        patch(nn.Module, "to", module_to)
        patch(nn.Module, "cuda", module_cuda)
    if env.driverless:
        _stand_in_for_the_driver(env, patch)
    if env.simulated:
        patch(torch, "Generator", _simulated_generator_class(env))
    if env.cuda_visible and not env.plan.real_data_parallel:
        from torch.nn import parallel as parallel_package
        from torch.nn.parallel import data_parallel as dp_module

        patch(nn, "DataParallel", EmulatedDataParallel)
        patch(parallel_package, "DataParallel", EmulatedDataParallel)
        patch(dp_module, "DataParallel", EmulatedDataParallel)
    previous = _CURRENT
    _CURRENT = env
    mode = _DeviceMap(env)
    try:
        with mode, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield env
    finally:
        _CURRENT = previous
        for owner, name, value in reversed(saved):
            if value is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def _stand_in_for_the_driver(env: Environment, patch: Callable[[Any, str, Any], None]) -> None:
    """Answer what ``torch.cuda`` would ask the driver, where user code sees
    CUDA devices that no real GPU backs (``env.driverless``). On a CUDA
    build each of these reaches the real driver once ``is_available()``
    says True ("no CUDA-capable device is detected", "Found no NVIDIA
    driver"); on a CPU build, a stub that raises. Seen on an H200
    (2026-12-04, torch 2.11): ``optimizer.step()`` asks
    ``torch.cuda.is_current_stream_capturing()`` when CUDA is built and
    available, in the CPU run of a ddp case's step 3."""
    # lazy initialisation would load the driver; nothing here needs it
    patch(torch.cuda, "_lazy_init", lambda: None)
    # optimizers' graph-capture check before a step (torch 2.11), and
    # BatchNorm's (nn.modules._functions): no graph is ever captured here
    patch(torch.cuda, "is_current_stream_capturing", lambda: False)

    def on_device(device: Any = None, *rest: Any) -> None:
        """Nothing to do on any device, once ``device`` is one the plan has."""
        _checked_index(device, env)

    patch(torch.cuda, "synchronize", on_device)
    patch(torch.cuda, "get_device_name", lambda device=None: SimulatedDeviceProperties(_checked_index(device, env)).name)
    # torch.cuda.get_device_properties/_capability read the driver (a NameError
    # on `_get_device_properties` once _lazy_init is a no-op)
    patch(torch.cuda, "get_device_properties", lambda device=None: SimulatedDeviceProperties(_checked_index(device, env)))
    patch(torch.cuda, "get_device_capability", lambda device=None: SimulatedDeviceProperties(_checked_index(device, env)).capability)
    # autocast(dtype=torch.bfloat16) asks it; the simulated device is an
    # Ampere-class GPU (capability 8.0), which has bf16
    patch(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    # torch.cuda.device(i) / device_of(t): swap the current device (real: cudaSetDevice)
    patch(torch.cuda, "_exchange_device", lambda d: _exchange(env, d))
    patch(torch.cuda, "_maybe_exchange_device", lambda d: _exchange(env, d))
    # streams: real ones are created and queried through the driver; no work
    # is ever queued on a device without a GPU, so every stream is done
    patch(torch.cuda, "Stream", SimulatedStream)
    patch(torch.cuda, "current_stream", lambda device=None: env.streams.get(_checked_index(device, env)) or SimulatedStream.default(device))
    patch(torch.cuda, "default_stream", SimulatedStream.default)
    patch(torch.cuda, "set_stream", lambda stream: _set_stream(env, stream))
    patch(torch.cuda, "Event", SimulatedEvent)
    # the random number generator of each device: a CPU generator per
    # device (get_rng_state would index torch.cuda.default_generators, empty
    # without a GPU); torch.manual_seed seeds them through manual_seed_all
    rng = SimulatedGenerators(env)
    for name in ("get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all",
                 "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed"):
        patch(torch.cuda, name, getattr(rng, name))
    # memory: the counters already read 0 before CUDA is initialised;
    # these call the allocator or cudart directly

    def mem_get_info(device: Any = None) -> tuple:
        """(free, total): the whole memory is free (nothing is allocated)."""
        total = SimulatedDeviceProperties(_checked_index(device, env)).total_memory
        return total, total

    patch(torch.cuda, "mem_get_info", mem_get_info)
    for name in ("reset_peak_memory_stats", "reset_accumulated_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached"):
        if hasattr(torch.cuda, name):
            patch(torch.cuda, name, on_device)
    patch(torch.cuda, "set_per_process_memory_fraction", lambda fraction, device=None: on_device(device))


def _generator_device(generator: Any) -> Optional[torch.device]:
    """Where a generator draws (a simulated CUDA generator says so itself)."""
    if not isinstance(generator, torch._C.Generator):
        return None
    return generator.device


def _check_generator(generator: Any, target: torch.device) -> None:
    """A draw on a simulated CUDA device given a generator of another
    device type raises as PyTorch's does (``check_generator`` in ATen)."""
    where = _generator_device(generator)
    if where is not None and where.type != target.type:
        raise RuntimeError(f"Expected a '{target.type}' device type for generator but found '{where.type}'")


def _simulated_generator_class(env: Environment) -> type:
    """``torch.Generator`` while devices are simulated: one for a simulated
    CUDA device is a CPU generator that remembers the device it stands for
    (a real CUDA generator needs the CUDA library), so draws on that device
    take it and draws elsewhere are checked as PyTorch checks them."""
    real = torch._C.Generator

    class _Kind(type(real)):  # type: ignore[misc]
        """Every real generator, made before the patch too, is still a
        ``torch.Generator`` to ``isinstance``."""

        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, real)

    class Generator(real, metaclass=_Kind):  # type: ignore[misc, valid-type]
        def __new__(cls, device: Any = "cpu"):
            target = env.resolve(_as_device(device)) if device is not None else None
            if target is not None and target.type == "cuda":
                generator = real.__new__(cls, "cpu")
                generator._devlint_device = target
                return generator
            return real.__new__(cls, device if device is not None else "cpu")

        def __init__(self, device: Any = "cpu") -> None:
            pass

        @property
        def device(self) -> torch.device:  # type: ignore[override]
            return getattr(self, "_devlint_device", None) or real.device.__get__(self)

        def _copy(self) -> "Generator":
            twin = real.__new__(type(self), "cpu")
            twin.set_state(self.get_state())
            if hasattr(self, "_devlint_device"):
                twin._devlint_device = self._devlint_device
            return twin

        def __deepcopy__(self, memo: Any) -> "Generator":
            return self._copy()

        def clone_state(self) -> "Generator":  # type: ignore[override]
            return self._copy()

    Generator.__module__ = "torch"
    Generator.__qualname__ = "Generator"
    return Generator


class SimulatedGenerators:
    """``torch.cuda``'s random-state functions over one CPU generator per
    logical device: states are saved and restored (``fork_rng``, activation
    checkpointing, resuming a run), seeds are kept; the numbers a CUDA
    generator would draw are not reproduced (nothing is drawn on a device
    without a GPU: fake tensors have no values, and step 3 runs on the CPU)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.generators: Dict[int, torch.Generator] = {}

    def _generator(self, device: Any = None) -> torch.Generator:
        if isinstance(device, str) and device == "cuda":
            device = None
        index = _checked_index(device, self.env)
        if index not in self.generators:
            self.generators[index] = torch.Generator()
            self.generators[index].manual_seed(torch.initial_seed())
        return self.generators[index]

    def get_rng_state(self, device: Any = "cuda") -> torch.Tensor:
        return self._generator(device).get_state()

    def get_rng_state_all(self) -> List[torch.Tensor]:
        return [self.get_rng_state(i) for i in range(self.env.plan.count)]

    def set_rng_state(self, new_state: torch.Tensor, device: Any = "cuda") -> None:
        with _no_mode():
            self._generator(device).set_state(new_state.clone())

    def set_rng_state_all(self, new_states: Any) -> None:
        for i, state in enumerate(new_states):
            self.set_rng_state(state, i)

    def manual_seed(self, seed: int) -> None:
        self._generator().manual_seed(int(seed))

    def manual_seed_all(self, seed: int) -> None:
        for i in range(self.env.plan.count):
            self._generator(i).manual_seed(int(seed))

    def seed(self) -> None:
        self._generator().seed()

    def seed_all(self) -> None:
        seed = self._generator(0).seed()
        for i in range(1, self.env.plan.count):
            self._generator(i).manual_seed(seed)

    def initial_seed(self) -> int:
        return self._generator().initial_seed()


_MISSING = object()


@contextlib.contextmanager
def running(env: Environment) -> Iterator[None]:
    """Around user ``forward`` calls: no autograd (autograd on fake CUDA
    tensors aborts a CPU-only build), and the fake mode on the simulated path."""
    with torch.no_grad():
        if env.fake_mode is not None:
            with env.fake_mode:
                yield
        else:
            yield


def _checked_index(device: Any, env: Environment) -> int:
    """The index ``torch.cuda`` queries resolve ``device`` to (None: the
    current device), refused as PyTorch refuses it when out of range."""
    index = env.current if device is None else _index(device, env)
    if not 0 <= index < env.plan.count:
        raise AssertionError("Invalid device id")
    return index


def _exchange(env: Environment, device: int) -> int:
    """``torch.cuda._exchange_device``: make ``device`` current, return the
    previous one (a negative index changes nothing, as in PyTorch)."""
    if device < 0:
        return -1
    previous, env.current = env.current, device
    return previous


def _set_stream(env: Environment, stream: Any) -> None:
    if stream is not None:
        env.streams[stream.device.index] = stream


class SimulatedDeviceProperties:
    """What ``torch.cuda.get_device_properties`` reports for a simulated
    device: a recent data-centre GPU, so code that picks a path by capability
    (bf16, TF32, cuDNN's minimum) takes the common one."""

    name = "simulated CUDA device"
    major, minor = 8, 0
    total_memory = 80 * 1024**3
    multi_processor_count = 108
    is_integrated = 0
    is_multi_gpu_board = 0

    def __init__(self, index: int) -> None:
        self.index = index

    @property
    def capability(self) -> tuple:
        return (self.major, self.minor)

    def __repr__(self) -> str:
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // 1024**2}MB, multi_processor_count={self.multi_processor_count})"
        )


class SimulatedStream:
    """``torch.cuda.Stream`` on a simulated device: nothing is ever queued
    (fake tensors have no data), so every stream is idle and every wait is
    already satisfied."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        env = current_environment()
        self.device = torch.device("cuda", _checked_index(device, env))
        self.priority = priority
        self.stream_id = next(_stream_ids)

    @classmethod
    def default(cls, device: Any = None) -> "SimulatedStream":
        stream = cls(device)
        stream.stream_id = 0
        return stream

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SimulatedStream) and (self.device, self.stream_id) == (other.device, other.stream_id)

    def __hash__(self) -> int:
        return hash((self.device, self.stream_id))

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> "SimulatedEvent":
        event = SimulatedEvent() if event is None else event
        event.record(self)
        return event

    def __enter__(self) -> "SimulatedStream":
        self._context = torch.cuda.stream(self)
        self._context.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._context.__exit__(*exc)

    def __repr__(self) -> str:
        return f"<torch.cuda.Stream device={self.device} stream_id={self.stream_id} (simulated)>"


_stream_ids = itertools.count(1)


class SimulatedEvent:
    """``torch.cuda.Event`` on a simulated device: recorded on a stream that
    never has work, so it is always complete, and no time passes between
    two events."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.device: Optional[torch.device] = None

    def record(self, stream: Any = None) -> None:
        if stream is None:
            stream = torch.cuda.current_stream()
        self.device = stream.device

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end_event: "SimulatedEvent") -> float:
        """Milliseconds between two events: none, no work ran between them."""
        if self.device is None or end_event.device is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return 0.0


def _index(value: Any, env: Environment) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    dev = _as_device(value)
    if dev is None or dev.type != "cuda":
        raise ValueError(f"expected a CUDA device, got {value!r}")
    return env.current if dev.index is None else dev.index


# --------------------------------------------------------------------------
# DataParallel on devices the real one cannot use (fake devices, cuda:0 + cpu)


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_asdict") and hasattr(obj, "_fields")


def replicate(module: nn.Module, devices: List[torch.device], env: Environment) -> List[nn.Module]:
    """``torch.nn.parallel.replicate`` with tensor copies made by ``env``
    (no CUDA broadcast): every module copied with
    ``_replicate_for_data_parallel``, parameters set as plain attributes,
    buffers copied per device."""
    modules = list(module.modules())
    index = {m: i for i, m in enumerate(modules)}
    copies: List[List[nn.Module]] = [[_replica_of(m) for m in modules] for _ in devices]
    for i, m in enumerate(modules):
        for key, child in m._modules.items():
            for j in range(len(devices)):
                if child is None:
                    copies[j][i]._modules[key] = None
                else:
                    setattr(copies[j][i], key, copies[j][index[child]])
        for key, p in m._parameters.items():
            for j, dev in enumerate(devices):
                replica = copies[j][i]
                if p is None:
                    replica._parameters[key] = None
                    continue
                # replicas hold plain tensors, never Parameters
                copy = p.detach() if p.device == dev else env.move(p.detach(), dev)
                setattr(replica, key, copy)
                replica._former_parameters[key] = copy  # type: ignore[index]
        for key, b in m._buffers.items():
            for j, dev in enumerate(devices):
                replica = copies[j][i]
                if b is None:
                    replica._buffers[key] = None
                else:
                    setattr(replica, key, b if b.device == dev else env.move(b, dev))
    return [copies[j][0] for j in range(len(devices))]


def _replica_of(m: nn.Module) -> nn.Module:
    make = getattr(m, "_replicate_for_data_parallel", None)
    if make is not None:
        replica = make()
    else:  # the same steps, for a PyTorch that lacks the method
        replica = m.__new__(type(m))
        replica.__dict__ = m.__dict__.copy()
        replica._parameters = OrderedDict()
        replica._buffers = replica._buffers.copy()
        replica._modules = replica._modules.copy()
        replica._is_replica = True
    replica._former_parameters = OrderedDict()
    return replica


class EmulatedDataParallel(nn.DataParallel):
    """``nn.DataParallel`` over the plan's devices when the real one cannot
    run there. ``forward`` is PyTorch's own (device check included); the
    hooks it calls are mirrored here."""

    def __init__(self, module: nn.Module, device_ids=None, output_device=None, dim: int = 0) -> None:
        nn.Module.__init__(self)
        env = current_environment()
        self.dim = dim
        self.module = module
        if device_ids is None:
            device_ids = list(range(env.plan.count))
        self.device_ids = [_index(d, env) for d in device_ids]
        self.output_device = self.device_ids[0] if output_device is None else _index(output_device, env)
        self.src_device_obj = env.target(self.device_ids[0])
        if len(self.device_ids) == 1:
            self.module.to(self.src_device_obj)

    def _devices(self, ids) -> List[torch.device]:
        env = current_environment()
        return [env.target(i) for i in ids]

    def scatter(self, inputs, kwargs, device_ids):
        env = current_environment()
        devices = self._devices(device_ids)
        dim = self.dim

        def scatter_map(obj):
            if isinstance(obj, torch.Tensor):
                return tuple(env.move(c, d) for c, d in zip(obj.chunk(len(devices), dim), devices))
            if _is_namedtuple(obj):
                return [type(obj)(*args) for args in zip(*map(scatter_map, obj))]
            if isinstance(obj, tuple) and len(obj) > 0:
                return list(zip(*map(scatter_map, obj)))
            if isinstance(obj, list) and len(obj) > 0:
                return [list(i) for i in zip(*map(scatter_map, obj))]
            if isinstance(obj, dict) and len(obj) > 0:
                return [type(obj)(i) for i in zip(*map(scatter_map, obj.items()))]
            return [obj for _ in devices]

        scattered_inputs = scatter_map(inputs) if inputs else []
        scattered_kwargs = scatter_map(kwargs) if kwargs else []
        if len(scattered_inputs) < len(scattered_kwargs):
            scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
        elif len(scattered_kwargs) < len(inputs):
            scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
        return tuple(scattered_inputs), tuple(scattered_kwargs)

    def replicate(self, module, device_ids):
        return replicate(module, self._devices(device_ids), current_environment())

    def parallel_apply(self, replicas, inputs, kwargs):
        env = current_environment()
        outputs = []
        saved = env.current
        try:
            for i, (replica, args, kw) in enumerate(zip(replicas, inputs, kwargs)):
                env.current = self.device_ids[i]
                if not isinstance(args, (list, tuple)):
                    args = (args,)
                try:
                    outputs.append(replica(*args, **kw))
                except Exception as exc:
                    _note_replica(exc, i, self.device_ids[i])
                    raise
        finally:
            env.current = saved
        return outputs

    def gather(self, outputs, output_device):
        env = current_environment()
        target = env.target(_index(output_device, env))
        dim = self.dim
        # The real gather refuses CPU tensors. A replica that stands for a
        # CUDA device must not return one; on the one-GPU path the replica
        # that stands for cuda:1 really is on the CPU, and its outputs are
        # (seen on an H200: a CPU anchor grid from replica 0 slipped through
        # when every CPU output was let pass)
        on_cuda = [env.target(i).type != "cpu" for i in self.device_ids]

        def gather_map(outs):
            out = outs[0]
            if isinstance(out, torch.Tensor):
                if any(t.device.type == "cpu" and cuda for t, cuda in zip(outs, on_cuda)):
                    raise AssertionError("Gather function not implemented for CPU tensors")
                if all(t.dim() == 0 for t in outs) and dim == 0:
                    outs = tuple(t.view(1) for t in outs)
                return torch.cat([env.move(t, target) for t in outs], dim)
            if out is None:
                return None
            if isinstance(out, dict):
                if not all(len(out) == len(d) for d in outs):
                    raise ValueError("All dicts must have the same number of keys")
                return type(out)((k, gather_map([d[k] for d in outs])) for k in out)
            if _is_namedtuple(out):
                return type(out)._make(map(gather_map, zip(*outs)))
            return type(out)(map(gather_map, zip(*outs)))

        try:
            return gather_map(outputs)
        except Exception as exc:
            _note_replica(exc, -1, -1)
            raise


def _note_replica(exc: BaseException, replica: int, device: int) -> None:
    try:
        if not hasattr(exc, "_devlint_replica"):
            where = "gathering the outputs" if replica < 0 else f"replica {replica} on device {device}"
            exc._devlint_replica = where  # type: ignore[attr-defined]
    except Exception:
        pass
