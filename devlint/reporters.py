"""Reporters: text (with source line and caret), JSON, GitHub workflow
annotations and SARIF 2.1.0. They format; they never decide what is found."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from typing import TYPE_CHECKING, Dict, List, Sequence, TextIO, Type

from devlint import __version__
from devlint.diagnostic import Diagnostic

if TYPE_CHECKING:  # pragma: no cover - importing the rules imports libcst
    from devlint.rule import Rule

FORMATS = ("text", "json", "github", "sarif", "concise")


def _style(text: str, color: bool, code: str) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def applies(d: Diagnostic, unsafe: bool = False) -> bool:
    """Whether ``devlint fix --apply`` fixes ``d`` (``unsafe``: with --unsafe-fixes,
    or ``unsafe-fixes = true`` in the configuration): what ``[*]`` marks."""
    return d.fix is not None and (unsafe or d.fix.is_safe)


def hidden(d: Diagnostic, unsafe: bool = False) -> bool:
    """Whether only ``--unsafe-fixes`` would fix ``d`` (no ``[*]``)."""
    return d.fix is not None and not d.fix.is_safe and not unsafe


def report_text(diagnostics: Sequence[Diagnostic], out: TextIO, color: bool, show_source: bool = True,
                unsafe: bool = False) -> None:
    for d in diagnostics:
        fixable = " [*]" if applies(d, unsafe) else ""
        cell = f"{d.cell_name}:" if d.cell is not None else ""  # notebooks: the line is in the cell
        loc = f"{_style(d.path, color, '1')}:{cell}{d.line}:{d.col}:"
        out.write(f"{loc} {_style(d.code, color, '1;31')} {d.message}{fixable}\n")
        if show_source and d.source_line:
            line = d.source_line.expandtabs(4) if "\t" not in d.source_line[: d.col] else d.source_line
            prefix = d.source_line[: max(d.col - 1, 0)]
            pad = len(prefix.expandtabs(4)) if line is not d.source_line else len(prefix)
            width = (d.end_col - d.col) if d.end_line == d.line and d.end_col > d.col else 1
            out.write(f"    {line.rstrip()}\n")
            out.write(f"    {' ' * pad}{_style('^' * max(width, 1), color, '31')}\n")
        if d.fix is None and d.no_fix_reason and d.code != "DL000":
            out.write(f"    = no autofix: {d.no_fix_reason}\n")


def report_json(diagnostics: Sequence[Diagnostic], out: TextIO) -> None:
    json.dump([d.to_json() for d in diagnostics], out, indent=2)
    out.write("\n")


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def _in_cell(d: Diagnostic) -> str:
    return f" ({d.cell_name}, line {d.line}, column {d.col})"


def report_github(diagnostics: Sequence[Diagnostic], out: TextIO) -> None:
    for d in diagnostics:
        level = "error"
        path = d.path[2:] if d.path.startswith("./") else d.path
        if d.cell is not None:
            # a notebook: annotate the line of its JSON that holds the cell's line
            where = f",line={d.file_line}" if d.file_line else ""
            props = f"title={_escape_prop(f'devlint ({d.code})')},file={_escape_prop(path)}{where}"
            out.write(f"::{level} {props}::{_escape_data(f'{d.code} {d.message}{_in_cell(d)}')}\n")
            continue
        props = (
            f"title={_escape_prop(f'devlint ({d.code})')},file={_escape_prop(path)},"
            f"line={d.line},col={d.col},endLine={d.end_line or d.line},endColumn={d.end_col or d.col}"
        )
        out.write(f"::{level} {props}::{_escape_data(f'{d.code} {d.message}')}\n")


def _uri(path: str) -> str:
    uri = path.replace(os.sep, "/")
    return uri[2:] if uri.startswith("./") else uri


def _what_it_does(doc: str) -> str:
    """The first paragraph of a rule's "What it does", on one line."""
    m = re.search(r"## What it does\s*\n(.+?)(?:\n\n|\n##)", doc, re.S)
    return " ".join(m.group(1).split()) if m else ""


def report_sarif(diagnostics: Sequence[Diagnostic], rules: Dict[str, Type[Rule]], out: TextIO) -> None:
    rule_ids = sorted(rules)
    index = {code: i for i, code in enumerate(rule_ids)}
    driver_rules = []
    for code in rule_ids:
        r = rules[code]
        driver_rules.append(
            {
                "id": code,
                "name": r.name,
                "shortDescription": {"text": r.summary()},
                "fullDescription": {"text": _what_it_does(r.documentation()) or r.summary()},
                "help": {"text": r.documentation(), "markdown": r.documentation()},
                "properties": {"fixSafety": r.fix_safety},
                "defaultConfiguration": {"level": "error"},
            }
        )
    results = []
    for d in diagnostics:
        uri = d.path.replace(os.sep, "/")
        if uri.startswith("./"):
            uri = uri[2:]
        region = {
            "startLine": max(d.line, 1),
            "startColumn": max(d.col, 1),
            "endLine": max(d.end_line or d.line, 1),
            "endColumn": max(d.end_col or d.col, 1),
        }
        res = {
            "ruleId": d.code,
            "level": "error",
            "message": {"text": d.message},
            "locations": [
                {"physicalLocation": {"artifactLocation": {"uri": uri}, "region": region}}
            ],
        }
        if d.cell is not None:
            # a notebook: the region is the line of its JSON holding the cell's
            # line (when known); the cell position goes in the message and
            # properties; fixes (in cell coordinates) are left out
            res["message"]["text"] += _in_cell(d)
            phys = res["locations"][0]["physicalLocation"]
            if d.file_line:
                phys["region"] = {"startLine": d.file_line}
            else:
                del phys["region"]
            res["properties"] = {"cell": d.cell, "cellLabel": d.cell_name, "cellLine": d.line, "cellColumn": d.col}
        if d.related:
            res["relatedLocations"] = [
                {
                    "id": i,
                    "message": {"text": m},
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(p)},
                        "region": {"startLine": max(l, 1)},
                    },
                }
                for i, (p, l, m) in enumerate(d.related)
            ]
        if d.code in index:
            res["ruleIndex"] = index[d.code]
        if d.fix is not None and d.fix.edits and d.cell is None:
            res["fixes"] = [
                {
                    "description": {"text": d.fix.description or "devlint fix"},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": uri},
                            "replacements": [
                                {
                                    "deletedRegion": {
                                        "startLine": e.start_line,
                                        "startColumn": e.start_col,
                                        "endLine": e.end_line,
                                        "endColumn": e.end_col,
                                    },
                                    "insertedContent": {"text": e.content},
                                }
                                for e in d.fix.edits
                            ],
                        }
                    ],
                }
            ]
        results.append(res)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "devlint",
                        "version": __version__,
                        "rules": driver_rules,
                    }
                },
                "results": results,
            }
        ],
    }
    json.dump(doc, out, indent=2)
    out.write("\n")


def statistics(diagnostics: Sequence[Diagnostic], unsafe: bool = False) -> List[Dict[str, object]]:
    """Findings per rule, most frequent first: ``count``; ``fixable``: how many
    ``devlint fix --apply`` fixes; ``unsafe_fixable``: how many more only
    ``--unsafe-fixes`` would fix."""
    counts = Counter((d.code, d.name) for d in diagnostics)
    fixable = Counter(d.code for d in diagnostics if applies(d, unsafe))
    more = Counter(d.code for d in diagnostics if hidden(d, unsafe))
    return [
        {"code": code, "name": name, "count": n, "fixable": fixable[code], "unsafe_fixable": more[code]}
        for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def report_statistics(diagnostics: Sequence[Diagnostic], out: TextIO, unsafe: bool = False, as_json: bool = False) -> None:
    """One line per rule: count, code, ``[*]`` (``fix --apply`` fixes them
    all) / ``[-]`` (some of them) / blank, name. ``as_json``: the same as a list."""
    rows = statistics(diagnostics, unsafe)
    if as_json:
        json.dump(rows, out, indent=2)
        out.write("\n")
        return
    for row in rows:
        n, fixable = row["count"], row["fixable"]
        mark = "[*]" if fixable == n else ("[-]" if fixable else "   ")
        out.write(f"{n:5d}\t{row['code']}\t{mark} {row['name']}\n")


def summary_line(diagnostics: Sequence[Diagnostic], n_files_with: int, unsafe: bool = False) -> str:
    """``Found N problems in M files (K fixable with 'devlint fix --apply').``,
    then, when some fixes are unsafe and not enabled, a line saying how many."""
    n = len(diagnostics)
    if n == 0:
        return "All checks passed!"
    safe = sum(1 for d in diagnostics if applies(d, unsafe))
    more = sum(1 for d in diagnostics if hidden(d, unsafe))
    s = f"Found {n} problem{'s' if n != 1 else ''} in {n_files_with} file{'s' if n_files_with != 1 else ''}"
    if safe:
        s += f" ({safe} fixable with 'devlint fix --apply')"
    s += "."
    if more:
        s += "\n" + hidden_fixes_line(more)
    return s


def hidden_fixes_line(n: int) -> str:
    return f"{n} hidden fix{'es' if n != 1 else ''} can be enabled with the `--unsafe-fixes` option."

