"""Every rule's VALID / INVALID examples run as tests (Fixit-style): valid
code stays silent, invalid code is reported and fixed to the expected text,
and fixing the fixed text again changes nothing."""

from __future__ import annotations

import textwrap

import pytest

from devlint.engine import fix_source, lint_source
from devlint.rule import all_rules

CASES = []
for code, rule in all_rules().items():
    for i, ex in enumerate(rule.VALID):
        CASES.append(pytest.param(code, "valid", ex, id=f"{code}-valid-{i}"))
    for i, ex in enumerate(rule.INVALID):
        CASES.append(pytest.param(code, "invalid", ex, id=f"{code}-invalid-{i}"))


def test_every_rule_has_examples():
    for code, rule in all_rules().items():
        assert rule.VALID, f"{code} has no VALID examples"
        assert rule.INVALID, f"{code} has no INVALID examples"


@pytest.mark.parametrize("code,kind,example", CASES)
def test_example(code, kind, example):
    src = textwrap.dedent(example.code).lstrip("\n")
    found = [d for d in lint_source(src, "example.py", codes=[code]).diagnostics if d.code == code]
    if kind == "valid":
        assert found == [], f"{code} reported valid code: {[(d.line, d.message) for d in found]}"
        return
    assert len(found) == example.count, [(d.line, d.message) for d in found]
    result = fix_source(src, "example.py", codes=[code], unsafe=example.unsafe)
    assert not result.internal_errors
    if example.expected is None:
        assert result.fixed_text == src
        return
    expected = textwrap.dedent(example.expected).lstrip("\n")
    assert result.fixed_text == expected
    again = fix_source(expected, "example.py", codes=[code], unsafe=example.unsafe)
    assert again.fixed_text == expected, "fixing twice changed the code the second time"
