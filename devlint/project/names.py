"""Module identity: a file's dotted module name, and import targets made
absolute.

A file in a package (its folder holds an ``__init__.py``) is named as Python
imports it, by the chain of packages above it (mypy's crawl). Any other file
is named by its path below the deepest source root that holds it (by default
the project root and its ``src/``), with ``/`` as ``.``, ``.py`` dropped; a
file outside every root by its bare name. A path with a part that
is not an identifier (``my-scripts/x.py``) has no module name: nothing can
import it by name, and names it imports stay unknown unless they resolve
another way (never guessed).
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

_SUFFIXES = (".py", ".pyi")


def module_name(path: str, roots: Sequence[str]) -> Optional[str]:
    """The dotted module name of ``path``: for a file in a package (its
    folder holds an ``__init__.py``), the chain of packages above it, as
    Python imports it (mypy's crawl); otherwise its path below the deepest
    of ``roots`` that holds it (namespace packages, a ``src`` layout's
    loose modules), else its bare name (a script among its siblings). None
    when a part is not an identifier."""
    full = os.path.abspath(path)
    best: Optional[str] = None
    if not os.path.isfile(os.path.join(os.path.dirname(full), "__init__.py")):
        for root in roots:
            r = os.path.abspath(root)
            if full == r or not full.startswith(r.rstrip(os.sep) + os.sep):
                continue
            rel = full[len(r.rstrip(os.sep)) + 1:]
            if best is None or len(rel) < len(best):
                best = rel
    if best is None:
        best = _crawl(full)
    for suffix in _SUFFIXES:
        if best.endswith(suffix):
            best = best[: -len(suffix)]
            break
    else:
        return None
    parts = best.split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def _crawl(full: str) -> str:
    """``full`` below the highest folder of the chain of packages holding it."""
    folder = os.path.dirname(full)
    top = folder
    while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    return os.path.relpath(full, top)


def is_package_file(path: str) -> bool:
    """Whether ``path`` is a package's ``__init__``."""
    return os.path.basename(path) in ("__init__.py", "__init__.pyi")


def absolute(target: str, module: Optional[str], is_package: bool) -> Optional[str]:
    """``target`` as an absolute dotted name. A relative target (``.x.Y``,
    ``..Y``) resolves against ``module`` (``is_package``: ``module`` is a
    package, so one dot names ``module`` itself); None when it climbs above
    the top package or the module is unknown. Absolute targets are returned
    as they are."""
    if not target.startswith("."):
        return target
    if module is None:
        return None
    level = len(target) - len(target.lstrip("."))
    rest = target[level:]
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    drop = level - 1
    if drop > len(parts) or (drop == len(parts) and not rest):
        return None
    base = parts[: len(parts) - drop]
    if not base and not rest:
        return None
    return ".".join(base + ([rest] if rest else []))


def script_package(module: Optional[str]) -> Optional[str]:
    """The package of ``module`` (``a.b`` for ``a.b.c``; "" for a top-level
    module): where a script run as ``python a/b/c.py`` finds its sibling
    modules by their bare names."""
    if module is None:
        return None
    return module.rpartition(".")[0]
