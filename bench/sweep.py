"""Corpus sweep: devlint check, then fix --apply --unsafe-fixes, then fix
again, on a COPY of the benchmark corpus; counts what docs/reliability.md
reports.

    python bench/sweep.py CORPUS_ROOT SCRATCH_DIR [--only timm,torch] [-j N]

CORPUS_ROOT is what ``../shared/bench/make_corpus.sh`` built (its
subfolders transformers/, timm/, torch/); SCRATCH_DIR receives the copy (it is
emptied first). Requirements: zero internal errors and no traceback; every
file the fix changed still parses (libcst) and compiles (CPython, when the
original did; nothing is executed); the second fix changes nothing.
Exit status 0 when all hold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List


def _digests(root: str) -> Dict[str, str]:
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith((".py", ".pyi")):
                path = os.path.join(folder, name)
                with open(path, "rb") as fh:
                    out[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _devlint(args: List[str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "devlint", *args], cwd=cwd, capture_output=True, text=True)


def _compiles(data: bytes, path: str) -> bool:
    try:
        compile(data, path, "exec", dont_inherit=True)  # compiled, never run
        return True
    except Exception:
        return False


def _stderr_counts(stderr: str) -> Dict[str, int]:
    lines = stderr.splitlines()
    return {
        "internal_errors": sum("internal error" in l for l in lines),
        "tracebacks": stderr.count("Traceback (most recent call last)"),
        "skipped_or_unreadable": sum(l.startswith("devlint: ") and "internal error" not in l for l in lines),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("scratch")
    ap.add_argument("--only", default="", help="comma-separated subfolders of the corpus (default: all)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--json", help="also write the figures here")
    opts = ap.parse_args()

    import libcst

    parts = [p for p in opts.only.split(",") if p] or sorted(
        d for d in os.listdir(opts.corpus) if not d.startswith(".") and os.path.isdir(os.path.join(opts.corpus, d))
    )
    copy = os.path.join(os.path.abspath(opts.scratch), "corpus")
    shutil.rmtree(copy, ignore_errors=True)
    os.makedirs(copy)
    for part in parts:
        shutil.copytree(os.path.join(opts.corpus, part), os.path.join(copy, part), symlinks=True)
    before = _digests(copy)
    originals = {}
    for rel in before:
        with open(os.path.join(copy, rel), "rb") as fh:
            originals[rel] = fh.read()
    figures: Dict[str, object] = {"corpus": parts, "files": len(before), "jobs": opts.jobs}
    common = ["--no-cache", "-j", str(opts.jobs), *parts]

    t = time.monotonic()
    check = _devlint(["check", "--statistics", *common], copy)
    figures["check"] = {"exit": check.returncode, "seconds": round(time.monotonic() - t, 1), **_stderr_counts(check.stderr)}
    figures["check"]["statistics"] = check.stdout.strip().splitlines()[-40:]

    t = time.monotonic()
    fix = _devlint(["fix", "--apply", "--unsafe-fixes", *common], copy)
    figures["fix"] = {"exit": fix.returncode, "seconds": round(time.monotonic() - t, 1), **_stderr_counts(fix.stderr)}
    figures["fix"]["summary"] = [l for l in (fix.stdout + fix.stderr).splitlines() if l.startswith("Fixed")]
    after = _digests(copy)
    changed = sorted(rel for rel in before if after.get(rel) != before[rel])
    not_parsing, not_compiling = [], []
    for rel in changed:
        with open(os.path.join(copy, rel), "rb") as fh:
            data = fh.read()
        try:
            libcst.parse_module(data)
        except Exception:
            not_parsing.append(rel)
        if _compiles(originals[rel], rel) and not _compiles(data, rel):
            not_compiling.append(rel)
    figures["changed_files"] = len(changed)
    figures["changed_not_parsing"] = not_parsing
    figures["changed_not_compiling"] = not_compiling

    t = time.monotonic()
    again = _devlint(["fix", "--apply", "--unsafe-fixes", *common], copy)
    final = _digests(copy)
    figures["second_fix"] = {
        "exit": again.returncode,
        "seconds": round(time.monotonic() - t, 1),
        "files_changed": sum(final.get(rel) != after.get(rel) for rel in after),
        "summary": [l for l in (again.stdout + again.stderr).splitlines() if l.startswith("Fixed")],
        **_stderr_counts(again.stderr),
    }
    problems = [l for l in (check.stderr + fix.stderr).splitlines() if l.startswith("devlint: ")]
    figures["messages"] = sorted(set(problems))[:50]

    ok = (
        figures["check"]["internal_errors"] == 0  # type: ignore[index]
        and figures["fix"]["internal_errors"] == 0  # type: ignore[index]
        and figures["second_fix"]["internal_errors"] == 0  # type: ignore[index]
        and not any(f[k]["tracebacks"] for f in [figures] for k in ("check", "fix", "second_fix"))  # type: ignore[index]
        and not not_parsing
        and not not_compiling
        and figures["second_fix"]["files_changed"] == 0  # type: ignore[index]
    )
    figures["ok"] = ok
    text = json.dumps(figures, indent=2)
    print(text)
    if opts.json:
        with open(opts.json, "w") as fh:
            fh.write(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
