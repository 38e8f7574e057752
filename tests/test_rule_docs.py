"""Every rule documents itself with the fixed sections (ruff-style), and its
metadata is well formed."""

from __future__ import annotations

import re

import pytest

from devlint.rule import DOC_SECTIONS, all_rules

RULES = sorted(all_rules().items())


@pytest.mark.parametrize("code,rule", RULES, ids=[c for c, _ in RULES])
def test_rule_doc_has_every_section(code, rule):
    doc = rule.documentation()
    assert doc.startswith(f"{code} {rule.name}"), "docstring must start with 'CODE name'"
    for section in DOC_SECTIONS:
        assert f"## {section}" in doc, f"{code} lacks the section '{section}'"


@pytest.mark.parametrize("code,rule", RULES, ids=[c for c, _ in RULES])
def test_rule_metadata(code, rule):
    assert re.fullmatch(r"DL\d{3}", code)
    assert re.fullmatch(r"[a-z]+(-[a-z]+)*", rule.name)
    assert rule.fix_safety in ("safe", "unsafe", "safe/unsafe")
    assert rule.tokens, "a rule must declare the text it needs (pre-filter)"


@pytest.mark.parametrize("code,rule", RULES, ids=[c for c, _ in RULES])
def test_why_quotes_a_real_error(code, rule):
    doc = rule.documentation()
    why = doc.split("## Why is this bad?", 1)[1].split("## Example", 1)[0]
    assert "Error" in why or "error" in why, f"{code}: 'Why is this bad?' should quote the error a user sees"


def test_codes_are_unique_and_sorted():
    codes = [c for c, _ in RULES]
    assert codes == sorted(set(codes))
