"""Rendering the harness's results: a table with one row per case that fits
a 100-column terminal (long cells elided with "…"), the full messages below
it, and a JSON form with everything untruncated."""

from __future__ import annotations

import json
from typing import IO, List, Sequence

from devlint.harness.supervise import (
    CANNOT_SIMULATE,
    CONFIRMED,
    ERROR,
    FIX_FAILED,
    MISSED,
    NO_BUG,
    NOT_REPRODUCED,
    PASSING,
    VERDICTS,
    simulation_text,
)

#: the text table's width: it fits a 100-column terminal
TABLE_WIDTH = 100


def _shorten(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    if width <= 1:
        return text[:width]
    return text if len(text) <= width else text[: width - 1] + "…"


def _shorten_middle(text: str, width: int) -> str:
    """Elided in the middle: a path's folder (the rule) and its end (the
    file and the case) say more than what lies between."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    head = (width - 1) // 3
    # keep the first two folders (``fixtures/DL005/``) when they fit in 45%
    parts = text.split("/")
    if len(parts) > 2 and len(parts[0]) + len(parts[1]) + 2 <= width * 0.45:
        head = len(parts[0]) + len(parts[1]) + 2
    tail = width - 1 - head
    return text[:head] + "…" + text[len(text) - tail:]


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
    if o["status"] == "cannot simulate":
        return "cannot simulate: " + simulation_text(o.get("error", {}))
    return o["status"]


def fixed_cell(r: dict) -> str:
    f = r.get("fixed")
    if not f:
        return "-"
    if f["status"] == "ok":
        return "ok: " + _outputs(f.get("outputs", []))
    if f["status"] == "cannot simulate":
        return "cannot simulate: " + simulation_text(f.get("error", {}))
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
    if p in ("data_parallel", "as_written", "ddp"):
        return f"{p} x{r.get('devices', '?')}"
    return str(p)


def verdict_cell(r: dict) -> str:
    """Passing verdicts in lower case, the others in capitals."""
    v = r.get("verdict", ERROR)
    return v if v in PASSING or v == CANNOT_SIMULATE else v.upper()


def _table(results: List[dict], width: int) -> List[str]:
    headers = ["CASE", "PLACEMENT", "ORIGINAL", "VERDICT"]
    rows = []
    for r in results:
        err = error_text(r)
        rows.append([f"{r.get('file', '-')}::{r.get('case', '-')}", placement_cell(r), err or original_cell(r), verdict_cell(r)])
    gap = 2
    fixed_widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]
    place, verdict = fixed_widths[1], fixed_widths[3]
    room = max(20, width - place - verdict - 3 * gap)
    case_nat, orig_nat = fixed_widths[0], fixed_widths[2]
    if case_nat + orig_nat <= room:
        case_w, orig_w = case_nat, orig_nat
    else:
        # CASE gets what ORIGINAL leaves, and at least half the room
        case_w = min(case_nat, max(room - orig_nat, room // 2))
        orig_w = max(len(headers[2]), room - case_w)
    widths = [case_w, place, orig_w, verdict]
    out = []
    for line in [headers] + rows:
        cells = [
            _shorten_middle(line[0], widths[0]),
            _shorten(line[1], widths[1]),
            _shorten(line[2], widths[2]),
            _shorten(line[3], widths[3]),
        ]
        out.append((" " * gap).join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
    return out


def report_text(results: List[dict], out: IO[str], torch_version: str = "", width: int = TABLE_WIDTH) -> None:
    for line in _table(results, width):
        out.write(line + "\n")
    out.write("\n")
    for r in results:
        out.write(f"{r.get('file', '-')}::{r.get('case', '-')}  [{r.get('verdict')}]\n")
        if r.get("why"):
            out.write(f"  why       {r['why']}\n")
        err = error_text(r)
        if err:
            for i, ln in enumerate(err.splitlines()):
                out.write(("  error     " if i == 0 else "            ") + ln + "\n")
        findings = r.get("findings") or []
        if findings:
            shown = "; ".join(
                f"{f['code']} {f['path']}:{f['line']}{'' if f.get('reached') else ' (not reached)'}" for f in findings
            )
            out.write(f"  findings  {shown}\n")
        o = r.get("original")
        if o:
            text = original_cell(r)
            if o["status"] == "reproduced":
                e = o["error"]
                where = ", ".join(x for x in (e.get("phase"), e.get("replica"), e.get("line")) if x)
                text += f"  ({where})" if where else ""
            elif "detail" in o and o["status"] != "cannot simulate":
                text += f": {o['detail']}"
            out.write(f"  original  {text}\n")
        if r.get("fixed"):
            out.write(f"  fixed     {fixed_cell(r)}\n")
        e = r.get("equivalence")
        if e:
            out.write(f"  one device  {e['status']}: {e.get('detail', '')}\n")
    out.write(summary_line(results, torch_version) + "\n")


def counts(results: List[dict]) -> dict:
    return {k: sum(1 for r in results if r.get("verdict") == k) for k in VERDICTS}


def summary_line(results: List[dict], torch_version: str = "") -> str:
    n = len(results)
    c = counts(results)
    parts = [f"{c[CONFIRMED]} confirmed"]
    for k in (NO_BUG, NOT_REPRODUCED, FIX_FAILED, MISSED, CANNOT_SIMULATE):
        if c[k]:
            parts.append(f"{c[k]} {k}")
    parts.append(f"{c[ERROR]} error{'s' if c[ERROR] != 1 else ''}")
    line = f"{n} case{'s' if n != 1 else ''}: " + ", ".join(parts)
    paths = sorted({r["device_path"] for r in results if r.get("device_path")})
    if paths:
        line += f"; devices: {'; '.join(paths)}"
    return line


def report_json(results: List[dict], out: IO[str]) -> None:
    c = counts(results)
    summary = {"cases": len(results)}
    summary.update({k.replace(" ", "_") if k != ERROR else "errors": c[k] for k in VERDICTS})
    doc = {"version": 2, "cases": results, "summary": summary}
    out.write(json.dumps(doc, indent=2, default=str) + "\n")


def exit_code(results: List[dict], strict: bool = False) -> int:
    """2 on any error; 1 when no case ran or any verdict does not pass
    (``cannot simulate`` passes unless ``strict``); else 0."""
    if not results:
        return 1
    if any(r.get("verdict") == ERROR for r in results):
        return 2
    passing = set(PASSING) | (set() if strict else {CANNOT_SIMULATE})
    return 0 if all(r.get("verdict") in passing for r in results) else 1


__all__ = [
    "FIX_FAILED", "MISSED", "NOT_REPRODUCED", "counts", "exit_code", "report_json", "report_text", "summary_line",
]
