"""DL001 factory-without-device

## What it does
Flags a torch tensor factory (`torch.arange`, `zeros`, `ones`, `empty`, `full`,
`rand*`, `eye`, `linspace`, `logspace`, `tensor`, `as_tensor`,
`tril_indices`, ...) called without `device=` inside `forward` of an
`nn.Module`, inside a method that `forward` calls, inside a method that runs
the module itself (`logits = self(tokens)` in `generate`/`sample`, and the
methods it calls), or inside a module-level function of the same file that
such code calls (`mask = causal_mask(n)`).

Anywhere else (a helper, a loss, a metric's `update`/`compute`,
post-processing, any method but those that run while a module is built),
it flags a CPU-born tensor (a factory without `device=`, `torch.from_numpy`,
`torch.Tensor(...)`) where the device flow shows it meeting a tensor on the
inputs' device: `torch.cat([x, torch.zeros(n, d)])` with `x` a tensor
argument, a CPU kernel passed to `F.conv1d(signal, kernel)`, a CPU table
indexed by a device index, CPU ids into a submodule's embedding, a helper's
CPU result added to an argument, a CPU tensor passed to a helper that
combines it with a device tensor. A helper returning a CPU fallback
(`return torch.zeros(1)` on one path, the input's device on the other) is not
flagged by itself: the flow follows only what every path agrees on. Methods of `torch.utils.data` datasets and samplers run in the
data loader, on the CPU, and are not flagged. An argument counts
as a tensor when it is annotated as one or used the way only a tensor is
(`.device`, `.size()`, `.view()`, the input of a torch computation); one
that may be a number (`torch.arange(n) * scale`) meets nothing.

## Why is this bad?
A factory without `device=` creates its tensor on the CPU (or the default
device). The model's parameters live on a GPU, so the first operation that
mixes the two fails, and under `nn.DataParallel` every replica but one is on
another GPU than the one the tensor was moved to:

```
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!
```

It only shows on a GPU machine, often after a long set-up.

## Example
```python
class Encoder(nn.Module):
    def forward(self, src):
        pos = torch.arange(0, src.shape[1]).unsqueeze(0)
        return self.tok(src) + self.pos(pos)
```

## Use instead
```python
class Encoder(nn.Module):
    def forward(self, src):
        pos = torch.arange(0, src.shape[1], device=src.device).unsqueeze(0)
        return self.tok(src) + self.pos(pos)
```

The device is taken from a tensor the method already has (a tensor argument
such as `src`); where there is none, from a parameter or buffer the module
holds directly (`self.tok.weight.device`); an argument annotated as a
collection of tensors (`features: List[torch.Tensor]`) has no `.device`, but
inside a loop over it the element does (`for feat in features`, also through
`zip` and `enumerate`: `device=feat.device`), and is preferred to a held
parameter. Never `next(self.parameters())`:
inside DataParallel replicas `parameters()` is empty (PyTorch >= 1.5), so that
"fix" raises `StopIteration` exactly where the bug was.

Not flagged: `device=` given (or `**kwargs`), `torch.zeros_like(x)`,
`x.new_zeros(...)`, a factory whose result is immediately moved with
`.to(...)`, `.cuda()` or `.type_as(...)`, a 0-dim `torch.tensor(2.0)` (a CPU
scalar tensor mixes with CUDA tensors; `torch.tensor(self.scale)` and
`torch.tensor(f(x))` count as 0-dim unless the attribute holds a list or tuple,
`self.weights = weights` with `weights=(10.0, 5.0)`, or the function is one
of this file whose every `return` gives a list), a factory used as an index
(`x[torch.arange(n)]`, indexing accepts CPU indices), a factory turned into a
Python value (`torch.rand(1).item() < p`, `.tolist()`, `.numel()`,
`int(torch.randint(...))`, `.numpy()`: a NumPy array needs a CPU tensor, so
one built for it is CPU on purpose), a tensor stored with `setattr` on an
argument (`setattr(x, name, t)`), factories in `__init__` and what it calls,
outside forward a CPU tensor that meets no device tensor (it is moved,
including under a condition, `t.to(d) if c else t`; used as an index or a
Python value; filled with device values copied in; kept for
`pack_padded_sequence`), and what a `generate`-style method returns to its
caller (`return torch.tensor(ids)`: it leaves the model). A tensor assembled on the CPU (filled in place, combined
with other CPU tensors, collected in a Python list, taken to the CPU on
purpose with `.cpu()`) is not flagged when every later use moves it, indexes
with it, tests it (`mask.any()`, `mask is None`), reads its shape, reduces it
to a 0-dim tensor (`t.sum()`), copies device values into it (`t[1:] = x`),
masks it with a comparison to a number (`t[t < 0] = 0`), collects it in
a list that also takes other values (`pieces.append(self.helper(...))`),
reduces it to a 0-dim offset (`start = pieces[-1].max() + 1 if pieces else 0`),
tests it in an `if`/`while` condition over CPU values and numbers
(`if ids[i] - ids[0] >= size:`), maps a list of such tensors
(`[p.float() for p in pieces]`), mixes it with the result of a method of the
class that builds its own result on the CPU,
reads it as a number (`torch.arange(start, end)` over the rows of a CPU
tensor) or feeds another such use, until a re-binding to its moved copy in
the same block (`t = t.to(dev)`), e.g. a helper that returns early with a
cached table and otherwise builds one and ends with `return pe.to(x.device)`;
nor is a factory inside a computation over CPU tensors whose result is moved
(`torch.stack(torch.meshgrid(torch.arange(h), torch.arange(w))).to(dev)`,
`torch.cat(offsets).to(dev)`,
`torch.exp(-math.log(p) * torch.arange(half) / half).to(device=t.device)`).

The flow is followed across the methods of the class (a static method called
as `ClassName.helper(...)` counts as `self.helper(...)`, and a method the
class inherits from a base module of the same file runs from the subclass's
forward: `h = self.init_hidden(b)` reaches the base's `init_hidden`): a helper's CPU result
is fine when every forward-reachable call site keeps it to such uses (also
through the caller's own return: a static grid moved by the caller's caller),
a CPU value passed to another method is fine when that method's parameter
is (the same holds for module-level functions forward calls: a
`square_subsequent_mask(n)` moved where forward uses it is fine; its use in
`__init__` to build a buffer does not count), and a module attribute
assigned in `forward` (`self.state = ...`) is
followed into every method of the class; a method forward does not reach that
reads it counts as an escape. Reads from outside the class are not seen.

Decided cases: a factory with a literal size of 0 (`torch.empty(0)`, an
unused placeholder argument) holds no data and is not flagged; a factory in
a statement that takes another tensor to the CPU explicitly
(`grid.cpu() * torch.tensor([1, m, m])`) is CPU on purpose, and adding
`device=` there would break it. A `.to(x.dtype)` / `.to(torch.float16)` cast
is not a move: `return t.to(torch.get_default_dtype())` from a helper whose
caller stores it unmoved is still flagged.

## Fix safety
Safe: it only adds `device=` pointing at the device the computation already
runs on. When no tensor or held parameter is in reach the finding has no fix.
"""

from __future__ import annotations

import itertools
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from devlint.diagnostic import Fix
from devlint.rule import Invalid, Rule, Valid
from devlint.semantic import (
    DEVICE_FACTORIES,
    LEGACY_TENSOR_CONSTRUCTORS,
    ClassFacts,
    FileFacts,
    has_star_kwargs,
    is_dtype_cast,
    keyword_arg,
    positional_args,
    self_attribute_loads,
    with_keyword_arg,
)
from devlint.facts.flow import CPU, INIT_METHODS as _INIT_METHODS
from devlint.scan import CHAIN_METHODS, MOVE_METHODS
from devlint.syntax import statements
from devlint.walk import walk

_MOVES = MOVE_METHODS
# tensor methods that keep a chain "the same tensor" for the purpose of a
# later .to(...): torch.arange(n).unsqueeze(0).to(x.device)
_CHAIN = CHAIN_METHODS


class FactoryWithoutDevice(Rule):
    code = "DL001"
    name = "factory-without-device"
    message = "`torch.{fn}` in `{method}` creates its tensor on the CPU, not on the model's device"
    fix_safety = "safe"
    tokens = ("torch",)

    VALID = [
        Valid(
            """
import torch
import torch.nn as nn

class M(nn.Module):
    def forward(self, x):
        a = torch.arange(x.size(1), device=x.device)
        b = torch.zeros_like(x)
        c = x.new_zeros(3)
        d = torch.ones(3).to(x.device)
        e = torch.arange(4).unsqueeze(0).type_as(x)
        f = torch.tensor(2.0)
        g = x[:, torch.randperm(x.size(1))]
        return a + b + c + d + e + f + g
"""
        ),
        Valid(
            """
import torch

def make_grid(n, device):
    return torch.arange(n)

class NotAModule:
    def forward(self, x):
        return torch.zeros(3)
"""
        ),
        Valid(
            """
import torch
from torch import nn

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.arange(16))

    def forward(self, x, **kw):
        return x + torch.ones(3, **kw)
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def forward(self, src):
        pos = torch.arange(0, src.shape[1]).unsqueeze(0)
        return src + pos
""",
            """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def forward(self, src):
        pos = torch.arange(0, src.shape[1], device=src.device).unsqueeze(0)
        return src + pos
""",
        ),
        Invalid(
            """
import torch as T
from torch import nn, zeros

class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, steps: int):
        h = self.init_hidden(steps)
        return self.head(h + T.rand(1, 16))

    def init_hidden(self, batch):
        return zeros(batch, 16)
""",
            """
import torch as T
from torch import nn, zeros

class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, steps: int):
        h = self.init_hidden(steps)
        return self.head(h + T.rand(1, 16, device=self.head.weight.device))

    def init_hidden(self, batch):
        return zeros(batch, 16, device=self.head.weight.device)
""",
            count=2,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # a call that may name a torch factory, without device=/out=/**kw,
        # in a method that may run from forward
        for call in itertools.chain(
            scan.calls_in_forward(), scan.calls_in_forward_functions(), scan.calls_in_model_runners()
        ):
            if "device" in call.keywords or "out" in call.keywords or call.has_star_kwargs:
                continue
            if call.moved:  # torch.arange(n).to(x.device), x[torch.arange(n)]
                continue
            for fn in scan.torch_functions(call.func) & DEVICE_FACTORIES:
                if fn == "scalar_tensor":
                    continue
                if fn in ("tensor", "as_tensor") and not (
                    call.first_arg in ("container", "empty", "name")
                    or (call.first_arg == "attribute" and scan.may_hold_sequence(call.cls, call.first_name))
                    or (call.first_arg == "call" and call.first_name in scan.function_names)
                ):
                    continue  # torch.tensor(self.scale): a 0-dim tensor
                if fn in _SHAPED and call.n_args == 1 and call.first_arg == "empty":
                    continue  # torch.rand([])
                return True
        # anywhere else the device flow decides: a CPU-born tensor outside
        # module construction, in a file where some value can be a tensor on
        # the inputs' device (a bound on DeviceFlow's meetings)
        local: Optional[bool] = None
        for call in scan.calls:
            if "device" in call.keywords or "out" in call.keywords or call.has_star_kwargs or call.moved:
                continue
            if call.cls is not None and call.method in _INIT_METHODS and scan.class_may_be_module(call.cls):
                continue  # built before the module is moved
            fns = scan.torch_functions(call.func)
            if not (fns & (DEVICE_FACTORIES | {"from_numpy"}) or scan.refers_to(call.func, LEGACY_TENSOR_CONSTRUCTORS)):
                continue
            if fns <= {"tensor", "as_tensor"} and call.first_arg == "attribute" and not scan.may_hold_sequence(call.cls, call.first_name):
                continue  # torch.tensor(self.scale): the flow cannot tell it holds data
            if local is None:
                local = scan.may_hold_local_tensors()
            if local:
                return True
        return False

    def __init__(self, context) -> None:
        super().__init__(context)
        # factory calls whose result is moved right away (ids of Call nodes)
        self._moved: Set[int] = set()
        self._method: Optional[_MethodFlow] = None
        #: the flows of the class being visited, by method; findings wait
        #: until the whole file has been seen (a flow may ask another)
        self._flows: Dict[str, _MethodFlow] = {}
        self._flows_class: Optional[ClassFacts] = None
        #: every flow of the file (a method defined twice has two), and the
        #: flows of module-level functions forward calls, by name
        self._all_flows: List[_MethodFlow] = []
        self._functions: Dict[str, _MethodFlow] = {}
        #: enclosing for loops: [node, loop variable holding a tensor of a
        #: List[Tensor] parameter (or None), inside its body yet]
        self._loops: List[list] = []

    # -- per method: findings wait until the whole method has been seen ------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._on_device() and self.context.current_method is node:
            cls = self.context.current_class
            tensor_attrs = {n for n, a in cls.attributes.items() if a.kind not in ("other", "device")}
            tensor_attrs |= set(cls.buffers) | set(cls.parameters)
            fn = self.context.current_method_facts
            self._method = _MethodFlow(
                node, self.facts, tensor_attrs, fn.tensor_params if fn else (),
                returns_placed=fn is not None and fn.result_placed_by_callers(),
                self_name=self.context.self_name, methods=[*cls.methods, *_inherited_methods(self.facts, cls)],
                class_name=cls.name,
            )
            self._method.runner = node.name.value in cls.model_runners
            if self._flows_class is not cls:
                self._flows, self._flows_class = {}, cls
            self._flows[node.name.value] = self._method  # the last definition is the one called
            self._method.group, self._method.cls = self._flows, cls
            self._start(self._method)
        elif (
            self.context.current_class is None
            and len(self.context.function_stack) == 1
            and node.name.value in self.facts.forward_functions
            and not self.context.class_stack
        ):
            # a module-level function that forward calls (mask = causal_mask(n))
            fn = self.facts.forward_functions[node.name.value]
            self._method = _MethodFlow(
                node, self.facts, set(), fn.tensor_params, self_name="", methods=(),
                functions=self.facts.forward_functions,
            )
            self._method.key = "@" + node.name.value
            self._functions[node.name.value] = self._method
            self._start(self._method)

    def _start(self, flow: "_MethodFlow") -> None:
        if flow.group is not None and not flow.functions:
            flow.functions = set(self.facts.forward_functions)
        self._all_flows.append(flow)
        for d in flow.param_defs.values():
            flow.kinds[id(d.value)] = ("store", d)  # the parameter's own name

    def _active(self) -> bool:
        """Inside code forward runs: a forward-reachable method, or a
        module-level function forward calls."""
        return self._on_device() or (self._method is not None and self._method.group is None)

    def _on_device(self) -> bool:
        """Inside a method that runs where the model's weights are: one
        ``forward`` reaches, or one that runs the module itself
        (``generate``/``sample``: ``logits = self(tokens)``)."""
        ctx = self.context
        if ctx.in_forward:
            return True
        cls, m = ctx.current_class, ctx.current_method
        return cls is not None and cls.is_module and m is not None and m.name.value in cls.model_runners

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self._method is not None and self._method.node is original_node:
            self._method = None

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        cls = self.context.current_class
        if cls is None or cls is not self._flows_class:
            return
        for flow in self._all_flows:
            if flow.cls is cls:
                flow.class_node = original_node
        self._flows, self._flows_class = {}, None

    def leave_Module(self, original_node: cst.Module) -> None:
        self._report_forward_flows()
        self._report_flow_meetings()

    def _report_forward_flows(self) -> None:
        if not self._all_flows:
            return
        resolver = _Resolver(self._all_flows, self._functions)
        for flow in self._all_flows:
            inside_moved = flow.calls_in_moved_values() if flow.pending else set()
            for call, defs, statement, message, fix, why in flow.pending:
                if id(call) in inside_moved:
                    continue
                if flow.contained(defs, resolver) or flow.moved_next(defs, statement):
                    continue
                if fix is None:
                    self.report(call, message, no_fix_reason=why)
                else:
                    self.report(call, message, fix=fix)

    # -- code forward does not run: asked of the device flow ------------------
    def _report_flow_meetings(self) -> None:
        """Every function and method (helpers, metrics' ``update``/``compute``,
        losses, post-processing, and what forward runs): a CPU-born tensor is
        a finding where the device flow shows it meeting a tensor on the
        inputs' or the module's device, unless the forward flow above
        already reported it."""
        reported: Set[int] = {id(d.node) for d in self.diagnostics}
        for found in self.context.device_flow.origin_meetings((CPU,), reported):
            origin, meeting = found.origin, found.meeting
            message = (
                f"`torch.{found.name}` in `{found.where}` creates its tensor on the CPU; it meets "
                f"{found.partner_text} through {found.how_text}, which fails when that is on a GPU"
            )
            if not found.anchors or not isinstance(origin, cst.Call):
                self.report(origin, message, no_fix_reason="no tensor on the right device is in scope where it is created")
                continue
            anchor = f"{found.anchors[0]}.device"
            if found.name in ("tensor", "as_tensor", "scalar_tensor") or self.facts.is_factory(origin.func):
                new = _add_device(origin, anchor)
            else:  # torch.from_numpy(a), torch.FloatTensor(xs): no device argument
                new = cst.Call(func=cst.Attribute(value=origin, attr=cst.Name("to")), args=[cst.Arg(cst.parse_expression(anchor))])
            self.report(origin, message, fix=self.replace(origin, new, f"create it on `{anchor}`"))

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._method is not None:
            self._method.assign([t.target for t in node.targets], node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self._method is not None and node.value is not None:
            self._method.assign([node.target], node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._method is not None:
            self._method.assign([node.target], node.value, augmented=True)

    def leave_Assign(self, original_node: cst.Assign) -> None:
        if self._method is not None:
            self._method.close_assign()

    leave_AnnAssign = leave_Assign  # type: ignore[assignment]
    leave_AugAssign = leave_Assign  # type: ignore[assignment]

    def visit_For(self, node: cst.For) -> None:
        if self._method is not None:
            self._method.loops.append(self._method.pos)
            self._method.loop_assign(node.target, node.iter)
            # for feat in features / zip(features, ...), features: List[Tensor]
            self._loops.append([node, self._loop_element(node), False])

    def leave_For(self, original_node: cst.For) -> None:
        if self._method is not None and self._method.loops:
            self._method.loops.pop()
        if self._loops and self._loops[-1][0] is original_node:
            self._loops.pop()

    def _loop_element(self, node: cst.For) -> Optional[str]:
        """The loop variable that holds an element of a parameter annotated as
        a list of tensors (``for feat in features``, ``for feat, s in
        zip(features, strides)``, ``for i, feat in enumerate(features)``)."""
        assert self._method is not None
        if self._method.group is None:
            facts = self.facts.forward_functions.get(self._method.node.name.value)
        else:
            facts = self.context.current_method_facts
        collections = set(facts.tensor_collection_params) if facts is not None else set()
        if not collections:
            return None
        it, target = node.iter, node.target
        if isinstance(it, cst.Name) and it.value in collections and isinstance(target, cst.Name):
            return target.value
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("zip", "enumerate")):
            return None
        if not isinstance(target, (cst.Tuple, cst.List)) or any(a.star or a.keyword for a in it.args):
            return None
        sources = [a.value for a in it.args]
        if it.func.value == "enumerate":
            sources = [cst.Name("_")] + sources[:1]
        if len(sources) != len(target.elements):
            return None
        for source, element in zip(sources, target.elements):
            if isinstance(source, cst.Name) and source.value in collections and isinstance(element.value, cst.Name):
                return element.value.value
        return None

    def _loop_anchor(self) -> Optional[str]:
        """``feat.device`` for the innermost loop body over a list of tensors."""
        for _, name, active in reversed(self._loops):
            if active and name is not None:
                return f"{name}.device"
        return None

    def visit_While(self, node: cst.While) -> None:
        if self._method is not None:
            self._method.loops.append(self._method.pos)
            self._method.moved_values.append(node.test)

    def visit_If(self, node: cst.If) -> None:
        # if t[i] - base >= limit: the test is read as a Python truth value,
        # which leaves a computation over CPU tensors and numbers on the CPU
        if self._method is not None:
            self._method.moved_values.append(node.test)

    leave_While = leave_For  # type: ignore[assignment]

    def visit_Expr(self, node: cst.Expr) -> None:
        # items.append(torch.zeros(n)): the list takes the tensor in
        call = node.value
        if (
            self._method is not None
            and isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in _LIST_ADDS
            and isinstance(call.func.value, cst.Name)
            and call.func.value.value in self._method.by_name
            and call.args
            and not any(a.star or a.keyword is not None for a in call.args)
        ):
            self._method.add_to_list(call.func.value, call.args[-1].value)

    def leave_Expr(self, original_node: cst.Expr) -> None:
        if self._method is not None and self._method.current is not None:
            self._method.close_assign()

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # t is None / t is not None: an identity test does not touch the data
        if self._method is None or not all(
            isinstance(c.operator, (cst.Is, cst.IsNot)) for c in node.comparisons
        ):
            return
        for part in (node.left, *(c.comparator for c in node.comparisons)):
            if isinstance(part, cst.Name):
                self._method.kinds[id(part)] = ("inspect", None)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if self._method is not None:
            self._method.block_opened(id(node))
        if self._loops and self._loops[-1][0].body is node:
            self._loops[-1][2] = True  # the loop's body: its variable is bound

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        if self._method is not None and self._method.blocks:
            self._method.blocks.pop()

    visit_SimpleStatementSuite = visit_IndentedBlock  # type: ignore[assignment]
    leave_SimpleStatementSuite = leave_IndentedBlock  # type: ignore[assignment]

    def visit_Return(self, node: cst.Return) -> None:
        if self._method is not None and node.value is not None:
            root = _chain_root(node.value, self.facts, self._method)
            if root is not None:
                self._method.kinds[id(root)] = ("return", None)
            if self.context.current_function is self._method.node:
                self._method.returning(node.value)

    def leave_Return(self, original_node: cst.Return) -> None:
        if self._method is not None and self._method.current is not None:
            self._method.current = None
            self._method.assign_value = None

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._method is None:
            return
        self._method.kinds[id(node.attr)] = ("store", None)  # x.mask: not a load of a local `mask`
        name = self._method.attribute_name(node)
        if name is not None:
            self._method.attribute_seen(node, name)
        # t.shape, t.dtype, t.device: looking at a tensor does not use its data
        if isinstance(node.value, cst.Name) and node.attr.value in _INSPECT_ATTRS:
            self._method.kinds[id(node.value)] = ("inspect", None)

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.context
        if not self._active():
            return
        func = node.func
        if self._method is not None:
            for arg in node.args:
                if arg.keyword is not None:
                    self._method.kinds[id(arg.keyword)] = ("store", None)  # f(mask=m): not a load of `mask`
        if isinstance(func, cst.Attribute) and self._method is not None:
            if func.attr.value in _INSPECT_CALLS or (func.attr.value in _REDUCE_ALL and not node.args):
                # t.size(), t[0].sum(): a shape, or a 0-dim tensor that mixes with any device
                root = _chain_root(func.value, self.facts, self._method)
                if root is not None and not isinstance(root, cst.Call):
                    self._method.kinds[id(root)] = ("inspect", None)
        if self._method is not None and len(node.args) == 1 and isinstance(node.args[0].value, cst.Name):
            if self.facts.torch_function(func) in ("any", "all", "numel", "is_nonzero") or (
                isinstance(func, cst.Name) and func.value in ("len", "bool", "int", "float")
            ):
                self._method.kinds[id(node.args[0].value)] = ("inspect", None)
        if self._method is not None and _is_setattr_on(node, self._method.params - {self._method.self_name}):
            # setattr(x, name, t) on an argument: t rides on the caller's
            # object, like metadata; it meets no tensor here
            value = node.args[2].value
            if isinstance(value, cst.Call):
                self._moved.add(id(value))
            root = _chain_root(value, self.facts, self._method)
            if root is not None:
                self._method.kinds[id(root)] = ("inspect", None)
        callee = _callee_key(node, self._method) if self._method is not None else None
        if callee is not None:
            self._self_call(node, callee)
        if isinstance(func, cst.Attribute) and func.attr.value in _TO_PYTHON and not node.args:
            self._mark_moved(func.value)  # torch.rand(1).item() < p: a Python number
        elif isinstance(func, cst.Name) and func.value in ("int", "float", "bool") and len(node.args) == 1:
            self._mark_moved(node.args[0].value)  # int(torch.randint(0, n, (1,)))
        if isinstance(func, cst.Attribute) and func.attr.value in _MOVES and not is_dtype_cast(self.facts, node):
            self._mark_moved(func.value)
            root = _chain_root(func.value, self.facts, self._method)
            if root is not None and self._method is not None:
                self._method.kinds[id(root)] = ("move", None)
            elif self._method is not None and isinstance(func.value, cst.Call):
                # torch.stack(torch.meshgrid(torch.arange(h), ...)).to(dev): a
                # CPU computation whose result is moved
                self._method.moved_values.append(func.value)
            return
        fn = self.facts.is_factory(func)
        if fn is None:
            return
        if self._method is not None and fn not in ("tensor", "as_tensor"):
            # torch.arange(start + i * step): the arguments are read as numbers
            for arg in node.args:
                if arg.keyword is None or arg.keyword.value not in ("device", "out", "dtype"):
                    self._mark_numbers(arg.value)
        if id(node) in self._moved:
            return
        if keyword_arg(node, "device") is not None or keyword_arg(node, "out") is not None or has_star_kwargs(node):
            return
        args = positional_args(node)
        if fn in ("tensor", "as_tensor", "scalar_tensor"):
            if fn == "scalar_tensor" or not args or not self._is_tensor_data(args[0].value):
                return  # a 0-dim CPU tensor mixes with CUDA tensors
            if _is_empty_shape(args[0].value):
                return  # torch.tensor([]): an empty placeholder, no data to place
        elif len(args) == 1 and _is_empty_shape(args[0].value) and fn in _SHAPED:
            return  # torch.rand([]): 0-dim, mixes with CUDA tensors too
        elif fn in _SHAPED and _zero_sized(args):
            return  # torch.empty(0), torch.zeros([0, d]): a placeholder with no elements
        if self._method is not None and self._method.assign_value is not None and _calls_cpu(self._method.assign_value):
            return  # t = x.cpu() * torch.tensor([1, m, m]): CPU on purpose, device= would break it
        if fn == "as_tensor" and len(positional_args(node)) >= 3:
            return  # as_tensor(data, dtype, device)
        method = self._method.node.name.value if self._method is not None else "forward"
        message = self.message.format(fn=fn, method=method)
        if self._method is not None and self._method.group is None:
            params = self._method.tensor_params_in_order
            anchor, why = (f"{params[0]}.device", "") if params else (
                None, "no tensor argument to take the device from")
        else:
            anchor, why = ctx.device_anchor()
        method_facts = ctx.current_method_facts if self._method is not None and self._method.group is not None else None
        if self._loop_anchor() is not None and not (
            (self._method is not None and self._method.group is None and self._method.tensor_params_in_order)
            or (method_facts is not None and anchor is not None
                and anchor.split(".", 1)[0] in method_facts.tensor_params)
        ):
            # no tensor argument: the element of a List[Tensor] argument the loop is over
            anchor, why = self._loop_anchor(), ""
        cls = ctx.current_class
        if cls is not None and len(set(cls.pinned_devices().values())) > 1:
            # model-parallel: the right device is the stage's, not the input's
            anchor = None
            why = "the module is split over several devices; create it on the device of the tensor it is combined with"
        fix = None
        if anchor is not None:
            fix = self.replace(node, _add_device(node, anchor), f"add `device={anchor}`")
        if self._method is None:
            if fix is None:
                self.report(node, message, no_fix_reason=why)
            else:
                self.report(node, message, fix=fix)
            return
        self._method.pending.append((node, self._method.current, self._method.statement, message, fix, why))

    def _self_call(self, node: cst.Call, method: str) -> None:
        """Record a ``self.<method>(...)`` call: how its result is used, and
        which of its arguments are loads of a local."""
        flow = self._method
        assert flow is not None
        kind = flow.kinds.get(id(node))
        if kind is not None and kind[0] == "arg":
            flow.sites.append(_Site(method, "arg", target=flow.arg_of.get(id(node))))
        elif kind is not None:
            flow.sites.append(_Site(method, kind[0]))
        elif flow.current and flow.assign_value is not None and (
            flow.assign_value is node or _chain_root(flow.assign_value, self.facts, flow) is node
        ):
            # v = self.m(...) / v = mask_fn(n).unsqueeze(0).expand(b, -1, -1)
            flow.sites.append(_Site(method, "bind", defs=list(flow.current)))
        else:
            flow.sites.append(_Site(method, "other"))
        position = 0
        for arg in node.args:
            if arg.star:
                break
            key: Union[int, str] = position if arg.keyword is None else arg.keyword.value
            if arg.keyword is None:
                position += 1
            root = _chain_root(arg.value, self.facts, flow)
            if root is not None:
                flow.kinds[id(root)] = ("arg", None)
                flow.arg_of[id(root)] = (method, key)

    def _mark_numbers(self, expr: cst.BaseExpression) -> None:
        """Mark the locals in an expression read as numbers (a factory's
        shape or range arguments) as inspections."""
        flow = self._method
        assert flow is not None
        if isinstance(expr, (cst.BinaryOperation,)):
            self._mark_numbers(expr.left)
            self._mark_numbers(expr.right)
        elif isinstance(expr, cst.UnaryOperation):
            self._mark_numbers(expr.expression)
        elif isinstance(expr, (cst.Tuple, cst.List)):
            for el in expr.elements:
                self._mark_numbers(el.value)
        else:
            root = _chain_root(expr, self.facts)
            if isinstance(root, cst.Name) and id(root) not in flow.kinds:
                flow.kinds[id(root)] = ("inspect", None)

    def _is_tensor_data(self, data: cst.BaseExpression) -> bool:
        """Whether ``torch.tensor(data)`` builds a tensor with dimensions: a
        list/tuple literal or comprehension, or a local name bound to one.
        Attributes, calls and arithmetic (``self.scale``, ``x.shape[1]``,
        ``d ** 0.5``) are almost always Python scalars: 0-dim tensors, except
        a module attribute that holds a list or tuple (``self.ratios``) and
        a call of a function of this file that returns one."""
        if isinstance(data, _CONTAINERS):
            return True
        if isinstance(data, cst.Name) and self._method is not None:
            return any(isinstance(d.value, _CONTAINERS) for d in self._method.by_name.get(data.value, ()))
        cls = self.context.current_class
        name = self._method.attribute_name(data) if self._method is not None else None
        if name is not None and cls is not None:
            # torch.tensor(self.ratios): a list or tuple the module holds
            records = cls.assignments_of(name[1:])
            return bool(records) and all(r.sequence for r in records)
        if isinstance(data, cst.Call) and isinstance(data.func, cst.Name):
            # torch.tensor(get_slopes(n)): a function of this file that returns a list
            fn = self.facts.forward_functions.get(data.func.value)
            return fn is not None and fn.returns_sequence
        return False

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self._method is not None:
            self._method.statement = node

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # x[torch.arange(n)]: indexing accepts CPU index tensors on any device
        if not self._active():
            return
        for el in node.slice:
            if isinstance(el.slice, cst.Index):
                value = el.slice.value
                if isinstance(value, cst.Call):
                    self._moved.add(id(value))
                if isinstance(value, cst.Comparison) and all(_is_number(c.comparator) for c in value.comparisons):
                    value = value.left  # t[t < 0] = 0: a mask of t compared with a number
                root = _chain_root(value, self.facts, self._method)
                if root is not None and self._method is not None:
                    self._method.kinds[id(root)] = ("index", None)

    def visit_Name(self, node: cst.Name) -> None:
        if self._method is not None:
            self._method.name_seen(node)

    def _mark_moved(self, node: cst.BaseExpression) -> None:
        while True:
            if isinstance(node, cst.Call):
                self._moved.add(id(node))
                if isinstance(node.func, cst.Attribute) and (
                    node.func.attr.value in _CHAIN or is_dtype_cast(self.facts, node)
                ):
                    node = node.func.value
                    continue
                return
            if isinstance(node, cst.Subscript):
                node = node.value
                continue
            if isinstance(node, (cst.Attribute,)) and node.attr.value in ("T", "mT"):
                node = node.value
                continue
            return


_CONTAINERS = (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)
#: reading these off a tensor does not use its data on a device
_INSPECT_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda"})
_INSPECT_CALLS = frozenset({"size", "dim", "numel"})
#: ``t.any()``, ``t.item()``: a Python value or a 0-dim tensor, which mixes
#: with tensors on any device
_REDUCE_ALL = frozenset({"any", "all", "item", "tolist", "numpy", "sum", "mean", "max", "min", "prod"})
#: tensor methods that return Python values (numbers, lists, sizes, NumPy
#: arrays: ``.numpy()`` needs a CPU tensor, so one built for it is CPU on purpose)
_TO_PYTHON = frozenset({"item", "tolist", "numpy", "numel", "size", "dim"})
#: factories whose positional arguments are the shape
_SHAPED = frozenset({"zeros", "ones", "empty", "rand", "randn"})


def _is_empty_shape(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.List, cst.Tuple)) and not node.elements


def _is_number(node: cst.BaseExpression) -> bool:
    """A literal number, a negated one, or ``len(...)``."""
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len"


def _zero_sized(args: Sequence[cst.Arg]) -> bool:
    """A literal size of 0 among a shaped factory's sizes: ``torch.empty(0)``,
    ``torch.zeros([0, d])``."""
    sizes: List[cst.BaseExpression] = []
    for arg in args:
        if isinstance(arg.value, (cst.List, cst.Tuple)):
            sizes.extend(e.value for e in arg.value.elements)
        else:
            sizes.append(arg.value)
    return any(isinstance(v, cst.Integer) and v.evaluated_value == 0 for v in sizes)


def _callee_key(node: cst.Call, flow: "_MethodFlow") -> Optional[str]:
    """For a call of the class's own method (``self.m(...)``,
    ``ClassName.m(...)``) its name; for a module-level function forward calls
    (``causal_mask(n)``) "@" and its name; else None."""
    func = node.func
    if (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value in (flow.self_name, flow.class_name)
        and func.attr.value in flow.methods
    ):
        return func.attr.value
    if isinstance(func, cst.Name) and func.value in flow.functions:
        return "@" + func.value
    return None


class _CpuCalls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "cpu" and not node.args:
            self.found = True


def _calls_cpu(node: cst.CSTNode) -> bool:
    """Whether an expression takes a tensor to the CPU explicitly (``x.cpu()``)."""
    v = _CpuCalls()
    walk(node, v)
    return v.found


def _chain_moves(node: cst.BaseExpression, facts: FileFacts) -> bool:
    """Whether a method chain contains ``.to(<device>)``, ``.cuda()`` or ``.type_as(...)``
    (a ``.to(<dtype>)`` cast does not move)."""
    while isinstance(node, (cst.Call, cst.Subscript, cst.Attribute)):
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in _MOVES and not is_dtype_cast(facts, node):
                return True
            node = node.func
        else:
            node = node.value
    return False


def _chain_root(node: cst.BaseExpression, facts: FileFacts,
                flow: Optional["_MethodFlow"] = None) -> Optional[cst.BaseExpression]:
    """The name a chain of same-tensor methods, casts and subscripts starts
    from: ``t`` in ``t``, ``t.view(-1)``, ``t[0].long()``, ``t.to(x.dtype)``;
    with a ``flow``, also a call of one of the class's methods
    (``self.table(n).view(-1)``)."""
    while True:
        if isinstance(node, cst.Name):
            return node
        if flow is not None and isinstance(node, cst.Call) and _callee_key(node, flow) is not None:
            return node
        if flow is not None and flow.attribute_name(node) is not None:
            return node
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
            node.func.attr.value in _CHAIN or is_dtype_cast(facts, node)
        ):
            if isinstance(node.func.value, cst.Name) and node.func.value.value in facts.imports:
                return None  # torch.exp(...): a function of its arguments, not a method of a local
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Attribute) and node.attr.value in ("T", "mT"):
            node = node.value
        elif isinstance(node, cst.UnaryOperation):
            node = node.expression  # x[~mask]
        else:
            return None


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.ids: Set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        self.ids.add(id(node))


class _Mentions(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.found = False

    def visit_Name(self, node: cst.Name) -> bool:
        if node.value == self.name:
            self.found = True
        return False


def _mentions(node: cst.CSTNode, name: str) -> bool:
    v = _Mentions(name)
    walk(node, v)
    return v.found


class _BlockFinder(cst.CSTVisitor):
    """Finds the statements that follow a given statement in its block."""

    def __init__(self, target: cst.CSTNode) -> None:
        self.target = target
        self.after: List[cst.CSTNode] = []

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> bool:
        for i, stmt in enumerate(node.body):
            if stmt is self.target:
                self.after = list(node.body[i + 1:])
                return False
        return True


def _statements_after(function: cst.FunctionDef, statement: cst.CSTNode) -> List[cst.CSTNode]:
    finder = _BlockFinder(statement)
    walk(function, finder)
    return finder.after


def _root_name(node: cst.BaseExpression) -> Optional[str]:
    """``x`` for ``x``, ``x.float()``, ``x[0]``, ``x.view(1, -1)``."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            return None


_BUILTIN_SCALARS = frozenset({"int", "float", "bool", "len", "max", "min", "abs", "round", "sum", "pow", "divmod"})

#: positional arguments of torch functions that are Python numbers, not
#: tensors (``torch.multinomial(probs, num_samples)``, ``torch.topk(t, k)``)
_SCALAR_POSITIONS: Dict[str, FrozenSet[int]] = {
    "multinomial": frozenset({1}),
    "topk": frozenset({1, 2}),
    "kthvalue": frozenset({1, 2}),
    "narrow": frozenset({1, 2, 3}),
    "roll": frozenset({1, 2}),
    "chunk": frozenset({1, 2}),
    "split": frozenset({1, 2}),
    "flatten": frozenset({1, 2}),
    "transpose": frozenset({1, 2}),
    "unsqueeze": frozenset({1}),
    "squeeze": frozenset({1}),
    "cumsum": frozenset({1}),
    "cumprod": frozenset({1}),
    "argmax": frozenset({1}),
    "argmin": frozenset({1}),
    "softmax": frozenset({1}),
    "log_softmax": frozenset({1}),
    "tril": frozenset({1}),
    "triu": frozenset({1}),
    "diag": frozenset({1}),
}
#: keyword arguments of torch functions that never hold a tensor
_SCALAR_KEYWORDS = frozenset(
    {
        "dim", "keepdim", "dtype", "num_samples", "replacement", "k", "largest", "sorted", "indexing",
        "generator", "layout", "requires_grad", "pin_memory", "memory_format", "non_blocking", "as_tuple",
        "diagonal", "offset", "dim1", "dim2", "start_dim", "end_dim", "descending", "stable", "correction",
        "unbiased",
    }
)
#: list methods that put their argument into the list
_LIST_ADDS = frozenset({"append", "extend", "insert"})


class _Def:
    """One binding of a local name: ``t = v`` (plain), ``t[i] = v`` /
    ``t += v`` / ``t.append(v)`` (in place: the tensor or list in ``t`` takes
    ``v`` in), the target of a ``for`` loop over a local (``for r in t``), or
    a parameter of the method (``param``)."""

    __slots__ = ("name", "value", "pos", "loop", "in_place", "blocks", "basic", "param", "returned", "listed")

    def __init__(self, name: str, value: cst.BaseExpression, loop: Optional[int], in_place: bool,
                 blocks: Tuple[int, ...], basic: bool = False, param: bool = False) -> None:
        self.name = name
        self.value = value
        self.pos = 1 << 60  # set when the statement has been visited
        self.loop = loop
        self.in_place = in_place
        #: ids of the blocks the binding is in, outermost first
        self.blocks = blocks
        #: ``t[i, 1:] = v`` with basic indexing: a copy into ``t``, which
        #: works whatever ``v``'s device (and keeps ``t`` where it is)
        self.basic = basic
        self.param = param
        #: the value of a ``return`` statement (not a binding of a name)
        self.returned = False
        #: ``items.append(v)``: a Python list takes ``v`` in, which does not
        #: touch the tensors already in it
        self.listed = False

    @property
    def block(self) -> int:
        return self.blocks[-1] if self.blocks else 0


#: the binding a value flows into when it is moved to a device
_MOVED_DEF = _Def("", cst.Name("None"), None, False, ())


class _Site:
    """A call ``self.<method>(...)`` in a forward-reachable method, and how
    its result is used: ``kind`` is "bind" (``v = self.m(...)``: ``defs``),
    "move", "index", "inspect", "return", "arg" (passed to another method:
    ``target``) or "other"."""

    __slots__ = ("method", "kind", "defs", "target")

    def __init__(self, method: str, kind: str, defs: Optional[List[_Def]] = None,
                 target: Optional[Tuple[str, Union[int, str]]] = None) -> None:
        self.method = method
        self.kind = kind
        self.defs = defs
        self.target = target


class _MethodFlow:
    """Local data flow in one forward-reachable method, enough to tell a CPU
    tensor that escapes into the computation from one that is assembled on
    the CPU and then moved (``t = torch.zeros(...); t[0] = ...; return t.to(dev)``)
    or only used as an index (``r = torch.randperm(n); x[:, r]``).

    Every binding of a local name is a :class:`_Def`. A name is *CPU-born*
    when every value bound to it is built from torch calls, Python scalars and
    other CPU-born names only; a binding is CPU-born when its value is. A
    binding is *contained* when every load of its name that can see it (a
    load after it, or anywhere in a loop around it) is an index, the receiver
    of a move (``.to(<device>)``/``.cuda``/``.type_as``), an inspection
    (``.shape``, ``.size()``, ``t is None``, a shape argument of a factory),
    a basic-index copy into it (``t[0] = v``), an in-place update with a
    CPU-born value, an operand of a binding that mixes it with CPU-born values
    only and is itself contained, an argument of another method whose
    parameter is contained there, or the returned value where every caller's
    use of the result is contained (:class:`_Resolver`). A factory whose
    result lands only in contained bindings cannot meet a CUDA tensor on the
    CPU.

    The questions about other methods (a result returned, an argument
    passed) are answered when the whole class has been seen, by asking the
    same question of the caller's or the callee's flow under the hypothesis
    that the value in question is a CPU tensor."""

    def __init__(self, node: cst.FunctionDef, facts: FileFacts, tensor_attrs: Set[str], tensor_params: Sequence[str],
                 returns_placed: bool = False, self_name: str = "self", methods: Sequence[str] = (),
                 class_name: Optional[str] = None, functions: Sequence[str] = ()) -> None:
        self.node = node
        self.facts = facts
        self.imports = set(facts.imports)
        self.tensor_attrs = tensor_attrs
        self.tensor_params = set(tensor_params)
        self.returns_placed = returns_placed
        self.self_name = self_name
        self.class_name = class_name
        self.methods = set(methods)
        #: module-level functions forward calls (``causal_mask(n)``)
        self.functions = set(functions)
        #: how calls name this flow's function: the method's name, or
        #: "@name" for a module-level function
        self.key = node.name.value
        #: the flows of the class's methods by name (None: a module-level function)
        self.group: Optional[Dict[str, "_MethodFlow"]] = None
        self.cls: Optional[ClassFacts] = None
        self.class_node: Optional[cst.ClassDef] = None
        self.tensor_params_in_order = list(tensor_params)
        self.pending: List[Tuple[cst.Call, Optional[List[_Def]], Optional[cst.SimpleStatementLine], str, Optional[Fix], str]] = []
        #: the simple statement line being visited
        self.statement: Optional[cst.SimpleStatementLine] = None
        #: bindings made by the assignment being visited (None: one of its
        #: targets is an attribute or a tuple, where a value escapes)
        self.current: Optional[List[_Def]] = None
        #: the value of the assignment being visited
        self.assign_value: Optional[cst.BaseExpression] = None
        self.defs: List[_Def] = []
        self.by_name: Dict[str, List[_Def]] = {}
        #: the values of the method's own ``return`` statements
        self.returns: List[_Def] = []
        #: position counter (Name nodes in visiting order) and open loops
        self.pos = 0
        self.loops: List[int] = []
        #: id(Name) -> (kind, binding) for loads whose use is known, set by
        #: the visit of a parent node before the Name is reached
        self.kinds: Dict[int, Tuple[str, Optional[_Def]]] = {}
        #: name -> (position, id(Name), kind, binding) of each load
        self.loads: Dict[str, List[Tuple[int, int, str, Optional[_Def]]]] = {}
        params = (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)
        self.params = {p.name.value for p in params}
        #: the method's parameters as bindings made before its first statement
        self.param_defs: Dict[str, _Def] = {}
        for p in params:
            d = _Def(p.name.value, p.name, None, False, (), param=True)
            d.pos = -1
            self.param_defs[p.name.value] = d
        self.positional = [p.name.value for p in (*node.params.posonly_params, *node.params.params)]
        #: ids of the blocks (statement lists) being visited
        self.blocks: List[int] = []
        #: receivers of a move that are computations (``torch.stack(...).to(d)``)
        self.moved_values: List[cst.BaseExpression] = []
        #: ``self.<method>(...)`` calls, and loads passed to one: id(node) -> (method, position or keyword)
        self.sites: List[_Site] = []
        self.arg_of: Dict[int, Tuple[str, Union[int, str]]] = {}
        #: the hypothesis of the question being answered: bindings (ids) and
        #: parameters whose value is taken to be a CPU tensor
        self._assumed: FrozenSet[int] = frozenset()
        self._assumed_params: FrozenSet[str] = frozenset()
        self._cache: Dict[Tuple[FrozenSet[int], FrozenSet[str]], Tuple[Set[str], Set[str], Dict[int, _Def]]] = {}
        self._returns_cpu: Optional[bool] = None
        #: a method that runs the module itself (generate): what it returns
        #: goes to its caller, outside the model
        self.runner = False

    # -- collection --------------------------------------------------------------
    def block_opened(self, block: int) -> None:
        if not self.blocks:
            for d in self.param_defs.values():
                d.blocks = (block,)
        self.blocks.append(block)

    def _new_def(self, name: str, value: cst.BaseExpression, in_place: bool, basic: bool = False) -> _Def:
        d = _Def(name, value, self.loops[0] if self.loops else None, in_place, tuple(self.blocks), basic)
        self.defs.append(d)
        self.by_name.setdefault(name, []).append(d)
        return d

    def assign(self, targets: Sequence[cst.BaseExpression], value: cst.BaseExpression, augmented: bool = False) -> None:
        defs: Optional[List[_Def]] = []
        flat: List[cst.BaseExpression] = []
        for t in targets:
            if isinstance(t, (cst.Tuple, cst.List)) and not augmented and all(
                isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in t.elements
            ):
                flat.extend(e.value for e in t.elements)  # a, b = torch.meshgrid(...): parts of the value
            else:
                flat.append(t)
        for t in flat:
            base = t.value if isinstance(t, cst.Subscript) else t
            name = base.value if isinstance(base, cst.Name) else self.attribute_name(base)
            if name is not None and defs is not None:
                in_place = base is not t or augmented
                basic = isinstance(t, cst.Subscript) and not augmented and self._basic_index(t)
                d = self._new_def(name, value, in_place, basic)
                defs.append(d)
                # the target: a store, or the tensor updated in place
                self.kinds[id(base)] = ("update", d) if in_place else ("store", d)
            else:
                defs = None  # another object's attribute or a tuple: the value escapes
        self.current = defs
        self.assign_value = value

    def attribute_name(self, node: cst.BaseExpression) -> Optional[str]:
        """``".cache"`` for ``self.cache``: the module's attributes are
        followed like locals whose loads are in every method of the class."""
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == self.self_name:
            return "." + node.attr.value
        return None

    def attribute_seen(self, node: cst.Attribute, name: str) -> None:
        kind, d = self.kinds.get(id(node), ("plain", None))
        if kind != "store":
            self.loads.setdefault(name, []).append((self.pos, id(node), kind, d))

    def returning(self, value: cst.BaseExpression) -> None:
        """``return <value>``: a factory in it is contained where the value
        is CPU-born and every caller's use of the method's result is."""
        d = _Def("", value, None, False, tuple(self.blocks))
        d.returned = True
        self.returns.append(d)
        self.current = [d]
        self.assign_value = value

    def add_to_list(self, receiver: cst.Name, value: cst.BaseExpression) -> None:
        """``items.append(v)``: ``items`` takes ``v`` in, like ``items += [v]``."""
        d = self._new_def(receiver.value, value, True)
        d.listed = True
        self.kinds[id(receiver)] = ("update", d)
        self.current = [d]
        self.assign_value = value

    def loop_assign(self, target: cst.BaseExpression, it: cst.BaseExpression) -> None:
        """``for r in rows`` / ``for a, b in zip(xs, ys)`` / ``for i, r in
        enumerate(rows)``: each target holds an element of a local, on that
        local's device. Other loops bind nothing devlint follows."""
        pairs: List[Tuple[cst.BaseExpression, Optional[cst.BaseExpression]]] = []
        if isinstance(it, cst.Name):
            pairs.append((target, it))
        elif isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("zip", "enumerate") \
                and not any(a.star or a.keyword is not None for a in it.args) \
                and isinstance(target, (cst.Tuple, cst.List)):
            sources: List[Optional[cst.BaseExpression]] = [a.value for a in it.args]
            if it.func.value == "enumerate":
                sources = [None] + sources[:1]
            if len(sources) == len(target.elements):
                pairs.extend(zip((e.value for e in target.elements), sources))
        for tgt, src in pairs:
            if isinstance(tgt, cst.Name) and src is not None and isinstance(src, cst.Name):
                d = self._new_def(tgt.value, src, False)
                d.pos = self.pos  # before the body; the source load comes later but is another name
                self.kinds[id(tgt)] = ("store", d)
            elif isinstance(tgt, cst.Name) and src is None:
                d = self._new_def(tgt.value, cst.Integer("0"), False)  # enumerate's counter
                d.pos = self.pos
                self.kinds[id(tgt)] = ("store", d)

    def _basic_index(self, target: cst.Subscript) -> bool:
        """``t[0]``, ``t[1:]``, ``t[..., i]`` with ``i`` a Python number: not
        an index tensor."""
        for el in target.slice:
            s = el.slice
            if isinstance(s, cst.Slice):
                continue
            value = s.value
            if isinstance(value, cst.UnaryOperation):
                value = value.expression
            if isinstance(value, (cst.Integer, cst.Ellipsis)) or (isinstance(value, cst.Name) and value.value == "None"):
                continue
            if isinstance(value, cst.Name) and value.value not in self.tensor_params and all(
                isinstance(d.value, cst.Integer) for d in self.by_name.get(value.value, ())
            ):
                continue  # a loop counter (for i in range(n)), an int argument or local
            return False
        return True

    def close_assign(self) -> None:
        for d in self.current or ():
            d.pos = self.pos
        self.pos += 1
        self.current = None
        self.assign_value = None

    def name_seen(self, node: cst.Name) -> None:
        self.pos += 1
        kind, d = self.kinds.get(id(node), ("plain", None))
        if kind == "store":
            return
        self.loads.setdefault(node.value, []).append((self.pos, id(node), kind, d))

    # -- analysis ---------------------------------------------------------------
    def _operands(self, node: cst.BaseExpression, out: List[cst.Name], skip: Set[str]) -> Tuple[bool, bool]:
        """Collect names used as tensor operands into ``out``; return
        (contains a torch call, has parts of unknown device)."""
        if isinstance(node, cst.Name):
            name = node.value
            if name in self.imports or name in ("True", "False", "None") or name in skip:
                return False, False
            if name in self.params and name not in self.tensor_params and name not in self.by_name \
                    and name not in self._assumed_params:
                return False, False  # a scalar argument (shape, flag)
            out.append(node)
            return False, False
        if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.Imaginary)):
            return False, False
        if isinstance(node, (cst.List, cst.Tuple)):
            return self._operands_of_data(node, out, skip)  # [a, b]: a list of the tensors
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name):
                return False, func.value not in _BUILTIN_SCALARS
            if isinstance(func, cst.Attribute):
                recv = func.value
                if func.attr.value == "cpu" and not node.args:
                    return True, False  # t.cpu(): a CPU tensor whatever t is
                if func.attr.value in _REDUCE_ALL and not node.args:
                    return False, False  # t.max(), t.item(): a 0-dim tensor or a number, which mixes with any device
                if isinstance(recv, cst.Name) and recv.value == "self":
                    callee = self.group.get(func.attr.value) if self.group is not None else None
                    if callee is not None and callee is not self and callee.returns_cpu():
                        return True, False  # self.grid(n): a method that builds its result on the CPU
                    return False, True  # self.proj(x): a submodule's output, on the model's device
                if isinstance(recv, cst.Name) and recv.value in self.imports:
                    if self.facts.is_factory(func):
                        return True, False  # a new CPU tensor; its arguments are shapes
                    # torch.cat([a, b]), torch.sin(a), math.log(2): operands are the arguments
                    qualified = self.facts.qualify(func) or ""
                    is_torch = qualified.startswith("torch.")
                    scalar_at = _SCALAR_POSITIONS.get(func.attr.value, frozenset()) if is_torch else frozenset()
                    unknown = False
                    i = 0
                    for arg in node.args:
                        if arg.keyword is None and not arg.star:
                            i += 1
                            if i - 1 in scalar_at:
                                continue
                        elif is_torch and arg.keyword is not None and arg.keyword.value in _SCALAR_KEYWORDS:
                            continue
                        _, u = self._operands_of_data(arg.value, out, skip)
                        unknown = unknown or u
                    return is_torch, unknown
                return self._operands(recv, out, skip)
            return False, True
        if isinstance(node, cst.Attribute):
            if isinstance(node.value, cst.Name) and node.value.value in self.imports:
                return False, False  # torch.float32, math.pi
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                return False, node.attr.value in self.tensor_attrs
            if node.attr.value in ("shape", "ndim", "dtype", "is_cuda"):
                return False, False
            return self._operands(node.value, out, skip)
        if isinstance(node, cst.Subscript):
            return self._operands(node.value, out, skip)
        if isinstance(node, cst.BinaryOperation):
            a = self._operands(node.left, out, skip)
            b = self._operands(node.right, out, skip)
            return a[0] or b[0], a[1] or b[1]
        if isinstance(node, cst.UnaryOperation):
            return self._operands(node.expression, out, skip)
        if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
            # [t.float() for t in pieces]: the elements of a local, transformed
            comp = node.for_in
            if comp.inner_for_in is None and not comp.ifs and isinstance(comp.target, cst.Name) and not comp.asynchronous:
                a = self._operands(comp.iter, out, skip)
                b = self._operands(node.elt, out, skip | {comp.target.value})
                return a[0] or b[0], a[1] or b[1]
            return False, True
        if isinstance(node, cst.IfExp):  # a if cond else b: either branch (the test is a Python truth value)
            a = self._operands(node.body, out, skip)
            b = self._operands(node.orelse, out, skip)
            return a[0] or b[0], a[1] or b[1]
        if isinstance(node, cst.Comparison):  # t < n, a >= b: a tensor on the operands' device
            t, u = self._operands(node.left, out, skip)
            for c in node.comparisons:
                a, b = self._operands(c.comparator, out, skip)
                t, u = t or a, u or b
            return t, u
        return False, True

    def _operands_of_data(self, node: cst.BaseExpression, out: List[cst.Name], skip: Set[str]) -> Tuple[bool, bool]:
        if isinstance(node, (cst.List, cst.Tuple)):
            t = u = False
            for el in node.elements:
                if isinstance(el, cst.StarredElement):
                    return t, True
                a, b = self._operands(el.value, out, skip)
                t, u = t or a, u or b
            return t, u
        return self._operands(node, out, skip)

    def _defs_of(self, name: str) -> List[_Def]:
        defs = list(self.by_name.get(name, ()))
        if name in self._assumed_params:
            defs.append(self.param_defs[name])
        return defs

    def _analysis(self) -> Tuple[Set[str], Set[str], Dict[int, _Def]]:
        """(scalar names, CPU-born names, flows) under the current
        hypothesis. A scalar name only ever holds Python numbers
        (``half = dim // 2``); a CPU-born name holds CPU tensors built from
        torch calls, scalars, other CPU-born names and values taken to be
        CPU tensors. ``flows`` maps a load (id of its Name) to the binding
        whose value it is an operand of, where that binding cannot mix it
        with a tensor of another device: every other operand is CPU-born
        (``u = t.repeat(2)``, ``u = t * born``)."""
        key = (self._assumed, self._assumed_params)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        # a parameter that does not hold a tensor and is re-bound in the body
        # (chunks = torch.tensor(chunks)) is followed like a local
        rebound = {n for n in self.by_name if n in self.params and n not in self.tensor_params}
        candidates = (set(self.by_name) - self.params) | rebound | set(self._assumed_params)
        scalars = set(candidates) - set(self._assumed_params)
        changed = True
        while changed:
            changed = False
            for name in list(scalars):
                for d in self._defs_of(name):
                    if id(d) in self._assumed:
                        scalars.discard(name)
                        changed = True
                        break
                    names: List[cst.Name] = []
                    torch_call, unknown = self._operands(d.value, names, set())
                    if torch_call or unknown or not {n.value for n in names} <= scalars:
                        scalars.discard(name)
                        changed = True
                        break
        born = candidates - scalars
        changed = True
        while changed:
            changed = False
            for name in list(born):
                tensor = False
                for d in self._defs_of(name):
                    if id(d) in self._assumed or (d.param and name in self._assumed_params):
                        tensor = True
                        continue
                    names = []
                    torch_call, unknown = self._operands(d.value, names, scalars)
                    if unknown or not {n.value for n in names} <= born:
                        born.discard(name)
                        changed = True
                        break
                    tensor = tensor or torch_call or bool(names)
                else:
                    if not tensor:
                        born.discard(name)
                        changed = True
        flows: Dict[int, _Def] = {}
        for d in (*self.defs, *self.returns):
            if id(d) in self._assumed:
                continue
            names = []
            _, unknown = self._operands(d.value, names, scalars)
            if unknown:
                continue
            others = {n.value for n in names} - born
            if len(others) <= 1:
                for n in names:
                    if not others or n.value in others:
                        flows[id(n)] = d
        for value in self.moved_values:
            names = []
            _, unknown = self._operands(value, names, scalars)
            if not unknown and {n.value for n in names} <= born:
                for n in names:
                    flows[id(n)] = _MOVED_DEF
        self._cache[key] = (scalars, born, flows)
        return scalars, born, flows

    def _born_def(self, d: _Def) -> bool:
        if id(d) in self._assumed or (d.param and d.name in self._assumed_params):
            return True
        scalars, born, _ = self._analysis()
        names: List[cst.Name] = []
        _, unknown = self._operands(d.value, names, scalars)
        return not unknown and {n.value for n in names} <= born

    def returns_cpu(self) -> bool:
        """Every ``return`` of the method gives a value built on the CPU from
        torch calls and numbers only (``return torch.cat(pieces)``)."""
        if self._returns_cpu is None:
            self._returns_cpu = False  # a recursive question is answered "no"
            saved = (self._assumed, self._assumed_params)
            self._assumed, self._assumed_params = frozenset(), frozenset()
            try:
                self._returns_cpu = bool(self.returns) and all(self._born_def(r) for r in self.returns)
            finally:
                self._assumed, self._assumed_params = saved
        return self._returns_cpu

    def calls_in_moved_values(self) -> Set[int]:
        """Ids of the calls inside a moved computation over CPU-born values
        only (``torch.stack(torch.meshgrid(torch.arange(h), ...)).to(dev)``)."""
        scalars, born, _ = self._analysis()
        out: Set[int] = set()
        for value in self.moved_values:
            names: List[cst.Name] = []
            _, unknown = self._operands(value, names, scalars)
            if unknown or not {n.value for n in names} <= born:
                continue
            collector = _Calls()
            value.visit(collector)
            out |= collector.ids
        return out

    def contained(self, defs: Optional[List[_Def]], resolver: "_Resolver", assume: bool = False) -> bool:
        """Whether a value bound by ``defs`` stays on its own device: on the
        CPU, it never meets a tensor of another device. With ``assume``, the
        bindings' values are taken to be CPU tensors (a method's result at a
        call site, a parameter); otherwise each must be CPU-born."""
        if not defs:
            return False
        saved = (self._assumed, self._assumed_params)
        if assume:
            self._assumed = frozenset(id(d) for d in defs if not d.param)
            self._assumed_params = frozenset(d.name for d in defs if d.param)
        try:
            return self._contained(defs, resolver, assume)
        finally:
            self._assumed, self._assumed_params = saved

    def _contained(self, defs: List[_Def], resolver: "_Resolver", assume: bool) -> bool:
        _, _, flows = self._analysis()
        contained: Dict[int, bool] = {id(_MOVED_DEF): True}
        roots = {id(d) for d in defs}

        def is_contained(d: _Def) -> bool:
            key = id(d)
            if key in contained:
                return contained[key]
            contained[key] = True  # a cycle of bindings does not escape by itself
            root = key in roots
            ok = self._born_def(d) if root else True
            if d.returned:
                ok = ok and (self.returns_placed or resolver.result_contained(self))
                contained[key] = ok
                return ok
            if d.name.startswith(".") and ok:
                ok = resolver.attribute_contained(d.name, self)
            seen = 0
            # a plain re-binding later in the same block, or in a block around
            # it, hides this binding from every load after it (t = zeros(n);
            # t[0] = 1; t = t.to(dev); use(t))
            killer = min(
                (o for o in self.by_name.get(d.name, ())
                 if not o.in_place and o.pos > d.pos and o.block in d.blocks and o is not d),
                key=lambda o: o.pos,
                default=None,
            )
            for pos, node_id, kind, target in self.loads.get(d.name, ()) if ok else ():
                if killer is not None:
                    around = killer.block != d.block and d.loop is not None and d.loop <= pos <= d.pos
                    if not (d.pos < pos <= killer.pos or around):
                        continue
                elif pos <= d.pos and (d.loop is None or pos < d.loop):
                    continue  # cannot see this binding
                seen += 1
                if kind in ("index", "move", "inspect"):
                    continue
                if kind == "return" and (self.returns_placed or resolver.result_contained(self)):
                    continue
                if kind == "update" and target is not None and (
                    target.basic or target.listed or self._born_def(target)
                ):
                    continue
                if kind == "arg" and node_id in self.arg_of and resolver.param_contained(self, *self.arg_of[node_id]):
                    continue
                into = flows.get(node_id)
                if into is not None and into is not d and is_contained(into):
                    continue
                if into is d:
                    continue  # t = t * 2: the new binding is checked on its own
                ok = False
                break
            if not (assume and root):
                ok = ok and seen > 0
            contained[key] = ok
            return ok

        return all(is_contained(d) for d in defs)

    def site_contained(self, site: _Site, resolver: "_Resolver") -> bool:
        """Whether a call's result stays on the device it is returned on."""
        if site.kind in ("move", "index", "inspect"):
            return True
        if site.kind == "return":
            return self.returns_placed or resolver.result_contained(self)
        if site.kind == "arg" and site.target is not None:
            return resolver.param_contained(self, *site.target)
        if site.kind == "bind":
            return self.contained(site.defs, resolver, assume=True)
        return False

    def param_contained(self, name: str, resolver: "_Resolver") -> bool:
        d = self.param_defs.get(name)
        return d is not None and self.contained([d], resolver, assume=True)

    def moved_next(self, defs: Optional[List[_Def]], statement: Optional[cst.SimpleStatementLine]) -> bool:
        """``t = torch.arange(n)`` directly followed, at the next statement
        of the same block that mentions ``t``, by ``t = t.<...>.to(dev)``."""
        if statement is None or not defs or len(defs) != 1 or defs[0].in_place:
            return False
        name = defs[0].name
        for stmt in _statements_after(self.node, statement):
            if not _mentions(stmt, name):
                continue
            if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
                small = stmt.body[0]
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                    and small.targets[0].target.value == name
                    and _root_name(small.value) == name
                    and _chain_moves(small.value, self.facts)
                ):
                    return True
            return False
        return False


class _Resolver:
    """Answers, once the file has been seen, the questions a flow asks about
    the others: is the result of a method (of the same class) or of a
    module-level function contained at every forward-reachable call site, is
    a value passed as one of its parameters contained there, is a module
    attribute kept to harmless uses. A question met again while it is being
    answered (recursion) is answered "no"."""

    def __init__(self, flows: List[_MethodFlow], functions: Dict[str, _MethodFlow]) -> None:
        self.flows = flows
        self.functions = functions
        self._results: Dict[Tuple[int, str], bool] = {}
        self._params: Dict[Tuple[int, str, str], bool] = {}
        self._outside: Dict[int, Set[str]] = {}

    def _callers(self, flow: _MethodFlow) -> List[_MethodFlow]:
        if flow.group is None:
            return self.flows  # a module-level function: called from anywhere in the file
        # the class's own methods, and those of its subclasses in the file
        # that inherit the method (self.init_hidden(b) in a subclass's forward)
        return [
            f for f in self.flows
            if f.group is flow.group or (
                flow.cls is not None and f.cls is not None and f.cls is not flow.cls
                and flow.cls.name in _file_bases(f.facts, f.cls)
                and flow.key not in f.cls.methods
            )
        ]

    def _callee(self, flow: _MethodFlow, key: str) -> Optional[_MethodFlow]:
        if key.startswith("@"):
            return self.functions.get(key[1:])
        return flow.group.get(key) if flow.group is not None else None

    def result_contained(self, flow: _MethodFlow) -> bool:
        memo = (id(flow.group), flow.key)
        if memo in self._results:
            return self._results[memo]
        self._results[memo] = False
        sites = [(f, s) for f in self._callers(flow) for s in f.sites if s.method == flow.key]
        if not sites and flow.runner:
            # generate(...) returning token ids built on the CPU: the result
            # leaves the model (no DataParallel gather runs it)
            self._results[memo] = True
            return True
        ok = bool(sites) and all(f.site_contained(s, self) for f, s in sites)
        self._results[memo] = ok
        return ok

    def param_contained(self, asker: _MethodFlow, callee_key: str, key: Union[int, str]) -> bool:
        flow = self._callee(asker, callee_key)
        if flow is None:
            return False
        if isinstance(key, int):
            facts = flow.cls.methods.get(callee_key) if flow.cls is not None else None
            offset = 0 if flow.group is None or (facts is not None and facts.is_static) else 1
            index = key + offset
            if index >= len(flow.positional):
                return False
            name = flow.positional[index]
        else:
            name = key
        memo = (id(flow.group), callee_key, name)
        if memo in self._params:
            return self._params[memo]
        self._params[memo] = False
        ok = flow.param_contained(name, self)
        self._params[memo] = ok
        return ok

    def attribute_contained(self, name: str, owner: _MethodFlow) -> bool:
        """The loads of a module attribute outside the method that stores
        it: none in methods forward does not reach, and in the others only
        uses that keep a CPU tensor to itself. Reads from outside the class
        are not seen."""
        group = owner.group
        if group is None:
            return False
        outside = self._outside.get(id(group))
        if outside is None:
            outside = self._outside[id(group)] = set()
            for stmt in statements(owner.class_node) if owner.class_node is not None else ():
                if isinstance(stmt, cst.FunctionDef) and stmt.name.value not in group:
                    outside |= self_attribute_loads(stmt)
        if name[1:] in outside:
            return False
        for flow in self._callers(owner):
            if flow is owner:
                continue
            for _, node_id, kind, _ in flow.loads.get(name, ()):
                if kind in ("index", "move", "inspect"):
                    continue
                if kind == "return" and (flow.returns_placed or self.result_contained(flow)):
                    continue
                if kind == "arg" and node_id in flow.arg_of and self.param_contained(flow, *flow.arg_of[node_id]):
                    continue
                return False
        return True


def _is_setattr_on(node: cst.Call, names: Set[str]) -> bool:
    """``setattr(<one of names>, <name>, <value>)``."""
    return (
        isinstance(node.func, cst.Name)
        and node.func.value == "setattr"
        and len(node.args) == 3
        and not any(a.star or a.keyword is not None for a in node.args)
        and isinstance(node.args[0].value, cst.Name)
        and node.args[0].value.value in names
    )


def _file_bases(facts: FileFacts, cls: ClassFacts) -> List[str]:
    """The bases of ``cls`` defined in this file, transitively."""
    out: List[str] = []
    todo = [b for b in cls.bases if b in facts.classes]
    while todo:
        b = todo.pop(0)
        if b in out:
            continue
        out.append(b)
        todo.extend(x for x in facts.classes[b].bases if x in facts.classes)
    return out


def _inherited_methods(facts: FileFacts, cls: ClassFacts) -> List[str]:
    """Methods ``cls`` inherits from its bases of this file."""
    return [m for b in _file_bases(facts, cls) for m in facts.classes[b].methods if m not in cls.methods]


def _add_device(call: cst.Call, anchor: str) -> cst.Call:
    return call.with_changes(args=with_keyword_arg(call.args, "device", cst.parse_expression(anchor)))
