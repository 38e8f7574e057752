"""Bounds on what one file may cost: a cheap scan that refuses hostile or
pathological source before libcst sees it, and a thread with a deep stack to
run the parse and the (recursive) visitors in.

libcst's native parser needs time that grows much faster than linearly with
the depth of an expression (a 4 000-term ``a + a + ...`` takes about half a
minute, ``x[0][0]...`` is worse), overflows its stack on deeply nested
brackets (a crash no ``except`` can catch), and holds about 3 KB of memory per
token. The scan below measures those three things in linear time, without
parsing, so that such a file is skipped with a message instead.
"""

from __future__ import annotations

import re
import sys
import threading
from typing import Callable, Optional, TypeVar

#: files larger than this are skipped (generated code; about 1 GB of libcst nodes)
MAX_BYTES = 3_000_000
#: tokens in one file (about 3 KB of memory each once parsed)
MAX_TOKENS = 400_000
#: nested brackets: CPython's own tokenizer refuses more than 200
MAX_BRACKETS = 200
#: estimated depth of one expression (chained operators, attributes, calls,
#: subscripts and brackets between two commas); libcst's parse time grows
#: steeply with it: 500 costs well under a second
MAX_EXPRESSION_DEPTH = 500

#: files up to this size go to CPython's parser (the candidate scan) before
#: the pre-scan below: its own limits bound it (200 nested brackets, a
#: recursion check, memory in proportion to a small file), and most files
#: then never reach libcst, so the pre-scan is paid only by those that do
SCAN_FIRST_BYTES = 300_000

#: stack size and recursion limit for the thread that parses and visits: the
#: libcst visitors recurse a few frames per tree level
DEEP_STACK_BYTES = 512 * 1024 * 1024
DEEP_RECURSION_LIMIT = 60_000

_TOKEN = re.compile(
    r"""
    [ \t]+
    |(?P<str>[rRbBuUfFtT]{0,2}(?:'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\Z)
        |\"\"\"[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:\"\"\"|\Z)
        |'[^'\\\n]*(?:\\.[^'\\\n]*)*(?:'|$)
        |"[^"\\\n]*(?:\\.[^"\\\n]*)*(?:"|$)))
    |(?P<comment>\#[^\n]*)
    |(?P<cont>\\(?:\r\n|\r|\n))
    |(?P<nl>\r\n|\r|\n)
    |(?P<open>[(\[{])
    |(?P<close>[)\]}])
    |(?P<sep>[,;]|=(?!=)|:=)
    |(?P<chain>(?:not|lambda|if|else|and|or|await)\b|\*\*|//|<<|>>|->|[-+*/%@&|^~])
    |(?P<dot>\.)
    |(?P<word>\w+)
    |(?P<other>\S)
    """,
    re.VERBOSE | re.MULTILINE | re.DOTALL,
)


def hostile(text: str) -> Optional[str]:
    """Why ``text`` must not be parsed (a one-line reason), or None.

    Linear in the size of the text; a miscount (an unusual string prefix, a
    nested f-string) can only make the estimates a little off, never crash.
    """
    size = len(text)
    if size > MAX_BYTES:
        return f"file too large ({size:,} characters; devlint's limit is {MAX_BYTES:,}): generated code?"
    tokens = 0
    # per bracket level, since the last separator: operators (each nests the
    # expression one level deeper) and trailers of the current operand
    # (``.name``, calls, subscripts); the depth here is the sum over levels
    ops = [0]
    trail = [0]
    running = 0
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind is None:  # blanks
            continue
        tokens += 1
        if kind == "open":
            trail[-1] += 1
            running += 1
            ops.append(0)
            trail.append(0)
            if len(ops) > MAX_BRACKETS + 1:
                return f"more than {MAX_BRACKETS} nested brackets (line {_line(text, m.start())}; Python itself refuses this)"
        elif kind == "close":
            if len(ops) > 1:
                running -= ops.pop() + trail.pop()
            continue
        elif kind == "dot":
            trail[-1] += 1
            running += 1
        elif kind == "chain":
            running += 1 - trail[-1]
            ops[-1] += 1
            trail[-1] = 0
        elif kind == "sep" or (kind == "nl" and len(ops) == 1):
            running -= ops[-1] + trail[-1]
            ops[-1] = trail[-1] = 0
            continue
        else:
            continue
        if running > MAX_EXPRESSION_DEPTH:
            return f"expression nested more than {MAX_EXPRESSION_DEPTH} levels deep (line {_line(text, m.start())}): too costly to parse"
    if tokens > MAX_TOKENS:
        return f"too many tokens ({tokens:,}; devlint's limit is {MAX_TOKENS:,}): generated code?"
    return None


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


T = TypeVar("T")


def run_deep(fn: Callable[..., T], *args, **kwargs) -> T:
    """Call ``fn`` in a thread with a deep stack and a high recursion limit,
    so that deeply nested (but legal) code neither overflows the C stack nor
    stops at Python's default limit of 1000 frames. Exceptions propagate."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    old_limit = sys.getrecursionlimit()
    try:
        old_size = threading.stack_size(DEEP_STACK_BYTES)
    except (ValueError, RuntimeError):  # pragma: no cover - platform without it
        return fn(*args, **kwargs)
    sys.setrecursionlimit(max(old_limit, DEEP_RECURSION_LIMIT))
    try:
        thread = threading.Thread(target=target, name="devlint-deep", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no memory for the stack: run here, with the usual limits
            threading.stack_size(old_size)
            sys.setrecursionlimit(old_limit)
            return fn(*args, **kwargs)
        thread.join()
    finally:
        threading.stack_size(old_size)
        sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]
