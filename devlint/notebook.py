"""Jupyter notebooks (``.ipynb``): checked and fixed like Python files.

The code cells are joined into one module (so a model defined in one cell and
trained in another is seen whole), each after a separator comment line;
IPython syntax (``%time``, ``!pip``, ``x = !ls``, ``obj?``) is masked as
``pass`` lines and restored after fixing; cells whose cell magic is not
Python (``%%bash``, ``%%writefile``...) are left out. Findings are mapped back
to the cell and the line in it: ``cell`` is its 1-based position among all the
notebook's cells (markdown included, to find it in the JSON), ``cell_label``
the ``In [N]`` Jupyter shows (the execution count, else the position among
the code cells). Fixes rewrite only the changed cells' source;
the notebook is written back with the same JSON layout (indent, key order,
escaping, trailing newline, line endings), metadata and outputs, and not at
all when that layout cannot be reproduced byte for byte.

Only the standard ``json`` module is used: no nbformat at run time.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from devlint.diagnostic import Diagnostic, Edit, FileResult

NOTEBOOK_SUFFIX = ".ipynb"
#: a line that cannot occur in a real cell; the engine sees it as a comment
_SEPARATOR = "# devlint-notebook-cell-7f3a9c: "
#: cell magics whose body is Python (only the magic line is masked)
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit", "snakeviz", "tensorboard"})
_ASSIGN_MAGIC = re.compile(r"^\s*[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[%!]")
_MAX_FIX_PASSES = 3


class NotebookError(Exception):
    """A file that is not a notebook devlint can read; the message is one line."""


@dataclass
class Cell:
    index: int  # 1-based position among all cells
    source: str  # the cell's text, as stored
    masked: str  # what the engine sees
    masks: Dict[str, str]  # placeholder line -> original line
    stored_as_list: bool
    #: the N of ``In [N]`` as Jupyter shows it: the cell's execution count when
    #: it has one, else its 1-based position among the code cells
    number: int = 0


@dataclass
class Notebook:
    data: Dict[str, Any]
    text: str
    cells: List[Cell]
    #: json.dumps keyword arguments (+ trailing text) that reproduce ``text``
    #: exactly, or None when no layout tried does
    style: Optional[Tuple[Dict[str, Any], str]]
    crlf: bool


@dataclass
class _Joined:
    """The code cells as one module, and where each cell starts in it."""

    text: str
    cells: List[Cell]
    starts: List[int] = field(default_factory=list)  # 1-based first line of each cell's text

    def locate(self, line: int) -> Optional[Tuple[Cell, int]]:
        for cell, start in zip(reversed(self.cells), reversed(self.starts)):
            if line >= start:
                n = max(len(cell.masked.splitlines()), 1)
                return (cell, line - start + 1) if line - start < n else None
        return None


# --------------------------------------------------------------------------
# reading


def read_notebook(raw: bytes) -> Notebook:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not a notebook: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc))
        where = f" at line {exc.lineno} column {exc.colno}" if hasattr(exc, "lineno") else ""
        raise NotebookError(f"not a notebook: invalid JSON ({msg}{where})") from None
    if not isinstance(data, dict):
        raise NotebookError("not a notebook: the JSON is not an object")
    if "worksheets" in data or (isinstance(data.get("nbformat"), int) and data["nbformat"] < 4):
        raise NotebookError("nbformat 3 notebooks are not supported (upgrade: jupyter nbconvert --to notebook --inplace)")
    cells = data.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("not a notebook: no 'cells' list")
    code_cells = []
    position = 0  # among the code cells
    for i, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        position += 1
        count = cell.get("execution_count")
        number = count if type(count) is int and count >= 0 else position
        src = cell.get("source", "")
        if isinstance(src, list) and all(isinstance(s, str) for s in src):
            source, as_list = "".join(src), True
        elif isinstance(src, str):
            source, as_list = src, False
        else:
            raise NotebookError(f"not a notebook: cell {i} has a source that is neither text nor a list of lines")
        masked = mask_ipython(source)
        if masked is None:
            continue
        code_cells.append(Cell(i, source, masked[0], masked[1], as_list, number))
    crlf = "\r\n" in text
    return Notebook(data, text, code_cells, _find_style(data, text.replace("\r\n", "\n")), crlf)


def is_python_notebook(nb: Notebook) -> bool:
    meta = nb.data.get("metadata")
    if not isinstance(meta, dict):
        return True
    for lang in (
        (meta.get("kernelspec") or {}).get("language") if isinstance(meta.get("kernelspec"), dict) else None,
        (meta.get("language_info") or {}).get("name") if isinstance(meta.get("language_info"), dict) else None,
    ):
        if isinstance(lang, str) and lang:
            return lang.lower() == "python"
    return True


def _find_style(data: Any, text: str) -> Optional[Tuple[Dict[str, Any], str]]:
    """The json.dumps options (and trailing text) that write ``data`` back as
    exactly ``text``."""
    m = re.match(r"[{\[]\n( +|\t)", text)
    indents: List[Any] = [m.group(1) if m.group(1) == "\t" else len(m.group(1))] if m else [None]
    trailing = text[len(text.rstrip()):]
    for indent in indents:
        separators = [(",", ": ")] if indent is not None else [(", ", ": "), (",", ":")]
        for sep in separators:
            for ensure_ascii in (False, True):
                kw = {"indent": indent, "separators": sep, "ensure_ascii": ensure_ascii}
                if json.dumps(data, **kw) + trailing == text:
                    return kw, trailing
    return None


# --------------------------------------------------------------------------
# IPython syntax


def _logical_starts(lines: Sequence[str]) -> List[bool]:
    """For each line: does it start a new statement (outside brackets, strings
    and backslash continuations)? A crude tokenizer, enough to tell a line
    magic from ``!= b`` or ``% args`` continuing an expression."""
    starts = []
    depth = 0
    quote: Optional[str] = None  # the open string's delimiter
    continued = False
    for line in lines:
        starts.append(depth == 0 and quote is None and not continued)
        continued = False
        i = 0
        while i < len(line):
            c = line[i]
            if quote is not None:
                if c == "\\":
                    i += 2
                    continue
                if line.startswith(quote, i):
                    i += len(quote)
                    quote = None
                    continue
                i += 1
                continue
            if c == "#":
                break
            if c in "\"'":
                quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else c
                i += len(quote)
                continue
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(depth - 1, 0)
            i += 1
        if quote is not None and len(quote) == 1:
            quote = None  # an unterminated one-line string ends with its line
        if line.rstrip("\r\n").endswith("\\") and quote is None:
            continued = True
    return starts


def _is_magic(line: str) -> bool:
    s = line.strip()
    if not s or s.startswith("#"):
        return False
    if s[0] in "%!?" and not s.startswith("!="):
        return True
    if s.endswith("?") and not s.endswith("??=") and re.match(r"^[\w.\[\]()'\"]+\?{1,2}$", s):
        return True  # obj? / obj.attr??
    return bool(_ASSIGN_MAGIC.match(line))


def mask_ipython(source: str) -> Optional[Tuple[str, Dict[str, str]]]:
    """The cell's text with IPython-only lines replaced by ``pass`` lines
    (indentation kept, one unique placeholder per line), and the map back;
    None for a cell whose cell magic is not Python."""
    lines = source.splitlines(keepends=True)
    first = next((l for l in lines if l.strip()), "")
    if first.lstrip().startswith("%%"):
        name = first.lstrip()[2:].split(None, 1)[0] if first.lstrip()[2:].strip() else ""
        if name not in _PYTHON_CELL_MAGICS:
            return None
    masks: Dict[str, str] = {}
    starts = _logical_starts(lines)
    out = []
    masking_continuation = False
    indent = ""
    for n, (line, start) in enumerate(zip(lines, starts)):
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        if masking_continuation or (start and (_is_magic(body) or (body.lstrip().startswith("%%") and line is first))):
            if not masking_continuation:  # a continued magic keeps its first line's indentation
                indent = body[: len(body) - len(body.lstrip())]
            placeholder = f"{indent}pass  # devlint-masked-{n}"
            masks[placeholder] = body
            out.append(placeholder + ending)
            masking_continuation = body.endswith("\\")
        else:
            out.append(line)
    return "".join(out), masks


def unmask(text: str, masks: Dict[str, str]) -> Optional[str]:
    """Put the masked lines back; None when a placeholder went missing."""
    if not masks:
        return text
    out = []
    seen = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if body in masks:
            out.append(masks[body] + line[len(body):])
            seen += 1
        else:
            out.append(line)
    return "".join(out) if seen == len(masks) else None


# --------------------------------------------------------------------------
# joining and splitting


def join_cells(cells: Sequence[Cell]) -> _Joined:
    parts: List[str] = []
    starts: List[int] = []
    line = 1
    for cell in cells:
        parts.append(f"{_SEPARATOR}{cell.index}\n")
        line += 1
        starts.append(line)
        body = cell.masked if cell.masked.endswith("\n") or not cell.masked else cell.masked + "\n"
        parts.append(body)
        line += len(body.splitlines())
    return _Joined("".join(parts), list(cells), starts)


def split_cells(text: str, cells: Sequence[Cell]) -> Optional[Dict[int, str]]:
    """The masked text of each cell out of a joined (and fixed) module."""
    out: Dict[int, List[str]] = {}
    current: Optional[int] = None
    for line in text.splitlines(keepends=True):
        if line.startswith(_SEPARATOR):
            try:
                current = int(line[len(_SEPARATOR):].strip())
            except ValueError:
                return None
            out[current] = []
        elif current is not None:
            out[current].append(line)
        elif line.strip():
            return None
    if sorted(out) != sorted(c.index for c in cells):
        return None
    result = {}
    for cell in cells:
        body = "".join(out[cell.index])
        if not cell.masked.endswith("\n") and body.endswith("\n"):
            body = body[:-1]
        result[cell.index] = body
    return result


# --------------------------------------------------------------------------
# checking


def _map(d: Diagnostic, joined: _Joined, path: str) -> Optional[Diagnostic]:
    where = joined.locate(d.line)
    if where is None:
        return None
    cell, line = where
    offset = d.line - line
    d.path = path
    d.cell = cell.index
    d.cell_label = f"In [{cell.number}]"
    d.line = line
    d.end_line = max(d.end_line - offset, line) if d.end_line else line
    src_lines = cell.source.splitlines()
    d.source_line = src_lines[line - 1] if line <= len(src_lines) else d.source_line
    if d.fix is not None:
        d.fix.edits = [
            Edit(e.start_line - offset, e.start_col, e.end_line - offset, e.end_col, e.content) for e in d.fix.edits
        ]
    return d


def _syntax_errors(cells: Sequence[Cell], path: str) -> Tuple[List[Cell], List[Diagnostic]]:
    """Cells libcst can parse, and a DL000 for each one it cannot."""
    import libcst as cst

    from devlint.engine import _syntax_error

    good, errors = [], []
    for cell in cells:
        try:
            cst.parse_module(cell.masked)
            good.append(cell)
        except cst.ParserSyntaxError as exc:
            d = _syntax_error(path, exc, cell.source.splitlines())
            d.cell = cell.index
            d.cell_label = f"In [{cell.number}]"
            errors.append(d)
        except (RecursionError, MemoryError):
            pass
    return good, errors


def lint_cells(
    nb: Notebook, path: str, codes, ignore, scan: bool = True, suppress: bool = True
) -> Tuple[FileResult, _Joined]:
    from devlint.engine import lint_source

    cells = nb.cells
    joined = join_cells(cells)
    result = lint_source(joined.text, path, codes, ignore, scan=scan, suppress=suppress)
    errors: List[Diagnostic] = []
    if any(d.code == "DL000" for d in result.diagnostics):
        cells, errors = _syntax_errors(cells, path)
        joined = join_cells(cells)
        result = lint_source(joined.text, path, codes, ignore, scan=scan, suppress=suppress)
    mapped = [m for m in (_map(d, joined, path) for d in result.diagnostics if d.code != "DL000") if m is not None]
    result.diagnostics = sorted(mapped + errors, key=Diagnostic.sort_key)
    _set_file_lines(nb, result.diagnostics)
    return result, joined


def _set_file_lines(nb: Notebook, diagnostics: Sequence[Diagnostic]) -> None:
    """The line of the notebook's JSON text that holds each finding's cell
    line (for GitHub annotations and SARIF regions), when it can be told."""
    if not diagnostics or nb.style is None:
        return
    marked = json.loads(json.dumps(nb.data))
    for cell in nb.cells:
        raw = marked["cells"][cell.index - 1]
        if cell.stored_as_list:
            raw["source"] = [f"@@devlint:{cell.index}:{i}@@" for i in range(1, len(raw["source"]) + 1)]
        else:
            raw["source"] = f"@@devlint:{cell.index}:0@@"
    kw, trailing = nb.style
    where: Dict[Tuple[int, int], int] = {}
    for n, line in enumerate(json.dumps(marked, **kw).splitlines(), start=1):
        for m in re.finditer(r"@@devlint:(\d+):(\d+)@@", line):
            where[(int(m.group(1)), int(m.group(2)))] = n
    for d in diagnostics:
        if d.cell is not None:
            d.file_line = where.get((d.cell, d.line)) or where.get((d.cell, 0)) or 0


# --------------------------------------------------------------------------
# writing


def rewrite(nb: Notebook, new_masked: Dict[int, str]) -> Tuple[Optional[str], str]:
    """The notebook's new text with the cells' new (masked) sources, or
    (None, why not)."""
    if nb.style is None:
        return None, "not fixed: this notebook's JSON layout cannot be written back unchanged (re-save it from Jupyter)"
    data = json.loads(json.dumps(nb.data))  # a deep copy that keeps key order
    changed = False
    for cell in nb.cells:
        masked = new_masked.get(cell.index, cell.masked)
        if masked == cell.masked:
            continue
        source = unmask(masked, cell.masks)
        if source is None:
            return None, f"internal error: a fix touched a masked IPython line in cell {cell.index}; not fixed; please report this as a devlint bug"
        if source == cell.source:
            continue
        data["cells"][cell.index - 1]["source"] = source.splitlines(keepends=True) if cell.stored_as_list else source
        changed = True
    if not changed:
        return nb.text, ""
    kw, trailing = nb.style
    text = json.dumps(data, **kw) + trailing
    if nb.crlf:
        text = text.replace("\n", "\r\n")
    return text, ""


def _transform(
    nb: Notebook, path: str, job, change: Callable[[str], Tuple[str, List[Diagnostic], List[str]]]
) -> FileResult:
    """Apply ``change`` (joined masked text -> new text, applied, internal
    errors) to the notebook's code cells and write the result (--apply)."""
    cells, errors = nb.cells, []
    joined = join_cells(cells)
    from devlint.engine import lint_source

    if any(d.code == "DL000" for d in lint_source(joined.text, path, job.codes, job.ignore, scan=job.scan).diagnostics):
        cells, errors = _syntax_errors(cells, path)
        joined = join_cells(cells)
    new_text, applied, internal = change(joined.text)
    result = FileResult(path=path, internal_errors=list(internal))
    new_cells = split_cells(new_text, cells) if new_text != joined.text else {}
    if new_cells is None:
        result.internal_errors.append("internal error: a fix crossed a cell boundary; not fixed; please report this as a devlint bug")
        new_cells = {}
    text, problem = rewrite(nb, new_cells)
    if text is None:
        if problem.startswith("internal error"):
            result.internal_errors.append(problem)
        else:
            result.error = problem
        text = nb.text
        applied = []
    result.applied = list(applied)
    result.fixed_text = text if text != nb.text else None
    return result


def run_notebook_job(job, raw: bytes) -> FileResult:
    """Check, fix or baseline (--add-noqa) one notebook: what
    :func:`devlint.runner._run_job` does for a Python file."""
    from devlint.runner import write_atomically

    path = job.path
    try:
        nb = read_notebook(raw)
    except NotebookError as exc:
        return FileResult(path=path, error=str(exc))
    if not is_python_notebook(nb) or not nb.cells:
        return FileResult(path=path, skipped=True)
    if not job.fix and not getattr(job, "add_noqa", False):
        return lint_cells(nb, path, job.codes, job.ignore, job.scan)[0]

    if getattr(job, "add_noqa", False):
        from devlint.engine import lint_source
        from devlint.noqa import add_noqa

        def change(text: str):
            found = lint_source(text, path, job.codes, job.ignore, scan=job.scan).diagnostics
            added = add_noqa(text, [d for d in found if d.code != "DL000"])
            return added.text, added.added, []

    else:
        from devlint.engine import fix_source

        def change(text: str):
            fixed = fix_source(text, path, job.codes, unsafe=job.unsafe, ignore=job.ignore, scan=job.scan)
            return fixed.fixed_text or text, fixed.applied, fixed.internal_errors

    result = _transform(nb, path, job, change)
    final = nb
    if result.fixed_text is not None:
        data = (codecs.BOM_UTF8 if raw.startswith(codecs.BOM_UTF8) else b"") + result.fixed_text.encode("utf-8")
        final = read_notebook(data)
        if job.apply or getattr(job, "add_noqa", False):
            problem = write_atomically(path, raw, data)
            if problem:
                result.error = problem
                result.fixed_text = None
                result.applied = []
                final = nb
    remaining, _ = lint_cells(final, path, job.codes, job.ignore, job.scan)
    result.diagnostics = remaining.diagnostics
    result.error = result.error or remaining.error
    result.internal_errors += [e for e in remaining.internal_errors if e not in result.internal_errors]
    return result
