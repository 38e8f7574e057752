"""The plan of a project run: each file's module name, the import graph
between the files of the run, the order of analysis and who needs a
summary. Built in the parent process from the files' text (no parse)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from devlint.files import PYTHON_SUFFIXES
from devlint.project.imports import imported_names, read_imports
from devlint.project.index import waves
from devlint.project.names import is_package_file, module_name

#: a plan reads at most this much of a file for its imports
_READ = 2 * 1024 * 1024


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


def _text(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_READ)
    except OSError:
        return ""
    return raw.decode("utf-8", errors="replace")


def make_plan(paths: Sequence[str], roots: Sequence[str],
              seed: Iterable[Tuple[str, str, bool, Dict[str, Any], str]] = ()) -> ProjectPlan:
    """``seed``: (path, module, is a package, summary, text) of files the run
    does not check whose stored summaries it may read
    (``ResultCache.project_summaries``)."""
    plan = ProjectPlan()
    targets: Dict[str, Set[str]] = {}
    for path in paths:
        if not path.endswith(PYTHON_SUFFIXES):
            continue
        module = module_name(path, roots)
        if module is not None and module in plan.paths:
            module = None  # two files claim one name (a .py and its .pyi): the first keeps it
        pkg = is_package_file(path)
        plan.files[path] = FilePlan(module, pkg)
        text = _text(path)
        imports = read_imports(text, module, pkg)
        targets[path] = imports.targets
        if module is not None:
            plan.paths[module] = path
            plan.aliases[module] = imports.aliases
    for path, module, pkg, summary, text in seed:
        if module in plan.paths:
            continue  # the run checks a file of that name: its own summary comes
        plan.seed[module] = summary
        plan.paths[module] = path
        stored = summary.get("aliases")
        plan.aliases[module] = stored if isinstance(stored, dict) else read_imports(text, module, pkg).aliases
    checked = {fp.module for fp in plan.files.values() if fp.module is not None}
    modules = set(plan.paths)
    edges: Dict[str, List[str]] = {}
    unnamed_deps: Set[str] = set()
    for path, fp in plan.files.items():
        named = imported_names(targets.get(path, set()), fp.module, modules)
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
    order = waves(sorted(checked), edges)
    plan.waves = [[plan.paths[m] for m in wave] for wave in order]
    rest = [p for p in paths if p not in plan.files or plan.files[p].module is None]
    if rest:
        plan.waves.append(rest)
    if not plan.waves:
        plan.waves = [list(paths)]
    return plan
