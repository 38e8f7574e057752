#!/usr/bin/env python3
"""Run the runtime harness over every fixture that carries cases, on this
machine's real CUDA devices (cuda:0 + cpu with one GPU), and print a short
table. One command, a few minutes:

    python bench/gpu_harness.py [--simulate] [--json OUT.json] [--timeout S] [-j N]

Exit 0 when every case is confirmed. Paste the printed table, the GPU model
and the date into docs/harness.md ("Last run on real GPUs").
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
try:  # an installed devlint (wheel on a bare GPU machine) has devlint.rules;
    import devlint.rules  # noqa: F401  # the bare checkout alone does not
except ImportError:
    sys.path.insert(0, str(ROOT))

from devlint.harness import declares_cases, job_for_text, verify_jobs  # noqa: E402
from devlint.harness.report import exit_code, summary_line  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulate", action="store_true", help="fake CUDA devices instead of the real ones")
    ap.add_argument("--json", help="also write the full results here")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    ap.add_argument("-j", "--jobs", type=int, default=4, help="child processes at once")
    args = ap.parse_args()

    import torch  # only to name the machine; cases run in child processes

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = sorted({torch.cuda.get_device_name(i) for i in range(gpus)})
    print(f"# {datetime.date.today()}  torch {torch.__version__}  CUDA {torch.version.cuda}  GPUs: {gpus} {', '.join(names)}")
    if gpus == 0 and not args.simulate:
        print("no CUDA device: the harness will take the simulated path (use a GPU machine for the real one)")

    files = sorted(p for p in (ROOT / "fixtures").glob("DL*/bad_*.py") if p.name.count(".") == 1)
    files = [p for p in files if declares_cases(p.read_text())]
    jobs = [job_for_text(str(p.relative_to(ROOT)), p.read_text()) for p in files]
    start = time.monotonic()
    results = verify_jobs(jobs, simulate=args.simulate, timeout=args.timeout, workers=args.jobs)
    took = time.monotonic() - start

    rows = [("fixture", "case", "path", "verdict", "original error")]
    for r in results:
        err = r.get("original", {}).get("error")
        first = f"{err['type']}: {err['message']}" if err else r.get("original", {}).get("status", "") or next(
            (f"{k}: {r[k]}" for k in ("crash", "timeout", "case_error", "file_error", "harness_error") if k in r), ""
        )
        first = " ".join(first.split())
        rows.append((r["file"].replace("fixtures/", ""), r["case"], r.get("device_path", "-"), r["verdict"], first[:70]))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print(summary_line(results) + f"; {took:.0f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main())
