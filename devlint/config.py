"""Configuration: ``[tool.devlint]`` in the nearest ``pyproject.toml``, then
command-line overrides. Unknown keys and unknown rule codes are errors."""

from __future__ import annotations

import fnmatch
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(Exception):
    """A configuration problem; the message is one line."""


DEFAULT_EXCLUDES: Tuple[str, ...] = (
    ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", ".tox", ".nox",
    "build", "dist", "__pycache__", "node_modules", "site-packages",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".devlint_cache", ".eggs",
    "__pypackages__", ".ipynb_checkpoints",
)


@dataclass(frozen=True)
class Config:
    select: Tuple[str, ...] = ()  # empty: every rule enabled by default
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    exclude: Tuple[str, ...] = DEFAULT_EXCLUDES
    extend_exclude: Tuple[str, ...] = ()
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    unsafe_fixes: bool = False
    #: source roots, relative to ``root``: where module names start (a
    #: file's module name is its path below the deepest root holding it)
    src: Tuple[str, ...] = (".", "src")
    #: project mode: a file is checked with the facts of the project modules
    #: it imports (``project = false`` or ``--isolated``: each file alone)
    project: bool = True
    #: the folder holding the pyproject.toml the config came from (patterns
    #: in exclude / per-file-ignores are relative to it)
    root: str = "."
    source: Optional[str] = None

    def enabled_codes(self, all_codes: Dict[str, bool]) -> List[str]:
        """Codes enabled by select / extend-select / ignore. ``all_codes``
        maps each code to whether it is on by default."""
        if self.select:
            chosen = {c for c in all_codes if _matches_any(c, self.select)}
        else:
            chosen = {c for c, on in all_codes.items() if on}
        chosen |= {c for c in all_codes if _matches_any(c, self.extend_select)}
        chosen -= {c for c in all_codes if _matches_any(c, self.ignore)}
        return sorted(chosen)

    def ignored_for(self, path: str) -> Tuple[str, ...]:
        if not self.per_file_ignores:
            return ()
        rel = _relative(path, self.root)
        out: List[str] = []
        for pattern, codes in self.per_file_ignores:
            if _path_matches(rel, pattern):
                out.extend(codes)
        return tuple(out)

    def source_roots(self) -> List[str]:
        return [os.path.join(self.root, r) for r in self.src]

    def cache_key(self) -> str:
        return repr((self.select, self.ignore, self.extend_select, self.per_file_ignores, self.src))


def _matches_any(code: str, prefixes: Iterable[str]) -> bool:
    return any(p == "ALL" or code.startswith(p) for p in prefixes)


def _relative(path: str, root: str) -> str:
    try:
        return os.path.relpath(os.path.abspath(path), os.path.abspath(root)).replace(os.sep, "/")
    except ValueError:  # pragma: no cover - other drive on Windows
        return path.replace(os.sep, "/")


def _path_matches(rel: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel, pattern + "/*"):
        return True
    parts = rel.split("/")
    if "/" not in pattern:
        return any(fnmatch.fnmatch(p, pattern) for p in parts)
    return False


_KEYS = {
    "select": "codes",
    "ignore": "codes",
    "extend-select": "codes",
    "exclude": "strings",
    "extend-exclude": "strings",
    "per-file-ignores": "table",
    "unsafe-fixes": "bool",
    "src": "strings",
    "project": "bool",
}


def find_pyproject(start: Path) -> Optional[Path]:
    start = start.resolve()
    if start.is_file() or not start.exists():
        start = start.parent
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _quietly(test) -> bool:
    try:
        return test()
    except OSError:
        return False


def load_config(paths: Sequence[str], explicit: Optional[str] = None) -> Config:
    """The configuration for a run: ``explicit`` if given, else the nearest
    pyproject.toml with a ``[tool.devlint]`` table above the first path."""
    if explicit is not None:
        return _read(Path(explicit), require_table=False)
    start = Path(paths[0]) if paths else Path(".")
    try:
        folder = start.resolve()
    except (OSError, RuntimeError):  # a symlink loop: its folder still has a config
        folder = Path(os.path.abspath(start))
    if not _quietly(folder.is_dir):
        folder = folder.parent
    for f in (folder, *folder.parents):
        candidate = f / "pyproject.toml"
        if _quietly(candidate.is_file):  # a folder we may not enter has no config for us
            cfg = _read(candidate, require_table=True)
            if cfg is not None:
                return cfg
    return Config()


def _read(path: Path, require_table: bool) -> Optional[Config]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: [tool] must be a table, got {type(tool).__name__}")
    table = tool.get("devlint") if path.name == "pyproject.toml" else tool.get("devlint", data)
    if table is None:
        return None if require_table else Config(root=str(path.parent), source=str(path))
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.devlint] must be a table")
    return config_from_table(table, str(path), root=str(path.parent))


def config_from_table(table: Dict[str, Any], source: str, root: str = ".") -> Config:
    from devlint.catalog import rule_table

    known_codes = set(rule_table())
    values: Dict[str, Any] = {}
    for key, value in table.items():
        kind = _KEYS.get(key)
        if kind is None:
            raise ConfigError(f"{source}: unknown key '{key}' in [tool.devlint] (known: {', '.join(sorted(_KEYS))})")
        values[key.replace("-", "_")] = _check(source, key, kind, value, known_codes)
    cfg = Config(root=root, source=source)
    if "per_file_ignores" in values:
        values["per_file_ignores"] = tuple((k, tuple(v)) for k, v in values["per_file_ignores"].items())
    for k in ("select", "ignore", "extend_select", "exclude", "extend_exclude", "src"):
        if k in values:
            values[k] = tuple(values[k])
    return replace(cfg, **values)


def _check(source: str, key: str, kind: str, value: Any, known_codes: set) -> Any:
    def fail(expected: str) -> ConfigError:
        return ConfigError(f"{source}: [tool.devlint] '{key}' must be {expected}, got {type(value).__name__} {value!r}")

    if kind == "bool":
        if not isinstance(value, bool):
            raise fail("true or false")
        return value
    if kind in ("codes", "strings"):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail("a list of strings")
        if kind == "codes":
            check_codes(value, known_codes, f"{source}: [tool.devlint] '{key}'")
        return value
    if kind == "table":
        if not isinstance(value, dict) or not all(
            isinstance(v, list) and all(isinstance(c, str) for c in v) for v in value.values()
        ):
            raise fail("a table of lists of rule codes")
        for codes in value.values():
            check_codes(codes, known_codes, f"{source}: [tool.devlint] '{key}'")
        return value
    raise AssertionError(kind)  # pragma: no cover


def check_codes(codes: Iterable[str], known_codes: Optional[set] = None, where: str = "") -> None:
    """Every code must be a known code or a prefix of one (``DL``, ``DL00``:
    the codes that start with it); an empty one is an error."""
    if known_codes is None:
        from devlint.catalog import rule_table

        known_codes = set(rule_table()) | {"DL000"}
    prefix = f"{where}: " if where else ""
    for code in codes:
        if code == "ALL":
            continue
        if not code.strip():
            # "" would be a prefix of every code: select or ignore them all
            raise ConfigError(f"{prefix}empty rule code (give a rule code or a prefix of one; see 'devlint rule --all')")
        if not any(k.startswith(code) for k in known_codes):
            hint = ""
            if code != code.strip().upper() and any(k.startswith(code.strip().upper()) for k in known_codes):
                hint = f"; did you mean '{code.strip().upper()}'?"
            raise ConfigError(f"{prefix}unknown rule code '{code}' (see 'devlint rule --all'){hint}")
