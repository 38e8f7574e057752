"""Suppression comments: ``# noqa``, ``# noqa: DL001,DL002`` on the reported
line, and a file-level ``# devlint: noqa`` (optionally ``: DL001``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional

# An empty frozenset means "all codes".
ALL: FrozenSet[str] = frozenset()

# codes are letters then digits (DL001, DL0): "# noqa: DL001 because ..." names one code
_CODES = r"(?P<codes>[A-Z]+[0-9]+(?:(?:\s*,\s*|\s+)[A-Z]+[0-9]+)*)"
_NOQA = re.compile(r"#\s*noqa(?::\s*" + _CODES + ")?", re.I)
_FILE = re.compile(r"#\s*devlint:\s*noqa(?::\s*" + _CODES + ")?", re.I)


def _codes(text: Optional[str]) -> FrozenSet[str]:
    if not text:
        return ALL
    return frozenset(c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)


@dataclass
class Suppressions:
    #: 1-based line -> codes suppressed there (ALL = every code)
    lines: Dict[int, FrozenSet[str]] = field(default_factory=dict)
    #: None: no file-level suppression; ALL: the whole file; else these codes
    file: Optional[FrozenSet[str]] = None

    def suppresses(self, code: str, line: int) -> bool:
        if self.file is not None and (self.file == ALL or _matches(code, self.file)):
            return True
        codes = self.lines.get(line)
        return codes is not None and (codes == ALL or _matches(code, codes))


def _matches(code: str, codes: FrozenSet[str]) -> bool:
    return any(code.startswith(c) for c in codes)


def parse_suppressions(text: str) -> Suppressions:
    sup = Suppressions()
    if "noqa" not in text and "NOQA" not in text:
        return sup
    for lineno, line in enumerate(text.splitlines(), start=1):
        if "#" not in line:
            continue
        m = _FILE.search(line)
        if m:
            codes = _codes(m.group("codes"))
            if codes == ALL or sup.file == ALL:
                sup.file = ALL
            else:
                sup.file = (sup.file or frozenset()) | codes
            continue
        m = _NOQA.search(line)
        if m:
            sup.lines[lineno] = _codes(m.group("codes"))
    return sup


def noqa_lines(text: str) -> List[int]:
    return sorted(parse_suppressions(text).lines)
