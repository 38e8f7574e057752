"""A read-only model of one training script for the codemods: its nodes by
kind, their parents and positions, what its imports bind, and the questions a
codemod asks of it (which function a call runs, what a name was bound to,
which parameter an argument lands in).

Names resolve through a light import-alias table, as devlint's facts do
(``devlint/facts/classes.py``), not libcst's scope analysis: a script that
rebinds ``nn`` or ``torch`` to something else is not the shape the codemods
handle.
"""

from __future__ import annotations

import builtins
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Type, Union

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from devlint.syntax import dotted_name

Scope = Union[cst.FunctionDef, cst.Module]
Position = Tuple[int, int]
_BUILTINS = frozenset(dir(builtins))


class Script:
    """One parsed script. Every node it hands out is a node of ``module``."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        walk = _Walk()
        module.visit(walk)
        self.parents: Dict[cst.CSTNode, cst.CSTNode] = walk.parents
        self._nodes: Dict[type, List[cst.CSTNode]] = walk.nodes
        self.aliases = _aliases(self.of(cst.Import), self.of(cst.ImportFrom))
        self._scope: Dict[cst.CSTNode, Scope] = {}
        self._callee: Dict[cst.Call, Optional[Tuple[cst.FunctionDef, int]]] = {}

    # ------------------------------------------------------------- nodes

    def of(self, kind: Type[cst.CSTNode]) -> List:
        """Every node of ``kind`` (one libcst class), in source order."""
        return self._nodes.get(kind, [])

    def find(self, container: Optional[cst.CSTNode], *kinds: Type[cst.CSTNode]) -> List:
        """The nodes of ``kinds`` inside ``container`` (itself included)."""
        if container is None:
            return []
        lo, hi = self.start(container), self.end(container)
        out = [n for kind in kinds for n in self.of(kind) if lo <= self.start(n) and self.end(n) <= hi]
        if len(kinds) > 1:
            out.sort(key=self.start)
        return out

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def start(self, node: cst.CSTNode) -> Position:
        p = self.positions[node].start
        return (p.line, p.column)

    def end(self, node: cst.CSTNode) -> Position:
        p = self.positions[node].end
        return (p.line, p.column)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node).strip()

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        while node in self.parents:
            node = self.parents[node]
            yield node

    def within(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return node is container or any(a is container for a in self.ancestors(node))

    def statement_of(self, node: cst.CSTNode) -> cst.BaseStatement:
        """The statement (a simple line, or a compound statement) holding ``node``."""
        for a in (node, *self.ancestors(node)):
            if isinstance(a, cst.BaseStatement):
                return a
        raise ValueError("a node outside any statement")

    # ------------------------------------------------------------- names

    def qn(self, node: cst.CSTNode) -> Set[str]:
        """What a name or attribute chain refers to through the imports
        (``nn.DataParallel`` -> ``torch.nn.DataParallel``), or a builtin."""
        dotted = dotted_name(node)
        if dotted is None:
            return set()
        head, _, rest = dotted.partition(".")
        target = self.aliases.get(head)
        if target is not None:
            return {f"{target}.{rest}" if rest else target}
        if head in _BUILTINS and self.module_function(head) is None:
            return {f"builtins.{dotted}"}
        return set()

    def calls_to(self, call: cst.Call, names: Set[str]) -> bool:
        return bool(self.qn(call.func) & names)

    # ------------------------------------------------------------ scopes

    def scope_of(self, node: cst.CSTNode) -> Scope:
        """The function whose code ``node`` is, or the module."""
        found = self._scope.get(node)
        if found is None:
            found = next((a for a in self.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.Module))), self.module)
            self._scope[node] = found
        return found

    def class_of(self, func: cst.CSTNode) -> Optional[cst.ClassDef]:
        """The class ``func`` is a method of."""
        if not isinstance(func, cst.FunctionDef):
            return None
        block = self.parents.get(func)
        owner = self.parents.get(block) if isinstance(block, cst.IndentedBlock) else None
        return owner if isinstance(owner, cst.ClassDef) else None

    def module_function(self, name: str) -> Optional[cst.FunctionDef]:
        return next((s for s in self.module.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)

    def module_class(self, name: str) -> Optional[cst.ClassDef]:
        return next((s for s in self.module.body if isinstance(s, cst.ClassDef) and s.name.value == name), None)

    @staticmethod
    def method(cls: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
        return next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)

    @staticmethod
    def params(func: cst.FunctionDef) -> List[cst.Param]:
        return [*func.params.posonly_params, *func.params.params, *func.params.kwonly_params]

    def is_param(self, scope: cst.CSTNode, name: str) -> bool:
        return isinstance(scope, cst.FunctionDef) and any(p.name.value == name for p in self.params(scope))

    def in_no_grad(self, node: cst.CSTNode) -> bool:
        """Under ``with torch.no_grad()`` / ``inference_mode()``, or in a
        function decorated with one."""
        grad_off = {"torch.no_grad", "torch.inference_mode"}
        for a in self.ancestors(node):
            if isinstance(a, cst.With) and any(
                isinstance(i.item, cst.Call) and self.calls_to(i.item, grad_off) for i in a.items
            ):
                return True
            if isinstance(a, cst.FunctionDef) and any(
                self.qn(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) & grad_off
                for d in a.decorators
            ):
                return True
        return False

    # ------------------------------------------------------------- calls

    def callee(self, call: cst.Call) -> Optional[Tuple[cst.FunctionDef, int]]:
        """The function of this script a call runs (a module function, a
        class's ``__init__``, or a method called on ``self``), and how many
        leading parameters the call does not pass (``self``)."""
        if call in self._callee:
            return self._callee[call]
        found = None
        func = call.func
        if isinstance(func, cst.Name):
            f = self.module_function(func.value)
            cls = self.module_class(func.value) if f is None else None
            init = self.method(cls, "__init__") if cls is not None else None
            found = (f, 0) if f is not None else (init, 1) if init is not None else None
        elif isinstance(func, cst.Attribute) and dotted_name(func.value) == "self":
            cls = self.class_of(self.scope_of(call))
            m = self.method(cls, func.attr.value) if cls is not None else None
            found = (m, 1) if m is not None else None
        self._callee[call] = found
        return found

    def callers(self, func: cst.FunctionDef) -> List[cst.Call]:
        return [c for c in self.of(cst.Call) if (self.callee(c) or (None,))[0] is func]

    def argument_for(self, call: cst.Call, func: cst.FunctionDef, param: str) -> Optional[cst.BaseExpression]:
        """The expression ``call`` passes for ``param`` of ``func``."""
        for a in call.args:
            if a.keyword is not None and a.keyword.value == param:
                return a.value
        names = [p.name.value for p in self.params(func)]
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if param in names:
            i = names.index(param) - (self.callee(call) or (None, 0))[1]
            if 0 <= i < len(positional):
                return positional[i].value
        return None

    def parameter_for(self, call: cst.Call, arg: cst.Arg) -> Optional[Tuple[cst.FunctionDef, str]]:
        """The parameter of the script's function that ``arg`` lands in."""
        target = self.callee(call)
        if target is None or arg.star:
            return None
        func, skip = target
        if arg.keyword is not None:
            return func, arg.keyword.value
        positional = [a for a in call.args if a.keyword is None and not a.star]
        i = positional.index(arg) + skip
        params = [*func.params.posonly_params, *func.params.params]
        return (func, params[i].name.value) if i < len(params) else None

    # ---------------------------------------------------------- bindings

    def binds(self, scope: cst.CSTNode, name: str) -> List[Tuple[cst.Assign, Optional[int]]]:
        """Assignments of ``name`` in ``scope`` (not in nested functions),
        with the index of the name in an unpacking target."""
        out = []
        for a in self.of(cst.Assign):
            if self.scope_of(a) is not scope:
                continue
            for t in a.targets:
                target = t.target
                if isinstance(target, cst.Name) and target.value == name:
                    out.append((a, None))
                elif isinstance(target, (cst.Tuple, cst.List)):
                    for i, el in enumerate(target.elements):
                        if isinstance(el.value, cst.Name) and el.value.value == name:
                            out.append((a, i))
        return out

    def attr_binds(self, cls: cst.ClassDef, attr: str) -> List[cst.Assign]:
        """``self.<attr> = ...`` in the methods of ``cls``."""
        return [a for a in self.of(cst.Assign) if self.class_of(self.scope_of(a)) is cls
                and any(dotted_name(t.target) == f"self.{attr}" for t in a.targets)]

    def bound_names(self, node: cst.CSTNode) -> Set[str]:
        """The names code binds (assignment targets, loop variables, ``as``
        names, nested definitions, imports)."""
        return {n.value for n in self.find(node, cst.Name) if _is_binding(n, self.parents.get(n), self.parents)}

    def local_names(self, func: cst.FunctionDef) -> Set[str]:
        """The names a function binds itself: its parameters and its bindings."""
        out = {p.name.value for p in self.params(func)} | self.bound_names(func.body)
        for star in (func.params.star_arg, func.params.star_kwarg):
            if isinstance(star, cst.Param):
                out.add(star.name.value)
        return out

    def loaded_names(self, node: cst.CSTNode) -> List[cst.Name]:
        """Names read in ``node`` (not attributes, keywords or bindings)."""
        out = []
        for n in self.find(node, cst.Name):
            parent = self.parents.get(n)
            if isinstance(parent, cst.Attribute) and parent.attr is n:
                continue
            if isinstance(parent, (cst.Arg, cst.Param)) and getattr(parent, "keyword", None) is n:
                continue
            if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName, cst.Param)):
                continue
            if _is_binding(n, parent, self.parents):
                continue
            out.append(n)
        return out


def _is_binding(name: cst.Name, parent: Optional[cst.CSTNode], parents: Dict[cst.CSTNode, cst.CSTNode]) -> bool:
    """Whether ``name`` is bound where it stands (an assignment target, a
    loop variable, ``as`` name, a nested ``def``/``class``, an import)."""
    node: cst.CSTNode = name
    while isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        node, parent = parent, parents.get(parent)
    if isinstance(parent, cst.AssignTarget) and parent.target is node:
        return True
    if isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is node:
        return True
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is node:
        return True
    if isinstance(parent, cst.NamedExpr) and parent.target is node:
        return True
    if isinstance(parent, cst.AsName) and parent.name is node:
        return True
    if isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is node:
        return True
    return isinstance(parent, cst.ImportAlias)


def _aliases(imports: Sequence[cst.Import], froms: Sequence[cst.ImportFrom]) -> Dict[str, str]:
    """Local name -> the dotted name it imports (``nn`` -> ``torch.nn``)."""
    table: Dict[str, str] = {}
    for node in imports:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                table[alias.asname.name.value] = full
            else:
                head = full.split(".")[0]
                table[head] = head
    for node in froms:
        if isinstance(node.names, cst.ImportStar) or node.relative or node.module is None:
            continue
        base = dotted_name(node.module)
        for alias in node.names:
            name = dotted_name(alias.name)
            if base is None or name is None:
                continue
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            table[local] = f"{base}.{name}"
    return table


class _Walk(cst.CSTVisitor):
    """One pass: every node by kind, and every node's parent."""

    def __init__(self) -> None:
        self.parents: Dict[cst.CSTNode, cst.CSTNode] = {}
        self.nodes: Dict[type, List[cst.CSTNode]] = {}
        self._stack: List[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._stack:
            self.parents[node] = self._stack[-1]
        self._stack.append(node)
        self.nodes.setdefault(type(node), []).append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()
