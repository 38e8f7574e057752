#!/usr/bin/env python3
"""What every rule says on real packages: devlint over the pinned wheels of
``bench/ecosystem.json`` (40+ PyTorch packages), per package and per rule,
with a hand review of a seeded sample of findings and a diff between versions.

    python bench/ecosystem.py                      # run, print the tables
    python bench/ecosystem.py --diff BASE          # findings added/removed since commit BASE
    python bench/ecosystem.py --review             # per-rule precision from bench/ecosystem_review.json
    python bench/ecosystem.py --worksheet FILE     # the sampled findings not judged yet, with source
    python bench/ecosystem.py --packages timm lpips ...   # a subset

The distributions are downloaded with ``pip download --no-deps`` and cached
under ``bench/cache/`` (git-ignored; ``bench/dists.py``). Each package is
checked by its own ``devlint check --select ALL --output-format json
--no-cache`` process (so its wall time is its own), from the package's root.
Results land in ``bench/out/ecosystem/`` (git-ignored).

``--diff BASE`` installs commit BASE of this repository into a temporary
folder (``pip install --no-deps --target``), runs it over the same packages
(its results are cached per commit under ``bench/cache/ecosystem-base/``) and
lists, package by package, the findings that the working tree adds and
removes. A finding is keyed by (package, path, line, code); a changed message
at the same key is listed as changed.

The review sample is deterministic: for each rule, every finding when it has
at most ``--sample`` (25), else ``random.Random(seed).sample`` of them from
the findings sorted by package, path and line. Judgements live in
``bench/ecosystem_review.json``, keyed ``package:path:line:code``: ``real``
(raises or silently misbehaves under a realistic placement), ``risky`` (works
only by an assumption a user easily breaks) or ``false`` (correct code), a
one-line reason, and whether the fix is right. Precision of a rule is
(real + risky) / judged, over its sample.

Exit status: 0; 1 when devlint reported an internal error or did not run; 2
when a distribution could not be fetched.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dists  # noqa: E402

REPO = dists.REPO
MANIFEST = REPO / "bench" / "ecosystem.json"
REVIEW = REPO / "bench" / "ecosystem_review.json"
OUT = REPO / "bench" / "out" / "ecosystem"
JUDGEMENTS = ("real", "risky", "false")
FIX_VERDICTS = ("right", "wrong", "none")

Finding = Dict[str, object]


def load_manifest(path: Path = MANIFEST) -> List[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["packages"]


def key_of(d: Finding) -> str:
    return f"{d['package']}:{d['filename']}:{d['location']['line']}:{d['code']}"  # type: ignore[index]


def run_devlint(python: str, root: Path, env: Optional[Dict[str, str]] = None, jobs: Optional[int] = None) -> dict:
    cmd = [python, "-m", "devlint", "check", "--select", "ALL", "--output-format", "json", "--exit-zero", "--no-cache"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    cmd.append(".")
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    try:
        findings = json.loads(proc.stdout) if proc.stdout.strip() else []
    except json.JSONDecodeError:
        findings = None
    stderr = [l for l in proc.stderr.splitlines() if l.strip()]
    return {"rc": proc.returncode, "findings": findings, "stderr": stderr, "wall": wall}


def python_files(root: Path) -> List[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.py"))


def candidate_counts(root: Path, files: Sequence[str]) -> Dict[str, int]:
    """Files the pre-filter keeps, per rule (the rules whose ``candidate``
    hook accepts the file's scan). Asks the engine of the working tree."""
    try:
        from devlint.engine import _scan_filter, _token_filter, all_rules
    except ImportError:  # the engine moved: the figure is optional
        return {}
    rules = list(all_rules().values())
    counts: Dict[str, int] = collections.Counter()
    for rel in files:
        try:
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        kept = _scan_filter(text, _token_filter(text, rules))
        if kept:
            counts["any"] += 1
        for r in kept:
            counts[r.code] += 1
    return dict(counts)


def fetch_all(packages: Sequence[dict]) -> Tuple[Dict[str, Path], List[str]]:
    roots, problems = {}, []
    for p in packages:
        try:
            roots[p["package"]] = dists.fetch(p["package"], p["version"], p.get("dist", "wheel"), p.get("sha256"))
        except dists.FetchError as exc:
            problems.append(f"{p['package']}: {exc}")
            print(f"ecosystem: {p['package']}: {exc}", file=sys.stderr)
    return roots, problems


def run_all(python: str, packages: Sequence[dict], roots: Dict[str, Path], env: Optional[Dict[str, str]] = None,
            candidates: bool = True, jobs: Optional[int] = None, label: str = "") -> dict:
    per_package: Dict[str, dict] = {}
    findings: List[Finding] = []
    for p in packages:
        name = p["package"]
        root = roots.get(name)
        if root is None:
            continue
        files = python_files(root)
        res = run_devlint(python, root, env, jobs)
        internal = [l for l in res["stderr"] if "internal error" in l]
        if res["findings"] is None:
            internal.append(f"devlint exited {res['rc']} without JSON: {' | '.join(res['stderr'][-3:])}")
        found = res["findings"] or []
        for d in found:
            d["package"] = name
            d["filename"] = str(d["filename"]).removeprefix("./")
        findings += found
        per_package[name] = {
            "version": p["version"],
            "files": len(files),
            "candidates": candidate_counts(root, files) if candidates else {},
            "findings": len(found),
            "per_rule": dict(collections.Counter(str(d["code"]) for d in found)),
            "wall": round(res["wall"], 2),
            "internal_errors": internal,
            "file_problems": [l for l in res["stderr"] if "internal error" not in l][:50],
        }
        print(f"ecosystem{label}: {name} {p['version']}: {len(files)} files, {len(found)} findings, "
              f"{res['wall']:.1f} s{', %d internal errors' % len(internal) if internal else ''}", file=sys.stderr)
    findings.sort(key=lambda d: (d["package"], d["filename"], d["location"]["line"], d["location"]["column"], d["code"]))  # type: ignore[index]
    return {"packages": per_package, "findings": findings}


def resolve_commit(rev: str) -> str:
    proc = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ecosystem: {rev}: not a commit of this repository")
    return proc.stdout.strip()


def base_results(commit: str, packages: Sequence[dict], roots: Dict[str, Path], jobs: Optional[int]) -> dict:
    cache = dists.CACHE / "ecosystem-base" / f"{commit}.json"
    wanted = {p["package"]: p["version"] for p in packages if p["package"] in roots}
    cached: Optional[dict] = None
    if cache.is_file():
        cached = json.loads(cache.read_text(encoding="utf-8"))
        have = {k: v["version"] for k, v in cached["packages"].items()}
        missing = [p for p in packages if p["package"] in wanted and have.get(p["package"]) != p["version"]]
    else:
        missing = [p for p in packages if p["package"] in wanted]
    if missing:
        # only what the cache lacks (another package set was run at this
        # commit before): the cache keeps every package run at the commit
        with tempfile.TemporaryDirectory(prefix="devlint-base-") as tmp:
            site = dists.install_commit(commit, Path(tmp))
            env = dict(os.environ, PYTHONPATH=str(site))
            res = run_all(sys.executable, missing, roots, env=env, candidates=False, jobs=jobs, label=f" [{commit[:7]}]")
        if cached is not None:
            redone = {p["package"] for p in missing}
            cached["packages"].update(res["packages"])
            cached["findings"] = [d for d in cached["findings"] if d["package"] not in redone] + res["findings"]
            for key, value in res.items():
                cached.setdefault(key, value)
            res = cached
        res["commit"] = commit
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(res), encoding="utf-8")
    else:
        res = cached  # type: ignore[assignment]
    out = dict(res)
    out["packages"] = {k: v for k, v in res["packages"].items() if k in wanted}
    out["findings"] = [d for d in res["findings"] if d["package"] in wanted]
    return out


def diff(base: dict, head: dict) -> Tuple[List[str], Dict[str, collections.Counter]]:
    old = {key_of(d): d for d in base["findings"]}
    new = {key_of(d): d for d in head["findings"]}
    lines: List[str] = []
    per_rule: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    by_pkg: Dict[str, List[Tuple[str, str, Finding]]] = collections.defaultdict(list)
    for k in sorted(set(old) | set(new)):
        if k in old and k in new:
            if old[k]["message"] != new[k]["message"]:
                by_pkg[str(new[k]["package"])].append(("~", k, new[k]))
                per_rule[str(new[k]["code"])]["changed"] += 1
            continue
        d = new.get(k) or old[k]
        sign = "+" if k in new else "-"
        by_pkg[str(d["package"])].append((sign, k, d))
        per_rule[str(d["code"])]["added" if sign == "+" else "removed"] += 1
    for pkg in sorted(by_pkg):
        items = by_pkg[pkg]
        lines.append(f"## {pkg}: +{sum(s == '+' for s, _, _ in items)} -{sum(s == '-' for s, _, _ in items)}"
                     f" ~{sum(s == '~' for s, _, _ in items)}")
        for sign, _, d in items:
            loc = d["location"]
            lines.append(f"{sign} {d['filename']}:{loc['line']}:{loc['column']}: {d['code']} {d['message']}")  # type: ignore[index]
        lines.append("")
    return lines, per_rule


def sample(findings: Sequence[Finding], n: int, seed: int) -> Dict[str, List[Finding]]:
    by_rule: Dict[str, List[Finding]] = collections.defaultdict(list)
    for d in findings:
        by_rule[str(d["code"])].append(d)
    out = {}
    for code, items in sorted(by_rule.items()):
        items = sorted(items, key=lambda d: (d["package"], d["filename"], d["location"]["line"], d["code"]))  # type: ignore[index]
        picked = items if len(items) <= n else random.Random(f"{seed}:{code}").sample(items, n)
        out[code] = sorted(picked, key=lambda d: (d["package"], d["filename"], d["location"]["line"]))  # type: ignore[index]
    return out


def load_review(path: Path = REVIEW) -> Dict[str, dict]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    judged = data.get("findings", {})
    for k, v in judged.items():
        if v.get("judgement") not in JUDGEMENTS:
            raise SystemExit(f"ecosystem: {path.name}: {k}: judgement must be one of {JUDGEMENTS}")
        if v.get("fix", "none") not in FIX_VERDICTS:
            raise SystemExit(f"ecosystem: {path.name}: {k}: fix must be one of {FIX_VERDICTS}")
    return judged


def precision_table(samples: Dict[str, List[Finding]], judged: Dict[str, dict], totals: Dict[str, int]) -> List[str]:
    lines = ["| rule | findings | sampled | judged | real | risky | false | precision | fixes judged | fixes right |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows = list(samples.items()) + [("all", [d for picked in samples.values() for d in picked])]
    for code, picked in rows:
        c = collections.Counter()
        fixes = collections.Counter()
        for d in picked:
            j = judged.get(key_of(d))
            if j is None:
                continue
            c[j["judgement"]] += 1
            c["judged"] += 1
            if d.get("fix") and j.get("fix", "none") != "none":
                fixes[j["fix"]] += 1
        prec = f"{(c['real'] + c['risky']) / c['judged']:.0%}" if c["judged"] else "—"
        nfix = fixes["right"] + fixes["wrong"]
        fixp = f"{fixes['right']} ({fixes['right'] / nfix:.0%})" if nfix else "—"
        total = sum(totals.values()) if code == "all" else totals.get(code, 0)
        lines.append(f"| {code} | {total} | {len(picked)} | {c['judged']} | {c['real']} | {c['risky']} | "
                     f"{c['false']} | {prec} | {nfix} | {fixp} |")
    return lines


def source_context(roots: Dict[str, Path], d: Finding, context: int = 3) -> List[str]:
    root = roots.get(str(d["package"]))
    if root is None:
        return []
    try:
        text = (root / str(d["filename"])).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    line = int(d["location"]["line"])  # type: ignore[index]
    lo, hi = max(line - 1 - context, 0), min(line + context, len(text))
    return [f"{'>' if i + 1 == line else ' '} {i + 1:5d}  {text[i]}" for i in range(lo, hi)]


def summary_table(res: dict) -> List[str]:
    codes = sorted({c for v in res["packages"].values() for c in v["per_rule"]})
    lines = ["| package | version | files | candidates | findings | " + " | ".join(codes) + " | wall s | internal errors |",
             "| --- | --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in codes) + " | ---: | ---: |"]
    tot = collections.Counter()
    for name, v in sorted(res["packages"].items()):
        lines.append(f"| {name} | {v['version']} | {v['files']} | {v['candidates'].get('any', '—')} | {v['findings']} | "
                     + " | ".join(str(v["per_rule"].get(c, "")) for c in codes)
                     + f" | {v['wall']:.1f} | {len(v['internal_errors'])} |")
        tot["files"] += v["files"]
        tot["candidates"] += v["candidates"].get("any", 0)
        tot["findings"] += v["findings"]
        tot["wall"] += v["wall"]
        tot["internal"] += len(v["internal_errors"])
        for c in codes:
            tot[c] += v["per_rule"].get(c, 0)
    lines.append(f"| **all ({len(res['packages'])})** | | {tot['files']} | {tot['candidates']} | {tot['findings']} | "
                 + " | ".join(str(tot[c]) for c in codes) + f" | {tot['wall']:.1f} | {tot['internal']} |")
    return lines


def _reused(path: Path, packages: Sequence[dict]) -> Optional[dict]:
    """The last run's results when they cover exactly these package versions."""
    try:
        res = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    have = {k: v["version"] for k, v in res.get("packages", {}).items()}
    if have != {p["package"]: p["version"] for p in packages}:
        print("ecosystem: the last results cover other packages; running devlint", file=sys.stderr)
        return None
    return res


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packages", nargs="+", metavar="NAME", help="only these packages of the manifest")
    ap.add_argument("--manifest", default=str(MANIFEST))
    ap.add_argument("--diff", metavar="BASE", help="list findings added and removed since commit BASE")
    ap.add_argument("--review", action="store_true", help="per-rule precision from the review file")
    ap.add_argument("--review-file", default=str(REVIEW))
    ap.add_argument("--worksheet", metavar="FILE", help="write the sampled findings not judged yet, with source")
    ap.add_argument("--sample", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--no-candidates", action="store_true", help="skip counting the pre-filter's candidate files")
    ap.add_argument("--reuse", action="store_true",
                    help="take the working tree's findings from the last run's results.json instead of running "
                    "devlint again (for --review/--worksheet after a run; never for --diff)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)

    # resolved first: HEAD may move while the working tree's run goes on
    base_commit = resolve_commit(args.diff) if args.diff else None
    packages = load_manifest(Path(args.manifest))
    if args.packages:
        unknown = sorted(set(args.packages) - {p["package"] for p in packages})
        if unknown:
            ap.error(f"not in the manifest: {', '.join(unknown)}")
        packages = [p for p in packages if p["package"] in args.packages]
    roots, problems = fetch_all(packages)

    out = Path(args.out)
    head = _reused(out / "results.json", packages) if args.reuse and not args.diff else None
    if head is None:
        head = run_all(sys.executable, packages, roots, candidates=not args.no_candidates, jobs=args.jobs)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(head, indent=1) + "\n", encoding="utf-8")
    report = ["# devlint ecosystem run", "", *summary_table(head), ""]
    internal = [f"{n}: {e}" for n, v in head["packages"].items() for e in v["internal_errors"]]
    if internal:
        report += ["## Internal errors", "", *[f"- {e}" for e in internal], ""]
    if problems:
        report += ["## Distributions that could not be fetched", "", *[f"- {e}" for e in problems], ""]

    if args.diff:
        base = base_results(str(base_commit), packages, roots, args.jobs)
        lines, per_rule = diff(base, head)
        report += [f"## Diff against {base.get('commit', args.diff)[:10]}", "",
                   "| rule | added | removed | message changed |", "| --- | ---: | ---: | ---: |"]
        for code in sorted(per_rule):
            c = per_rule[code]
            report.append(f"| {code} | {c['added']} | {c['removed']} | {c['changed']} |")
        if not per_rule:
            report.append("| (none) | 0 | 0 | 0 |")
        report += ["", *lines]

    if args.review or args.worksheet:
        versions = {p["package"]: p["version"] for p in packages}
        # a judgement holds for the version it was made on
        judged = {k: v for k, v in load_review(Path(args.review_file)).items()
                  if v.get("version") in (None, versions.get(k.split(":", 1)[0]))}
        totals = collections.Counter(str(d["code"]) for d in head["findings"])
        samples = sample(head["findings"], args.sample, args.seed)
        report += [f"## Review (sample {args.sample} per rule, seed {args.seed}; {Path(args.review_file).name})", "",
                   *precision_table(samples, judged, totals), ""]
        missing = [d for picked in samples.values() for d in picked if key_of(d) not in judged]
        report.append(f"Sampled findings not judged yet: {len(missing)}.")
        if args.worksheet:
            ws = ["# Findings to judge", "",
                  "Add each to bench/ecosystem_review.json under its key: judgement real|risky|false, reason, fix right|wrong|none.", ""]
            for d in missing:
                fix = d.get("fix")
                root = roots.get(str(d["package"]))
                ws += [f"## `{key_of(d)}`", "", f"{d['message']}", ""]
                if root is not None:
                    ws += [f"source: `{root / str(d['filename'])}`", ""]
                if fix:
                    ws += [f"fix ({fix['applicability']}): {fix['message']}", ""]  # type: ignore[index]
                ws += ["```", *source_context(roots, d), "```", ""]
            Path(args.worksheet).write_text("\n".join(ws) + "\n", encoding="utf-8")
            report.append(f"Worksheet: {args.worksheet}.")

    text = "\n".join(report) + "\n"
    (out / "report.md").write_text(text, encoding="utf-8")
    print(text)
    if problems:
        return 2
    return 1 if internal else 0


if __name__ == "__main__":
    sys.exit(main())
