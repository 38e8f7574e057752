#!/usr/bin/env python3
"""Real-world precision check: run devlint (every rule enabled) over a corpus
of real PyTorch code and write per-rule counts and a reviewable sample of
findings, each with its source lines.

    python bench/precision.py [CORPUS_ROOT] [--sample N] [--seed S] [--out DIR]
                              [--select CODES] [--paths PATH...]

CORPUS_ROOT holds ``timm/``, ``transformers/`` and ``torch/`` as built by
``shared/bench/make_corpus.sh`` (pinned PyPI wheels, .py files only); when it
is missing the script builds it with that script (``--make-corpus`` gives its
path). The sample is deterministic: for each rule, ``N`` findings drawn with
``random.Random(seed)`` from the findings sorted by path and line, listed by
path. Writes ``precision-report.md`` and ``precision.json`` under ``--out``
(default ``bench/out/``, ignored by git). Exit status: 0, or 1 when devlint
reported an internal error or failed to run.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
PROJECTS = ("timm", "transformers", "torch")
DEFAULT_CORPUS = REPO.parent / "corpus"


def find_make_corpus(explicit: Optional[str]) -> Optional[Path]:
    if explicit:
        return Path(explicit)
    for base in (REPO.parent, REPO.parent.parent):
        cand = base / "shared" / "bench" / "make_corpus.sh"
        if cand.is_file():
            return cand
    return None


def ensure_corpus(root: Path, make_corpus: Optional[Path]) -> None:
    missing = [p for p in PROJECTS if not (root / p).is_dir()]
    if not missing:
        return
    if make_corpus is None or not make_corpus.is_file():
        sys.exit(f"precision: {root} lacks {', '.join(missing)} and make_corpus.sh was not found (give --make-corpus)")
    print(f"precision: building the corpus in {root} with {make_corpus}", file=sys.stderr)
    subprocess.run(["bash", str(make_corpus), str(root)], check=True)


def run_devlint(root: Path, jobs: Optional[int], select: str = "ALL", paths: Sequence[str] = PROJECTS) -> Dict[str, object]:
    cmd = [sys.executable, "-m", "devlint", "check", "--select", select, "--output-format", "json",
           "--exit-zero", "--no-cache"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    cmd += list(paths)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    try:
        findings = json.loads(proc.stdout) if proc.stdout.strip() else []
    except json.JSONDecodeError:
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-2000:])
        sys.exit("precision: devlint did not print JSON")
    return {"cmd": cmd, "rc": proc.returncode, "findings": findings, "stderr": proc.stderr, "seconds": elapsed}


def source_lines(root: Path, path: str, line: int, context: int) -> List[str]:
    try:
        text = (root / path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    lo, hi = max(line - 1 - context, 0), min(line + context, len(text))
    return [f"{'>' if i + 1 == line else ' '} {i + 1:5d}  {text[i]}" for i in range(lo, hi)]


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="?", default=str(DEFAULT_CORPUS), help="corpus root (default: %(default)s)")
    ap.add_argument("--make-corpus", help="path of make_corpus.sh (default: ../shared/bench/make_corpus.sh)")
    ap.add_argument("--sample", type=int, default=25, help="findings sampled per rule (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--context", type=int, default=2, help="source lines shown around each finding")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    ap.add_argument("--select", default="ALL",
                    help="rules to run, as devlint --select takes them (default ALL; for iterating: the "
                    "published figures are with ALL)")
    ap.add_argument("--paths", nargs="+", default=list(PROJECTS), metavar="PATH",
                    help="paths under the corpus root to check (default: timm transformers torch; for iterating "
                    "on one project or folder, e.g. --paths transformers/transformers/models)")
    args = ap.parse_args(argv)

    root = Path(args.corpus).resolve()
    ensure_corpus(root, find_make_corpus(args.make_corpus))
    files = {p: sum(1 for _ in (root / p).rglob("*.py")) for p in PROJECTS}
    run = run_devlint(root, args.jobs, args.select, args.paths)
    findings = sorted(run["findings"], key=lambda d: (d["filename"], d["location"]["line"], d["location"]["column"], d["code"]))
    stderr_lines = [l for l in str(run["stderr"]).splitlines() if l.strip()]
    internal = [l for l in stderr_lines if "internal error" in l]
    file_problems = [l for l in stderr_lines if "internal error" not in l]

    by_rule: Dict[str, List[dict]] = collections.defaultdict(list)
    for d in findings:
        by_rule[d["code"]].append(d)
    per_project = collections.Counter((d["code"], d["filename"].split("/", 1)[0]) for d in findings)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        "# devlint precision report",
        "",
        f"Corpus: `{root}` ({', '.join(f'{p} {n} files' for p, n in files.items())}; {sum(files.values())} in all).",
        f"Command (run in the corpus root): `{' '.join(['devlint'] + list(run['cmd'][3:]))}`",
        f"devlint exit status {run['rc']}, {run['seconds']:.0f} s; sample: {args.sample} per rule, seed {args.seed}.",
        "",
        f"Internal errors: {len(internal)}. Files devlint could not check: {len(file_problems)}.",
        "",
        "| rule | findings | " + " | ".join(PROJECTS) + " | files | sampled |",
        "| --- | ---: | " + " | ".join("---:" for _ in PROJECTS) + " | ---: | ---: |",
    ]
    samples: Dict[str, List[dict]] = {}
    for code in sorted(by_rule):
        items = by_rule[code]
        picked = items if len(items) <= args.sample else random.Random(args.seed).sample(items, args.sample)
        picked = sorted(picked, key=lambda d: (d["filename"], d["location"]["line"], d["location"]["column"]))
        samples[code] = picked
        nfiles = len({d["filename"] for d in items})
        lines.append(
            f"| {code} | {len(items)} | " + " | ".join(str(per_project[(code, p)]) for p in PROJECTS)
            + f" | {nfiles} | {len(picked)} |"
        )
    lines.append(f"| all | {len(findings)} | " + " | ".join(
        str(sum(v for (c, p), v in per_project.items() if p == proj)) for proj in PROJECTS) + " | | |")
    if internal or file_problems:
        lines += ["", "## Problems reported on stderr", "", "```"] + (internal + file_problems)[:200] + ["```"]
    for code, picked in samples.items():
        lines += ["", f"## {code} ({len(by_rule[code])} findings, {len(picked)} sampled)", ""]
        for i, d in enumerate(picked, 1):
            fix = d.get("fix")
            fixtxt = f" — fix ({fix['applicability']}): {fix['message']}" if fix else ""
            lines.append(f"### {code}.{i} `{d['filename']}:{d['location']['line']}`")
            lines.append("")
            lines.append(f"{d['message']}{fixtxt}")
            lines.append("")
            lines.append("```")
            lines += source_lines(root, d["filename"], d["location"]["line"], args.context)
            lines.append("```")
            lines.append("")
    report = out / "precision-report.md"
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    summary = {
        "corpus": str(root),
        "files": files,
        "seconds": round(float(run["seconds"]), 1),
        "exit_status": run["rc"],
        "internal_errors": internal,
        "file_problems": file_problems,
        "counts": {c: len(v) for c, v in sorted(by_rule.items())},
        "samples": {c: [f"{d['filename']}:{d['location']['line']}" for d in v] for c, v in samples.items()},
    }
    (out / "precision.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"precision: {len(findings)} findings, {len(internal)} internal errors, {len(file_problems)} file problems; "
          f"counts {summary['counts']}; report {report}")
    return 1 if internal or run["rc"] not in (0, 1) else 0


if __name__ == "__main__":
    sys.exit(main())
