"""``devlint migrate ddp``: rewrite a single-script ``nn.DataParallel``
training script for ``DistributedDataParallel`` launched by ``torchrun``.

The plan reads the script once (:class:`~devlint.migrate.script.Script`),
finds the parts of the common shape (the wrap and the model it wraps, the
entry function, the training loop and its epoch loop, the training
``DataLoader``, the optimiser, saving, loading, printing), and records every
edit against the original nodes; :func:`~devlint.migrate.apply.apply` makes
them in one transform. Anything it cannot follow raises
:class:`CannotMigrate` with the reason, and nothing is written. What it
changes and why: docs/migrate.md.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from devlint.migrate.apply import (
    Edits,
    apply,
    expr,
    is_docstring,
    kwarg,
    parenthesized,
    stmt,
    with_args,
    with_comment,
)
from devlint.migrate.script import Position, Script
from devlint.syntax import dotted_name

DATA_PARALLEL = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel"}
FUNCTIONAL_DATA_PARALLEL = {"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"}
DATA_LOADER = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
#: anything under these names means the script already runs distributed
DISTRIBUTED = (
    "torch.distributed",
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed",
    "torch.utils.data.DistributedSampler",
    "torch.utils.data.distributed",
    "torch.multiprocessing",
)
TORCHRUN_VARIABLES = {"LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"}
#: ``model.module.<m>()`` calls that never run the model: the same with or without the wrapper
STATE_METHODS = {
    "state_dict", "load_state_dict", "parameters", "named_parameters", "buffers", "named_buffers",
    "modules", "named_modules", "children", "named_children", "train", "eval", "zero_grad",
}
#: what a training loop's data may be wrapped in (``enumerate(loader)``, ``tqdm(loader)``)
PROGRESS_WRAPPERS = {"enumerate", "tqdm", "iter", "progress_bar"}
#: logging calls that print on rank 0 only (warnings and errors stay on every rank)
LOG_METHODS = {"info", "debug"}
GRAD_OFF = {"torch.no_grad", "torch.inference_mode"}

#: the lines the migration writes, with ``{dist}`` for the name of torch.distributed
INIT = [
    'local_rank = int(os.environ["LOCAL_RANK"])',
    "if torch.cuda.is_available():\n    torch.cuda.set_device(local_rank)",
    '{dist}.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo", init_method="env://")',
]
INIT_COMMENT = "DDP: torchrun starts one process per device and sets LOCAL_RANK, RANK and WORLD_SIZE."
MODULE_RANK_COMMENT = "DDP: this process's GPU (torchrun sets LOCAL_RANK; 0 when imported without it)"
DEVICE_IDS = "[local_rank] if torch.cuda.is_available() else None"
RANK_DEVICE = 'f"cuda:{local_rank}"'
IMPORTS = [
    "import os",
    "import torch",
    "import torch.distributed as {dist}",
    "from torch.nn.parallel import DistributedDataParallel",
    "from torch.utils.data.distributed import DistributedSampler",
]


class CannotMigrate(Exception):
    """The script is outside what the codemod can rewrite faithfully."""

    def __init__(self, reason: str, line: Optional[int] = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}" if self.line else self.reason


@dataclass
class Migration:
    """A migrated script: its text and what the user should know about it."""

    text: str
    #: the launch command the header shows
    launch: str
    #: True: the old batch on every rank; False: the old batch divided by the world size
    per_rank_batch: bool
    #: one line each: behaviour the migration changed on purpose or could not keep
    notes: List[str] = field(default_factory=list)


def migrate_ddp(source: str, path: str = "train.py", per_rank_batch: bool = False,
                nproc: Optional[int] = None) -> Migration:
    """Migrate ``source`` (the text of the script at ``path``) from
    ``nn.DataParallel`` to ``DistributedDataParallel`` under torchrun.

    Raises :class:`CannotMigrate` (with the reason and, where there is one,
    the line) when the script is not in the shape the codemod handles.
    """
    try:
        compile(source, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:  # Python's own message and line, as DL000 reports them
        raise CannotMigrate(f"syntax error: {exc.msg}", exc.lineno) from None
    except ValueError as exc:  # null bytes
        raise CannotMigrate(f"syntax error: {exc}") from None
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise CannotMigrate(f"libcst cannot parse it: {exc.message}", exc.raw_line) from None
    plan = _Plan(module, os.path.basename(path) or "train.py", per_rank_batch, nproc)
    edits = plan.plan()
    text = apply(module, edits, [line.format(dist=edits.dist) for line in IMPORTS])
    try:
        compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:  # a bug of the codemod, never the user's
        raise RuntimeError(f"the migrated script does not compile ({exc.msg}, line {exc.lineno})") from None
    return Migration(text=text, launch=plan.launch, per_rank_batch=per_rank_batch, notes=plan.notes)


@dataclass
class _Loop:
    """The training loop: the loop over batches, the epoch loop around it,
    the ``DataLoader(...)`` it iterates and how the epoch loop names it."""

    batch: cst.For
    epoch: cst.For
    loader: cst.Call
    loader_in_epoch: str


#: the entry's code, as a scope: the process-group block binds ``local_rank`` there
ENTRY = cst.Name("__entry__")


class _Plan(Script):
    """Reads the script and plans the migration (raises CannotMigrate)."""

    def __init__(self, module: cst.Module, name: str, per_rank_batch: bool, nproc: Optional[int]) -> None:
        super().__init__(module)
        self.name = name
        self.per_rank_batch = per_rank_batch
        self.nproc = nproc
        self.edits = Edits()
        self.notes: List[str] = []
        self.launch = ""
        #: the wrapped model's names: (scope, name) -> wrapped from this position on (None: everywhere)
        self.wrapped_names: Dict[Tuple[cst.CSTNode, str], Optional[Position]] = {}
        #: (class, attribute) -> (the method that wraps, from this position) or None: every method
        self.wrapped_attrs: Dict[Tuple[cst.CSTNode, str], Optional[Tuple[cst.CSTNode, Position]]] = {}
        #: scopes whose code needs ``local_rank`` (ENTRY: the entry's code, which binds it)
        self.needs_local_rank: Set[cst.CSTNode] = set()
        #: module-level statements (outside the entry) that need it
        self.module_rank_uses: List[cst.CSTNode] = []
        #: functions every call of which runs on rank 0 only
        self.rank0_functions: Set[cst.CSTNode] = set()

    def plan(self) -> Edits:
        self.refuse_distributed()
        self.choose_dist_alias()
        wrap = self.find_wrap()
        self.entry = self.find_entry()
        self.loop = self.find_training_loop()
        self.devices = self.device_bindings()
        self.plan_wrap(wrap)
        self.propagate_wrapped()
        self.check_optimisers()
        self.check_module_uses()
        self.plan_devices()
        self.plan_loader()
        self.note_summed_loss()
        self.plan_loads()
        self.plan_state_dicts()
        self.plan_rank0()
        self.plan_references()
        self.plan_entry()
        self.plan_local_rank()
        self.plan_header()
        return self.edits

    # ------------------------------------------------------------ refusals

    def refuse_distributed(self) -> None:
        for imp in [*self.of(cst.Import), *self.of(cst.ImportFrom)]:
            if isinstance(imp, cst.Import):
                names = [dotted_name(a.name) or "" for a in imp.names]
            elif imp.module is None or imp.relative:
                continue
            elif isinstance(imp.names, cst.ImportStar):
                names = [dotted_name(imp.module) or ""]
            else:
                names = [f"{dotted_name(imp.module)}.{dotted_name(a.name)}" for a in imp.names]
            if any(n.startswith(DISTRIBUTED) for n in names):
                raise CannotMigrate(f"the script already uses torch.distributed (`{self.code(imp)}`)", self.line(imp))
        for node in [*self.of(cst.Name), *self.of(cst.Attribute)]:
            if any(q.startswith(DISTRIBUTED) for q in self.qn(node)):
                raise CannotMigrate(f"the script already uses torch.distributed (`{self.code(node)}`)", self.line(node))
        for s in self.of(cst.SimpleString):
            if _string(s) in TORCHRUN_VARIABLES:
                raise CannotMigrate(f"the script already reads the launcher's {_string(s)} (a distributed run)", self.line(s))
        for n in self.of(cst.Name):
            if n.value == "local_rank":
                raise CannotMigrate("the script already has a `local_rank` (a distributed run)", self.line(n))
        for call in self.of(cst.Call):
            if self.calls_to(call, {"torch.cuda.set_device"}):
                raise CannotMigrate("the script sets the CUDA device itself (`torch.cuda.set_device`); "
                                    "under DDP each process's device comes from LOCAL_RANK", self.line(call))

    def choose_dist_alias(self) -> None:
        used = {n.value for n in self.of(cst.Name)}
        for alias in ("dist", "torch_dist"):
            if alias not in used:
                self.edits.dist = alias
                return
        raise CannotMigrate("the names `dist` and `torch_dist` are both taken; the codemod needs one for torch.distributed")

    def find_wrap(self) -> cst.Call:
        for call in self.of(cst.Call):
            if self.calls_to(call, FUNCTIONAL_DATA_PARALLEL):
                raise CannotMigrate("the functional `data_parallel(...)` runs one step on several GPUs; "
                                    "the codemod migrates a model wrapped in `nn.DataParallel`", self.line(call))
        wraps = [c for c in self.of(cst.Call) if self.calls_to(c, DATA_PARALLEL)]
        if not wraps:
            raise CannotMigrate("no `nn.DataParallel` in the script: nothing to migrate")
        if len(wraps) > 1:
            named = []
            for w in wraps:
                parent = self.parents.get(w)
                name = self.code(parent.targets[0].target) if isinstance(parent, cst.Assign) else "a model"
                named.append(f"`{name}` (line {self.line(w)})")
            raise CannotMigrate(
                f"several models are wrapped in DataParallel separately ({', '.join(named[:-1])} and {named[-1]}): "
                "the codemod migrates one model with one optimiser; wrap each in DistributedDataParallel by hand",
                self.line(wraps[1]),
            )
        return wraps[0]

    # ---------------------------------------------------------------- entry

    def find_entry(self):
        """``("function", def)``: the function the main guard calls;
        ``("guard", if)``: the code under ``if __name__ == "__main__":``
        becomes ``main()``; ``("module", statements)``: the module-level
        code does."""
        guard = next((s for s in self.module.body if isinstance(s, cst.If) and _is_main_guard(s.test)), None)
        if guard is not None:
            entries = []
            for line in guard.body.body:
                call = _called_in(line)
                if call is not None and isinstance(call.func, cst.Name) and self.module_function(call.func.value):
                    entries.append(self.module_function(call.func.value))
            if len(entries) == 1:
                return ("function", entries[0])
            if self.module_function("main") or self.module_class("main"):
                raise CannotMigrate("the code under `if __name__ == \"__main__\":` would become `main()`, "
                                    "but the script already has a `main`", self.line(guard))
            self.check_moved_names(list(guard.body.body))
            self.edits.guard_to_main = guard
            return ("guard", guard)
        moved = [s for s in self.module.body if not _stays_at_module_level(s)]
        if not moved:
            raise CannotMigrate("not a script: no `if __name__ == \"__main__\":` and no code at module level")
        if any(n.value == "main" for n in self.of(cst.Name)):
            raise CannotMigrate("the module-level code would become `main()`, but the script already uses the name `main`")
        self.check_moved_names(moved)
        self.edits.new_main = moved
        return ("module", moved)

    def check_moved_names(self, moved: List[cst.CSTNode]) -> None:
        """Code that moves into ``main()`` must not bind names that the
        module's functions read as globals."""
        bound = {name for node in moved for name in self.bound_names(node)}
        readers = [f for f in self.of(cst.FunctionDef) if not any(self.within(f, m) for m in moved)]
        found = []
        for func in readers:
            local = self.local_names(func)
            for n in self.loaded_names(func.body):
                if n.value in bound and n.value not in local and self.scope_of(n) is func:
                    found.append((self.start(n), func, n))
        if found:
            _, func, n = min(found, key=lambda f: f[0])
            raise CannotMigrate(
                f"`{func.name.value}()` reads the module-level `{n.value}`, which would move into `main()`; "
                "pass it as an argument first",
                self.line(n),
            )

    def in_entry(self, node: cst.CSTNode) -> bool:
        kind, what = self.entry
        if kind == "function":
            return self.scope_of(node) is what
        if kind == "guard":
            return self.within(node, what)
        return self.scope_of(node) is self.module and any(self.within(node, s) for s in what)

    def need_local_rank(self, node: cst.CSTNode) -> None:
        key = self.scope_key(node)
        self.needs_local_rank.add(key)
        if key is self.module:
            self.module_rank_uses.append(next(a for a in (node, *self.ancestors(node)) if self.parents.get(a) is self.module))

    def scope_key(self, node: cst.CSTNode) -> cst.CSTNode:
        """Where a name bound for ``node`` must live (ENTRY: the entry's code)."""
        return ENTRY if self.in_entry(node) else self.scope_of(node)

    # -------------------------------------------------------- training loop

    def contains_call(self, node: cst.CSTNode, attr: str, depth: int = 0) -> bool:
        """A call of ``.attr(...)`` in ``node``, or in a function of the
        script that ``node`` calls (one level)."""
        for call in self.find(node, cst.Call):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == attr:
                return True
            target = self.callee(call) if depth == 0 else None
            if target is not None and self.contains_call(target[0].body, attr, depth + 1):
                return True
        return False

    def find_training_loop(self) -> _Loop:
        candidates = [f for f in self.of(cst.For) if self.contains_call(f.body, "backward")]
        innermost = [f for f in candidates if not any(o is not f and self.within(o, f) for o in candidates)]
        # a loop over a range whose body calls a function is an epoch loop, not one over data
        batch_loops = [f for f in innermost if not (_is_range(f.iter) and any(self.callee(c) for c in self.find(f.body, cst.Call)))]
        if not batch_loops:
            raise CannotMigrate("no training loop: no loop over a DataLoader that calls `backward()` "
                                "(the codemod migrates a training script)")
        if len(batch_loops) > 1:
            lines = ", ".join(str(self.line(f)) for f in batch_loops)
            raise CannotMigrate(f"several training loops (lines {lines}); the codemod migrates one", self.line(batch_loops[1]))
        batch = batch_loops[0]
        if not self.contains_call(batch.body, "step"):
            raise CannotMigrate("the training loop calls `backward()` but no `step()`", self.line(batch))
        func = self.scope_of(batch)
        epoch = next((a for a in self.ancestors(batch) if isinstance(a, cst.For) and self.scope_of(a) is func), None)
        call_in_epoch = None
        if epoch is None and isinstance(func, cst.FunctionDef):
            sites = [(c, next((a for a in self.ancestors(c) if isinstance(a, cst.For)), None)) for c in self.callers(func)]
            sites = [(c, f) for c, f in sites if f is not None]
            if len(sites) == 1:
                call_in_epoch, epoch = sites[0]
        if epoch is None:
            raise CannotMigrate("no epoch loop around the training loop: the codemod needs one to call "
                                "`sampler.set_epoch(epoch)`", self.line(batch))
        if not isinstance(epoch.target, cst.Name):
            raise CannotMigrate(f"the epoch loop's variable (`{self.code(epoch.target)}`) is not a name", self.line(epoch))
        data = _strip_progress(batch.iter)
        if isinstance(data, cst.Call) and dotted_name(data.func) == "zip":
            raise CannotMigrate("the training loop zips several loaders; the codemod migrates one", self.line(batch))
        if dotted_name(data) is None or (isinstance(data, cst.Attribute) and dotted_name(data.value) != "self"):
            raise CannotMigrate(f"cannot follow the training loop's data (`{self.code(batch.iter)}`)", self.line(batch))
        loader = self.resolve_loader(data, 0)
        if loader is None:
            raise CannotMigrate(f"cannot find the DataLoader the training loop iterates (`{self.code(data)}`)", self.line(batch))
        if self.within(loader, epoch) or (isinstance(data, cst.Name) and call_in_epoch is None and any(
                self.within(a, epoch) for a, _ in self.binds(func, data.value))):
            raise CannotMigrate("the training DataLoader is built inside the epoch loop", self.line(loader))
        # the loader as the epoch loop names it
        if call_in_epoch is None:
            outer: Optional[cst.CSTNode] = data
        elif isinstance(data, cst.Name) and self.is_param(func, data.value):
            outer = self.argument_for(call_in_epoch, func, data.value)
        elif isinstance(data, cst.Attribute) and self.class_of(func) is not None and self.class_of(func) is self.class_of(self.scope_of(epoch)):
            outer = data
        else:
            outer = None
        if outer is None or dotted_name(outer) is None:
            raise CannotMigrate("cannot name the training DataLoader in the epoch loop", self.line(epoch))
        return _Loop(batch=batch, epoch=epoch, loader=loader, loader_in_epoch=dotted_name(outer) or "")

    def resolve_loader(self, node: cst.CSTNode, depth: int, index: Optional[int] = None) -> Optional[cst.Call]:
        """The ``DataLoader(...)`` call ``node`` holds, following names,
        parameters, ``self.`` attributes and return values of the script."""
        if depth > 8:
            return None
        if isinstance(node, (cst.Tuple, cst.List)):
            if index is not None and index < len(node.elements):
                return self.resolve_loader(node.elements[index].value, depth + 1)
            return None
        if isinstance(node, cst.Call):
            if self.calls_to(node, DATA_LOADER):
                return node if index is None else None
            target = self.callee(node)
            if target is None or not isinstance(node.func, cst.Name):
                return None
            returns = [r for r in self.find(target[0].body, cst.Return) if r.value is not None and self.scope_of(r) is target[0]]
            return _one({self.resolve_loader(r.value, depth + 1, index) for r in returns})
        if isinstance(node, cst.Name):
            scope = self.scope_of(node)
            binds = [(a, i) for a, i in self.binds(scope, node.value) if self.start(a) < self.start(node)]
            if binds:
                a, i = binds[-1]
                return self.resolve_loader(a.value, depth + 1, i)
            if isinstance(scope, cst.FunctionDef) and self.is_param(scope, node.value):
                args = [self.argument_for(c, scope, node.value) for c in self.callers(scope)]
                return _one({self.resolve_loader(a, depth + 1) if a is not None else None for a in args})
            if scope is not self.module:
                binds = self.binds(self.module, node.value)
                if len(binds) == 1:
                    a, i = binds[0]
                    return self.resolve_loader(a.value, depth + 1, i)
            return None
        if isinstance(node, cst.Attribute) and dotted_name(node.value) == "self":
            cls = self.class_of(self.scope_of(node))
            if cls is None:
                return None
            return _one({self.resolve_loader(a.value, depth + 1) for a in self.attr_binds(cls, node.attr.value)})
        return None

    # ------------------------------------------------------- the wrapped model

    def is_wrapped(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` names the model wrapped in DataParallel (DDP after
        the migration) where it stands."""
        if isinstance(node, cst.Name):
            since = self.wrapped_names.get((self.scope_of(node), node.value), False)
            return since is not False and (since is None or self.start(node) >= since)
        if isinstance(node, cst.Attribute) and dotted_name(node.value) == "self":
            scope = self.scope_of(node)
            entry = self.wrapped_attrs.get((self.class_of(scope), node.attr.value), False)
            if entry is False:
                return False
            return entry is None or scope is not entry[0] or self.start(node) >= entry[1]
        return False

    def mark_wrapped(self, target: cst.CSTNode, since: Optional[Position]) -> bool:
        scope = self.scope_of(target)
        if isinstance(target, cst.Name):
            key = (scope, target.value)
            if key in self.wrapped_names:
                return False
            self.wrapped_names[key] = since
            return True
        if isinstance(target, cst.Attribute) and dotted_name(target.value) == "self" and self.class_of(scope) is not None:
            attr = (self.class_of(scope), target.attr.value)
            if attr in self.wrapped_attrs:
                return False
            self.wrapped_attrs[attr] = None if since is None else (scope, since)
            return True
        return False

    def propagate_wrapped(self) -> None:
        """Follow the wrapped model through aliases, calls of the script's
        functions (into their parameters) and return values."""
        for _ in range(12):
            changed = False
            for a in self.of(cst.Assign):
                if len(a.targets) == 1 and self.is_wrapped(a.value):
                    changed |= self.mark_wrapped(a.targets[0].target, self.end(a))
            for call in self.of(cst.Call):
                for arg in call.args:
                    hit = self.parameter_for(call, arg) if self.is_wrapped(arg.value) else None
                    if hit is not None and hit not in self.wrapped_names:
                        self.wrapped_names[hit] = None
                        changed = True
            for ret in self.of(cst.Return):
                func = self.scope_of(ret)
                if ret.value is not None and self.is_wrapped(ret.value) and isinstance(func, cst.FunctionDef):
                    for call in self.callers(func):
                        parent = self.parents.get(call)
                        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
                            changed |= self.mark_wrapped(parent.targets[0].target, self.end(parent))
            if not changed:
                return

    def plan_wrap(self, wrap: cst.Call) -> None:
        """``nn.DataParallel(model)`` becomes ``DistributedDataParallel(model,
        device_ids=...)``, with the model placed before the wrap."""
        positional = [a for a in wrap.args if a.keyword is None and not a.star]
        model_arg = positional[0] if positional else next((a for a in wrap.args if a.keyword and a.keyword.value == "module"), None)
        if model_arg is None:
            raise CannotMigrate("`nn.DataParallel(...)` without the model it wraps", self.line(wrap))
        if any(a.keyword is not None and a.keyword.value == "dim" for a in wrap.args):
            self.notes.append(f"line {self.line(wrap)}: DataParallel's `dim=` is dropped: each DDP rank loads whole batches")
        # `nn.DataParallel(model).to(device)`: the placement moves into the wrap
        outer: cst.CSTNode = wrap
        moves: List[cst.Call] = []
        for call in self._method_chain(wrap, ("to", "cuda")):
            moves.append(call)
            outer = call
        parent = self.parents.get(outer)
        if isinstance(parent, cst.IfExp):
            other = parent.orelse if parent.body is outer else parent.body
            if dotted_name(other) is not None and dotted_name(other) == dotted_name(model_arg.value):
                outer = parent
                self.notes.append(f"line {self.line(wrap)}: the condition of the DataParallel wrap is gone: DDP wraps on every launch")
        # `nn.DataParallel(model).eval()`: a mode switch stays on the wrapper
        holder = ([outer, *self._method_chain(outer, ("train", "eval"))])[-1]
        wrap_stmt = self.statement_of(outer)
        parent = self.parents.get(holder)
        target: Optional[cst.CSTNode] = None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, (cst.Name, cst.Attribute)):
            target = parent.targets[0].target
            self.mark_wrapped(target, self.end(parent))
        elif isinstance(parent, cst.Return) and isinstance(self.scope_of(parent), cst.FunctionDef) and self.callers(self.scope_of(parent)):
            for call in self.callers(self.scope_of(parent)):
                assign = self.parents.get(call)
                if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
                    raise CannotMigrate("the wrapped model is used in an expression the codemod cannot follow", self.line(call))
                self.mark_wrapped(assign.targets[0].target, self.end(assign))
        else:
            raise CannotMigrate("`nn.DataParallel(...)` is used in an expression the codemod cannot follow "
                                "(it migrates `model = nn.DataParallel(model)`)", self.line(wrap))
        self.plan_wrap_condition(wrap_stmt)
        # a later `model.to(device)` moves into the wrap: DDP reads where the
        # parameters are when it is built
        if target is not None:
            for line, call in self.later_moves(wrap_stmt, target):
                moves.append(call)
                self.edits.remove.add(line)
        moved = bool(moves) or self.moved_before(model_arg.value, wrap_stmt)
        device = None if moved else self.device_expr(wrap, required=False)
        if not moved and device is None:
            raise CannotMigrate("cannot see the model moved to its device before the wrap; DDP needs it there "
                                "when it is built (move it with `model.to(device)` first)", self.line(wrap))
        self.wrap_model = model_arg.value
        self.need_local_rank(wrap)
        index = list(wrap.args).index(model_arg)

        def to_ddp(updated: cst.Call) -> cst.Call:
            model = updated.args[index].value
            for m in moves:
                model = cst.Call(func=cst.Attribute(value=model, attr=cst.Name(m.func.attr.value)), args=m.args)
            if device is not None:
                model = cst.Call(func=cst.Attribute(value=model, attr=cst.Name("to")), args=[cst.Arg(expr(device))])
            return cst.Call(
                func=cst.Name("DistributedDataParallel"),
                args=[cst.Arg(model, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), kwarg("device_ids", expr(DEVICE_IDS))],
                lpar=updated.lpar,
                rpar=updated.rpar,
            )

        self.edits.replace[wrap] = to_ddp
        if outer is not wrap:
            self.edits.replace[outer] = _ddp_inside

    def _method_chain(self, node: cst.CSTNode, methods: Tuple[str, ...]) -> List[cst.Call]:
        """The calls ``node.m1(...).m2(...)`` of ``methods`` around ``node``."""
        out = []
        while True:
            parent = self.parents.get(node)
            grand = self.parents.get(parent) if parent is not None else None
            if not (isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in methods
                    and isinstance(grand, cst.Call) and grand.func is parent):
                return out
            out.append(grand)
            node = grand

    def plan_wrap_condition(self, wrap_stmt: cst.CSTNode) -> None:
        """``if torch.cuda.device_count() > 1: model = nn.DataParallel(model)``:
        DDP always wraps, so the ``if`` goes (when it guards nothing else)."""
        block = self.parents.get(wrap_stmt)
        owner = self.parents.get(block) if block is not None else None
        if not isinstance(owner, cst.If) or owner.body is not block:
            return
        if owner.orelse is not None:
            raise CannotMigrate(f"the DataParallel wrap is one branch of `if {self.code(owner.test)}: ... else: ...`; "
                                "under DDP the model is always wrapped: rewrite the branches by hand", self.line(owner))
        if isinstance(self.parents.get(owner), cst.If):
            raise CannotMigrate("the DataParallel wrap is in an `elif` branch", self.line(owner))
        for other in owner.body.body:
            if other is not wrap_stmt and not self.is_output_statement(other):
                raise CannotMigrate(
                    f"the condition of the DataParallel wrap (`if {self.code(owner.test)}:`) also runs "
                    f"`{self.code(other)}`; under DDP the model is always wrapped, and whether that runs too "
                    "is a decision for you",
                    self.line(other),
                )
        self.edits.unwrap.add(owner)
        self.notes.append(f"line {self.line(owner)}: `if {self.code(owner.test)}:` around the wrap is gone: "
                          "DDP wraps on every launch (torchrun's process count decides the parallelism)")

    def later_moves(self, wrap_stmt: cst.CSTNode, target: cst.CSTNode) -> List[Tuple[cst.CSTNode, cst.Call]]:
        """``model.to(device)`` / ``model = model.cuda()`` statements after
        the wrap in the same function."""
        key = dotted_name(target)
        scope = self.scope_of(wrap_stmt)
        out = []
        for line in self.find(scope, cst.SimpleStatementLine):
            if self.scope_of(line) is not scope or self.start(line) <= self.start(wrap_stmt) or len(line.body) != 1:
                continue
            small = line.body[0]
            call = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
            if isinstance(small, cst.Assign) and not (len(small.targets) == 1 and dotted_name(small.targets[0].target) == key):
                call = None
            if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "cuda")
                    and dotted_name(call.func.value) == key and not _is_dtype_move(call)):
                continue
            if self.nested_in_control_flow(line, scope, allow=self.edits.unwrap):
                raise CannotMigrate(f"the wrapped model is moved under a condition after the wrap (`{self.code(line)}`); "
                                    "DDP needs the model on its device when it is built", self.line(line))
            out.append((line, call))
        return out

    def nested_in_control_flow(self, node: cst.CSTNode, scope: cst.CSTNode, allow: Set[cst.CSTNode]) -> bool:
        for a in self.ancestors(node):
            if a is scope:
                return False
            if isinstance(a, (cst.If, cst.For, cst.While, cst.Try, cst.With)) and a not in allow:
                return True
        return False

    def moved_before(self, model: cst.CSTNode, wrap_stmt: cst.CSTNode, depth: int = 0) -> bool:
        """Whether the model handed to DataParallel is visibly on a device."""
        if depth > 3:
            return False
        if isinstance(model, cst.Call):
            return _has_move(model)
        key = dotted_name(model)
        if key is None:
            return False
        scope = self.scope_of(wrap_stmt)
        for line in self.find(scope, cst.SimpleStatementLine):
            if self.scope_of(line) is not scope or self.start(line) >= self.start(wrap_stmt):
                continue
            for small in line.body:
                if isinstance(small, cst.Assign) and any(dotted_name(t.target) == key for t in small.targets):
                    if isinstance(small.value, cst.Call) and _has_move(small.value):
                        return True
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    c = small.value
                    if isinstance(c.func, cst.Attribute) and c.func.attr.value in ("to", "cuda") and dotted_name(c.func.value) == key:
                        return True
        if isinstance(model, cst.Name) and self.is_param(scope, model.value):
            calls = self.callers(scope)
            return bool(calls) and all(
                (arg := self.argument_for(c, scope, model.value)) is not None
                and self.moved_before(arg, self.statement_of(c), depth + 1)
                for c in calls
            )
        return False

    # ------------------------------------------------------------ optimiser

    def check_optimisers(self) -> None:
        """One optimiser (perhaps chosen in branches), over the wrapped
        model: under DDP a model trained outside the wrapper drifts apart
        on every rank."""
        optimisers = [c for c in self.of(cst.Call) if any(_is_optimizer(q) for q in self.qn(c.func))]
        keys = self.model_keys()
        targets = set()
        for opt in optimisers:
            params = opt.args[0].value if opt.args else None
            refs = self.find(params, cst.Name, cst.Attribute)
            if not any(self.is_wrapped(r) or dotted_name(r) in keys for r in refs):
                raise CannotMigrate(
                    f"the optimiser at line {self.line(opt)} trains `{self.code(params) if params is not None else 'nothing'}`, "
                    "not the model wrapped in DataParallel: under DDP its gradients would not be averaged across ranks",
                    self.line(opt),
                )
            parent = self.parents.get(opt)
            targets.add(self.code(parent.targets[0].target) if isinstance(parent, cst.Assign) else f"line {self.line(opt)}")
        if len(targets) > 1:
            raise CannotMigrate(f"several optimisers ({', '.join(sorted(targets))}): the codemod migrates one model "
                                "with one optimiser", self.line(optimisers[1]))

    def model_keys(self) -> Set[str]:
        """The names the model goes by before the wrap (for the optimiser check)."""
        keys: Set[str] = {name for (_, name) in self.wrapped_names}
        todo = [(self.wrap_model, 0)]
        while todo:
            node, depth = todo.pop()
            key = dotted_name(_call_base(node) if isinstance(node, cst.Call) else node)
            if key is None or depth > 3:
                continue
            keys.add(key)
            scope = self.scope_of(node)
            if isinstance(node, cst.Name) and self.is_param(scope, node.value):
                todo.extend((a, depth + 1) for c in self.callers(scope) if (a := self.argument_for(c, scope, node.value)) is not None)
        return keys

    # ---------------------------------------------------------- model.module

    def check_module_uses(self) -> None:
        """``model.module`` run outside the wrapper while training: DDP
        would not average its gradients."""
        aliases: Set[Tuple[cst.CSTNode, str]] = set()
        for attr in self.of(cst.Attribute):
            if attr.attr.value != "module" or not self.is_wrapped(attr.value):
                continue
            parent = self.parents.get(attr)
            grand = self.parents.get(parent) if parent is not None else None
            runs = None
            if isinstance(parent, cst.Call) and parent.func is attr:
                runs = parent
            elif isinstance(parent, cst.Attribute) and isinstance(grand, cst.Call) and grand.func is parent and parent.attr.value not in STATE_METHODS:
                runs = grand
            if runs is not None and not self.in_no_grad(attr):
                raise CannotMigrate(f"`{self.code(runs)}` runs the model without its wrapper: under DDP its gradients "
                                    "would not be averaged across ranks", self.line(attr))
            line = self.statement_of(attr)
            for small in getattr(line, "body", ()):
                if isinstance(small, cst.Assign) and self.within(attr, small.value):
                    aliases |= {(self.scope_of(attr), t.target.value) for t in small.targets if isinstance(t.target, cst.Name)}
        for call in self.of(cst.Call):
            if isinstance(call.func, cst.Name) and (self.scope_of(call), call.func.value) in aliases and not self.in_no_grad(call):
                raise CannotMigrate(f"`{self.code(call)}` calls `{call.func.value}`, the model taken out of its wrapper: "
                                    "under DDP its gradients would not be averaged across ranks", self.line(call))

    # -------------------------------------------------------------- devices

    def device_bindings(self) -> List[cst.Assign]:
        """``device = torch.device("cuda" if ... else "cpu")`` and the like:
        a name with "device" in it bound to a device or a CUDA string."""
        out = []
        for a in self.of(cst.Assign):
            last = (dotted_name(a.targets[0].target) or "").rsplit(".", 1)[-1].lower() if len(a.targets) == 1 else ""
            if "device" not in last and last not in ("dev", "gpu"):
                continue
            if any(self.calls_to(c, {"torch.device"}) for c in self.find(a.value, cst.Call)) or any(
                    (_string(s) or "").startswith("cuda") for s in self.find(a.value, cst.SimpleString)):
                out.append(a)
        return out

    def plan_devices(self) -> None:
        """The first GPU becomes the rank's: ``"cuda"``/``"cuda:0"`` in a
        device binding, ``"cuda:0"``, ``.cuda(0)`` and ``torch.device("cuda",
        0)`` anywhere. A fixed other GPU is refused (model parallelism)."""
        in_binding: Set[cst.CSTNode] = set()
        for a in self.devices:
            for s in self.find(a.value, cst.SimpleString):
                if _string(s) in ("cuda", "cuda:0"):
                    self.edits.replace[s] = lambda u: expr(RANK_DEVICE)
                    self.need_local_rank(a)
                    in_binding.add(s)
        for s in self.of(cst.SimpleString):
            m = re.fullmatch(r"cuda:(\d+)", _string(s) or "")
            if s in in_binding or m is None:
                continue
            if int(m.group(1)) > 0:
                raise CannotMigrate(f"names the GPU `{m.group(0)}`: under DDP each process owns one GPU "
                                    "(model parallelism is out of scope)", self.line(s))
            self.edits.replace[s] = lambda u: expr(RANK_DEVICE)
            self.need_local_rank(s)
        for call in self.of(cst.Call):
            index = None
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "cuda" and call.args:
                index = call.args[0].value
            elif self.calls_to(call, {"torch.device"}) and len(call.args) >= 2:
                index = call.args[1].value
            if not isinstance(index, cst.Integer):
                continue
            if index.evaluated_value > 0:
                raise CannotMigrate(f"`{self.code(call)}` names GPU {index.value}: under DDP each process owns one GPU",
                                    self.line(call))
            self.edits.replace[index] = lambda u: cst.Name("local_rank")
            self.need_local_rank(call)

    def device_expr(self, node: cst.CSTNode, required: bool = True) -> Optional[str]:
        """The code of the rank's device where ``node`` stands: a device
        name in scope, ``self.<device>``, or one made from ``local_rank``."""
        scope = self.scope_of(node)
        for a in reversed(self.devices):
            target = a.targets[0].target
            if isinstance(target, cst.Name) and self.scope_of(a) is scope and self.start(a) < self.start(node):
                return target.value
        if isinstance(scope, cst.FunctionDef):
            param = next((p.name.value for p in self.params(scope) if p.name.value in ("device", "dev")), None)
            if param is not None:
                return param
            cls = self.class_of(scope)
            for a in self.devices:
                key = dotted_name(a.targets[0].target) or ""
                if cls is not None and key.startswith("self.") and self.class_of(self.scope_of(a)) is cls:
                    return key
        for a in self.devices:
            target = a.targets[0].target
            if isinstance(target, cst.Name) and self.scope_of(a) is self.module and not self.binds(scope, target.value):
                return target.value
        if not required:
            return None
        self.need_local_rank(node)
        return f'{RANK_DEVICE} if torch.cuda.is_available() else "cpu"'

    # --------------------------------------------------------------- loader

    def plan_loader(self) -> None:
        """The training DataLoader gets a DistributedSampler (its shuffle
        moves there) and, by default, the old batch divided by the world size."""
        loop = self.loop
        call = loop.loader
        line = self.line(call)
        for a in call.args:
            if a.star:
                raise CannotMigrate(f"the training DataLoader takes `{a.star}{self.code(a.value)}`: the codemod cannot "
                                    "see its batch size and shuffling", line)
            if a.keyword is not None and a.keyword.value in ("sampler", "batch_sampler"):
                raise CannotMigrate(f"the training DataLoader has its own sampler (`{a.keyword.value}={self.code(a.value)}`): "
                                    "DistributedSampler would replace it", line)
        positional = [a for a in call.args if a.keyword is None]
        if len(positional) > 3:
            raise CannotMigrate("the training DataLoader passes its sampler positionally", line)
        keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
        dataset_arg = positional[0] if positional else keywords.get("dataset")
        if dataset_arg is None:
            raise CannotMigrate("the training DataLoader has no dataset argument", line)
        batch_arg = positional[1] if len(positional) > 1 else keywords.get("batch_size")
        shuffle_arg = positional[2] if len(positional) > 2 else keywords.get("shuffle")
        line_stmt = self.statement_of(call)
        dataset = self.code(dataset_arg.value)
        hoisted = None
        if dotted_name(dataset_arg.value) is None:
            # a dataset built in the call: bind it once, the sampler needs it too
            if not isinstance(line_stmt, cst.SimpleStatementLine):
                raise CannotMigrate("the training DataLoader builds its dataset inline in a compound statement", line)
            parent = self.parents.get(call)
            base = (self.code(parent.targets[0].target) if isinstance(parent, cst.Assign) else "").rsplit(".", 1)[-1]
            hoisted = base[: -len("_loader")] + "_dataset" if base.endswith("_loader") else "train_dataset"
            if any(n.value == hoisted for n in self.of(cst.Name)):
                raise CannotMigrate(f"the training DataLoader builds its dataset inline, and `{hoisted}` is taken", line)
            self.edits.before.setdefault(line_stmt, []).append(stmt(f"{hoisted} = {dataset}\n"))
            dataset = hoisted
        shuffle = self.code(shuffle_arg.value) if shuffle_arg is not None else "False"
        sampler = expr(f"DistributedSampler({dataset}, shuffle={shuffle})")
        batch = self.code(batch_arg.value) if batch_arg is not None else None
        per_rank = self.per_rank_batch or batch is None
        if batch is None:
            self.notes.append(f"line {line}: the training DataLoader has no batch_size (1): every rank loads batches of 1")
        world = expr(f"{self.edits.dist}.get_world_size()")

        def rewrite(updated: cst.Call) -> cst.Call:
            args: List[cst.Arg] = []
            pos = [a for a in updated.args if a.keyword is None]
            for a in updated.args:
                role = a.keyword.value if a.keyword is not None else ("dataset", "batch_size", "shuffle")[pos.index(a)]
                if role == "dataset" and hoisted is not None:
                    a = a.with_changes(value=cst.Name(hoisted))
                elif role == "batch_size" and not per_rank:
                    a = a.with_changes(value=cst.BinaryOperation(left=parenthesized(a.value), operator=cst.FloorDivide(), right=world))
                elif role == "shuffle":
                    a = kwarg("sampler", sampler).with_changes(comma=a.comma)
                args.append(a)
            if shuffle_arg is None:
                args.append(kwarg("sampler", sampler))
            return with_args(updated, args)

        self.edits.replace[call] = rewrite
        if batch is not None:
            if per_rank:
                comment = [f"DDP batch: DataParallel split each batch of `{batch}` across the GPUs;",
                           f"each rank now loads a whole `{batch}`, so the global batch is world_size",
                           "times larger: scale the learning rate (and any schedule counted in samples)."]
            else:
                comment = [f"DDP batch: DataParallel split each batch of `{batch}` across the GPUs;",
                           f"each rank now loads `{batch} // world_size`, so the global batch and the",
                           "learning-rate schedule stay the same (--per-rank-batch: the whole batch per rank)."]
            self.edits.comments.setdefault(line_stmt, []).extend(comment)
        set_epoch = stmt(f"{loop.loader_in_epoch}.sampler.set_epoch({loop.epoch.target.value})\n")
        self.edits.prepend.setdefault(loop.epoch, []).append(
            with_comment(set_epoch, ["DDP: a new shuffle of the data every epoch, the same on every rank"]))

    def note_summed_loss(self) -> None:
        """DDP averages the ranks' gradients; DataParallel's backward ran on
        one loss over the whole batch. With a mean loss that is the same; a
        summed one gets gradients world_size times smaller."""
        calls = self.find(self.loop.batch, cst.Call)
        calls += [c for c in self.of(cst.Call) if any(q.startswith("torch.nn.") and q.endswith("Loss") for q in self.qn(c.func))]
        for call in calls:
            if any(a.keyword is not None and a.keyword.value == "reduction" and _string(a.value) == "sum" for a in call.args):
                self.notes.append(f"line {self.line(call)}: the training loss is summed over the batch; DDP averages the "
                                  "ranks' gradients, so they are world_size times smaller than DataParallel's: "
                                  "multiply the loss (or the learning rate) by the world size to keep them")
                return

    # --------------------------------------------------- loading and saving

    def plan_loads(self) -> None:
        """``torch.load`` onto the rank's device."""
        for call in self.of(cst.Call):
            if not self.calls_to(call, {"torch.load"}) or any(a.star for a in call.args):
                continue
            positional = [a for a in call.args if a.keyword is None]
            given = next((a for a in call.args if a.keyword is not None and a.keyword.value == "map_location"), None)
            if given is None and len(positional) >= 2:
                given = positional[1]
            if given is None:
                code = self.device_expr(call)
                self.edits.replace[call] = lambda u, code=code: with_args(u, [*u.args, kwarg("map_location", expr(code))])
            elif (_string(given.value) or "").startswith("cuda"):
                code = self.device_expr(call)
                self.edits.replace[given.value] = lambda u, code=code: expr(code)
            # "cpu", a device name, a function: kept

    def plan_state_dicts(self) -> None:
        """Save and load the model inside the wrapper: ``model.module``."""
        rekeyed = False
        for call in self.of(cst.Call):
            func = call.func
            ref = None
            if isinstance(func, cst.Attribute) and func.attr.value in ("state_dict", "load_state_dict"):
                ref = func.value
            elif self.calls_to(call, {"torch.save"}) and call.args:
                ref = call.args[0].value
            if ref is not None and self.is_wrapped(ref) and not self.in_unwrapped_branch(ref):
                self.edits.replace[ref] = _module_of
                rekeyed = True
        if rekeyed:
            self.notes.append(
                "checkpoints now hold the model's own keys (no `module.` prefix): one saved by the DataParallel "
                "script from `model.state_dict()` loads after "
                "`torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state, \"module.\")`"
            )

    def in_unwrapped_branch(self, ref: cst.CSTNode) -> bool:
        """``ref`` in the branch of ``isinstance(ref, nn.DataParallel)`` /
        ``hasattr(ref, "module")`` taken when the model is not wrapped."""
        key = dotted_name(ref)
        for node in [ref, *self.ancestors(ref)]:
            parent = self.parents.get(node)
            if not isinstance(parent, (cst.IfExp, cst.If)):
                continue
            test = parent.test
            negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
            if parent.orelse is node and not negated and self.tests_wrapper(test, key):
                return True
            if parent.body is node and negated and self.tests_wrapper(test.expression, key):
                return True
        return False

    def tests_wrapper(self, test: cst.CSTNode, key: Optional[str]) -> bool:
        if not isinstance(test, cst.Call) or len(test.args) < 2 or dotted_name(test.args[0].value) != key:
            return False
        if dotted_name(test.func) == "isinstance":
            return any(self.qn(n) & DATA_PARALLEL for n in self.find(test.args[1].value, cst.Name, cst.Attribute))
        return dotted_name(test.func) == "hasattr" and _string(test.args[1].value) == "module"

    # ---------------------------------------------------------------- rank 0

    def is_output_statement(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.SimpleStatementLine) and all(
            isinstance(s, cst.Expr) and isinstance(s.value, cst.Call) and self.is_output_call(s.value) for s in node.body)

    def is_output_call(self, call: cst.Call) -> bool:
        """``print(...)``, ``logging.info(...)``, ``logger.debug(...)``."""
        names = self.qn(call.func)
        if "builtins.print" in names or names & {f"logging.{m}" for m in LOG_METHODS}:
            return True
        func = call.func
        return (isinstance(func, cst.Attribute) and func.attr.value in LOG_METHODS
                and (dotted_name(func.value) or "").rsplit(".", 1)[-1].lower() in ("logger", "log", "_logger", "_log"))

    def runs_model(self, node: cst.CSTNode) -> Optional[str]:
        """A call in ``node`` that may run the model (a collective under DDP)."""
        for call in self.find(node, cst.Call):
            func = call.func
            if (self.is_wrapped(func) or self.callee(call) is not None
                    or (isinstance(func, cst.Attribute) and self.is_wrapped(func.value) and func.attr.value not in STATE_METHODS)
                    or any(self.is_wrapped(a.value) for a in call.args)):
                return self.code(func)
        return None

    def plan_rank0(self) -> None:
        """Saving, printing and logging on rank 0 only; nothing that may run
        the model (a collective) inside those branches."""
        guarded: List[cst.CSTNode] = []
        for call in self.of(cst.Call):
            if not self.calls_to(call, {"torch.save"}):
                continue
            line = self.statement_of(call)
            if not (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(line.body[0], cst.Expr)
                    and line.body[0].value is call and isinstance(self.parents.get(line), (cst.IndentedBlock, cst.Module))):
                raise CannotMigrate("`torch.save(...)` inside an expression or on one line with its `if`: the codemod "
                                    "saves on rank 0 only and needs it as a statement of its own", self.line(call))
            func = self.scope_of(line)
            helper = (isinstance(func, cst.FunctionDef) and not self.in_entry(line)
                      and not self.within(self.loop.batch, func) and not self.within(self.loop.epoch, func))
            sites = self.callers(func) if helper else []
            if sites and all(self.is_call_statement(c) for c in sites):
                # a checkpoint helper: its callers call it on rank 0
                self.rank0_functions.add(func)
                guarded.extend(self.statement_of(c) for c in sites)
            else:
                guarded.append(line)
        for line in guarded:
            runs = self.runs_model_in(line)
            if runs is not None:
                raise CannotMigrate(f"saving (`{self.code(line)}`) calls `{runs}`: on rank 0 alone that may be a "
                                    "collective the other ranks never join", self.line(line))
            self.edits.guard.add(line)
        for call in self.of(cst.Call):
            if not self.is_output_call(call):
                continue
            line = self.statement_of(call)
            if line in self.edits.guard or any(self.within(line, f) for f in self.rank0_functions):
                continue
            if not (self.in_entry(line) or isinstance(self.scope_of(line), cst.FunctionDef)):
                continue  # module-level code that runs at import, before the process group
            where = f"line {self.line(call)}: `{self.code(call.func)}(...)`"
            if not isinstance(line, cst.SimpleStatementLine) or not isinstance(self.parents.get(line), (cst.IndentedBlock, cst.Module)):
                self.notes.append(f"{where} on one line with its `if` stays on every rank")
            elif not self.is_output_statement(line):
                self.notes.append(f"{where} shares its line with other code; it stays on every rank")
            elif (runs := self.runs_model(line)) is not None:
                self.notes.append(f"{where} calls `{runs}`, so it stays on every rank (on rank 0 alone that call "
                                  "could wait for the other ranks forever)")
            else:
                self.edits.guard.add(line)

    def runs_model_in(self, line: cst.CSTNode) -> Optional[str]:
        for call in self.find(line, cst.Call):
            if self.is_wrapped(call.func):
                return self.code(call.func)
            target = self.callee(call)
            if target is not None and target[0] in self.rank0_functions:
                inner = next((c for c in self.find(target[0].body, cst.Call) if self.is_wrapped(c.func)), None)
                if inner is not None:
                    return self.code(inner.func)
        return None

    def is_call_statement(self, call: cst.Call) -> bool:
        line = self.statement_of(call)
        return (isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(line.body[0], cst.Expr)
                and line.body[0].value is call and isinstance(self.parents.get(line), (cst.IndentedBlock, cst.Module)))

    # -------------------------------------------------------------- the rest

    def plan_references(self) -> None:
        """``isinstance(model, nn.DataParallel)`` and other mentions of the class."""
        for node in [*self.of(cst.Name), *self.of(cst.Attribute)]:
            if not self.qn(node) & DATA_PARALLEL:
                continue
            parent = self.parents.get(node)
            if (isinstance(parent, cst.Call) and parent.func is node) or (isinstance(parent, cst.Attribute) and parent.value is node):
                continue
            if any(isinstance(a, (cst.Import, cst.ImportFrom)) for a in self.ancestors(node)):
                continue
            self.edits.replace[node] = lambda u: cst.Name("DistributedDataParallel")
        for imp in self.of(cst.ImportFrom):
            if imp.module is None or isinstance(imp.names, cst.ImportStar):
                continue
            for alias in imp.names:
                if f"{dotted_name(imp.module)}.{dotted_name(alias.name)}" in DATA_PARALLEL:
                    self.edits.drop_imports.append((dotted_name(imp.module) or "", dotted_name(alias.name) or ""))

    def plan_entry(self) -> None:
        """The process group starts in the entry (after argument parsing, so
        that ``--help`` works without torchrun) and ends with it."""
        dist = self.edits.dist
        head = [stmt(line.format(dist=dist) + "\n") for line in INIT]
        head[0] = with_comment(head[0], [INIT_COMMENT])
        destroy = f"{dist}.destroy_process_group()\n"
        kind, what = self.entry
        body = list(what.body.body) if kind in ("function", "guard") else list(what)
        after = self.init_point(body)
        if after is not None:
            self.edits.after.setdefault(after, []).extend(head)
        elif kind == "function":
            self.edits.prepend.setdefault(what, [])[:0] = head
        else:
            self.edits.main_head = head
        if kind != "function":
            self.edits.main_tail = [stmt(destroy)]
            return
        self.edits.append.setdefault(what, []).append(stmt(destroy))
        for ret in self.find(what.body, cst.Return):
            if self.scope_of(ret) is not what:
                continue
            line = self.statement_of(ret)
            if isinstance(line, cst.SimpleStatementLine) and isinstance(self.parents.get(line), cst.IndentedBlock):
                self.edits.before.setdefault(line, []).append(stmt(destroy))
            else:
                self.notes.append(f"line {self.line(ret)}: this `return` leaves without destroying the process group")

    def init_point(self, body: List[cst.CSTNode]) -> Optional[cst.CSTNode]:
        """The argument-parsing statement the process group may start
        after, when nothing before it changes; None: at the top."""
        parse = None
        for line in body:
            for call in self.find(line, cst.Call):
                target = self.callee(call)
                if _parses_arguments(call) or (target is not None and any(_parses_arguments(c) for c in self.find(target[0], cst.Call))):
                    parse = line
        if parse is None:
            return None
        edited = [*self.edits.replace, *self.edits.before, *self.edits.guard, *self.edits.unwrap, *self.edits.remove,
                  *self.edits.comments, *self.edits.prepend]
        for line in body:
            if self.start(line) > self.start(parse):
                break
            if any(self.within(e, line) for e in edited if e is not ENTRY):
                return None
        return parse

    def plan_local_rank(self) -> None:
        """Code outside the entry that uses ``local_rank`` binds it: a
        function at its top, module-level code (it runs at import) before
        its first use, with a default so that the module still imports,
        and ``--help`` still works, without torchrun."""
        for scope in self.needs_local_rank:
            if isinstance(scope, cst.FunctionDef):
                self.edits.prepend.setdefault(scope, [])[:0] = [stmt(INIT[0] + "\n")]
        if self.module_rank_uses:
            first = min(self.module_rank_uses, key=self.start)
            bind = with_comment(stmt('local_rank = int(os.environ.get("LOCAL_RANK", 0))\n'), [MODULE_RANK_COMMENT])
            self.edits.before.setdefault(first, []).insert(0, bind)

    def plan_header(self) -> None:
        n = str(self.nproc) if self.nproc else "N"
        self.launch = f"torchrun --nproc_per_node={n} {self.name}"
        self.edits.header = [
            "Migrated from nn.DataParallel to DistributedDataParallel by `devlint migrate ddp`.",
            f"Launch one process per GPU{'' if self.nproc else ' (N of them)'}; without GPUs, processes on the CPU (gloo):",
            f"    {self.launch} [ARGS]",
            "Each process trains on its own share of every epoch; rank 0 prints and saves.",
        ]


# ---------------------------------------------------------------- helpers


def _one(found: Set[Optional[cst.Call]]) -> Optional[cst.Call]:
    """The single answer of several paths, or None when they disagree."""
    return next(iter(found)) if len(found) == 1 else None


def _string(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _module_of(updated: cst.CSTNode) -> cst.CSTNode:
    return cst.Attribute(value=updated, attr=cst.Name("module"))


def _ddp_inside(updated: cst.CSTNode) -> cst.CSTNode:
    """The DDP call the wrap became, out of the ``.to()`` chain or the
    conditional expression around it (those moved into the call, or went)."""
    node = updated
    while True:
        if isinstance(node, cst.Call) and dotted_name(node.func) == "DistributedDataParallel":
            return node.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        elif isinstance(node, cst.IfExp):
            node = node.body if isinstance(node.body, cst.Call) else node.orelse
        else:
            raise RuntimeError("the wrap is not where the plan left it")


def _parses_arguments(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("parse_args", "parse_known_args")


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = {dotted_name(test.left) or _string(test.left), dotted_name(test.comparisons[0].comparator) or _string(test.comparisons[0].comparator)}
    return sides == {"__name__", "__main__"}


def _called_in(line: cst.CSTNode) -> Optional[cst.Call]:
    """``f(...)``, ``sys.exit(f(...))`` or ``raise SystemExit(f(...))`` as a statement."""
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    small = line.body[0]
    value = small.value if isinstance(small, cst.Expr) else small.exc if isinstance(small, cst.Raise) else None
    if not isinstance(value, cst.Call):
        return None
    if dotted_name(value.func) in ("sys.exit", "exit", "SystemExit") and value.args and isinstance(value.args[0].value, cst.Call):
        return value.args[0].value
    return value


def _stays_at_module_level(node: cst.CSTNode) -> bool:
    """What a new ``main()`` leaves at module level: definitions, imports,
    the docstring, ``UPPER_CASE`` constants and dunders."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)) or is_docstring(node):
        return True
    if isinstance(node, cst.If) and _is_main_guard(node.test):
        return True
    if not isinstance(node, cst.SimpleStatementLine):
        return False
    for small in node.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            continue
        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target] if isinstance(small, cst.AnnAssign) else None
        if targets and all(isinstance(t, cst.Name) and (t.value.isupper() or t.value.startswith("__")) for t in targets):
            continue
        return False
    return True


def _strip_progress(node: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(node, cst.Call) and node.args and (dotted_name(node.func) or "").rsplit(".", 1)[-1] in PROGRESS_WRAPPERS:
        node = node.args[0].value
    return node


def _is_range(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and dotted_name(node.func) == "range"


def _is_optimizer(qname: str) -> bool:
    parts = qname.split(".")
    return (qname.startswith("torch.optim.") and parts[-1][:1].isupper() and "lr_scheduler" not in parts
            and "swa_utils" not in parts and parts[-1] != "Optimizer")


def _has_move(call: cst.Call) -> bool:
    """A call chain that places a module: ``Net().to(device)``, ``.cuda()``."""
    node: cst.CSTNode = call
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value in ("to", "cuda") and not _is_dtype_move(node):
            return True
        node = node.func.value
    return False


def _is_dtype_move(call: cst.Call) -> bool:
    if call.func.attr.value != "to" or not call.args:
        return False
    first = call.args[0].value
    return isinstance(first, cst.Attribute) and dotted_name(first.value) == "torch" and first.attr.value in (
        "float16", "float32", "float64", "bfloat16", "half", "float", "double")


def _call_base(call: cst.Call) -> cst.CSTNode:
    node: cst.CSTNode = call
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        node = node.func.value
    return node
