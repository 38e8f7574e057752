"""Pinned PyPI distributions for the benchmarks, downloaded at run time and
cached under ``bench/cache/`` (git-ignored): the code of other projects is
never committed, only the names, versions and digests that pin it.

``fetch(package, version, dist)`` returns the folder holding the ``.py`` files
of that distribution: a wheel's root, or an sdist's root without its
``name-version/`` folder. Downloads use ``pip download --no-deps`` (wheels
with ``--only-binary :all:``, sdists with ``--no-binary :all:``); extraction
goes to a temporary folder renamed into place, so an interrupted run never
leaves a half-extracted tree behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("DEVLINT_BENCH_CACHE", REPO / "bench" / "cache"))


class FetchError(Exception):
    """A distribution that could not be downloaded or extracted (one line)."""


def _key(package: str, version: str, dist: str) -> str:
    return f"{package}-{version}-{dist}"


def _download(package: str, version: str, dist: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    existing = [p for p in dest.iterdir() if p.is_file() and not p.name.startswith(".")]
    if existing:
        return existing[0]
    binary = ["--only-binary", ":all:"] if dist == "wheel" else ["--no-binary", ":all:"]
    tmp = Path(tempfile.mkdtemp(prefix=".dl-", dir=dest))
    try:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "--disable-pip-version-check",
               *binary, "-d", str(tmp), f"{package}=={version}"]
        env = dict(os.environ)
        if dist == "sdist":
            # old sdists' setup.py imports pkg_resources, which setuptools 70+
            # no longer provides in a fresh build environment
            constraint = dest / ".constraints.txt"
            constraint.write_text("setuptools<70\n", encoding="utf-8")
            env["PIP_CONSTRAINT"] = str(constraint)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        files = [p for p in tmp.iterdir() if p.is_file()]
        if not files:
            # pip prepares an sdist's metadata, which can fail on build
            # requirements we do not need: the archive itself is what we keep.
            err = [l for l in (proc.stderr or "").splitlines() if l.strip() and "WARNING: Location" not in l]
            raise FetchError(f"pip download {package}=={version} ({dist}) failed: {err[-1] if err else proc.returncode}")
        target = dest / files[0].name
        os.replace(files[0], target)
        return target
    except subprocess.TimeoutExpired:
        raise FetchError(f"pip download {package}=={version} ({dist}) timed out") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _safe_member(name: str) -> Optional[str]:
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return "/".join(parts)


def _extract(archive: Path, out: Path, strip_top: bool) -> int:
    count = 0

    def place(name: str, data: bytes) -> None:
        nonlocal count
        rel = _safe_member(name)
        if rel is None or not rel.endswith(".py"):
            return
        if strip_top:
            rel = rel.split("/", 1)[1] if "/" in rel else ""
            if not rel:
                return
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        count += 1

    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    place(info.filename, zf.read(info))
    elif archive.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar")):
        with tarfile.open(archive) as tf:
            for member in tf.getmembers():
                if member.isfile():
                    fh = tf.extractfile(member)
                    if fh is not None:
                        place(member.name, fh.read())
    else:
        raise FetchError(f"{archive.name}: not a wheel, zip or tar archive")
    return count


def fetch(package: str, version: str, dist: str = "wheel", digest: Optional[str] = None) -> Path:
    """The folder with the ``.py`` files of ``package==version`` (``dist`` is
    ``wheel`` or ``sdist``), downloading and extracting it on first use. A
    ``digest`` (sha256 of the archive) is checked when given."""
    if dist not in ("wheel", "sdist"):
        raise FetchError(f"{package}=={version}: dist must be 'wheel' or 'sdist', not {dist!r}")
    key = _key(package, version, dist)
    src = CACHE / "src" / key
    if (src / ".complete").is_file():
        return src
    archive = _download(package, version, dist, CACHE / "downloads" / key)
    if digest and sha256(archive) != digest:
        raise FetchError(f"{archive.name}: sha256 differs from the pinned digest (a different build was served)")
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=src.parent if src.parent.exists() else _mk(src.parent)))
    try:
        n = _extract(archive, tmp, strip_top=(dist == "sdist"))
        if n == 0:
            raise FetchError(f"{archive.name}: holds no .py files")
        (tmp / ".complete").write_text(f"{archive.name}\n", encoding="utf-8")
        if src.exists():
            shutil.rmtree(src)
        os.replace(tmp, src)
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise FetchError(f"{archive.name}: cannot extract ({exc})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return src


def _mk(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def cached(package: str, version: str, dist: str = "wheel") -> Optional[Path]:
    """The extracted folder when it is already in the cache, else None (for
    offline smoke tests)."""
    src = CACHE / "src" / _key(package, version, dist)
    return src if (src / ".complete").is_file() else None


def install_commit(commit: str, dest: Path) -> Path:
    """Install commit ``commit`` of this repository (not editable, no
    dependencies) under ``dest``; returns the folder to put on PYTHONPATH so
    that ``python -m devlint`` runs that version."""
    src, site = dest / "src", dest / "site"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                    "--target", str(site), str(src)], check=True, capture_output=True)
    return site
