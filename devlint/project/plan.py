"""The plan of a project run: each file's module name, the import graph
between the files of the run, the order of analysis and who needs a
summary. Built in the parent process from the files' text (no parse)."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from devlint.files import PYTHON_SUFFIXES
from devlint.project.imports import Imports, imported_names, read_imports
from devlint.project.index import waves
from devlint.project.names import is_package_file, module_name

#: a plan reads at most this much of a file for its imports
_READ = 2 * 1024 * 1024
#: a ``def`` or ``class`` at the top level of a module
_DEFINES = re.compile(r"^(?:async[ \t]+)?(?:def|class)[ \t]", re.M)


@dataclass
class FilePlan:
    module: Optional[str]
    is_package: bool
    #: other files of the run import it: it exports a summary
    summarize: bool = False
    #: the names other files import from it ("*": the module itself is
    #: imported, so any of its functions may be called)
    exports: Set[str] = field(default_factory=set)


@dataclass
class ProjectPlan:
    files: Dict[str, FilePlan] = field(default_factory=dict)
    #: module -> local name -> absolute import target
    aliases: Dict[str, Dict[str, str]] = field(default_factory=dict)
    #: module -> path
    paths: Dict[str, str] = field(default_factory=dict)
    #: paths in analysis order, wave by wave; files without a module name
    #: (not importable by name) come in the last wave
    waves: List[List[str]] = field(default_factory=list)
    #: module -> summary of files the run does not check, as the last run
    #: that did stored them (still matching their content)
    seed: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    #: files the run's files import that it only summarises (``follow``)
    followed: List[str] = field(default_factory=list)


def _imports_of(text: str, module: Optional[str], pkg: bool, memo: Optional[Dict[str, Any]]) -> Tuple[Imports, bool]:
    """The imports of a file and whether it defines a function or a class,
    from ``memo`` when an earlier run read the same text under the same
    module name (a warm run reads no import twice)."""
    if memo is None:
        return read_imports(text, module, pkg), bool(_DEFINES.search(text))
    key = f"{hashlib.blake2b(text.encode('utf-8', 'surrogatepass'), digest_size=16).hexdigest()}:{module}:{int(pkg)}"
    found = memo.get(key)
    if (
        isinstance(found, list) and len(found) == 3 and isinstance(found[0], list) and isinstance(found[1], dict)
        and isinstance(found[2], bool) and all(isinstance(t, str) for t in found[0])
        and all(isinstance(k, str) and isinstance(v, str) for k, v in found[1].items())
    ):
        return Imports(set(found[0]), dict(found[1])), found[2]
    imports, defs = read_imports(text, module, pkg), bool(_DEFINES.search(text))
    memo[key] = [sorted(imports.targets), imports.aliases, defs]
    return imports, defs


def _text(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_READ)
    except OSError:
        return ""
    return raw.decode("utf-8", errors="replace")


def make_plan(paths: Sequence[str], roots: Sequence[str],
              seed: Iterable[Tuple[str, str, bool, Dict[str, Any], str]] = (), follow: bool = False,
              limit: int = 0, texts: Optional[Dict[str, str]] = None,
              memo: Optional[Dict[str, Any]] = None) -> ProjectPlan:
    """``seed``: (path, module, is a package, summary, text) of files the run
    does not check whose stored summaries it may read
    (``ResultCache.project_summaries``). ``follow``: also plan the project
    files the run's files import that neither the run nor the seed holds
    (``ProjectPlan.followed``: read for their summaries only), at most
    ``limit`` of them (default ``FOLLOW_LIMIT``). ``texts``: the source of
    files whose text is not the one on disk (standard input). ``memo``:
    the imports read on earlier runs, by content digest, module name and
    role (``ResultCache.imports``); what this run reads is added to it."""
    plan = ProjectPlan()
    targets: Dict[str, Set[str]] = {}
    defines: Dict[str, bool] = {}

    def add(path: str) -> None:
        module = module_name(path, roots)
        if module is not None and module in plan.paths:
            module = None  # two files claim one name (a .py and its .pyi): the first keeps it
        pkg = is_package_file(path)
        plan.files[path] = FilePlan(module, pkg)
        text = texts[path] if texts and path in texts else _text(path)
        imports, defs = _imports_of(text, module, pkg, memo)
        targets[path] = imports.targets
        if pkg:
            defines[path] = defs
        if module is not None:
            plan.paths[module] = path
            plan.aliases[module] = imports.aliases

    for path in paths:
        if path.endswith(PYTHON_SUFFIXES):
            add(path)
    seeded = []
    for path, module, pkg, summary, text in seed:
        seeded.append(path)
        if module in plan.paths:
            continue  # the run checks a file of that name: its own summary comes
        plan.seed[module] = summary
        plan.paths[module] = path
        stored = summary.get("aliases")
        plan.aliases[module] = stored if isinstance(stored, dict) else read_imports(text, module, pkg).aliases
    if follow:
        for path in _follow(list(plan.files), targets, roots, seeded, limit or FOLLOW_LIMIT, plan, memo):
            add(path)
            plan.followed.append(path)
    checked = {fp.module for fp in plan.files.values() if fp.module is not None}
    modules = set(plan.paths)
    edges: Dict[str, List[str]] = {}
    unnamed_deps: Set[str] = set()
    named_by: Dict[str, Set[tuple]] = {}
    for path, fp in plan.files.items():
        named = named_by[path] = imported_names(targets.get(path, set()), fp.module, modules)
        deps = sorted({d for d, _ in named})
        for d, name in named:
            target = plan.files.get(plan.paths[d])
            if target is None:
                continue  # a file the run does not check: its stored summary stands in
            target.summarize = True
            target.exports.add(name or "*")
        if fp.module is not None:
            edges[fp.module] = deps
        else:
            unnamed_deps.update(deps)
    # a package's __init__ that only re-exports (no def or class of its
    # own) has nothing to say before the modules it imports: an importer
    # reads the names through its aliases. An edge into one orders nothing,
    # and it is what closes most import cycles (``import pkg`` in a module
    # that ``pkg/__init__.py`` imports), which would run a whole package as
    # one wave whose members cannot see each other's summaries
    relays = {m for m, path in plan.paths.items()
              if m in checked and plan.files[path].is_package and not defines.get(path, True)}
    if relays:
        for path, fp in plan.files.items():
            if fp.module is None or fp.module not in edges:
                continue
            deps = set()
            for d, name in named_by[path]:
                sub = d if not name else f"{d}.{name}"
                if sub in relays and not fp.module.startswith(sub + "."):
                    # a relay taken as a module (``from pkg import geometry``
                    # or ``import pkg.geometry as geometry``, then
                    # ``geometry.random_angles``): any name it relays
                    # may be read, so the modules they come from come first
                    # (not for a module inside that package: ``import pkg``
                    # there closes the cycle a relay is left out to avoid)
                    for target in plan.aliases.get(sub, {}).values():
                        m, _ = _defined_in(target, modules)
                        if m and m != fp.module and m not in relays:
                            deps.add(m)
                    continue
                # a name taken from a relay: the module it comes from
                # (``from .utils import create_grid`` -> ``utils.grid``)
                seen: Set[str] = set()
                while d in relays and name and d not in seen:
                    seen.add(d)
                    relayed = plan.aliases.get(d, {})
                    if name not in relayed:
                        # a name ``from .x import *`` may bring: the star sources
                        deps.update(t for k, t in relayed.items() if k.startswith("*") and t in modules and t != fp.module)
                    d, name = _defined_in(relayed.get(name, ""), modules)
                if d and d != fp.module and d not in relays:
                    deps.add(d)  # (``import pkg`` of a relay orders nothing)
            edges[fp.module] = sorted(deps)
    # an import under ``if TYPE_CHECKING:`` (in the aliases, not the
    # targets) names a class for annotations (``outputs: "DetectionOutput"``):
    # its module is summarised, and comes first where that closes no cycle
    weak: Dict[str, Set[str]] = {}
    for path, fp in plan.files.items():
        if fp.module is None:
            continue
        typed = set(plan.aliases.get(fp.module, {}).values()) - targets.get(path, set())
        for d, name in imported_names(typed, fp.module, modules) if typed else ():
            target = plan.files.get(plan.paths[d])
            if target is None or d == fp.module or d in relays:
                continue
            target.summarize = True
            target.exports.add(name or "*")
            weak.setdefault(fp.module, set()).add(d)
    order = _after_typing_imports(waves(sorted(checked), edges), edges, weak)
    plan.waves = [[plan.paths[m] for m in wave] for wave in order]
    rest = [p for p in paths if p not in plan.files or plan.files[p].module is None]
    if rest:
        plan.waves.append(rest)
    if not plan.waves:
        plan.waves = [list(paths)]
    return plan


def _after_typing_imports(order: List[List[str]], edges: Dict[str, List[str]], weak: Dict[str, Set[str]]) -> List[List[str]]:
    """The waves with each module placed after the modules it imports for
    annotations only (``weak``), where that closes no cycle: an edge whose
    target already waits for its source (through the import order or an
    accepted such edge) is left out. Import cycles stay as they were."""
    level = {m: i for i, wave in enumerate(order) for m in wave}
    todo = sorted((a, b) for a, bs in weak.items() for b in bs if a in level and b in level and level[b] >= level[a])
    if not todo:
        return order
    # x waits for y: the import order across waves (inside one wave, a cycle)
    deps: Dict[str, Set[str]] = {x: {y for y in ys if y in level and level[y] < level[x]} for x, ys in edges.items() if x in level}

    def waits_for(start: str, goal: str) -> bool:
        seen, stack = {start}, [start]
        while stack:
            for y in deps.get(stack.pop(), ()):
                if y == goal:
                    return True
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        return False

    for a, b in todo:
        if not waits_for(b, a):
            deps.setdefault(a, set()).add(b)
    placed: Dict[str, int] = {}

    def place(m: str) -> int:
        found = placed.get(m)
        if found is None:
            placed[m] = level[m]  # (acyclic by construction; a guard all the same)
            found = placed[m] = max([level[m], *(place(y) + 1 for y in deps.get(m, ()))])
        return found

    for m in sorted(level):
        place(m)
    out: List[List[str]] = [[] for _ in range(max(placed.values()) + 1)]
    for m in sorted(placed):
        out[placed[m]].append(m)
    return [w for w in out if w]


#: a run follows at most this many imported files it does not check
FOLLOW_LIMIT = 400


def follow_imports(paths: Sequence[str], roots: Sequence[str], limit: int = FOLLOW_LIMIT) -> List[str]:
    """The files :func:`make_plan` with ``follow`` adds (see ``_follow``)."""
    return make_plan(paths, roots, follow=True, limit=limit).followed


def _follow(start: List[str], targets: Dict[str, Set[str]], roots: Sequence[str], known: Iterable[str],
            limit: int, plan: ProjectPlan, memo: Optional[Dict[str, Any]] = None) -> List[str]:
    """The files of the project that the files ``start`` import (at module
    level, transitively) but the run does not check and ``known`` (files
    whose stored summaries it has) does not hold: a run on ``train.py``
    alone reads the summaries of the ``models.py`` it imports, as mypy
    follows imports. A module is looked for below the folder its importer's
    top-level package sits in and below the source roots; a name that
    resolves to no file there (``torch``, a package installed elsewhere)
    stays unknown. At most ``limit`` files, nearest first. ``targets``
    holds the imports of the files read so far and grows as files are."""
    seen = {os.path.abspath(p) for p in (*start, *known)}
    #: (folder, top-level package found there, or "" for any module: a source root)
    bases: List[Tuple[str, str]] = []

    def base_of(path: str, module: Optional[str], pkg: bool) -> None:
        if module is None:
            return
        d = os.path.dirname(os.path.abspath(path))
        for _ in range(module.count(".") + (1 if pkg else 0)):
            d = os.path.dirname(d)
        # the importer's own top-level package: a sibling folder there is
        # another project (a checkout next to it), not this one
        base = (d, module.split(".", 1)[0])
        if base not in bases and (d, "") not in bases:
            bases.append(base)
            resolved.clear()  # a new place to look

    resolved: Dict[str, Optional[str]] = {}
    listed: Dict[str, Set[str]] = {}

    def resolve(target: str) -> Optional[str]:
        if target not in resolved:
            resolved[target] = _resolve(target)
        return resolved[target]

    def _resolve(target: str) -> Optional[str]:
        parts = target.split(".")
        for n in (len(parts), len(parts) - 1):  # pkg.mod, or pkg.mod.Name
            if n < 1:
                continue
            rel = os.path.join(*parts[:n])
            for base, top in bases:
                if (top and parts[0] != top) or (not top and parts[0] not in _entries(base, listed)):
                    continue
                for cand in (os.path.join(base, rel + ".py"), os.path.join(base, rel, "__init__.py")):
                    if os.path.isfile(cand):
                        return os.path.abspath(cand)
        return None

    for root in roots:
        r = os.path.abspath(root)
        if os.path.isdir(r) and (r, "") not in bases:
            bases.append((r, ""))
    for path in start:
        base_of(path, plan.files[path].module, plan.files[path].is_package)
    for path in start:
        # a script finds its sibling modules by their bare names (``python
        # tree/train.py`` puts ``tree/`` on sys.path), as the run's own
        # resolution does (``script_package``)
        d = os.path.dirname(os.path.abspath(path))
        if plan.files[path].module is not None and not os.path.isfile(os.path.join(d, "__init__.py")) and (d, "") not in bases:
            bases.append((d, ""))
    queue = list(start)
    out: List[str] = []
    while queue and len(out) < limit:
        path = queue.pop(0)
        for target in sorted(targets.get(path, ())):
            if target in plan.paths:
                continue  # a module of the run (or of the seed)
            found = resolve(target)
            if found is None or found in seen:
                continue
            seen.add(found)
            shown = _shown(found, start)
            out.append(shown)
            if len(out) >= limit:
                break
            # its imports, read now (make_plan adds it to the plan after)
            module, pkg = module_name(shown, roots), is_package_file(shown)
            targets[shown] = _imports_of(_text(shown), module, pkg, memo)[0].targets
            base_of(shown, module, pkg)
            queue.append(shown)
    return out


def _entries(folder: str, known: Dict[str, Set[str]]) -> Set[str]:
    """The module and package names a folder holds (``x`` for ``x.py`` and
    for ``x/``), read once per run (``known``)."""
    found = known.get(folder)
    if found is None:
        try:
            names = os.listdir(folder)
        except OSError:
            names = []
        found = {n[:-3] if n.endswith(".py") else n for n in names}
        known[folder] = found
    return found


def _shown(path: str, paths: Sequence[str]) -> str:
    """``path`` as the run's own paths are written: relative to the current
    folder when they are (and it is below it), else absolute."""
    if any(os.path.isabs(p) for p in paths):
        return path
    rel = os.path.relpath(path)
    return path if rel.startswith(os.pardir) else rel


def _defined_in(target: str, modules: Set[str]) -> Tuple[str, str]:
    """(module, name) of an absolute import target: the longest prefix that
    is a module of the run and the name after it; ("", "") for none."""
    parts = target.split(".") if target else []
    for i in range(len(parts), 0, -1):
        mod = ".".join(parts[:i])
        if mod in modules:
            return mod, parts[i] if i < len(parts) else ""
    return "", ""
