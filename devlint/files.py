"""File discovery: walk directories for Python files, honouring default
excludes, the configuration's excludes and ``.gitignore`` files; a file named
on the command line is always checked."""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence, Tuple

from devlint.config import Config

PYTHON_SUFFIXES = (".py", ".pyi")
NOTEBOOK_SUFFIXES = (".ipynb",)


def is_test_file(path: str) -> bool:
    """A file the test runner runs, by pytest's default collection names:
    ``test_*.py``, ``*_test.py``, and the ``conftest.py`` whose fixtures the
    tests use. Such code runs only under the test runner, on the machine
    that runs the tests."""
    name = os.path.basename(path)
    stem, ext = os.path.splitext(name)
    return ext in (".py", ".ipynb") and (stem.startswith("test_") or stem.endswith("_test") or stem == "conftest")


@dataclass
class Discovery:
    files: List[str] = field(default_factory=list)
    #: (path, one-line problem) for paths that could not be walked or read
    problems: List[Tuple[str, str]] = field(default_factory=list)
    #: paths named on the command line that do not exist
    missing: List[str] = field(default_factory=list)


class _GitIgnore:
    """The patterns of one ``.gitignore`` file (the common subset of the
    syntax: comments, negation, directory-only and anchored patterns, ``**``)."""

    def __init__(self, base: str, lines: Sequence[str]) -> None:
        self.base = base
        self.rules: List[Tuple[re.Pattern, bool, bool]] = []
        for line in lines:
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip() or line.startswith("#"):
                continue
            line = line.rstrip(" ")
            negate = line.startswith("!")
            if negate:
                line = line[1:]
            if line.startswith("\\"):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            line = line.lstrip("/")
            regex = _glob_to_regex(line)
            if not anchored:
                regex = r"(?:.*/)?" + regex
            self.rules.append((re.compile(regex + r"$"), negate, dir_only))

    def match(self, rel: str, is_dir: bool) -> Optional[bool]:
        result: Optional[bool] = None
        for regex, negate, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            if regex.match(rel):
                result = not negate
        return result


def _glob_to_regex(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append(r"(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append(r"/.*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(r".*")
            i += 2
            continue
        if c == "*":
            out.append(r"[^/]*")
        elif c == "?":
            out.append(r"[^/]")
        elif c == "[":
            j = pattern.find("]", i)
            if j == -1:
                out.append(re.escape(c))
            else:
                out.append(pattern[i : j + 1].replace("!", "^", 1) if pattern[i + 1 : i + 2] == "!" else pattern[i : j + 1])
                i = j + 1
                continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _load_gitignore(folder: str) -> Optional[_GitIgnore]:
    path = os.path.join(folder, ".gitignore")
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return _GitIgnore(folder, fh.readlines())
    except OSError:
        return None


def _excluded_name(name: str, rel: str, patterns: Sequence[str]) -> bool:
    for p in patterns:
        p = p.rstrip("/")
        if "/" in p:
            if fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(rel, p + "/*"):
                return True
        elif fnmatch.fnmatch(name, p):
            return True
    return False


def discover(
    paths: Sequence[str],
    config: Config,
    suffixes: Sequence[str] = PYTHON_SUFFIXES + NOTEBOOK_SUFFIXES,
    force_exclude: bool = False,
) -> Discovery:
    """The files to check under ``paths``. ``force_exclude``: apply the
    configured excludes to files named explicitly too (pre-commit names every
    staged file)."""
    result = Discovery()
    excludes = tuple(config.exclude) + tuple(config.extend_exclude)
    seen = set()

    def add(path: str) -> None:
        key = os.path.normpath(path)
        if key not in seen:
            seen.add(key)
            result.files.append(path)

    for raw in paths:
        path = raw
        if not os.path.lexists(path):
            result.missing.append(raw)
            continue
        try:
            st = os.stat(path)
        except OSError as exc:
            broken = os.path.islink(path) and exc.errno == errno.ENOENT
            result.problems.append((raw, "broken symbolic link" if broken else _oserror(exc)))
            continue
        if not stat.S_ISDIR(st.st_mode):
            if force_exclude and excluded_by_config(path, excludes, config.root):
                continue
            add(path)  # named explicitly: checked unless force_exclude
            continue
        for f in _walk(path, excludes, config.root, result):
            if f.endswith(tuple(suffixes)):
                add(f)
    result.files.sort(key=lambda p: os.path.normpath(p))
    return result


def excluded_by_config(path: str, excludes: Sequence[str], root: str) -> bool:
    """Whether ``path`` or a folder above it (up to ``root``) matches an exclude pattern."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root)).replace(os.sep, "/")
    if rel.startswith("../"):
        rel = os.path.abspath(path).replace(os.sep, "/").lstrip("/")
    parts = rel.split("/")
    return any(_excluded_name(parts[i], "/".join(parts[: i + 1]), excludes) for i in range(len(parts)))


def _oserror(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    if exc.errno == errno.ELOOP:
        return "too many levels of symbolic links (a symlink loop)"
    return exc.strerror or str(exc)


def _walk(top: str, excludes: Sequence[str], root: str, result: Discovery) -> Iterator[str]:
    ignores: List[_GitIgnore] = []
    # .gitignore files of the folders above `top`, up to the repository root
    above = []
    folder = os.path.abspath(top)
    while True:
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
        gi = _load_gitignore(folder)
        if gi is not None:
            above.append(gi)
        if os.path.isdir(os.path.join(folder, ".git")):
            break
    ignores.extend(reversed(above))
    visited = set()
    yield from _walk_dir(top, excludes, os.path.abspath(root), ignores, result, visited)


def _ignored(path: str, is_dir: bool, ignores: Sequence[_GitIgnore]) -> bool:
    verdict: Optional[bool] = None
    apath = os.path.abspath(path)
    for gi in ignores:
        rel = os.path.relpath(apath, gi.base).replace(os.sep, "/")
        if rel.startswith(".."):
            continue
        m = gi.match(rel, is_dir)
        if m is not None:
            verdict = m
    return bool(verdict)


def is_virtualenv(folder: str) -> bool:
    """A virtual environment, whatever its name: it has a ``pyvenv.cfg``."""
    return os.path.isfile(os.path.join(folder, "pyvenv.cfg"))


def _walk_dir(folder, excludes, root, ignores, result, visited, above=()) -> Iterator[str]:
    """``above``: the (device, inode) of the folders that lead here; a symlink
    back to one of them is a loop. One to a folder already walked elsewhere
    (a venv's ``lib64 -> lib``) is walked once, silently."""
    try:
        st = os.stat(folder)
    except OSError as exc:
        result.problems.append((folder, _oserror(exc)))
        return
    key = (st.st_dev, st.st_ino)
    if key in above:
        result.problems.append((folder, "symlink loop: a link back to a folder above it"))
        return
    if key in visited:
        return  # the same folder through another symlink: its files are already listed
    visited.add(key)
    above = (*above, key)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        result.problems.append((folder, f"cannot list folder: {_oserror(exc)}"))
        return
    gi = _load_gitignore(folder)
    local = ignores + [gi] if gi is not None else ignores
    for entry in entries:
        rel = os.path.relpath(os.path.abspath(entry.path), root).replace(os.sep, "/")
        if _excluded_name(entry.name, rel, excludes):
            continue
        try:
            is_dir = entry.is_dir()  # follows symlinks
        except OSError as exc:
            result.problems.append((entry.path, _oserror(exc)))
            continue
        if entry.is_symlink() and not os.path.exists(entry.path):
            if entry.name.endswith(PYTHON_SUFFIXES):
                try:
                    os.stat(entry.path)
                    problem = "broken symbolic link"
                except OSError as exc:
                    problem = "broken symbolic link" if exc.errno == errno.ENOENT else _oserror(exc)
                result.problems.append((entry.path, problem))
            continue
        if _ignored(entry.path, is_dir, local):
            continue
        if is_dir:
            if is_virtualenv(entry.path):
                continue
            yield from _walk_dir(entry.path, excludes, root, local, result, visited, above)
        else:
            yield entry.path
