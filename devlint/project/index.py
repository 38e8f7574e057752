"""The project index: the summaries of the files analysed so far, and the
lookups a file makes through it.

A lookup asks the file first (its own classes), then the index, then the
PyTorch vocabulary (``devlint.torch_api``); :class:`FileFacts` does the
asking. The index resolves an absolute dotted name to the module that
defines it, following re-exports (``pkg/__init__.py``'s ``from .lm import
LanguageModel``) and a script's imports of its sibling modules by bare
name; a name it cannot resolve stays unknown.

Every module a lookup reads is recorded in :attr:`ProjectIndex.consulted`
(with the digest of its summary): a file's cached result is valid while
those digests are.

Files are analysed in import order (:func:`waves`): strongly connected
components of the import graph, each wave holding the components whose
imports are all in earlier waves, so each file is parsed once and sees the
summaries of what it imports. Members of one import cycle are analysed in
the same wave and do not see each other.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from devlint.project.names import absolute, script_package

if TYPE_CHECKING:  # pragma: no cover
    from devlint.facts.classes import ClassFacts

# the summaries' module (and libcst through the facts) is imported on first
# use: a warm run answered from the cache plans the project without them

def digest(summary: Optional[Dict[str, Any]]) -> str:
    """A short stable digest of a summary ("" for none): what a dependent
    file's cached result is keyed on."""
    if summary is None:
        return ""
    data = json.dumps(summary, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.blake2b(data, digest_size=12).hexdigest()


#: import heads that are never modules of the project being checked
_NOT_PROJECT = frozenset(getattr(sys, "stdlib_module_names", ())) | {"torch", "numpy", "typing_extensions", "__future__"}

#: how many re-exports a lookup follows before giving up (a cycle of aliases)
_MAX_HOPS = 8


def shared(value: Any) -> Any:
    """A summary (JSON-like: dicts, lists, strings, numbers) rebuilt with its
    strings interned. Each result a worker sends back is unpickled with its
    own copy of every key (``"module_class"``, ``"read_after_build"``) and of
    every repeated value (``"__init__"``, a module's digest); the index of a
    large project holds tens of thousands of them, in the parent and in each
    worker."""
    t = type(value)
    if t is str:
        return sys.intern(value) if len(value) <= 80 else value
    if t is dict:
        return {(sys.intern(k) if type(k) is str else k): shared(v) for k, v in value.items()}
    if t is list:
        return [shared(v) for v in value]
    if t is tuple:
        return tuple(shared(v) for v in value)
    return value


class ProjectIndex:
    def __init__(self, summaries: Optional[Dict[str, Dict[str, Any]]] = None,
                 aliases: Optional[Dict[str, Dict[str, str]]] = None,
                 paths: Optional[Dict[str, str]] = None) -> None:
        #: module -> its summary (files analysed so far)
        self.summaries: Dict[str, Dict[str, Any]] = dict(summaries or {})
        #: module -> local name -> absolute target (its imports: re-exports)
        self.aliases: Dict[str, Dict[str, str]] = dict(aliases or {})
        #: module -> file path, for messages
        self.paths: Dict[str, str] = dict(paths or {})
        #: module -> digest of its summary, for every module a lookup read
        self.consulted: Dict[str, str] = {}
        self._classes: "Dict[str, Optional[ClassFacts]]" = {}
        self._digests: Dict[str, str] = {}
        self._imports_project: Dict[str, bool] = {}

    def add(self, module: str, summary: Optional[Dict[str, Any]]) -> None:
        if summary is not None:
            self.summaries[module] = summary
            self._digests.pop(module, None)
            self._classes.clear()
            self._imports_project.clear()

    def digest_of(self, module: str) -> str:
        if module not in self._digests:
            self._digests[module] = digest(self.summaries.get(module))
        return self._digests[module]

    def _consult(self, module: str) -> None:
        self.consulted[module] = self.digest_of(module)

    # -- resolution -------------------------------------------------------------
    def _split(self, dotted: str) -> Optional[Tuple[str, str]]:
        """(module, name) for ``module.name`` where ``module`` is a known
        module (summarised, or with known imports) and ``name`` one
        identifier."""
        mod, _, name = dotted.rpartition(".")
        if mod and name and (mod in self.summaries or mod in self.aliases):
            return mod, name
        return None

    def resolve(self, dotted: str, importer: Optional[str] = None) -> Optional[Tuple[str, str]]:
        """The (module, name) that defines ``dotted`` in the project, following
        re-exports; for a bare sibling import of a script (``models.Net``
        imported by ``pkg.train``), ``pkg.models.Net`` is tried too."""
        if dotted.split(".", 1)[0] == "torch":
            # the vocabulary describes torch's names, also where the run
            # checks torch itself (``torch.nn.Module`` is no project class)
            return None
        candidates = [dotted]
        pkg = script_package(importer)
        if pkg:
            candidates.append(f"{pkg}.{dotted}")
        for cand in candidates:
            found = self._follow(cand)
            if found is not None:
                return found
        return None

    def _follow(self, dotted: str, seen: Optional[Set[str]] = None) -> Optional[Tuple[str, str]]:
        seen = set() if seen is None else seen
        for _ in range(_MAX_HOPS):
            if dotted in seen:
                return None
            seen.add(dotted)
            split = self._split(dotted)
            if split is None:
                return None
            mod, name = split
            summary = self.summaries.get(mod)
            if summary is not None and (name in summary.get("classes", {}) or name in summary.get("functions", {})):
                return mod, name
            aliases = self.aliases.get(mod, {})
            target = aliases.get(name)
            if target is None:
                # a public name that ``from .x import *`` brought in
                if name.startswith("_"):
                    return None
                for key, source in sorted(aliases.items()):
                    if key.startswith("*") and len(seen) < 4 * _MAX_HOPS:
                        found = self._follow(f"{source}.{name}", seen)
                        if found is not None:
                            return found
                return None
            if summary is not None:
                self._consult(mod)
            dotted = target
        return None

    def absolute_name(self, dotted: str, importer: Optional[str] = None) -> str:
        """The absolute name of the class ``dotted`` names, as the module that
        defines it spells it; ``dotted`` itself when the index does not know it."""
        found = self.resolve(dotted, importer)
        return f"{found[0]}.{found[1]}" if found else dotted

    def class_facts(self, dotted: str, importer: Optional[str] = None) -> "Optional[ClassFacts]":
        """The facts of the project class ``dotted`` names, None when the index
        does not know it."""
        key = f"{importer}|{dotted}"
        if key in self._classes:
            cls = self._classes[key]
            if cls is not None:
                self._consult(cls.origin)
            return cls
        found = self.resolve(dotted, importer)
        cls = None
        if found is not None and found[1] in self.summaries[found[0]].get("classes", {}):
            from devlint.project.summary import class_from_summary

            mod, name = found
            self._consult(mod)
            cls = class_from_summary(self.summaries[mod]["classes"][name], mod)
        self._classes[key] = cls
        return cls

    def function(self, dotted: str, importer: Optional[str] = None) -> Optional[Tuple[str, Dict[str, Any]]]:
        """(module, summary record) of the project function ``dotted`` names,
        None when the index has no summary of it."""
        found = self.resolve(dotted, importer)
        if found is None:
            return None
        mod, name = found
        record = self.summaries[mod].get("functions", {}).get(name)
        if record is None:
            return None
        self._consult(mod)
        return mod, record

    def imports_project(self, module: Optional[str]) -> bool:
        """Whether ``module`` imports something of the project (a class or a
        function another file of the run defines, or one of its modules)."""
        if module is None:
            return False
        known = self._imports_project.get(module)
        if known is None:
            known = any(
                self._is_module(t, module) or self.resolve(t, module) is not None
                for t in self.aliases.get(module, {}).values()
                if not t.startswith("torch")
            )
            self._imports_project[module] = known
        return known

    def parameter_properties(self, imports: Dict[str, List[str]], importer: Optional[str], is_package: bool = False) -> Set[str]:
        """The properties that take ``next(self.parameters())`` in the
        lineage of the project classes a file imports (``device`` of
        transformers' ``ModuleUtilsMixin``)."""
        out: Set[str] = set()
        for targets in imports.values():
            for t in targets:
                t = absolute(t, importer, is_package) or ""
                if not t or t.startswith("torch") or self.resolve(t, importer) is None:
                    continue
                todo, seen = [t], set()
                while todo:
                    name = todo.pop()
                    if name in seen:
                        continue
                    seen.add(name)
                    cls = self.class_facts(name, importer)
                    if cls is not None:
                        out.update(cls.first_parameter_properties)
                        todo.extend(cls.bases)
        return out

    def helpers(self, imports: Dict[str, List[str]], importer: Optional[str], is_package: bool, key: str) -> Set[str]:
        """The dotted names (as a file spells them) of the project functions
        it imports whose summary has ``key`` (``returns``: a tensor made on
        the CPU; ``first_parameter``; ``wraps``): ``create_grid`` for ``from
        utils import create_grid``, ``U.create_grid`` for ``import pkg.utils
        as U``."""
        return self.helpers_by_key(imports, importer, is_package, (key,))[key]

    def helpers_by_key(self, imports: Dict[str, List[str]], importer: Optional[str], is_package: bool,
                       keys: Sequence[str]) -> Dict[str, Set[str]]:
        """:meth:`helpers` for several keys in one pass over the imports
        (each resolution once, not once per key): key -> names. Consults
        what the calls of :meth:`helpers` one key at a time would."""
        out: Dict[str, Set[str]] = {k: set() for k in keys}
        pkg = script_package(importer)
        for local, targets in imports.items():
            for t in targets:
                t = absolute(t, importer, is_package) or ""
                if not t or t.startswith("torch"):
                    continue
                found = self.function(t, importer)
                if found is not None:
                    for k in keys:
                        if k in found[1]:
                            out[k].add(local)
                for mod in (t, f"{pkg}.{t}" if pkg else ""):
                    for name, record in self.summaries.get(mod, {}).get("functions", {}).items():
                        hit = False
                        for k in keys:
                            if k in record:
                                hit = True
                                out[k].add(f"{local}.{name}")
                        if hit:
                            self._consult(mod)
                    # a package that relays its modules' functions
                    # (``from pkg import geometry``; ``geometry.random_angles``
                    # defined in ``pkg/geometry/rotations.py``)
                    for name in self._relayed_names(mod):
                        found = self.function(f"{mod}.{name}", importer)
                        if found is not None:
                            for k in keys:
                                if k in found[1]:
                                    out[k].add(f"{local}.{name}")
        return out

    def _relayed_names(self, mod: str, seen: Optional[Set[str]] = None) -> Set[str]:
        """The names ``mod`` relays: its imported names, and the public
        functions and classes each ``from .x import *`` brings (through
        further star imports too; ``from .rotation import *`` in
        ``pkg/geometry/__init__.py``)."""
        seen = set() if seen is None else seen
        if mod in seen or len(seen) > 4 * _MAX_HOPS:
            return set()
        seen.add(mod)
        out: Set[str] = set()
        for name, source in self.aliases.get(mod, {}).items():
            if not name.startswith("*"):
                out.add(name)
                continue
            summary = self.summaries.get(source, {})
            out.update(n for part in ("functions", "classes") for n in summary.get(part, {}) if not n.startswith("_"))
            out.update(n for n in self._relayed_names(source, seen) if not n.startswith("_"))
        return out

    def imported_modules(self, module: Optional[str]) -> Dict[str, str]:
        """The project modules ``module`` imports (by its import aliases),
        each with the digest of its summary now ("" when there is none yet):
        what the file's result depends on even where no lookup succeeded (a
        result made before a summary existed must not outlive it)."""
        if module is None:
            return {}
        out: Dict[str, str] = {}
        pkg = script_package(module)
        for target in self.aliases.get(module, {}).values():
            head = target.split(".", 1)[0]
            if head in _NOT_PROJECT:
                continue
            parts = target.split(".")
            for cand in (parts, (pkg.split(".") + parts) if pkg else None):
                if not cand:
                    continue
                # every module the target may name, summarised or not yet
                for i in range(1, len(cand) + 1):
                    name = ".".join(cand[:i])
                    if name != module:
                        out[name] = self.digest_of(name)
        return out

    def project_names(self, imports: Dict[str, List[str]], importer: Optional[str], is_package: bool = False) -> Set[str]:
        """The local names of a file's ``imports`` (local name -> targets)
        that may name a module class through the project: bound to a project
        class the index knows to be an ``nn.Module`` (``from models import
        Net``), or to a project module, whose attributes may be such classes
        (``import pkg.models as m``). A project class that is no module (a
        config class) is left out, as the facts leave it out."""
        out: Set[str] = set()
        for local, targets in imports.items():
            for t in targets:
                t = absolute(t, importer, is_package) or ""
                if not t or t.startswith("torch"):
                    continue
                if self._is_module(t, importer):
                    out.add(local)
                    break
                if self.resolve(t, importer) is not None:
                    cls = self.class_facts(t, importer)
                    if cls is not None and cls.is_module:
                        out.add(local)
                        break
        return out

    def record_classes(self, imports: Dict[str, List[str]], importer: Optional[str], is_package: bool = False) -> Set[str]:
        """The local names of a file's ``imports`` bound to a project class
        whose body (or a base's, through the project) annotates a field as a
        tensor: ``from .modeling import DetectionOutput``."""
        out: Set[str] = set()
        for local, targets in imports.items():
            for t in targets:
                t = absolute(t, importer, is_package) or ""
                if t and not t.startswith("torch") and self._declares_tensor_fields(t, importer, 0):
                    out.add(local)
                    break
        return out

    def _declares_tensor_fields(self, dotted: str, importer: Optional[str], depth: int) -> bool:
        found = self.resolve(dotted, importer) if depth <= _MAX_HOPS else None
        cls = self.class_facts(dotted, importer) if found is not None else None
        if cls is None:
            return False
        return bool(cls.tensor_fields) or any(self._declares_tensor_fields(b, found[0], depth + 1) for b in cls.bases)

    def _is_module(self, dotted: str, importer: Optional[str]) -> bool:
        pkg = script_package(importer)
        return any(c in self.summaries for c in (dotted, f"{pkg}.{dotted}" if pkg else None) if c)

    def path_of(self, module: str) -> str:
        """The file of ``module`` as a message shows it (``models.py``, not ``./models.py``)."""
        path = self.paths.get(module)
        return os.path.normpath(path) if path else module


def waves(modules: Sequence[str], edges: Dict[str, Iterable[str]]) -> List[List[str]]:
    """The modules in import order: lists of modules, each list depending only
    on the lists before it; the members of one import cycle share a list."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on_stack: Set[str] = set()
    stack: List[str] = []
    comp_of: Dict[str, int] = {}
    comps: List[List[str]] = []
    counter = [0]
    known = set(modules)

    for root in modules:
        if root in index:
            continue
        # iterative Tarjan
        work = [(root, iter(sorted(e for e in edges.get(root, ()) if e in known)))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(e for e in edges.get(nxt, ()) if e in known))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp_of[m] = len(comps)
                    comp.append(m)
                    if m == node:
                        break
                comps.append(sorted(comp))
    # Tarjan emits components dependencies first; a component's level is one
    # more than the deepest component it imports
    level: Dict[int, int] = {}
    for ci, comp in enumerate(comps):
        deps = {comp_of[e] for m in comp for e in edges.get(m, ()) if e in known and comp_of[e] != ci}
        level[ci] = 1 + max((level[d] for d in deps), default=-1)
    out: List[List[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for ci, comp in enumerate(comps):
        out[level[ci]].extend(comp)
    return [sorted(w) for w in out]


class ProjectContext:
    """Where one file stands in a project run: its module name, whether it is
    a package's ``__init__``, and the index of what it may import."""

    __slots__ = ("module", "is_package", "index")

    def __init__(self, module: Optional[str], is_package: bool, index: ProjectIndex) -> None:
        self.module = module
        self.is_package = is_package
        self.index = index
