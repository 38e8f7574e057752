"""The candidate scan: one walk over CPython's ``ast`` (about 12x cheaper than
the libcst parse) that summarises what a file calls, imports and defines, so
that a rule can say "I cannot fire here" before libcst parses the file.

A rule answers from the summary in :meth:`devlint.rule.Rule.candidate`. The
answer must over-approximate the rule: ``False`` only when the libcst visitor
certainly reports nothing (a wrong ``False`` drops a finding; a wrong
``True`` costs only time). A rule without the hook is always a candidate.
Names resolve through the same import-alias semantics as
:class:`devlint.semantic.FileFacts`, but to *every* target a name may have
(a superset of the one the semantic pass picks).
"""

from __future__ import annotations

import ast
from typing import Dict, FrozenSet, Iterator, List, NamedTuple, Optional, Set, Tuple

from devlint.semantic import canonical


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
    #: ("call", dotted callee), ("name", id), ("attr", "root.attr"), ("other", "")
    device_arg: Optional[Tuple[str, str]] = None
    #: the call is a direct element of a list/tuple/set display, the element
    #: of a comprehension or a positional argument of another call (where
    #: ``nn.Sequential(a.to(d0), b.to(d1))`` places container elements)
    in_container: bool = False

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
        #: ``self.<attr> = ...`` targets as (class, method, attribute)
        self.attribute_assigns: List[Tuple[Optional[str], Optional[str], str]] = []
        #: for each ``for`` statement: the dotted name it iterates, calls and
        #: subscripts peeled off (``enumerate(tqdm(loaders["train"]))`` ->
        #: ``loaders``), "" when it is not a name
        self.loops: List[str] = []
        #: names bound by ``for`` targets anywhere
        self.loop_targets: Set[str] = set()
        #: name -> dotted callees of the calls assigned to it, method-call
        #: chains peeled (``model = Net(...).cuda()`` -> ``Net``; "" unnamed)
        self.call_bound: Dict[str, Set[str]] = {}
        #: names assigned outside any class (at module level or in functions)
        self.unclassed_names: Set[str] = set()
        #: (class, method) -> the names its first parameter may have (``self``)
        self.method_self: Dict[Tuple[str, str], Set[str]] = {}
        #: attribute name -> values assigned to ``<name>.attr`` anywhere:
        #: "call:<dotted callee>", "container" (list, tuple, dict,
        #: comprehension) or "other"; see :meth:`attribute_kinds`
        self.attribute_values: Dict[str, Set[str]] = {}
        #: every ``<owner>.device`` as (class, method, owner's root name,
        #: owner's shape: "name" ``x``, "attr" ``x.a``, "subscript" ``x.a[i]``,
        #: "other", the ``a`` of the last two or "")
        self.device_reads: List[Tuple[Optional[str], Optional[str], Optional[str], str, str]] = []
        self._forward: Optional[Dict[str, FrozenSet[str]]] = None

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

    def torch_functions(self, dotted: Optional[str]) -> Set[str]:
        """``{"zeros"}`` when ``dotted`` may name ``torch.zeros``."""
        out = set()
        for q in self.resolve(dotted):
            if q.startswith("torch.") and q.count(".") == 1:
                out.add(q[len("torch."):])
        return out

    def imports_any(self, prefix: str) -> bool:
        """Some import binds a name to ``prefix`` or something under it."""
        return any(t == prefix or t.startswith(prefix + ".") for ts in self.imports.values() for t in ts)

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

    # -- classes and forward -------------------------------------------------
    def forward_methods(self) -> Dict[str, FrozenSet[str]]:
        """Class name -> method names that may run from ``forward``: ``forward``
        and, transitively, what it calls as ``<name>.<method>(...)``. A
        superset of :attr:`devlint.semantic.ClassFacts.forward_reachable`
        (every class counts, whatever its bases; same-named classes merge)."""
        if self._forward is None:
            out: Dict[str, FrozenSet[str]] = {}
            for cls, methods in self.methods.items():
                reach = {"forward"}
                todo = ["forward"]
                while todo:
                    for callee in methods.get(todo.pop(), ()):
                        if callee in methods and callee not in reach:
                            reach.add(callee)
                            todo.append(callee)
                out[cls] = frozenset(reach)
            self._forward = out
        return self._forward

    def in_forward(self, cls: Optional[str], method: Optional[str]) -> bool:
        if cls is None or method is None:
            return False
        return method in self.forward_methods().get(cls, ())

    def calls_in_forward(self) -> Iterator[CallSite]:
        for call in self.calls:
            if self.in_forward(call.cls, call.method):
                yield call


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
            return "call:" + (_dotted(value.func) or "")
        if isinstance(value, (ast.List, ast.Tuple, ast.ListComp, ast.Dict, ast.DictComp, ast.GeneratorExp, ast.Set, ast.SetComp)):
            return "container"
        return "other"

    def walk(self, tree: ast.AST) -> None:
        s = self.s
        calls = s.calls
        attributes = s.attributes
        strings = s.strings
        methods = s.methods
        # (node, class name, method name, method's called-attribute set)
        stack: List[Tuple[ast.AST, Optional[str], Optional[str], Optional[Set[str]]]] = [(tree, None, None, None)]
        pop, push = stack.pop, stack.append
        Call, Attribute, Name, Constant = ast.Call, ast.Attribute, ast.Name, ast.Constant
        FunctionDef, AsyncFunctionDef, ClassDef = ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef
        Import, ImportFrom, Assign, AnnAssign = ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign
        For, AsyncFor = ast.For, ast.AsyncFor
        ListNode, TupleNode, SetNode, Starred = ast.List, ast.Tuple, ast.Set, ast.Starred
        ListComp, GeneratorExp, SetComp = ast.ListComp, ast.GeneratorExp, ast.SetComp
        #: ids of calls that are container elements / call arguments (see CallSite.in_container)
        elements: Set[int] = set()
        iter_fields = ast.iter_fields
        AST = ast.AST
        while stack:
            node, cls, method, called = pop()
            t = type(node)
            if t is Call:
                func = node.func
                dotted = _dotted(func)
                attr = func.attr if type(func) is Attribute else None
                if attr is not None and called is not None:
                    called.add(attr)
                dev = next((k.value for k in node.keywords if k.arg == "device"), None)
                if dev is None and attr == "to":
                    # the first positional argument that is not *args (as the rules read it)
                    dev = next((a for a in node.args if type(a) is not Starred), None)
                for a in node.args:
                    if type(a) is Call:
                        elements.add(id(a))
                calls.append(
                    CallSite(
                        dotted,
                        attr,
                        tuple(k.arg for k in node.keywords),
                        len(node.args),
                        cls,
                        method,
                        node.lineno,
                        _receiver(func.value) if attr is not None else (None, ""),
                        _value_shape(dev) if dev is not None else None,
                        id(node) in elements,
                    )
                )
            elif t is Attribute:
                attributes.add(node.attr)
                if node.attr == "device":
                    s.device_reads.append((cls, method) + _owner_shape(node.value))
            elif t is Constant:
                value = node.value
                if type(value) is str and len(value) <= 64:
                    strings.add(value)
                continue
            elif t is Name:
                continue
            elif t is ListNode or t is TupleNode or t is SetNode:
                for a in node.elts:
                    if type(a) is Call:
                        elements.add(id(a))
            elif t is ListComp or t is GeneratorExp or t is SetComp:
                if type(node.elt) is Call:
                    elements.add(id(node.elt))
            elif t is FunctionDef or t is AsyncFunctionDef:
                if cls is not None and method is None:
                    method = node.name
                    called = methods.setdefault(cls, {}).setdefault(method, set())
                    firsts = {a.arg for a in (node.args.posonlyargs[:1] + node.args.args[:1])}
                    if node.args.posonlyargs and node.args.args:
                        firsts.add(node.args.args[0].arg)  # libcst's params skip positional-only ones
                    s.method_self.setdefault((cls, method), set()).update(firsts)
            elif t is ClassDef:
                cls, method, called = node.name, None, None
                s.bases.setdefault(cls, []).extend(filter(None, (_dotted(b) for b in node.bases)))
                methods.setdefault(cls, {})
            elif t is Import:
                self._import(node)
                continue
            elif t is ImportFrom:
                self._import_from(node)
                continue
            elif t is For or t is AsyncFor:
                s.loops.append(_iterated_name(node.iter))
                s.loop_targets.update(n.id for n in _flatten_targets(node.target) if type(n) is Name)
            elif t is Assign or t is AnnAssign:
                targets = node.targets if t is Assign else [node.target]
                value = node.value
                for target in targets:
                    for el in _flatten_targets(target):
                        if type(el) is Attribute and type(el.value) is Name:
                            s.attribute_assigns.append((cls, method, el.attr))
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
            for _, value in iter_fields(node):
                if isinstance(value, list):
                    for item in reversed(value):
                        if isinstance(item, AST):
                            push((item, cls, method, called))
                elif isinstance(value, AST):
                    push((value, cls, method, called))


def _flatten_targets(node: ast.AST) -> List[ast.AST]:
    if isinstance(node, (ast.Tuple, ast.List)):
        out: List[ast.AST] = []
        for el in node.elts:
            out.extend(_flatten_targets(el))
        return out
    if isinstance(node, ast.Starred):
        return _flatten_targets(node.value)
    return [node]


def _owner_shape(node: ast.AST) -> Tuple[Optional[str], str, str]:
    if type(node) is ast.Name:
        return node.id, "name", ""  # type: ignore[attr-defined]
    sub = type(node) is ast.Subscript
    inner = node.value if sub else node  # type: ignore[attr-defined]
    if type(inner) is ast.Attribute and type(inner.value) is ast.Name:  # type: ignore[attr-defined]
        return inner.value.id, "subscript" if sub else "attr", inner.attr  # type: ignore[attr-defined]
    return None, "other", ""


def _receiver(node: ast.AST) -> Tuple[Optional[str], str]:
    if type(node) is ast.Call:
        return None, "call"
    root, shape, _ = _owner_shape(node)
    return root, shape


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
