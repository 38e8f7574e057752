"""The imports of a file, read from its text without a parse: for the import
order of the project and the names a module re-exports (``from .lm import
LanguageModel`` in ``pkg/__init__.py`` makes ``pkg.LanguageModel`` the
class of ``pkg.lm``).

Only imports that run when the module is imported order the files: one
inside a function (a lazy import) or under ``if TYPE_CHECKING:`` does not,
or every package that imports its submodules lazily would be one import
cycle (transformers' would hold 2,480 files); a ``TYPE_CHECKING`` import
still says what a name of the module is (a re-export), and the plan orders
it where that closes no cycle (``plan._after_typing_imports``). The reader follows
indentation line by line, skipping triple-quoted strings roughly; where it
errs, an extra edge costs only parallelism and a missed one only delays a
dependency, so the dependent file sees fewer cross-file facts (never wrong
ones).
"""

from __future__ import annotations

import bisect
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


_OPENER = re.compile(r"^([ \t]*)(?:(async[ \t]+)?def[ \t]|class[ \t]|if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:)")


def _contexts(text: str) -> List[str]:
    """Per line: "" at module level (blocks such as ``try``/``if`` included),
    "type" under ``if TYPE_CHECKING:``, "def" inside a function or class."""
    out: List[str] = []
    stack: List[tuple] = []  # (indent, kind)
    in_string = False
    for line in text.split("\n"):
        stripped = line.strip()
        quotes = line.count('"""') + line.count("'''")
        if in_string:
            out.append(stack[-1][1] if stack else "")
            if quotes % 2:
                in_string = False
            continue
        if stripped and not stripped.startswith("#"):
            indent = len(line) - len(line.lstrip(" \t"))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            m = _OPENER.match(line)
            kind = "def" if any(k == "def" for _, k in stack) else ("type" if stack else "")
            out.append(kind)
            if m:
                stack.append((indent, "type" if "TYPE_CHECKING" in line[: m.end()] else "def"))
        else:
            out.append(stack[-1][1] if stack else "")
        if quotes % 2:
            in_string = True
    return out


def read_imports(text: str, module: Optional[str], is_package: bool) -> Imports:
    targets: Set[str] = set()
    aliases: Dict[str, str] = {}
    contexts: Optional[List[str]] = None
    line_starts: List[int] = []

    def context(offset: int) -> str:
        nonlocal contexts
        if offset == 0 or text[offset] not in " \t":
            return ""  # an unindented import runs with the module
        if contexts is None:
            contexts = _contexts(text)
            pos = 0
            for line in text.split("\n"):
                line_starts.append(pos)
                pos += len(line) + 1
        i = bisect.bisect_right(line_starts, offset) - 1
        return contexts[i] if 0 <= i < len(contexts) else ""

    for m in _IMPORT.finditer(text):
        where = context(m.start())
        if where == "def":
            continue
        for part in m.group(1).split(","):
            words = part.split()
            if not words or not _NAME.match(words[0]):
                continue
            name = words[0]
            if where == "":
                targets.add(name)
            if len(words) == 3 and words[1] == "as" and words[2].isidentifier():
                aliases[words[2]] = name
    for m in _FROM.finditer(text):
        where = context(m.start())
        if where == "def":
            continue
        base = absolute(m.group(1), module, is_package) if m.group(1).startswith(".") else m.group(1)
        if not base:
            continue
        names = m.group(2).strip().strip("()").replace("\\\n", " ")
        if names == "*":
            # from .rotation import *: every public name of it (the key
            # "*<module>" is no identifier, so it never shadows a name)
            if where == "":
                targets.add(base)
            aliases["*" + base] = base
            continue
        for part in names.split(","):
            words = part.split()
            if not words or not words[0].isidentifier():
                continue
            full = f"{base}.{words[0]}"
            if where == "":
                targets.add(full)
            local = words[2] if len(words) == 3 and words[1] == "as" and words[2].isidentifier() else words[0]
            aliases[local] = full
    return Imports(targets, aliases)


def imported_names(targets: Set[str], importer: Optional[str], modules: Set[str]) -> Set[tuple]:
    """(module, name) for each import target of ``importer`` that names a
    module of ``modules``: the longest prefix of the target that is a module
    (``pkg`` for ``pkg.Class``, ``pkg.mod`` for ``pkg.mod``), as an absolute
    name or (a script's sibling imports) below ``importer``'s own package;
    ``name`` is the first name taken from it ("" when the target is the
    module itself). Parent packages an import runs are left out: they would
    put every package and its submodules in one import cycle, and what a
    parent re-exports is followed through its imports instead."""
    from devlint.project.names import script_package

    out: Set[tuple] = set()
    pkg = script_package(importer)
    floor_pkg = len(pkg.split(".")) + 1 if pkg else 0
    for t in targets:
        for candidate, floor in ((t, 1), (f"{pkg}.{t}" if pkg else None, floor_pkg)):
            if not candidate:
                continue
            parts = candidate.split(".")
            for i in range(len(parts), floor - 1, -1):
                name = ".".join(parts[:i])
                if name in modules:
                    if name != importer:
                        out.add((name, parts[i] if i < len(parts) else ""))
                    break
    return out
