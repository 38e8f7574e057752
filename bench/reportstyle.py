"""devlint on report-style device bugs: small programs written the way users
paste them into forum posts and issues, each with one bug and a fixed
look-alike (``bench/reportstyle/<set>/``, ``expected.json``).

The sets were written for devlint by people (and agents) who did not read
its fixtures or code: ``a`` (training scripts and models, forum style) and
``b`` (library and research modules) drove the round that added them; ``c``
was held out until its first measurement, and so was ``d`` (20 programs
written in a later round: 13 found on a bug line at ``7bda43a``, its first
measurement, with one finding on a fixed look-alike), and so was ``e`` (20
programs written blind on 2026-12-05: 10 found on a bug line at
``5f44f0e``, its first measurement, with two findings on one fixed
look-alike), and so was ``f`` (20 programs written blind later that day,
by a helper that read nothing of devlint: 10 found on a bug line at
``aafbac9``, its first measurement, no finding on a fixed look-alike). A bug counts as found when a
finding sits on one of its lines (where the tensor is made or the device
chosen, or where the mismatch raises) or, in ``--by-file`` mode, anywhere in
its file. Findings on the fixed look-alikes are false alarms.

    python bench/reportstyle.py [--sets a b c d e f] [--devlint PATH] [--json OUT]

The exit status is 0 unless devlint could not run; the figures are the
result, not a gate."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Sequence

ROOT = Path(__file__).resolve().parent / "reportstyle"


def run_devlint(devlint: Sequence[str], folder: Path, files: List[str]) -> List[dict]:
    """Findings of ``devlint check`` on ``files`` (names relative to ``folder``)."""
    if not files:
        return []
    proc = subprocess.run(
        [*devlint, "check", "--no-cache", "--output-format", "json", *files],
        cwd=folder, capture_output=True, text=True,
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"reportstyle: devlint failed in {folder}: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout or "[]")


def score_set(devlint: Sequence[str], folder: Path) -> Dict[str, object]:
    expected = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    bugs = [e["file"] for e in expected]
    fixed = [b.replace(".py", "_fixed.py") for b in bugs if (folder / b.replace(".py", "_fixed.py")).is_file()]
    found = run_devlint(devlint, folder, bugs)
    alarms = run_devlint(devlint, folder, fixed)
    rows = []
    for e in expected:
        mine = [d for d in found if d["filename"] == e["file"]]
        lines = {d["location"]["line"] for d in mine}
        rows.append({
            "file": e["file"], "kind": e["kind"], "lines": e["lines"],
            "on_a_bug_line": bool(lines & set(e["lines"])), "in_file": bool(mine),
            "found": sorted((d["location"]["line"], d["code"]) for d in mine),
        })
    return {
        "set": folder.name,
        "bugs": len(rows),
        "found_on_a_bug_line": sum(r["on_a_bug_line"] for r in rows),
        "found_in_file": sum(r["in_file"] for r in rows),
        "bug_lines": sum(len(r["lines"]) for r in rows),
        "bug_lines_found": sum(len(set(r["lines"]) & {ln for ln, _ in r["found"]}) for r in rows),
        "fixed_files": len(fixed),
        "false_alarms": [{"file": d["filename"], "line": d["location"]["line"], "code": d["code"]} for d in alarms],
        "rows": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=sorted(p.name for p in ROOT.iterdir() if (p / "expected.json").is_file()))
    ap.add_argument("--devlint", default=f"{sys.executable} -m devlint", help="how to run devlint (default: this Python's)")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = ap.parse_args(argv)
    devlint = args.devlint.split()
    results = []
    for name in args.sets:
        folder = ROOT / name
        if not (folder / "expected.json").is_file():
            raise SystemExit(f"reportstyle: no set {name!r} under {ROOT}")
        results.append(score_set(devlint, folder))
    print("| set | bugs | found on a bug line | found in the file | bug lines found | findings on the fixed look-alikes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(f"| {r['set']} | {r['bugs']} | {r['found_on_a_bug_line']} | {r['found_in_file']} | "
              f"{r['bug_lines_found']} of {r['bug_lines']} | {len(r['false_alarms'])} of {r['fixed_files']} files |")
    print()
    for r in results:
        for row in r["rows"]:
            if not row["on_a_bug_line"]:
                where = ", ".join(f"{ln} {code}" for ln, code in row["found"]) or "nothing"
                print(f"- {r['set']}/{row['file']} ({row['kind']}, lines {row['lines']}): {where}")
        for a in r["false_alarms"]:
            print(f"- {r['set']}/{a['file']}:{a['line']}: {a['code']} on a fixed look-alike")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
