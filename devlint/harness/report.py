"""Rendering the harness's results: a table with one row per case, the full
messages below it, and a JSON form."""

from __future__ import annotations

import json
from typing import IO, List, Sequence

from devlint.harness.supervise import CONFIRMED, ERROR, NOT_CONFIRMED


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _outputs(outs: Sequence[dict]) -> str:
    if not outs:
        return "no tensors"
    shown = ", ".join(f"{tuple(o['shape'])} on {o['device']}" for o in outs[:2])
    return shown + (f" (+{len(outs) - 2} more)" if len(outs) > 2 else "")


def original_cell(r: dict) -> str:
    o = r.get("original")
    if not o:
        return "-"
    if o["status"] == "reproduced":
        return f"{o['error']['type']}: {o['error']['message']}"
    return o["status"]


def fixed_cell(r: dict) -> str:
    f = r.get("fixed")
    if not f:
        return "-"
    if f["status"] == "ok":
        return "ok: " + _outputs(f.get("outputs", []))
    if "error" in f:
        return f"{f['status']}: {f['error']['type']}: {f['error']['message']}"
    return f"{f['status']}: {f.get('detail', '')}"


def equivalence_cell(r: dict) -> str:
    e = r.get("equivalence")
    return e["status"] if e else "-"


def error_text(r: dict) -> str:
    for key in ("file_error", "case_error", "timeout", "crash", "harness_error"):
        if key in r:
            return f"{key.replace('_', ' ')}: {r[key]}"
    return ""


def placement_cell(r: dict) -> str:
    p = r.get("placement", "-")
    if p in ("data_parallel", "as_written"):
        return f"{p} x{r.get('devices', '?')}"
    return str(p)


def report_text(results: List[dict], out: IO[str], torch_version: str = "") -> None:
    headers = ["FILE", "CASE", "RULES", "PLACEMENT", "DEVICES", "ORIGINAL", "FIXED", "EQUIVALENCE", "VERDICT"]
    rows = []
    for r in results:
        err = error_text(r)
        rows.append(
            [
                r.get("file", "-"),
                r.get("case", "-"),
                ",".join(r.get("rules", [])) or "-",
                placement_cell(r),
                r.get("device_path", "-"),
                _shorten(original_cell(r) if not err else err, 46),
                _shorten(fixed_cell(r), 34),
                equivalence_cell(r),
                r.get("verdict", ERROR).upper() if r.get("verdict") != CONFIRMED else CONFIRMED,
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]
    for line in [headers] + rows:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() + "\n")
    out.write("\n")
    for r in results:
        out.write(f"{r.get('file', '-')}::{r.get('case', '-')}  [{r.get('verdict')}]\n")
        err = error_text(r)
        if err:
            for i, ln in enumerate(err.splitlines()):
                out.write(("  error     " if i == 0 else "            ") + ln + "\n")
        o = r.get("original")
        if o:
            text = original_cell(r)
            if o["status"] == "reproduced":
                e = o["error"]
                where = ", ".join(x for x in (e.get("phase"), e.get("replica"), e.get("line")) if x)
                text += f"  ({where})" if where else ""
            elif "detail" in o:
                text += f": {o['detail']}"
            out.write(f"  original  {text}\n")
        if r.get("fixed"):
            out.write(f"  fixed     {fixed_cell(r)}\n")
        e = r.get("equivalence")
        if e:
            out.write(f"  one device  {e['status']}: {e.get('detail', '')}\n")
    out.write(summary_line(results, torch_version) + "\n")


def summary_line(results: List[dict], torch_version: str = "") -> str:
    n = len(results)
    counts = {k: sum(1 for r in results if r.get("verdict") == k) for k in (CONFIRMED, NOT_CONFIRMED, ERROR)}
    paths = sorted({r["device_path"] for r in results if r.get("device_path")})
    line = (
        f"{n} case{'s' if n != 1 else ''}: {counts[CONFIRMED]} confirmed, "
        f"{counts[NOT_CONFIRMED]} not confirmed, {counts[ERROR]} error{'s' if counts[ERROR] != 1 else ''}"
    )
    if paths:
        line += f"; devices: {'; '.join(paths)}"
    return line


def report_json(results: List[dict], out: IO[str]) -> None:
    counts = {k: sum(1 for r in results if r.get("verdict") == k) for k in (CONFIRMED, NOT_CONFIRMED, ERROR)}
    doc = {
        "version": 1,
        "cases": results,
        "summary": {"cases": len(results), "confirmed": counts[CONFIRMED], "not_confirmed": counts[NOT_CONFIRMED], "errors": counts[ERROR]},
    }
    out.write(json.dumps(doc, indent=2, default=str) + "\n")


def exit_code(results: List[dict]) -> int:
    if not results or any(r.get("verdict") == ERROR for r in results):
        return 2 if results else 1
    return 0 if all(r.get("verdict") == CONFIRMED for r in results) else 1
