"""DL003 nested-data-parallel

## What it does
Flags a `DataParallel`/`DistributedDataParallel` wrapper that ends up inside
another one:

* a submodule wrapped inside a model (`self.encoder = nn.DataParallel(Encoder())`
  in `__init__`, or in a helper method that returns a wrapper) when that
  model, or a model built from it, is itself wrapped in this file;
* a wrapped model handed to the constructor of a model that is then wrapped
  (`enc = nn.DataParallel(Encoder())` ... `nn.DataParallel(Seq2Seq(enc, dec))`);
* a model wrapped twice on one path: `DP(DP(m))`, `model = DP(model)` after
  `model = DP(model)` with no re-binding in between, a function that wraps
  its argument called on a model it already wrapped, or `self.model` wrapped
  again in a method (`resume()`) when `__init__` always wraps it; a class
  whose `__init__` wraps its model argument (`self.model =
  nn.DataParallel(model)`) counts as such a function when it is built
  (`Trainer(nn.DataParallel(net))`), and so does a wrapper given the result
  of a function that returns one (`nn.DataParallel(build_model(args))`,
  `Trainer(build_model(args))` with `build_model` wrapping under `if
  torch.cuda.device_count() > 1:`, which holds on every machine where
  wrappers can nest);
* a loop whose every round wraps what the last round left in the name
  (`for stage in stages: model = DP(model)`, or `model =
  train_stage(model, ...)` with a function that wraps its argument and
  returns the wrapper): from the second round on it wraps the wrapper. Not
  a wrap under a condition inside the round (`if i == 0:`), nor one that
  tests whether the model is wrapped first, nor one of a model the round
  builds afresh;
* a method that wraps what an attribute of the instance held when it began
  and stores the wrapper back in that attribute (`self.model =
  DP(self.model)` in `fit()`; `model = self.model_wrapped`, `model =
  DP(model)`, `self.model_wrapped = model` in `train()`): every call after
  the first wraps the wrapper (`train()` called once per stage). Only for a
  method that may run more than once on one instance: one the file calls in
  a loop, twice on one instance, from such a method, or never (its users
  call it); not `__init__`, nor a method called once on each instance
  (unless `__init__` wraps the attribute too: then the first call nests
  already). The value may pass through a call given it on the way
  (`self.model, opt = prepare(self.model)`: it may return it), not through
  one that returns its `.module` (a function of the file or of the project:
  `getattr(m, "module", m)`). Not when the method tests whether the model is
  wrapped already before wrapping it, or rebinds the attribute to a fresh
  model first.

A subclass of `DataParallel`/`DistributedDataParallel` (of this file or of
the project: `class AttrDataParallel(nn.DataParallel)` forwarding attribute
reads) is a wrapper like its base. A function of this file (a method, or a
function defined inside the calling one) that returns its argument wrapped
(directly, or as another such function returned it: `model =
setup(model)`, then `return model`) counts as a wrap of that argument
wherever it is called: inside a model
(`self.backbone = maybe_parallel(Backbone())`), around a model, or twice on
one path. That holds when it wraps under a condition too
(`if torch.cuda.device_count() > 1: model = nn.DataParallel(model)` then
`return model`, or `return nn.DataParallel(model) if multi_gpu else model`):
on a multi-GPU machine the condition holds.

## Why is this bad?
The outer wrapper replicates the model, inner wrapper included, onto every
GPU and runs each replica on its own device. The inner `DataParallel` still
believes its parameters live on its `device_ids[0]` (`cuda:0`) and checks
that in its `forward`, so the replica on `cuda:1` fails:

```
RuntimeError: module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of them on device: cuda:1
```

Where it does not fail, the inner wrapper scatters an already scattered batch
again and gathers it onto `cuda:0`, so activations of different replicas end
up on the wrong GPU (`Expected all tensors to be on the same device`).
Wrapping twice also nests `state_dict` keys (`module.module.`).

## Example
```python
class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.DataParallel(Encoder())
        self.decoder = Decoder()

model = nn.DataParallel(Seq2Seq()).cuda()
```

## Use instead
```python
class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder()

model = nn.DataParallel(Seq2Seq()).cuda()
```

Wrap once, at the top, around the whole model. Not flagged: one wrapper at
the top level; a wrapper inside `if torch.cuda.device_count() > 1:` around an
unwrapped model; `DataParallel` on one branch and `DistributedDataParallel`
on another (`if args.n_gpu > 1: ...` / `if args.local_rank != -1: ...`);
`model = model.module` before wrapping again; wrappers in different functions
applied to different models; a model class with an inner wrapper that this
file never wraps. A wrapping function is not a wrap of its argument when it
first checks whether the argument is already wrapped (`isinstance(m,
nn.DataParallel)`, `hasattr(m, "module")`, `m.module`), when it wraps a model
it builds rather than its argument, or when the caller turns off a switch its
condition reads (`maybe_wrap(m, parallel=False)`).

## Fix safety
Unsafe. The fix removes the inner wrapper (for a double wrap: the second
one) and rewrites the reads that went through it (`self.encoder.module` ->
`self.encoder`, `model.module.module` -> `model.module`). The `state_dict`
keys lose one `module.` level, so checkpoints saved before the fix need that
prefix stripped to load. A method that wraps again on each call is reported
without a fix (wrap only what is not wrapped yet, or keep the unwrapped model
in its own attribute). A call of a wrapping function (a second one, or one
inside a model) is reported without a fix (the function may do more than
wrap, and it is still needed for the wrap that stays).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from devlint.diagnostic import Fix, FixSafety
from devlint.facts.scripts import (
    BindEvent,
    ScopeFacts,
    WrapEvent,
    always_before,
    binding_chain,
    contained_classes,
    rewraps_in_loop,
    rewraps_own_attribute,
    runs_repeatedly,
    wrapped_origin,
)
from devlint.rule import Invalid, ScriptRule, Valid
from devlint.scan import calls_a_wrapper
from devlint.syntax import keyword_arg, positional_args
from devlint.torch_api import WRAPPER_SHORT

_WHY_UNSAFE = "removing a wrapper drops a `module.` level from the state_dict keys"


class NestedDataParallel(ScriptRule):
    code = "DL003"
    name = "nested-data-parallel"
    brief = "DataParallel/DDP around a submodule of a wrapped model, or around a model twice"
    message = "{what}"
    fix_safety = "unsafe"
    tokens = ("DataParallel",)
    project_keys = ("wraps",)

    VALID = [
        Valid(
            """
import torch
from torch import nn

def main():
    device = torch.device("cuda")
    model = nn.Linear(4, 4).to(device)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    torch.save(model.module.state_dict(), "m.pt")
"""
        ),
        Valid(
            """
import torch
from torch import nn

def train(args, model, local_rank):
    if args.n_gpu > 1:
        model = nn.DataParallel(model)
    if args.local_rank != -1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    return model

def evaluate(other):
    return nn.DataParallel(other)
"""
        ),
        Valid(
            """
from torch import nn

class Big(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.DataParallel(nn.Linear(4, 4))

model = Big()
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
from torch import nn

class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.DataParallel(nn.Linear(4, 4))
        self.decoder = nn.Linear(4, 4)

    def forward(self, x):
        return self.decoder(self.encoder(x))

    def encoder_weights(self):
        return self.encoder.module.weight

model = nn.DataParallel(Seq2Seq()).cuda()
""",
            """
from torch import nn

class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.decoder = nn.Linear(4, 4)

    def forward(self, x):
        return self.decoder(self.encoder(x))

    def encoder_weights(self):
        return self.encoder.weight

model = nn.DataParallel(Seq2Seq()).cuda()
""",
            unsafe=True,
        ),
        Invalid(
            """
import torch
from torch import nn

def main():
    model = nn.Linear(4, 4).cuda()
    model = nn.DataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model = nn.DataParallel(model)
    torch.save(model.module.module.state_dict(), "m.pt")
""",
            """
import torch
from torch import nn

def main():
    model = nn.Linear(4, 4).cuda()
    model = nn.DataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.save(model.module.state_dict(), "m.pt")
""",
            unsafe=True,
        ),
        Invalid(
            """
from torch import nn

enc = nn.DataParallel(nn.Linear(4, 4))
dec = nn.Linear(4, 4)
model = nn.DataParallel(nn.Sequential(enc, dec))
""",
            """
from torch import nn

enc = nn.Linear(4, 4)
dec = nn.Linear(4, 4)
model = nn.DataParallel(nn.Sequential(enc, dec))
""",
            unsafe=True,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        return calls_a_wrapper(scan)

    def on_file_end(self) -> None:
        self._reported: Set[int] = set()
        self._inner_in_classes()
        self._inner_in_scripts()
        self._double_wraps()
        self._rewraps_on_each_call()
        self._rewraps_in_loops()

    def _emit(self, node: cst.CSTNode, message: str, replacements: Optional[List[Tuple[cst.CSTNode, object]]], description: str, no_fix: str = "",
              related: Sequence[Tuple[str, int, str]] = ()) -> None:
        if id(node) in self._reported:
            return
        self._reported.add(id(node))
        if replacements:
            self.report(node, message, fix=Fix(replacements, FixSafety.UNSAFE, description), related=related)
        else:
            self.report(node, message, no_fix_reason=no_fix or "the wrapped module is not a positional argument", related=related)

    def _related_class(self, name: str) -> List[Tuple[str, int, str]]:
        """Where a project class of another file is (for a cross-file finding)."""
        origin = self.facts.class_origin(name) if name else None
        if origin is None:
            return []
        return [(origin[0], origin[1], f"{name.rsplit('.', 1)[-1]} holds the wrapped part as a submodule")]

    # -- a wrapper inside a model class ----------------------------------------
    def _outer_wraps(self) -> Dict[str, Tuple[str, str, bool]]:
        """class -> (outer wrapper, scope name, only under a condition) for
        every local module class whose instances end up inside a wrapped
        model (an unconditional wrap preferred)."""
        out: Dict[str, Tuple[str, str, bool]] = {}
        for scope in self.scripts.scopes:
            for ev in list(scope.wraps) + list(scope.helper_wraps):
                origin = wrapped_origin(self.scripts, scope, ev)
                roots = list(origin.classes)
                for _name, _scope, chain in origin.args:
                    if chain and chain[-1].kind == "construct":
                        roots.append(chain[-1].value_class)
                for cls in contained_classes(self.facts, roots):
                    if cls == scope.class_name:
                        continue  # a class wrapping its own parts is not wrapped by that
                    conditional = bool(ev.branch)
                    if cls not in out or (out[cls][2] and not conditional):
                        out[cls] = (ev.wrapper, scope.name, conditional)
        return out

    def _inner_in_classes(self) -> None:
        outer = self._outer_wraps()
        for scope in self.scripts.scopes:
            cls = self.facts.classes.get(scope.class_name)
            inner = self.scripts.inner_wrappers.get(cls.name) if cls is not None else None
            if cls is None or not inner or cls.name not in outer or not scope.params:
                continue
            me = scope.params[0] + "."
            wrapper_out, where, outer_conditional = outer[cls.name]
            for ev in scope.wraps:
                if ev.branch and outer_conditional:
                    # both wrappers depend on conditions (an "inside" and an
                    # "outside" mode): nothing shows they meet
                    continue
                attr = ev.statement_target[len(me):] if ev.statement_target.startswith(me) else ""
                if attr in inner:
                    attrs = [attr]
                    shown = f"`{me}{attr}`"
                elif scope.wraps_param >= 0:
                    attrs = list(inner)
                    shown = f"`{scope.name}` wraps a submodule"
                    shown = f"a submodule (through `{scope.name.split('.')[-1]}`)"
                else:
                    continue
                node = self.wrap_nodes[(scope.index, ev.index)]
                message = (
                    f"{shown} is wrapped in {_short(ev.wrapper)} inside `{cls.name}`, which is itself wrapped in "
                    f"{_short(wrapper_out)} ({_where(where)}): the inner wrapper fails on the replicas"
                )
                replacements = self.unwrap_replacements(node, ev)
                if replacements is not None:
                    replacements += self.class_read_fixes(cls.name, attrs)
                self._emit(node, message, replacements, f"remove the inner {_short(ev.wrapper)} ({_WHY_UNSAFE})")
            for ev in scope.helper_wraps:
                attr = ev.statement_target[len(me):] if ev.statement_target.startswith(me) else ""
                if attr not in inner or (ev.branch and outer_conditional):
                    continue
                helper = self.scripts.callee_scope(scope, ev.helper)
                if helper is not None and helper.class_name == cls.name and helper.wraps_param >= 0:
                    continue  # reported at the wrapper inside that method
                node = self._helper_node(scope, ev)
                if node is None:
                    continue
                message = (
                    f"`{me}{attr}` is wrapped in {_short(ev.wrapper)} by `{ev.helper}` inside `{cls.name}`, which is "
                    f"itself wrapped in {_short(wrapper_out)} ({_where(where)}): the inner wrapper fails on the replicas"
                )
                self._emit(node, message, None, "", no_fix=_helper_no_fix(ev.helper))

    # -- a wrapped model passed into a model that is wrapped ---------------------
    def _inner_in_scripts(self) -> None:
        for scope in self.scripts.scopes:
            for ev in list(scope.wraps) + list(scope.helper_wraps):
                if ev.wrapped_is_wrap and ev.index > 0 and not ev.helper:
                    inner = scope.wraps[ev.index - 1]
                    node = self.wrap_nodes[(scope.index, inner.index)]
                    first = _first_arg(node)
                    replacements = None
                    if first is not None:
                        replacements = [(node, first)]
                        if ev.target:
                            replacements += self.module_read_fixes(ev.target, scope, ev.index, depth=2)
                    message = f"{_short(inner.wrapper)} directly inside {_short(ev.wrapper)}: the model is wrapped twice"
                    self._emit(node, message, replacements, f"remove the inner {_short(inner.wrapper)} ({_WHY_UNSAFE})")
                origin = wrapped_origin(self.scripts, scope, ev)
                for name, where, chain in origin.args:
                    if chain and chain[-1].kind == "call":
                        self._inner_helper_in_script(name, where, chain[-1], ev, origin)
                    if not chain or chain[-1].kind != "wrap":
                        continue
                    inner = where.wraps[chain[-1].wrap_index]
                    node = self.wrap_nodes[(where.index, inner.index)]
                    model = origin.classes[0] if origin.classes else (ev.wrapped_class or ev.wrapped_name)
                    message = (
                        f"`{name}` is wrapped in {_short(inner.wrapper)} and then built into {self.facts.shown_class(model)}, "
                        f"which is wrapped in {_short(ev.wrapper)}: the inner wrapper fails on the replicas"
                    )
                    replacements = self.unwrap_replacements(node, inner)
                    if replacements is not None and inner.target:
                        replacements += self.module_read_fixes(inner.target, where, inner.index)
                    self._emit(node, message, replacements, f"remove the inner {_short(inner.wrapper)} ({_WHY_UNSAFE})",
                               related=self._related_class(model))

    # -- the same model wrapped twice ------------------------------------------------
    def _double_wraps(self) -> None:
        for scope in self.scripts.scopes:
            for ev in list(scope.wraps) + list(scope.helper_wraps):
                earlier = self._wrapped_before(scope, ev)
                if earlier is None:
                    continue
                shown = f"`{ev.wrapped_name or ev.wrapped}`"
                if not ev.wrapped_name and ev.wrapped_call and not ev.wrapped_is_wrap:
                    shown = f"the model `{ev.wrapped_call}()` returns"
                if ev.helper:
                    # a function that wraps its argument, called on a wrapped model
                    node = self._helper_node(scope, ev)
                    if node is not None:
                        helper, related = self.helper_shown(ev.helper)
                        message = (
                            f"{shown} is already wrapped ({earlier}) and {helper} wraps it again "
                            f"in {_short(ev.wrapper)}"
                        )
                        self._emit(node, message, None, "", no_fix=_helper_no_fix(ev.helper), related=related)
                    continue
                node = self.wrap_nodes[(scope.index, ev.index)]
                message = (
                    f"{shown} is already wrapped ({earlier}) and is wrapped again in {_short(ev.wrapper)}"
                )
                replacements = self.unwrap_replacements(node, ev)
                if replacements is not None and ev.target:
                    replacements += self.module_read_fixes(ev.target, scope, ev.index, depth=2)
                self._emit(node, message, replacements, f"remove the second wrapper ({_WHY_UNSAFE})")

    # -- a method that wraps what it stored on its last call ------------------------
    def _rewraps_on_each_call(self) -> None:
        for scope in self.scripts.scopes:
            rewraps = rewraps_own_attribute(self.scripts, scope)
            repeated = bool(rewraps) and runs_repeatedly(self.scripts, scope)
            for ev, attr in rewraps:
                in_init = self._wrapped_in_init(scope, attr, ev)
                if not repeated and not in_init:
                    continue
                node = self._helper_node(scope, ev) if ev.helper else self.wrap_nodes[(scope.index, ev.index)]
                if node is None:
                    continue
                method = scope.name.split(".")[-1]
                shown, related = self.helper_shown(ev.helper) if ev.helper else ("", [])
                through = f" (through {shown})" if shown else ""
                if repeated:
                    message = (
                        f"`{method}` wraps `{attr}` in {_short(ev.wrapper)}{through} and stores the wrapper back in `{attr}`: "
                        f"the next call of `{method}` wraps the wrapper again"
                    )
                    if in_init:
                        message += f" (and `__init__` already wraps `{attr}`)"
                else:
                    message = (
                        f"`{attr}` is already wrapped by `__init__` (on a multi-GPU machine) and `{method}` wraps it "
                        f"again in {_short(ev.wrapper)}{through}"
                    )
                self._emit(node, message, None, "", no_fix=_helper_no_fix(ev.helper) if ev.helper else (
                    f"wrap only what is not wrapped yet (`isinstance({ev.wrapped_name}, {_short(ev.wrapper)})`), "
                    f"or keep the unwrapped model in its own attribute"
                ), related=related)

    # -- a loop that wraps what the last round stored ---------------------------
    def _rewraps_in_loops(self) -> None:
        for scope in self.scripts.scopes:
            for ev in rewraps_in_loop(scope):
                node = self._helper_node(scope, ev) if ev.helper else self.wrap_nodes.get((scope.index, ev.index))
                if node is None:
                    continue
                shown, related = self.helper_shown(ev.helper) if ev.helper else ("", [])
                through = f" (through {shown})" if shown else ""
                message = (
                    f"`{ev.wrapped_name}` is wrapped in {_short(ev.wrapper)}{through} in a loop that keeps the wrapper "
                    f"in `{ev.wrapped_name}`: every round after the first wraps the wrapper again"
                )
                self._emit(node, message, None, "", no_fix=_helper_no_fix(ev.helper) if ev.helper else (
                    f"wrap once before the loop, or keep the unwrapped model in its own name"
                ), related=related)

    def _wrapped_in_init(self, scope: ScopeFacts, attr: str, ev: WrapEvent) -> bool:
        """Does ``__init__`` wrap ``attr`` too (one of the two wraps holding
        on every path: two conditional ones may be exclusive modes)?"""
        init = self.scripts.scope_named(f"{scope.class_name}.__init__")
        if init is None or not init.params:
            return False
        name = init.params[0] + attr[len(scope.params[0]):]
        return any(b.target == name and b.kind == "wrap" and not (b.branch and ev.branch) for b in init.binds)

    # -- calls of the file's wrap helpers ---------------------------------------
    def _helper_node(self, scope: ScopeFacts, ev: WrapEvent) -> Optional[cst.Call]:
        return self.scripts.call_nodes.get((scope.index, ev.helper, ev.helper_call))

    @staticmethod
    def _helper_event(scope: ScopeFacts, bind: BindEvent) -> Optional[WrapEvent]:
        """The helper wrap behind ``x = helper(...)``, None when that call
        does not wrap."""
        found = None
        for h in scope.helper_wraps:
            if h.target == bind.target and h.helper == bind.call and h.order < bind.order:
                found = h
        return found

    def _inner_helper_in_script(self, name: str, where: ScopeFacts, bind: BindEvent, ev: WrapEvent, origin) -> None:
        """``enc = maybe_parallel(Encoder())`` built into a model wrapped by ``ev``."""
        inner = self._helper_event(where, bind)
        if inner is None:
            return
        node = self._helper_node(where, inner)
        if node is None:
            return
        model = origin.classes[0] if origin.classes else (ev.wrapped_class or ev.wrapped_name)
        message = (
            f"`{name}` is wrapped in {_short(inner.wrapper)} by `{inner.helper}` and then built into {self.facts.shown_class(model)}, "
            f"which is wrapped in {_short(ev.wrapper)}: the inner wrapper fails on the replicas"
        )
        self._emit(node, message, None, "", no_fix=_helper_no_fix(inner.helper), related=self._related_class(model))

    def _wrapping_function(self, scope: ScopeFacts, call: str) -> Optional[ScopeFacts]:
        helper = self.scripts.callee_scope(scope, call)
        if helper is not None and (helper.wraps_param >= 0 or helper.returns_wrapper or helper.name in self.scripts.wrap_helpers):
            return helper
        return None

    def _wrapped_before(self, scope: ScopeFacts, ev: WrapEvent) -> Optional[str]:
        """How what ``ev`` wraps was wrapped already, or None: a name wrapped
        on every path to it, a wrapper call handed to a wrap helper
        (``Trainer(nn.DataParallel(net))``), or the result of a function that
        returns a wrapper (``nn.DataParallel(build_model(args))``; one that
        wraps under ``if torch.cuda.device_count() > 1`` does it on every
        machine where a wrapper can nest)."""
        if ev.wrapped_name:
            return self._already_wrapped(scope, ev.wrapped_name, ev.order, ev.branch)
        if ev.helper and ev.wrapped_is_wrap:
            return "a wrapper built in the call itself"
        if ev.wrapped_call:
            helper = self._wrapping_function(scope, ev.wrapped_call)
            if helper is not None and (helper.returns_wrapper or helper.name in self.scripts.wrap_helpers and not ev.helper):
                known = self.scripts.wrap_helpers.get(helper.name)
                wrapper = helper.returns_wrapper or helper.wraps_param_with or (known.wrapper if known else "")
                return f"in {_short(wrapper)} by `{ev.wrapped_call}`"
        return None

    def _already_wrapped(self, scope: ScopeFacts, name: str, order: int, branch) -> Optional[str]:
        """How ``name`` was wrapped before ``order`` on every path to it, or None."""
        chain = binding_chain(scope, name, order, branch)
        if not chain:
            return self._wrapped_by_constructor(scope, name)
        last = chain[-1]
        if not always_before(last.branch, branch):
            return None
        if last.kind == "wrap":
            first = scope.wraps[last.wrap_index]
            return f"in {_short(first.wrapper)} earlier {_where(scope.name)}"
        if last.kind == "call":
            helper = self._wrapping_function(scope, last.call)
            if helper is not None:
                known = self.scripts.wrap_helpers.get(helper.name)
                if known is not None and self._helper_event(scope, last) is None:
                    return None  # a wrap helper switched off (``maybe_wrap(m, parallel=False)``)
                wrapper = helper.wraps_param_with or helper.returns_wrapper or (known.wrapper if known else "")
                return f"by `{last.call}`, which returns it wrapped in {_short(wrapper)}"
        return None


    def _wrapped_by_constructor(self, scope: ScopeFacts, name: str) -> Optional[str]:
        """``self.model`` that a method wraps without binding it first, when
        ``__init__`` of the same class leaves it wrapped on every path:
        ``__init__`` always runs first (``self.model = DDP(self.model)`` there,
        again in ``resume()``)."""
        if not scope.class_name or not scope.params or scope.name.endswith(".__init__"):
            return None
        me = scope.params[0] + "."
        if not name.startswith(me) or "." in name[len(me):]:
            return None
        init = self.scripts.scope_named(f"{scope.class_name}.__init__")
        if init is None or not init.params:
            return None
        attr = init.params[0] + "." + name[len(me):]
        last = init.last_binding(attr, 10 ** 9, [])
        if last is None or last.kind != "wrap" or last.branch:
            return None
        wrap = init.wraps[last.wrap_index]
        return f"in {_short(wrap.wrapper)} by `{init.name}`, which always runs first"


def _where(scope_name: str) -> str:
    return "at module level" if scope_name == "<module>" else f"in `{scope_name}`"


def _short(wrapper: str) -> str:
    return WRAPPER_SHORT.get(wrapper, wrapper)


def _helper_no_fix(helper: str) -> str:
    return f"`{helper}` may do more than wrap; drop the wrapping from one of the calls by hand"


def _first_arg(call: cst.Call) -> Optional[cst.BaseExpression]:
    args = positional_args(call)
    if args:
        return args[0].value
    kw = keyword_arg(call, "module")
    return kw.value if kw is not None else None
