"""The result cache: what checking a file found, keyed by devlint's version,
the code of devlint and its rules, the effective configuration and the
file's content hash, stored as JSON in ``.devlint_cache/``.

A cache directory can come from an untrusted checkout, so it is only ever
read as JSON (never pickle), every entry is validated field by field before
use, and anything unexpected (bad JSON, wrong types, another key, a symlink
where the cache should be) is a cache miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from devlint import __version__
from devlint.diagnostic import FileResult

CACHE_DIR = ".devlint_cache"
FORMAT = 1
#: a cache file larger than this is not read (a hostile or runaway file)
MAX_CACHE_BYTES = 256 * 1024 * 1024
_GITIGNORE = "# created by devlint: this folder is a cache, never commit it\n*\n"
_CACHEDIR_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# devlint result cache (https://bford.info/cachedir/)\n"


def cache_dir(root: str) -> str:
    """Where the cache of a project lives: ``$DEVLINT_CACHE_DIR`` or
    ``<root>/.devlint_cache`` (root: the folder of the pyproject.toml the
    configuration came from, else the current folder)."""
    return os.environ.get("DEVLINT_CACHE_DIR") or os.path.join(root or ".", CACHE_DIR)


def code_fingerprint() -> str:
    """A hash of everything that decides what devlint reports: its version,
    the Python version, libcst's version and the source of every devlint and
    module, rules and their private helpers included, every subpackage
    (``devlint/facts/``) included: a changed, added or removed module
    invalidates the cache."""
    import importlib.util

    h = hashlib.sha256(f"devlint {__version__} python {sys.version_info[:3]}".encode())
    spec = importlib.util.find_spec("libcst")
    if spec is not None and spec.origin:
        _feed(h, os.path.join(os.path.dirname(spec.origin), "_version.py"))
    for name, path in _source_files():
        h.update(name.encode() + b"\0")
        _feed(h, path)
    return h.hexdigest()


def _source_files() -> List[Tuple[str, str]]:
    """(name relative to its package, path) of every ``.py`` file of the
    ``devlint`` package and of the rules' package, sorted."""
    import devlint.rules as rules_package

    engine_dir = os.path.dirname(os.path.abspath(__file__))
    roots = [("", engine_dir)] + [("rules/", folder) for folder in rules_package.__path__]
    out: List[Tuple[str, str]] = []
    seen: Set[str] = set()
    for prefix, root in roots:
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for n in names:
                path = os.path.join(folder, n)
                real = os.path.realpath(path)
                if not n.endswith(".py") or real in seen:
                    continue
                seen.add(real)
                out.append((prefix + os.path.relpath(path, root).replace(os.sep, "/"), path))
    return sorted(out)


def _feed(h: Any, path: str) -> None:
    try:
        with open(path, "rb") as fh:
            h.update(fh.read())
    except OSError:
        h.update(b"<unreadable>")
    h.update(b"\0")


def content_digest(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


class ResultCache:
    """The cached results of one configuration of one devlint build: one JSON
    file ``results-<key>.json`` mapping each path to the digest of what was
    checked and what was found."""

    def __init__(self, folder: str, config_key: str) -> None:
        self.folder = folder
        self.key = hashlib.sha256(f"{code_fingerprint()}\0{config_key}".encode()).hexdigest()[:24]
        self.file = os.path.join(folder, f"results-{self.key}.json")
        self.entries: Dict[str, Any] = {}
        #: the imports the project plan read from each file's text, by
        #: content digest, module name and role (``plan.make_plan(memo=)``):
        #: a warm run reads none again. Validated where it is read.
        self.imports: Dict[str, Any] = {}
        self._imports_seen = 0
        self.hits = 0
        self.stored = 0
        self._dirty = False
        self._load()

    # -- keys --------------------------------------------------------------
    @staticmethod
    def entry_key(digest: str, codes: Sequence[str], ignore: Sequence[str], project: str = "") -> str:
        """The content digest salted with the rules that run on the file and,
        in a project run, the file's module name and role (a result checked
        alone never stands for one checked with its project, nor the reverse)."""
        key = f"{digest}:{','.join(codes)}:{','.join(ignore)}"
        return f"{key}:{project}" if project else key

    # -- reading -----------------------------------------------------------
    def _load(self) -> None:
        if not _plain_folder(self.folder):
            return
        data = _read_json(self.file)
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != self.key:
            return
        files = data.get("files")
        if isinstance(files, dict):
            self.entries = files
        imports = data.get("imports")
        if isinstance(imports, dict):
            self.imports = imports
            self._imports_seen = len(imports)

    def get(self, path: str, key: str) -> Optional[FileResult]:
        entry = self.entries.get(path)
        if not (isinstance(entry, list) and len(entry) == 2 and entry[0] == key and isinstance(entry[1], dict)):
            return None
        result = _result_from_json(entry[1], path)
        if result is not None:
            self.hits += 1
        return result

    def project_summaries(self, skip: Iterable[str]) -> List[Tuple[str, str, bool, Dict[str, Any], str]]:
        """The summaries a project run stored for files a run on a few files
        does not check (``skip``: the files it checks): (path, module, is a
        package, summary, text) of each file whose content is still the one
        the summary was made from. A pre-commit hook or an editor run on
        ``train.py`` so sees the classes of the ``models.py`` the last whole
        run read, and nothing stale."""
        skipped = {os.path.abspath(p) for p in skip}
        out = []
        for path, entry in sorted(self.entries.items()):
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], dict)):
                continue
            key, data = entry
            summary = data.get("summary")
            if not isinstance(summary, dict) or os.path.abspath(path) in skipped:
                continue
            digest, _, rest = key.partition(":")
            role = rest.rsplit(":project=", 1)[-1] if ":project=" in rest else ""
            module = role.split(":", 1)[0].split("+", 1)[0]
            is_package = module.endswith("/")
            module = module.rstrip("/")
            if not module:
                continue
            try:
                with open(path, "rb") as fh:
                    raw = fh.read()
            except OSError:
                continue
            if content_digest(raw) != digest:
                continue
            out.append((path, module, is_package, summary, raw.decode("utf-8", errors="replace")))
        return out

    # -- writing -----------------------------------------------------------
    def put(self, path: str, key: str, result: FileResult) -> None:
        if result.error or result.internal_errors or result.path != path:
            return  # problems are reported afresh on every run
        data = result.to_json()
        for d, out in zip(result.diagnostics, data["diagnostics"]):
            out["source_line"] = d.source_line
        self.entries[path] = [key, data]
        self.stored += 1
        self._dirty = True

    def save(self) -> Optional[str]:
        """Write the cache (atomically); a one-line problem, or None."""
        if not self._dirty and len(self.imports) == self._imports_seen:
            return None
        if len(self.imports) > 2 * len(self.entries) + 1000:
            # mostly the imports of old versions of files: start again (the next run reads them anew)
            self.imports = {}
        try:
            if not os.path.lexists(self.folder):
                os.makedirs(self.folder, exist_ok=True)
                for name, text in ((".gitignore", _GITIGNORE), ("CACHEDIR.TAG", _CACHEDIR_TAG)):
                    with open(os.path.join(self.folder, name), "w", encoding="utf-8") as fh:
                        fh.write(text)
            if not _plain_folder(self.folder):
                return f"{self.folder}: not a plain folder; the cache was not written"
            fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".tmp", dir=self.folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    # one string with the C encoder: json.dump to a file encodes in Python, chunk by chunk
                    fh.write(json.dumps({"format": FORMAT, "key": self.key, "files": self.entries, "imports": self.imports},
                                        separators=(",", ":")))
                os.replace(tmp, self.file)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as exc:
            return f"cannot write the cache in {self.folder}: {exc.strerror or exc}"
        self._dirty = False
        self._imports_seen = len(self.imports)
        return None


def clean(folder: str) -> bool:
    """Remove a cache folder; True when there was one. A symlink is removed,
    never followed."""
    if os.path.islink(folder):
        os.unlink(folder)
        return True
    if not os.path.isdir(folder):
        return False
    shutil.rmtree(folder)
    return True


def _plain_folder(folder: str) -> bool:
    import stat

    try:
        return stat.S_ISDIR(os.lstat(folder).st_mode)
    except OSError:
        return False


def _read_json(path: str) -> Any:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            if os.fstat(fh.fileno()).st_size > MAX_CACHE_BYTES:
                return None
            return json.loads(fh.read())
    except (OSError, ValueError, RecursionError):
        return None


# -- validation of untrusted entries -------------------------------------------

def _is_pos(d: Any) -> bool:
    return isinstance(d, dict) and type(d.get("line")) is int and type(d.get("column")) is int


def _valid_diagnostic(d: Any, path: str) -> bool:
    if not isinstance(d, dict):
        return False
    if not all(isinstance(d.get(k), str) for k in ("code", "name", "message", "filename")):
        return False
    if d["filename"] != path or not _is_pos(d.get("location")) or not _is_pos(d.get("end_location")):
        return False
    if not isinstance(d.get("no_fix_reason"), (str, type(None))) or not isinstance(d.get("source_line", ""), str):
        return False
    fix = d.get("fix")
    if fix is None:
        return True
    if not isinstance(fix, dict) or fix.get("applicability") not in ("safe", "unsafe"):
        return False
    if not isinstance(fix.get("message", ""), str) or not isinstance(fix.get("edits", []), list):
        return False
    return all(
        isinstance(e, dict) and _is_pos(e.get("start")) and _is_pos(e.get("end")) and isinstance(e.get("content"), str)
        for e in fix.get("edits", [])
    )


def _result_from_json(data: Dict[str, Any], path: str) -> Optional[FileResult]:
    diagnostics = data.get("diagnostics")
    if data.get("path") != path or not isinstance(diagnostics, list):
        return None
    if data.get("error") is not None or data.get("internal_errors") not in (None, []):
        return None
    if not isinstance(data.get("skipped", False), bool):
        return None
    if not all(_valid_diagnostic(d, path) for d in diagnostics):
        return None
    try:
        result = FileResult.from_json(data)
    except (KeyError, TypeError, ValueError):  # pragma: no cover - validated above
        return None
    for d, raw in zip(result.diagnostics, diagnostics):
        d.source_line = raw.get("source_line", "")
    return result
