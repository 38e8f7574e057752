"""``# noqa``, ``# noqa: DL001`` and file-level ``# devlint: noqa``."""

from __future__ import annotations

from devlint.engine import fix_source, lint_source

TEMPLATE = """
import torch
import torch.nn as nn
{header}
class M(nn.Module):
    def forward(self, x):
        a = torch.ones(3){c1}
        b = torch.zeros(3){c2}
        return x + a + b
"""


def findings(header="", c1="", c2=""):
    src = TEMPLATE.format(header=header, c1=c1, c2=c2)
    return [(d.line, d.code) for d in lint_source(src, "m.py").diagnostics]


def test_unsuppressed():
    assert findings() == [(7, "DL001"), (8, "DL001")]


def test_line_noqa_with_code():
    assert findings(c1="  # noqa: DL001") == [(8, "DL001")]


def test_line_noqa_with_other_code_does_not_suppress():
    assert findings(c1="  # noqa: DL002") == [(7, "DL001"), (8, "DL001")]


def test_bare_noqa_suppresses_everything_on_the_line():
    assert findings(c2="  # noqa") == [(7, "DL001")]


def test_noqa_with_several_codes_and_prefix():
    assert findings(c1="  # noqa: DL002, DL001", c2="  # NOQA:DL0") == []


def test_file_level_noqa():
    assert findings(header="# devlint: noqa") == []
    assert findings(header="# devlint: noqa: DL001") == []
    assert findings(header="# devlint: noqa: DL002") == [(7, "DL001"), (8, "DL001")]


def test_fix_respects_noqa():
    src = TEMPLATE.format(header="", c1="  # noqa: DL001", c2="")
    fixed = fix_source(src, "m.py").fixed_text
    assert "torch.ones(3)  # noqa: DL001" in fixed
    assert "torch.zeros(3, device=x.device)" in fixed


def test_words_after_the_codes_are_not_codes():
    from devlint.suppress import parse_suppressions

    sup = parse_suppressions("x = 1  # noqa: DL001 because the table is tiny\n")
    assert sup.lines[1] == frozenset({"DL001"})
    assert findings(c1="  # noqa: DL001 because scalars are fine") == [(8, "DL001")]
