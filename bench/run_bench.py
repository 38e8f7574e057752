#!/usr/bin/env python3
"""devlint's speed benchmark, side by side, in one command:

    .venv/bin/python bench/run_bench.py --corpus /work/corpus [--runs 3]
        [--corpora timm transformers] [--torchfix-venv /work/bench-venv]
        [--torchfix-runs N] [--no-verify-scan]

For every corpus, in rounds (each round runs every command once, so a busy
machine slows all of them alike), whole processes, timed from outside:

* ``devlint check`` cold (empty cache, default jobs) and warm (nothing changed);
* ``devlint check`` after one file of a copy changed (and that only it was re-checked),
  and of that file alone (the project's summaries from the cache of the runs before);
* ``devlint fix --apply`` on a fresh copy of the corpus;
* TorchFix 0.7 (``torchfix CORPUS``, its own venv: it pins libcst<1.6), ruff for reference;
* the floors: a one-process libcst parse of every file with the libcst devlint
  uses (``bench/parse_floor.py cst``) and CPython's ``ast.parse``;
* ``devlint check`` of one small file against ``python -c "import libcst"``.

It also checks that the ast candidate scan drops nothing: the findings with
and without it (``--no-scan``) must be identical on every corpus.

Wall = monotonic clock start..reap; CPU = user+sys of the process and the
children it waited for (os.wait4); peak = largest single process RSS. Medians
of ``--runs``; a markdown table and a JSON file land in ``bench/out/``.
Create the TorchFix venv with
``python3 -m venv /work/bench-venv && /work/bench-venv/bin/pip install -r ../shared/bench/requirements.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SMALL_FILE = os.path.join(REPO, "fixtures", "DL001", "bad_seq2seq_positions.py")


def run_once(cmd: List[str], env: Optional[Dict[str, str]] = None, log: Optional[str] = None, cwd: Optional[str] = None):
    out = open(log, "ab") if log else subprocess.DEVNULL
    try:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, cwd=cwd)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
    finally:
        if log:
            out.close()
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "peak": ru.ru_maxrss / 1024.0, "rc": os.waitstatus_to_exitcode(status)}


class Row:
    def __init__(self, key: str, label: str, cmd: Callable[[int], List[str]], runs: int,
                 env: Optional[Callable[[int], Dict[str, str]]] = None, before: Optional[Callable[[int], None]] = None,
                 cwd: Optional[str] = None) -> None:
        self.key, self.label, self.cmd, self.runs = key, label, cmd, runs
        self.env, self.before, self.cwd = env, before, cwd
        self.samples: List[dict] = []
        self.shown_cmd = ""

    def run(self, i: int, log: str) -> None:
        if i >= self.runs:
            return
        if self.before:
            self.before(i)
        cmd = self.cmd(i)
        self.shown_cmd = " ".join(cmd)
        env = dict(os.environ)
        if self.env:
            env.update(self.env(i))
        s = run_once(cmd, env, log, self.cwd)
        self.samples.append(s)
        print(f"  {self.label}: {s['wall']:.2f} s wall, {s['cpu']:.2f} s CPU, {s['peak']:.0f} MiB, rc={s['rc']}", flush=True)

    def stat(self, what: str) -> float:
        return statistics.median(s[what] for s in self.samples) if self.samples else float("nan")

    def summary(self) -> dict:
        if not self.samples:
            return {"label": self.label, "runs": 0}
        walls = [s["wall"] for s in self.samples]
        return {
            "label": self.label, "command": self.shown_cmd, "runs": len(self.samples),
            "wall": self.stat("wall"), "wall_min": min(walls), "wall_max": max(walls),
            "cpu": self.stat("cpu"), "peak": max(s["peak"] for s in self.samples),
            "rc": sorted({s["rc"] for s in self.samples}),
        }


def load_info() -> str:
    parts = ["load average %.2f %.2f %.2f" % os.getloadavg()]
    try:
        with open("/proc/pressure/cpu") as fh:
            parts.append("cpu pressure: " + fh.readline().strip())
    except OSError:
        pass
    return "; ".join(parts)


def findings(devlint: List[str], corpus: str, extra: List[str], cache: str) -> List[tuple]:
    env = dict(os.environ, DEVLINT_CACHE_DIR=cache)
    p = subprocess.run(devlint + ["check", "--no-cache", "--output-format", "json", *extra, corpus],
                       capture_output=True, text=True, env=env)
    data = json.loads(p.stdout or "[]")
    return sorted((d["filename"], d["location"]["line"], d["location"]["column"], d["code"], d["message"]) for d in data)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="/work/corpus", help="folder holding timm/, transformers/ (make_corpus.sh)")
    ap.add_argument("--corpora", nargs="+", default=["timm", "transformers"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--torchfix-venv", default="/work/bench-venv")
    ap.add_argument("--torchfix-runs", type=int, default=None, help="runs of TorchFix per corpus (default: --runs)")
    ap.add_argument("--torchfix-corpora", nargs="*", default=None, help="corpora to run TorchFix on (default: all)")
    ap.add_argument("--rows", nargs="*", default=None,
                    help="only these rows: cold floor ast warm touched touched_one fix torchfix ruff one import (default: all)")
    ap.add_argument("--no-verify-scan", action="store_true", help="skip the with/without-scan findings comparison")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log = os.path.join(a.out, f"log-{stamp}.txt")
    work = tempfile.mkdtemp(prefix="devlint-bench-")
    py = sys.executable
    devlint = [py, "-m", "devlint"]
    # what a normal install has: byte-compiled devlint (this machine sets PYTHONDONTWRITEBYTECODE)
    subprocess.run([py, "-m", "compileall", "-q", os.path.join(REPO, "devlint"), os.path.join(REPO, "rules")], check=False)
    tf_bin = os.path.join(a.torchfix_venv, "bin")
    torchfix = os.path.join(tf_bin, "torchfix")
    ruff = os.path.join(tf_bin, "ruff")
    tf_runs = a.runs if a.torchfix_runs is None else a.torchfix_runs
    versions = {
        "python": sys.version.split()[0],
        "libcst (devlint)": subprocess.run([py, "-c", "import libcst, importlib.metadata as m; print(m.version('libcst'))"], capture_output=True, text=True).stdout.strip(),
        "devlint": subprocess.run(devlint + ["--version"], capture_output=True, text=True).stdout.strip(),
    }
    if os.path.exists(torchfix):
        versions["torchfix venv"] = subprocess.run(
            [os.path.join(tf_bin, "python"), "-c", "import importlib.metadata as m; print('torchfix', m.version('torchfix'), 'libcst', m.version('libcst'), 'ruff', m.version('ruff'))"],
            capture_output=True, text=True).stdout.strip()
    report: Dict[str, dict] = {"versions": versions, "cores": len(os.sched_getaffinity(0)), "load_before": load_info(), "corpora": {}}
    print(json.dumps(versions), report["load_before"], flush=True)

    for name in a.corpora:
        corpus = os.path.join(a.corpus, name)
        files = [os.path.join(d, f) for d, _, fs in os.walk(corpus) for f in fs if f.endswith(".py")]
        lines = 0
        for f in files:
            with open(f, "rb") as fh:
                lines += fh.read().count(b"\n")
        print(f"== {name}: {len(files)} files, {lines} lines", flush=True)
        base = os.path.join(work, name)
        os.makedirs(base)
        warm_cache = os.path.join(base, "warm-cache")
        touched_copy = os.path.join(base, "touched")
        shutil.copytree(corpus, touched_copy)
        touched_cache = os.path.join(base, "touched-cache")
        fresh_env = lambda i, n=name: {"DEVLINT_CACHE_DIR": os.path.join(base, f"cold-cache-{i}")}
        # one file to edit between runs: the largest that mentions torch
        victim = max((f for f in files if b"torch" in open(f, "rb").read()), key=os.path.getsize)
        victim_copy = os.path.join(touched_copy, os.path.relpath(victim, corpus))

        def touch(i, path=victim_copy):
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(f"\n# devlint bench edit {i}\n")

        def fresh_copy(i, name=name, corpus=corpus, base=base):
            dst = os.path.join(base, "fix-copy")
            if os.path.exists(dst):
                shutil.rmtree(dst)
            shutil.copytree(corpus, dst)

        rows = [
            Row("cold", "devlint check, cold (empty cache), default jobs", lambda i: devlint + ["check", "--output-format", "concise", corpus], a.runs, env=fresh_env),
            Row("floor", "libcst.parse_module, 1 process (floor)", lambda i: [py, os.path.join(HERE, "parse_floor.py"), "cst", corpus], a.runs),
            Row("ast", "ast.parse, 1 process (reference)", lambda i: [py, os.path.join(HERE, "parse_floor.py"), "ast", corpus], a.runs),
            Row("warm", "devlint check, warm (nothing changed)", lambda i: devlint + ["check", "--output-format", "concise", corpus], a.runs,
                env=lambda i: {"DEVLINT_CACHE_DIR": warm_cache}),
            Row("touched", "devlint check, warm, one file changed", lambda i: devlint + ["check", "-v", "--output-format", "concise", touched_copy], a.runs,
                env=lambda i: {"DEVLINT_CACHE_DIR": touched_cache}, before=touch),
            Row("touched_one", "devlint check of that changed file alone (project summaries from the cache)",
                lambda i: devlint + ["check", "--output-format", "concise", victim_copy], a.runs,
                env=lambda i: {"DEVLINT_CACHE_DIR": touched_cache}, before=lambda i: touch(1000 + i)),
            Row("fix", "devlint fix --apply on a fresh copy (empty cache)", lambda i: devlint + ["fix", "--apply", os.path.join(base, "fix-copy")], a.runs,
                env=lambda i: {"DEVLINT_CACHE_DIR": os.path.join(base, f"fix-cache-{i}")}, before=fresh_copy),
        ]
        if os.path.exists(torchfix) and tf_runs > 0 and (a.torchfix_corpora is None or name in a.torchfix_corpora):
            rows.append(Row("torchfix", "TorchFix 0.7 (check only, default jobs)", lambda i: [torchfix, corpus], tf_runs))
        if os.path.exists(ruff):
            rows.append(Row("ruff", "ruff check --select ALL (reference)", lambda i: [ruff, "check", "--no-cache", "--isolated", "--output-format", "concise", "--select", "ALL", corpus], a.runs))
        if name == a.corpora[0]:
            rows.append(Row("one", f"devlint check one small file ({os.path.basename(SMALL_FILE)}, no cache)",
                            lambda i: devlint + ["check", "--no-cache", SMALL_FILE], a.runs))
            rows.append(Row("import", 'python -c "import libcst"', lambda i: [py, "-c", "import libcst"], a.runs))
        if a.rows is not None:
            rows = [r for r in rows if r.key in a.rows]
        keys = {r.key for r in rows}
        # fill the warm caches (not timed), only those a selected row reads
        if "warm" in keys:
            subprocess.run(devlint + ["check", corpus], env=dict(os.environ, DEVLINT_CACHE_DIR=warm_cache), capture_output=True)
        rechecked_note: List[str] = []
        if keys & {"touched", "touched_one"}:
            subprocess.run(devlint + ["check", touched_copy], env=dict(os.environ, DEVLINT_CACHE_DIR=touched_cache), capture_output=True)
            # one file changed: exactly one file must be re-checked
            touch(-1)
            p = subprocess.run(devlint + ["check", "-v", touched_copy], env=dict(os.environ, DEVLINT_CACHE_DIR=touched_cache), capture_output=True, text=True)
            rechecked_note = [l for l in p.stderr.splitlines() if "from the cache" in l]
        for i in range(max(r.runs for r in rows)):
            print(f"-- round {i + 1} ({load_info()})", flush=True)
            for r in rows:
                r.run(i, log)
        result = {"files": len(files), "lines": lines, "rows": {r.key: r.summary() for r in rows}, "load_after": load_info(),
                  "one_file_changed": rechecked_note}
        if not a.no_verify_scan:
            cache = os.path.join(base, "verify-cache")
            with_scan = findings(devlint, corpus, [], cache)
            without = findings(devlint, corpus, ["--no-scan"], cache)
            result["scan_check"] = {"findings_with_scan": len(with_scan), "findings_without_scan": len(without), "identical": with_scan == without}
            print(f"  scan check: {result['scan_check']}", flush=True)
        report["corpora"][name] = result
        shutil.rmtree(base, ignore_errors=True)

    shutil.rmtree(work, ignore_errors=True)
    md = render(report)
    print(md)
    with open(os.path.join(a.out, f"results-{stamp}.json"), "w") as fh:
        json.dump(report, fh, indent=2)
    with open(os.path.join(a.out, f"results-{stamp}.md"), "w") as fh:
        fh.write(md)
    return 0


def render(report: dict) -> str:
    out = [f"versions: {json.dumps(report['versions'])}; {report['cores']} usable cores", f"load before: {report['load_before']}", ""]
    for name, res in report["corpora"].items():
        rows = res["rows"]
        out.append(f"### {name} ({res['files']} files, {res['lines']} lines)")
        out.append("")
        out.append("| command | runs | wall s median (min-max) | CPU s | peak MiB |")
        out.append("|---|--:|--:|--:|--:|")
        for r in rows.values():
            if r["runs"]:
                out.append(f"| {r['label']} | {r['runs']} | {r['wall']:.2f} ({r['wall_min']:.2f}-{r['wall_max']:.2f}) | {r['cpu']:.2f} | {r['peak']:.0f} |")
        out.append("")

        def ratio(a, b, what="wall"):
            if a in rows and b in rows and rows[a].get("runs") and rows[b].get("runs"):
                return rows[a][what] / rows[b][what]
            return None

        checks = [
            ("TorchFix / devlint cold (wall)", ratio("torchfix", "cold"), ">= 20"),
            ("TorchFix / devlint cold (CPU)", ratio("torchfix", "cold", "cpu"), ""),
            ("devlint cold / libcst parse floor (wall)", ratio("cold", "floor"), "<= 0.75"),
            ("warm / cold (wall)", ratio("warm", "cold"), "<= 0.05"),
            ("one file changed / cold (wall)", ratio("touched", "cold"), ""),
            ("fix --apply / cold check (wall)", ratio("fix", "cold"), "<= 1.5"),
            ("one small file / import libcst (wall)", ratio("one", "import"), "<= 2"),
            ("one changed file of the project, alone / import libcst (wall)", ratio("touched_one", "import"), "<= 2"),
        ]
        out.append("| ratio | value | target |")
        out.append("|---|--:|---|")
        for label, value, target in checks:
            if value is not None:
                out.append(f"| {label} | {value:.3f} | {target} |")
        peak = max((r["peak"] for k, r in rows.items() if k in ("cold", "warm", "touched", "touched_one", "fix", "one") and r.get("runs")), default=0)
        out.append(f"| peak memory of any devlint process (MiB) | {peak:.0f} | <= 250 |")
        out.append("")
        out.append(f"one file changed: {'; '.join(res.get('one_file_changed', []))}")
        if "scan_check" in res:
            out.append(f"scan check (findings with / without the ast scan): {res['scan_check']}")
        out.append(f"load after: {res['load_after']}")
        out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
