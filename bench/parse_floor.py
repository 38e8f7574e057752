#!/usr/bin/env python3
"""The floors devlint is measured against: read every .py file of a folder and
parse it with libcst (``cst``) or CPython (``ast``), nothing else.

    python bench/parse_floor.py {read,ast,cst} FOLDER [-j N]

Same method as ../shared/bench/parse_floor.py (native libcst parser, bytes in,
one process unless -j). Run it with the interpreter devlint uses, so that the
libcst floor is the libcst devlint parses with.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("LIBCST_PARSER_TYPE", "native")


def gather(root: str):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        out.extend(os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(".py"))
    return out


def work(job):
    mode, path = job
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        if mode == "ast":
            import ast

            ast.parse(data)
        elif mode == "cst":
            import libcst

            libcst.parse_module(data)
    except Exception:
        return 1
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("read", "ast", "cst"))
    ap.add_argument("folder")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    a = ap.parse_args()
    jobs = [(a.mode, p) for p in gather(a.folder)]
    if a.jobs <= 1:
        failed = sum(work(j) for j in jobs)
    else:
        import multiprocessing

        with multiprocessing.Pool(a.jobs) as pool:
            failed = sum(pool.imap_unordered(work, jobs, chunksize=4))
    print(f"mode={a.mode} files={len(jobs)} failed={failed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
