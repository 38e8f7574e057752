"""The imports of a file, read from its text without a parse: for the import
order of the project and the names a module re-exports (``from .lm import
LanguageModel`` in ``pkg/__init__.py`` makes ``pkg.LanguageModel`` the
class of ``pkg.lm``).

An over-approximation is harmless here: an import inside a string or a
function adds an edge to the import order (less parallelism, never a wrong
fact); an import this reader misses only delays a dependency, so the
dependent file sees fewer cross-file facts (never wrong ones).
"""

from __future__ import annotations

import re
from typing import Dict, List, NamedTuple, Optional, Set

from devlint.project.names import absolute

_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#;]+)", re.M)
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|(?:[^\n#;\\]|\\\n)*)", re.M)
_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


class Imports(NamedTuple):
    #: absolute dotted names the file may depend on (modules, or
    #: ``module.name`` where the name may be a submodule)
    targets: Set[str]
    #: local name -> absolute dotted target it is bound to
    #: (``from .lm import LanguageModel as LM`` -> ``LM: pkg.lm.LanguageModel``)
    aliases: Dict[str, str]


def read_imports(text: str, module: Optional[str], is_package: bool) -> Imports:
    targets: Set[str] = set()
    aliases: Dict[str, str] = {}
    for m in _IMPORT.finditer(text):
        for part in m.group(1).split(","):
            words = part.split()
            if not words or not _NAME.match(words[0]):
                continue
            name = words[0]
            targets.add(name)
            if len(words) == 3 and words[1] == "as" and words[2].isidentifier():
                aliases[words[2]] = name
    for m in _FROM.finditer(text):
        base = absolute(m.group(1), module, is_package) if m.group(1).startswith(".") else m.group(1)
        if not base:
            continue
        targets.add(base)
        names = m.group(2).strip().strip("()").replace("\\\n", " ")
        for part in names.split(","):
            words = part.split()
            if not words or not words[0].isidentifier():
                continue
            full = f"{base}.{words[0]}"
            targets.add(full)
            local = words[2] if len(words) == 3 and words[1] == "as" and words[2].isidentifier() else words[0]
            aliases[local] = full
    return Imports(targets, aliases)


def project_edges(targets: Set[str], importer: Optional[str], modules: Set[str]) -> List[str]:
    """The modules of ``modules`` that the import ``targets`` of ``importer``
    name: for each target, the longest prefix of it that is a module (``pkg``
    for ``pkg.Class``, ``pkg.mod`` for ``pkg.mod``), as an absolute name or
    (a script's sibling imports) below ``importer``'s own package. Parent
    packages an import runs are left out: they would put every package and
    its submodules in one import cycle, and what a parent re-exports is
    followed through its imports instead."""
    from devlint.project.names import script_package

    out: Set[str] = set()
    pkg = script_package(importer)
    for t in targets:
        for candidate, floor in ((t, 0), (f"{pkg}.{t}" if pkg else None, len(pkg.split(".")) + 1 if pkg else 0)):
            if not candidate:
                continue
            parts = candidate.split(".")
            for i in range(len(parts), max(floor, 1) - 1, -1):
                name = ".".join(parts[:i])
                if name in modules:
                    if name != importer:
                        out.add(name)
                    break
    return sorted(out)
