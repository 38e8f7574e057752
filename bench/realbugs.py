#!/usr/bin/env python3
"""Recall on real device bugs fixed upstream: devlint over the buggy and the
fixed files of every case in ``bench/realbugs/cases/*.json``, and over the
clean files of ``bench/realbugs/clean.json`` (format: bench/realbugs/README.md).

    python bench/realbugs.py                 # every case; tables on stdout
    python bench/realbugs.py --cases ID ...  # some cases
    python bench/realbugs.py --offline       # only distributions already cached
    python bench/realbugs.py --validate      # check the manifests, run nothing
    python bench/realbugs.py --at BASE       # the same figures for devlint as of commit BASE

For each case the pinned distributions are fetched (``pip download
--no-deps``, cached under ``bench/cache/``, ``bench/dists.py``) and ``devlint
check --select ALL`` runs from the distribution's root on the case's files and
context files (one devlint process per distribution). Then:

* a bug line is *found* when a finding (any rule) starts within 2 lines of it
  in the same file; a bug is found when one of its lines is; the tables give
  both, per rule and category, single-file against cross-file, and whether
  the rule the case names was the one that fired;
* for a found bug, the upstream fix *clears* it when the fixed file has no
  finding of that code within 2 lines of where the bug lines went (mapped
  through a line diff of the two versions);
* every finding on a clean file, and every finding in a case's files that is
  not at a bug line, is listed with its judgement from the manifest
  (``other_findings`` / the clean entry's ``judgements``) or "unjudged".

Results land in ``bench/out/realbugs/`` (git-ignored). Exit status: 0; 1
when devlint failed on a file or reported an internal error; 2 when a manifest
is invalid or a distribution could not be fetched.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dists  # noqa: E402

REPO = dists.REPO
DATA = REPO / "bench" / "realbugs"
OUT = REPO / "bench" / "out" / "realbugs"
WINDOW = 2

CATEGORIES = {
    "cpu-factory": "DL001", "captured-device": "DL002", "nested-wrap": "DL003",
    "wrap-over-manual-placement": "DL004", "placement-after-wrap": "DL005",
    "unregistered-tensor": "DL006", "unregistered-module-container": "DL007",
    "missing-transfer": "DL008", "module-device-attribute": "DL009",
    "load-without-map-location": "DL010", "inputs-not-moved": "DL011",
    "hardcoded-device-ids": "DL012", "parameters-in-replica": "DL013",
    "other-device-bug": None,
}
REQUIRED = ("id", "package", "buggy_version", "fixed_version", "files", "bug_lines", "category", "rule",
            "cross_file", "upstream", "summary")
#: an independent check uses these; no benchmark, fixture or test may
EXCLUDED = frozenset({
    "accelerate", "deepspeed", "diffusers", "kornia", "monai", "open-clip-torch", "peft", "pyannote-audio",
    "pytorch-lightning", "sentence-transformers", "speechbrain", "torch-geometric", "torchaudio", "torchvision",
    "ultralytics",
})
JUDGEMENTS = ("real", "risky", "false")

Finding = Dict[str, object]


@dataclass
class Case:
    id: str
    package: str
    buggy_version: str
    fixed_version: str
    files: List[str]
    fixed_files: List[str]
    bug_lines: Dict[str, List[int]]
    context_files: List[str]
    category: str
    rule: Optional[str]
    cross_file: bool
    upstream: str
    summary: str
    dist: str = "wheel"
    other_findings: Dict[str, dict] = field(default_factory=dict)
    source: str = ""


@dataclass
class CleanFile:
    package: str
    version: str
    file: str
    why: str
    dist: str = "wheel"
    judgements: Dict[str, dict] = field(default_factory=dict)


def _problem(where: str, msg: str) -> str:
    return f"{where}: {msg}"


def parse_case(raw: dict, where: str) -> Tuple[Optional[Case], List[str]]:
    problems = []
    if not isinstance(raw, dict):
        return None, [_problem(where, "a case must be a JSON object")]
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        return None, [_problem(where, f"missing {', '.join(missing)}")]
    cid = str(raw["id"])
    where = f"{where} {cid}"
    if raw["package"] in EXCLUDED:
        problems.append(_problem(where, f"{raw['package']} is one of the packages kept out of every benchmark"))
    if raw["category"] not in CATEGORIES:
        problems.append(_problem(where, f"unknown category {raw['category']!r}"))
    rule = raw["rule"]
    if rule is not None and not (isinstance(rule, str) and rule.startswith("DL") and rule[2:].isdigit()):
        problems.append(_problem(where, f"rule must be a DLnnn code or null, not {rule!r}"))
    files = raw["files"]
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        problems.append(_problem(where, "files must be a non-empty list of paths"))
        files = []
    fixed_files = raw.get("fixed_files") or files
    if len(fixed_files) != len(files):
        problems.append(_problem(where, "fixed_files must name one fixed file per buggy file"))
    bug_lines = raw["bug_lines"]
    if not isinstance(bug_lines, dict) or not bug_lines:
        problems.append(_problem(where, "bug_lines must map buggy files to line numbers"))
        bug_lines = {}
    for f, lines in bug_lines.items():
        if f not in files:
            problems.append(_problem(where, f"bug_lines names {f}, which is not in files"))
        if not isinstance(lines, list) or not lines or not all(isinstance(n, int) and n > 0 for n in lines):
            problems.append(_problem(where, f"bug_lines[{f}] must be a non-empty list of 1-based line numbers"))
    for k, v in (raw.get("other_findings") or {}).items():
        if not isinstance(v, dict) or v.get("judgement") not in JUDGEMENTS:
            problems.append(_problem(where, f"other_findings[{k}]: judgement must be one of {JUDGEMENTS}"))
    if raw.get("dist", "wheel") not in ("wheel", "sdist"):
        problems.append(_problem(where, "dist must be wheel or sdist"))
    if not isinstance(raw["cross_file"], bool):
        problems.append(_problem(where, "cross_file must be true or false"))
    if problems:
        return None, problems
    return Case(
        id=cid, package=raw["package"], buggy_version=str(raw["buggy_version"]),
        fixed_version=str(raw["fixed_version"]), files=list(files), fixed_files=list(fixed_files),
        bug_lines={k: sorted(set(v)) for k, v in bug_lines.items()}, context_files=list(raw.get("context_files") or []),
        category=raw["category"], rule=rule, cross_file=raw["cross_file"], upstream=str(raw["upstream"]),
        summary=str(raw["summary"]), dist=raw.get("dist", "wheel"), other_findings=dict(raw.get("other_findings") or {}),
        source=where.split(" ")[0],
    ), []


def load_cases(folder: Path = DATA / "cases") -> Tuple[List[Case], List[str]]:
    cases: List[Case] = []
    problems: List[str] = []
    seen: Set[str] = set()
    for path in sorted(folder.glob("*.json")):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path.name}: not readable JSON ({exc})")
            continue
        if not isinstance(raw, list):
            problems.append(f"{path.name}: must hold a JSON list of cases")
            continue
        for i, item in enumerate(raw):
            case, errs = parse_case(item, f"{path.name}[{i}]")
            problems += errs
            if case is None:
                continue
            if case.id in seen:
                problems.append(f"{path.name}: duplicate case id {case.id}")
                continue
            seen.add(case.id)
            twin = next((c for c in cases if _same_fix(c, case)), None)
            if twin is not None:
                problems.append(f"{path.name}: {case.id} is the same upstream fix as {twin.id} (one case per fix)")
                continue
            cases.append(case)
    return cases, problems


def _same_fix(a: Case, b: Case) -> bool:
    """Two cases of one package, fixed in the same release, with bug lines
    within a few lines of each other in the same file."""
    if (a.package, a.buggy_version, a.fixed_version) != (b.package, b.buggy_version, b.fixed_version):
        return False
    for f, lines in a.bug_lines.items():
        other = b.bug_lines.get(f, [])
        if any(abs(x - y) <= WINDOW for x in lines for y in other):
            return True
    return False


def load_clean(path: Path = DATA / "clean.json") -> Tuple[List[CleanFile], List[str]]:
    if not path.is_file():
        return [], []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [], [f"{path.name}: not readable JSON ({exc})"]
    out, problems = [], []
    for i, item in enumerate(raw if isinstance(raw, list) else []):
        where = f"{path.name}[{i}]"
        if not isinstance(item, dict) or not all(k in item for k in ("package", "version", "file", "why")):
            problems.append(f"{where}: needs package, version, file and why")
            continue
        if item["package"] in EXCLUDED:
            problems.append(f"{where}: {item['package']} is one of the packages kept out of every benchmark")
            continue
        out.append(CleanFile(item["package"], str(item["version"]), item["file"], item["why"],
                             item.get("dist", "wheel"), dict(item.get("judgements") or {})))
    return out, problems


def run_devlint(root: Path, paths: Sequence[str], env: Optional[Dict[str, str]] = None
                ) -> Tuple[Dict[str, List[Finding]], List[str]]:
    """Findings per file (relative to ``root``) and the problems devlint reported."""
    cmd = [sys.executable, "-m", "devlint", "check", "--select", "ALL", "--output-format", "json", "--exit-zero",
           "--no-cache", *sorted(set(paths))]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)
    problems = [f"{root.name}: {l}" for l in proc.stderr.splitlines() if l.strip()]
    try:
        found = json.loads(proc.stdout) if proc.stdout.strip() else []
    except ValueError:
        return {}, problems + [f"{root.name}: devlint exited {proc.returncode} without JSON"]
    by_file: Dict[str, List[Finding]] = collections.defaultdict(list)
    for d in found:
        by_file[str(d["filename"]).removeprefix("./")].append(d)
    return by_file, problems


def near(findings: Sequence[Finding], lo: int, hi: int, code: Optional[str] = None) -> List[Finding]:
    return [d for d in findings
            if lo - WINDOW <= int(d["location"]["line"]) <= hi + WINDOW and (code is None or d["code"] == code)]  # type: ignore[index]


def line_map(old: List[str], new: List[str]) -> Dict[int, Tuple[int, int]]:
    """1-based old line -> (first, last) 1-based new lines it became (a
    deleted line maps to the point where it was)."""
    out: Dict[int, Tuple[int, int]] = {}
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        for i in range(i1, i2):
            if tag == "equal":
                out[i + 1] = (j1 + (i - i1) + 1, j1 + (i - i1) + 1)
            else:
                out[i + 1] = (j1 + 1, max(j1 + 1, j2))
    return out


def _read_lines(path: Path) -> Optional[List[str]]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def evaluate(cases: Sequence[Case], roots: Dict[Tuple[str, str, str], Path],
             results: Dict[Tuple[str, str, str], Dict[str, List[Finding]]]) -> List[dict]:
    rows = []
    for c in cases:
        bkey, fkey = (c.package, c.buggy_version, c.dist), (c.package, c.fixed_version, c.dist)
        if bkey not in results:
            continue
        buggy = results[bkey]
        fixed = results.get(fkey, {})
        row = {"id": c.id, "package": c.package, "rule": c.rule, "category": c.category, "cross_file": c.cross_file,
               "lines": 0, "lines_found": 0, "found": False, "found_by_rule": False, "cleared": None,
               "missing_files": [], "hits": [], "other": []}
        bug_keys: Set[Tuple[str, int]] = set()
        codes_at_bug: Dict[str, Set[str]] = collections.defaultdict(set)
        for f, lines in c.bug_lines.items():
            if _read_lines(roots[bkey] / f) is None:
                row["missing_files"].append(f)
            for n in lines:
                row["lines"] += 1
                hits = near(buggy.get(f, []), n, n)
                if hits:
                    row["lines_found"] += 1
                    for d in hits:
                        bug_keys.add((f, int(d["location"]["line"])))  # type: ignore[index]
                        codes_at_bug[f].add(str(d["code"]))
                        row["hits"].append(f"{f}:{d['location']['line']}: {d['code']}")  # type: ignore[index]
                        if d["code"] == c.rule:
                            row["found_by_rule"] = True
        row["found"] = row["lines_found"] > 0
        if row["found"] and fkey in results:
            cleared = True
            for f, fixed_f in zip(c.files, c.fixed_files):
                if f not in c.bug_lines or not codes_at_bug.get(f):
                    continue
                old, new = _read_lines(roots[bkey] / f), _read_lines(roots[fkey] / fixed_f)
                if old is None or new is None:
                    cleared = False
                    continue
                mapping = line_map(old, new)
                for n in c.bug_lines[f]:
                    lo, hi = mapping.get(n, (n, n))
                    for code in codes_at_bug[f]:
                        if near(fixed.get(fixed_f, []), lo, hi, code):
                            cleared = False
            row["cleared"] = cleared
        for f in c.files + c.context_files:
            for d in buggy.get(f, []):
                if (f, int(d["location"]["line"])) in bug_keys:  # type: ignore[index]
                    continue
                k = f"{f}:{d['location']['line']}:{d['code']}"  # type: ignore[index]
                j = c.other_findings.get(k)
                row["other"].append({"key": k, "message": d["message"],
                                     "judgement": j["judgement"] if j else "unjudged",
                                     "reason": j.get("reason", "") if j else ""})
        rows.append(row)
    return rows


def pct(a: int, b: int) -> str:
    return f"{a / b:.0%}" if b else "—"


def tables(rows: Sequence[dict]) -> List[str]:
    out: List[str] = []

    def group(title: str, keyf) -> None:
        agg: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for r in rows:
            for k in ([keyf(r)] if not isinstance(keyf(r), list) else keyf(r)):
                a = agg[k]
                a["bugs"] += 1
                a["found"] += r["found"]
                a["by_rule"] += r["found_by_rule"]
                a["lines"] += r["lines"]
                a["lines_found"] += r["lines_found"]
                a["cleared"] += bool(r["cleared"])
        out.extend([f"| {title} | bugs | found | found by its rule | bug lines | lines found | fix clears |",
                    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"])
        for k in sorted(agg, key=str):
            a = agg[k]
            out.append(f"| {k} | {a['bugs']} | {a['found']} ({pct(a['found'], a['bugs'])}) | "
                       f"{a['by_rule']} ({pct(a['by_rule'], a['bugs'])}) | {a['lines']} | "
                       f"{a['lines_found']} ({pct(a['lines_found'], a['lines'])}) | "
                       f"{a['cleared']} of {a['found']} ({pct(a['cleared'], a['found'])}) |")
        out.append("")

    group("all", lambda r: "all")
    group("rule", lambda r: r["rule"] or "(none)")
    group("category", lambda r: r["category"])
    group("scope", lambda r: "cross-file" if r["cross_file"] else "single-file")
    group("package", lambda r: r["package"])
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", metavar="ID", help="only these case ids")
    ap.add_argument("--data", default=str(DATA), help="folder with cases/ and clean.json (default: %(default)s)")
    ap.add_argument("--offline", action="store_true", help="skip distributions that are not cached yet")
    ap.add_argument("--validate", action="store_true", help="check the manifests and stop")
    ap.add_argument("--no-clean", action="store_true", help="skip the clean files")
    ap.add_argument("--at", metavar="COMMIT", help="run devlint as of this commit of the repository (installed in a "
                    "temporary folder) instead of the working tree, to compare figures")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)

    at_commit = None
    if args.at:
        proc = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{args.at}^{{commit}}"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            ap.error(f"{args.at}: not a commit of this repository")
        at_commit = proc.stdout.strip()
    data = Path(args.data)
    cases, problems = load_cases(data / "cases")
    clean, clean_problems = load_clean(data / "clean.json")
    problems += clean_problems
    for p in problems:
        print(f"realbugs: {p}", file=sys.stderr)
    if args.cases:
        unknown = sorted(set(args.cases) - {c.id for c in cases})
        if unknown:
            ap.error(f"unknown case ids: {', '.join(unknown)}")
        cases = [c for c in cases if c.id in args.cases]
        clean = [] if args.no_clean else clean
    if args.no_clean:
        clean = []
    if args.validate:
        per_rule = collections.Counter(c.rule or "(none)" for c in cases)
        print(f"realbugs: {len(cases)} cases ({sum(c.cross_file for c in cases)} cross-file), {len(clean)} clean files, "
              f"{len(problems)} problems; per rule: {dict(sorted(per_rule.items()))}")
        return 2 if problems else 0

    # What to check in each distribution.
    wanted: Dict[Tuple[str, str, str], Set[str]] = collections.defaultdict(set)
    for c in cases:
        wanted[(c.package, c.buggy_version, c.dist)].update(c.files + c.context_files)
        wanted[(c.package, c.fixed_version, c.dist)].update(c.fixed_files + c.context_files)
    for cf in clean:
        wanted[(cf.package, cf.version, cf.dist)].add(cf.file)

    roots: Dict[Tuple[str, str, str], Path] = {}
    fetch_problems: List[str] = []
    for key in sorted(wanted):
        pkg, ver, dist = key
        try:
            root = dists.cached(pkg, ver, dist) if args.offline else dists.fetch(pkg, ver, dist)
        except dists.FetchError as exc:
            fetch_problems.append(str(exc))
            continue
        if root is None:
            continue
        roots[key] = root

    results: Dict[Tuple[str, str, str], Dict[str, List[Finding]]] = {}
    run_problems: List[str] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="devlint-at-") as tmp:
        env = None
        if args.at:
            env = dict(os.environ, PYTHONPATH=str(dists.install_commit(at_commit, Path(tmp))))
        for key, root in roots.items():
            present = [p for p in sorted(wanted[key]) if (root / p).is_file()]
            for p in sorted(wanted[key] - set(present)):
                run_problems.append(f"{key[0]} {key[1]}: {p} is not in the distribution")
            results[key], errs = run_devlint(root, present, env) if present else ({}, [])
            run_problems += errs
    seconds = time.monotonic() - t0

    rows = evaluate(cases, roots, results)
    clean_rows = []
    for cf in clean:
        key = (cf.package, cf.version, cf.dist)
        if key not in results:
            continue
        for d in results[key].get(cf.file, []):
            k = f"{cf.file}:{d['location']['line']}:{d['code']}"  # type: ignore[index]
            j = cf.judgements.get(k)
            clean_rows.append({"package": cf.package, "key": k, "message": d["message"],
                               "judgement": j["judgement"] if j else "unjudged", "reason": j.get("reason", "") if j else ""})

    skipped = len(cases) - len(rows)
    report = ["# devlint on real fixed bugs" + (f" (devlint at {args.at})" if args.at else ""), "",
              f"{len(rows)} cases run ({skipped} skipped: distribution not available), "
              f"{sum(r['cross_file'] for r in rows)} cross-file; {len(clean)} clean files; devlint {seconds:.0f} s.", "",
              *tables(rows)]
    report += ["## Cases", "", "| case | rule | cross-file | lines found | found by | fix clears |",
               "| --- | --- | --- | ---: | --- | --- |"]
    for r in rows:
        hits = ", ".join(sorted({h.split(": ")[-1] for h in r["hits"]})) or "—"
        clears = "—" if r["cleared"] is None else ("yes" if r["cleared"] else "no")
        report.append(f"| {r['id']} | {r['rule'] or '—'} | {'yes' if r['cross_file'] else ''} | "
                      f"{r['lines_found']}/{r['lines']} | {hits} | {clears} |")
    report += ["", f"## Findings on the clean files ({len(clean_rows)})", ""]
    report += [f"- {c['package']} `{c['key']}` [{c['judgement']}] {c['message']}"
               + (f" — {c['reason']}" if c["reason"] else "") for c in clean_rows] or ["(none)"]
    others = [(r["id"], o) for r in rows for o in r["other"]]
    tally = collections.Counter(o["judgement"] for _, o in others)
    report += ["", f"## Other findings in the cases' files ({len(others)}: "
               + ", ".join(f"{k} {v}" for k, v in sorted(tally.items())) + ")", ""]
    report += [f"- {cid} `{o['key']}` [{o['judgement']}] {o['message']}" + (f" — {o['reason']}" if o["reason"] else "")
               for cid, o in others] or ["(none)"]
    missing = [f"{r['id']}: {f}" for r in rows for f in r["missing_files"]]
    trouble = problems + fetch_problems + run_problems + missing
    if trouble:
        report += ["", "## Problems", "", *[f"- {p}" for p in trouble]]
    text = "\n".join(report) + "\n"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text, encoding="utf-8")
    (out / "results.json").write_text(json.dumps({"cases": rows, "clean": clean_rows, "problems": trouble}, indent=1)
                                      + "\n", encoding="utf-8")
    print(text)
    if problems or fetch_problems:
        return 2
    return 1 if any("internal error" in p for p in run_problems) or missing else 0


if __name__ == "__main__":
    sys.exit(main())
