"""DL007 unregistered-module-container

## What it does
Flags submodules kept in a plain Python `list`, `tuple` or `dict` on an
`nn.Module`: `self.blocks = [Block() for _ in range(n)]`,
`self.heads = {"cls": nn.Linear(...), "box": nn.Linear(...)}` (or
`dict(cls=nn.Linear(...), box=nn.Linear(...))`),
`self.heads = list(nn.Linear(w, n) for w in widths)` (or `tuple(...)`), a
list filled with `self.layers.append(nn.Linear(...))`, or a local list of
modules assigned to `self.x`, outside `forward`. An element may also come
from a helper of the same file whose every `return` builds a module
(`[self._make_stage(w) for w in widths]`, `layers.append(conv_bn(a, b))`),
unless the helper registers it itself (`self.add_module(...)`), and the whole
container may come from a helper whose every `return` gives a list, tuple or
dict of modules, built there or by the callable it is handed
(`self.heads = map_values(lambda n: nn.Linear(d, n), sizes)` with `def
map_values(fn, d): return {k: fn(v) for k, v in d.items()}`).

A module kept inside a `functools` wrapper is held the same way: `self.net =
lru_cache(maxsize=8)(network)` (with `network: nn.Module` or built in
place), `functools.cache(net)`, `partial(Block(d), scale=2)`. The wrapper is
not an `nn.Module`, so assigning it registers nothing (no fix: keep the
module as the attribute and wrap the call instead). A wrapped class
(`partial(nn.Linear, bias=False)`) is not a module and is not flagged.

## Why is this bad?
`nn.Module` registers a submodule only when it is assigned directly or held
in an `nn.ModuleList` / `nn.ModuleDict` / `nn.Sequential`. Modules inside a
plain container are invisible to the parent: `.parameters()` (and so the
optimiser) skips their weights, `model.to(device)` / `.cuda()` leave them on
the CPU, `state_dict()` does not save them, and `nn.DataParallel` does not
replicate them, so every replica calls the same originals. On a GPU the
first one to run fails:

```
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
```

and when everything stays on the CPU the model silently trains with those
blocks frozen at their initial weights.

## Example
```python
class Encoder(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = [Block(dim) for _ in range(depth)]

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
```

## Use instead
```python
class Encoder(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
```

Dicts of modules become `nn.ModuleDict({...})`; an empty list or dict
filled later becomes `nn.ModuleList()` / `nn.ModuleDict()` (both support
`append`, `extend`, `insert`, `d[key] = m` and `update`). The container is
spelled with the file's own imports (`nn.ModuleList`, `torch.nn.ModuleList`,
`ModuleList`); when the file has none that reaches it, `ModuleList` is added to
its `from torch.nn import ...`, or an `import torch.nn as nn` is added.

Also flagged, under DataParallel only: a plain container of modules that are
also registered another way (each also assigned as an attribute, `self.net =
nn.Sequential(*layers)`, `self.add_module(name, m)`, `setattr(self, name, m)`,
or handed to a function of the file that registers it on some module:
`set_module_by_path(self.net, path, m)` ending in `setattr(parent, last, m)`)
when `forward` (or what it calls) reaches them through the container (`for
layer in self.layers: x = layer(x)`): `.to()` moves them, but a replica's
copy of the module keeps the same container, holding the original modules on
the first GPU, so the replica on `cuda:1` feeds them its inputs.

Not flagged: a container that no method but the one building it reads
(`self.models = [fit(s) for s in sources]`, used in `__init__` to pick
training points and never again): the modules serve construction only, so
nothing that `.to()`, the optimiser or DataParallel would miss ever runs;
`nn.ModuleList`, `nn.ModuleDict`, `nn.Sequential`; lists of
things that are not modules; lists of modules that are also registered another
way and reached in `forward` only through their registered names (or the
list wrapped in `nn.ModuleList` later); containers built inside `forward`.

Decided case: a literal list, tuple or dict whose every element is a
`torch.nn` module without parameters, buffers or train/eval behaviour (losses
built without `weight=`/`pos_weight=`, such as
`{"ce": nn.CrossEntropyLoss(), "l1": nn.SmoothL1Loss(reduction="none")}`,
activations, `nn.Identity`, `nn.Flatten`) is not flagged: there is nothing
for `.to()` to move, `state_dict()` to save, the optimiser to train or
`.eval()` to switch, and DataParallel replicas may share such a module. A
weighted loss (`nn.CrossEntropyLoss(weight=w)`, `nn.BCEWithLogitsLoss(pos_weight=p)`)
holds its weight as a buffer and is still flagged, and so is `nn.Dropout`
(`model.eval()` would not reach it).

## Fix safety
Unsafe: the wrapped modules become registered, so `state_dict()` gains their
keys (loading an old checkpoint with `strict=True` then fails on the missing
keys), `.parameters()` gains their weights (the optimiser starts training
them) and `repr(model)` changes. That is the point of the fix, but it changes
behaviour. No fix for a dict whose keys are not strings, or are strings that
`nn.ModuleDict` refuses (containing `.`, empty, or the name of an
`nn.Module` attribute such as `"train"` or `"keys"`).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from devlint.diagnostic import Fix, FixSafety
from devlint.facts.classes import is_keyword_dict_call, is_sequence_call
from devlint.rule import Invalid, Rule, Valid
from devlint.syntax import code_of, dotted_name, self_attribute, string_value

_REGISTERED_KINDS = frozenset({"parameter", "buffer", "module", "nn_container"})
#: names nn.ModuleDict.add_module refuses as keys: its own attributes
_MODULE_DICT_ATTRIBUTES = frozenset(
    {
        "T_destination", "add_module", "apply", "bfloat16", "buffers", "call_super_init", "children", "clear",
        "compile", "cpu", "cuda", "double", "dump_patches", "eval", "extra_repr", "float", "forward",
        "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half", "ipu", "items", "keys",
        "load_state_dict", "modules", "mtia", "named_buffers", "named_children", "named_modules",
        "named_parameters", "parameters", "pop", "register_backward_hook", "register_buffer",
        "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
        "register_full_backward_pre_hook", "register_load_state_dict_post_hook",
        "register_load_state_dict_pre_hook", "register_module", "register_parameter",
        "register_state_dict_post_hook", "register_state_dict_pre_hook", "requires_grad_", "set_extra_state",
        "set_submodule", "share_memory", "state_dict", "to", "to_empty", "train", "training", "type", "update",
        "values", "xpu", "zero_grad",
    }
)


class UnregisteredModuleContainer(Rule):
    code = "DL007"
    name = "unregistered-module-container"
    brief = "Modules kept in a plain list or dict, which `.to()`, the optimiser and `state_dict` never see"
    message = (
        "`self.{name}` keeps modules in a plain {container}: their parameters are not registered, so `.to()`, "
        "`.parameters()`, the optimiser and DataParallel miss them"
    )
    fix_safety = "unsafe"
    tokens = ("torch",)

    VALID = [
        Valid(
            """
import torch.nn as nn

class Net(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 1)})
        self.sizes = [4, 8, 16]
        self.names = {"a": "head a"}
        layers = [nn.Linear(4, 4), nn.ReLU()]
        self.layers = layers
        self.body = nn.Sequential(*layers)
        self.conv1 = nn.Conv2d(3, 3, 1)
        self.conv2 = nn.Conv2d(3, 3, 1)
        self.convs = [self.conv1, self.conv2]

    def forward(self, x):
        steps = [nn.Identity() for _ in range(2)]
        for block in self.blocks:
            x = block(x)
        return self.body(x)
"""
        ),
        Valid(
            """
import torch.nn as nn

class Tower(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.blocks = [nn.Linear(4, 4) for _ in range(n)]
        self.body = nn.Sequential(*self.blocks)
        self.heads = {}
        for name in ("a", "b"):
            head = nn.Linear(4, 1)
            self.add_module("head_" + name, head)
            self.heads[name] = head

    def forward(self, x):
        h = self.body(x)
        return {"a": self.head_a(h), "b": self.head_b(h)}

    def head_names(self):
        return sorted(self.heads)
"""
        ),
        Valid(
            """
import torch.nn as nn

class Net(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.n = n
        self.blocks = [nn.Linear(4, 4) for _ in range(n)]
        for i, block in enumerate(self.blocks):
            self.add_module(f"block{i}", block)
        self.extra = [nn.Linear(4, 4)]
        self.extra = nn.ModuleList(self.extra)

    def forward(self, x):
        for i in range(self.n):
            x = getattr(self, f"block{i}")(x)  # each replica's own copy
        for block in self.extra:
            x = block(x)
        return x
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch
from torch.nn import (
    Conv2d,
    Module,
)

class Pyramid(Module):
    def __init__(self, levels=3):
        super().__init__()
        convs = []
        for _ in range(levels):
            convs.append(Conv2d(8, 8, 3, padding=1))
        self.convs = convs

    def forward(self, feats):
        return [conv(f) for conv, f in zip(self.convs, feats)]
""",
            """
import torch
from torch.nn import (
    Conv2d,
    Module,
    ModuleList,
)

class Pyramid(Module):
    def __init__(self, levels=3):
        super().__init__()
        convs = []
        for _ in range(levels):
            convs.append(Conv2d(8, 8, 3, padding=1))
        self.convs = ModuleList(convs)

    def forward(self, feats):
        return [conv(f) for conv, f in zip(self.convs, feats)]
""",
            unsafe=True,
        ),
        Invalid(
            """
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = [nn.Linear(dim, dim) for _ in range(depth)]
        self.heads = {"cls": nn.Linear(dim, 2), "box": nn.Linear(dim, 4)}

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return {k: h(x) for k, h in self.heads.items()}
""",
            """
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])
        self.heads = nn.ModuleDict({"cls": nn.Linear(dim, 2), "box": nn.Linear(dim, 4)})

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return {k: h(x) for k, h in self.heads.items()}
""",
            count=2,
            unsafe=True,
        ),
        Invalid(
            """
import torch
from torch.nn import Module, Linear

class MLP(Module):
    def __init__(self, sizes=(4, 8, 2)):
        super().__init__()
        self.layers = []
        for a, b in zip(sizes, sizes[1:]):
            self.layers.append(Linear(a, b))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x
""",
            """
import torch
from torch.nn import Module, Linear, ModuleList

class MLP(Module):
    def __init__(self, sizes=(4, 8, 2)):
        super().__init__()
        self.layers = ModuleList()
        for a, b in zip(sizes, sizes[1:]):
            self.layers.append(Linear(a, b))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x
""",
            unsafe=True,
        ),
        Invalid(
            """
import torch.nn as nn

class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = {0: nn.Linear(4, 4), 1: nn.Linear(4, 4)}

    def forward(self, x, k: int):
        return self.experts[k](x)
""",
            None,
            unsafe=True,
        ),
    ]

    @classmethod
    def candidate(cls, scan) -> bool:
        # an attribute assigned, in a method other than forward, a plain
        # container (or a local one) that holds or is filled with something
        # that may be a module
        return any(
            scan.may_be_module_container(value, cls, method, attr)
            for cls, method, attr, value in scan.stores_outside_forward()
        )

    def __init__(self, context) -> None:
        super().__init__(context)
        # top-level import statements, for adding ModuleList / ModuleDict
        self._import_lines: List[cst.SimpleStatementLine] = []
        self._torch_nn_imports: List[cst.ImportFrom] = []

    def visit_Module(self, node: cst.Module) -> None:
        for stmt in node.body:
            if isinstance(stmt, (cst.ClassDef, cst.FunctionDef)):
                break
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    self._import_lines.append(stmt)
                if (
                    isinstance(small, cst.ImportFrom)
                    and not small.relative
                    and small.module is not None
                    and dotted_name(small.module) == "torch.nn"
                    and not isinstance(small.names, cst.ImportStar)
                ):
                    self._torch_nn_imports.append(small)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            self._check(node.targets[0].target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._check(node.target, node.value)

    def _check(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        ctx = self.context
        cls, method = ctx.current_class, ctx.current_method
        if cls is None or not cls.is_module or method is None or ctx.current_function is not method:
            return
        if method.name.value == "forward" or method.name.value in cls.forward_reachable:
            return
        name = self_attribute(target, ctx.self_name)
        if name is None:
            return
        record = cls.assignment_for(method.name.value, name, code_of(value))
        if record is None or record.kind != "module_container":
            return
        if not record.read_after_build:
            return  # used while the module is built, never after: nothing is missed
        if record.wrapper:
            self._check_wrapper(target, cls, name, record)
            return
        message = None
        if record.registered_elsewhere:
            if name not in cls.forward_reads or record.stateless_elements:
                return  # registered, and only an index outside forward
            # registered another way, called through the plain container: a
            # DataParallel replica's copy of the container still holds the originals
            message = (
                f"`self.{name}` keeps modules in a plain {record.container or 'container'}; they are registered "
                f"another way, but `forward` reaches them through it: DataParallel's replicas share the "
                f"container, so every replica calls the originals on the first GPU"
            )
        if record.stateless_elements:
            return  # nothing to move, save, train or switch to eval: see the docstring
        if name in cls.buffers or name in cls.parameters:
            return
        if any(a.kind in _REGISTERED_KINDS for a in cls.assignments_of(name)):
            return
        container = record.container or "container"
        message = message or self.message.format(name=name, container=container)
        is_dict = container == "dict"
        if is_dict:
            why = _dict_key_problem(value, record.str_keys)
            if why:
                self.report(target, message, no_fix_reason=why)
                return
        wrapper = "torch.nn.ModuleDict" if is_dict else "torch.nn.ModuleList"
        spelled, import_fix = self._spelling(wrapper)
        if spelled is None:
            self.report(target, message, no_fix_reason="the file imports torch.nn in no way devlint can extend")
            return
        new_value = _wrap(value, spelled)
        replacements: List[Tuple[cst.CSTNode, object]] = [(value, new_value)]
        if import_fix is not None:
            replacements.append(import_fix)
        short = wrapper.rsplit(".", 1)[-1]
        self.report(
            target,
            message,
            fix=Fix(replacements=replacements, safety=FixSafety.UNSAFE, description=f"hold them in `{short}`"),
        )

    def _check_wrapper(self, target: cst.BaseExpression, cls, name: str, record) -> None:
        """A module kept inside a ``functools`` wrapper (``lru_cache(...)(net)``)."""
        if name in cls.buffers or name in cls.parameters:
            return
        if any(a.kind in _REGISTERED_KINDS for a in cls.assignments_of(name)):
            return
        wrapper = record.wrapper.rsplit(".", 1)[-1]
        if record.registered_elsewhere:
            if name not in cls.forward_reads:
                return
            message = (
                f"`self.{name}` calls a module through `{wrapper}`; the module is registered another way, but "
                f"`forward` reaches it through the wrapper: DataParallel's replicas share the wrapper, so every "
                f"replica calls the original on the first GPU"
            )
        else:
            message = (
                f"`self.{name}` keeps a module inside `{wrapper}`, which is not an `nn.Module`: the module is not "
                f"registered, so `.to()`, `.parameters()`, the optimiser and DataParallel miss it"
            )
        self.report(
            target,
            message,
            no_fix_reason=(
                "keep the module itself as the attribute (`self.net = net`, which registers it) and apply "
                f"`{wrapper}` to the call in a method instead"
            ),
        )

    def _spelling(self, qualified: str) -> Tuple[Optional[str], Optional[Tuple[cst.CSTNode, object]]]:
        """How to spell ``qualified`` here, and the import replacement it needs."""
        local = self.facts.local_name_for(qualified)
        short = qualified.rsplit(".", 1)[-1]
        # a file that writes `from torch.nn import Module, Linear` gets the
        # name added there rather than a spelled-out torch.nn.ModuleList
        if local is not None and not (local.count(".") >= 2 and self._torch_nn_imports):
            return local, None
        if self._torch_nn_imports:
            node = self._torch_nn_imports[-1]
            return short, (node, _add_alias(node, short))
        if not self._import_lines:
            return None, None
        line = self._import_lines[-1]
        if "nn" not in self.facts.imports and "nn" not in self.facts.classes:
            new = cst.parse_statement("import torch.nn as nn\n")
            spelled = f"nn.{short}"
        else:
            new = cst.parse_statement(f"from torch.nn import {short}\n")
            spelled = short
        return spelled, (line, cst.FlattenSentinel([line, new]))


def _dict_key_problem(value: cst.BaseExpression, str_keys: bool) -> str:
    if not str_keys:
        return (
            "`nn.ModuleDict` accepts only string keys and devlint cannot tell that these keys are strings; "
            "wrap the dict in `nn.ModuleDict` if they are (or use an `nn.ModuleList` indexed by position)"
        )
    keys: List[Optional[str]] = []
    if isinstance(value, cst.Dict):
        keys = [string_value(e.key) for e in value.elements if isinstance(e, cst.DictElement)]
    elif is_keyword_dict_call(value):
        keys = [a.keyword.value for a in value.args if a.keyword is not None]  # dict(rgb=...)
    for s in keys:
        if s is not None and ("." in s or not s or s in _MODULE_DICT_ATTRIBUTES):
            return f"`nn.ModuleDict` refuses the key {s!r} (empty, dotted or an `nn.Module` attribute); rename it"
    return ""


def _wrap(value: cst.BaseExpression, spelled: str) -> cst.Call:
    func = cst.parse_expression(spelled)
    if isinstance(value, (cst.List, cst.Dict, cst.Tuple)) and not value.elements:
        return cst.Call(func=func)
    if isinstance(value, cst.Call) and not value.args and dotted_name(value.func) in ("list", "dict", "tuple"):
        return cst.Call(func=func)
    if is_sequence_call(value):
        # list(Block() for _ in range(n)) -> nn.ModuleList(Block() for _ in range(n))
        return cst.Call(func=func, args=[cst.Arg(value=value.args[0].value)])
    if isinstance(value, cst.Tuple):
        value = cst.List(elements=value.elements)
    return cst.Call(func=func, args=[cst.Arg(value=value)])


def _add_alias(node: cst.ImportFrom, name: str) -> cst.ImportFrom:
    assert not isinstance(node.names, cst.ImportStar)
    names = list(node.names)
    last = names[-1]
    new = cst.ImportAlias(name=cst.Name(name))
    if isinstance(last.comma, cst.Comma):
        # a trailing comma (parenthesised, one name a line): keep the layout
        separator = names[-2].comma if len(names) > 1 and isinstance(names[-2].comma, cst.Comma) else last.comma
        new = new.with_changes(comma=last.comma)
        names[-1] = last.with_changes(comma=separator)
    else:
        names[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    names.append(new)
    return node.with_changes(names=names)
