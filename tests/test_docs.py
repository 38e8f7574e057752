"""Generated documentation stays in step with the rules."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from conftest import ROOT
from devlint import docgen
from devlint.cli import main
from devlint.rule import DOC_SECTIONS, all_rules


def test_rules_md_is_up_to_date():
    path = ROOT / "docs" / "rules.md"
    assert path.exists(), "docs/rules.md is missing: run python -m devlint.docgen"
    assert path.read_text(encoding="utf-8") == docgen.render(), "docs/rules.md is out of date: run python -m devlint.docgen"


def test_rules_md_has_every_rule_and_section():
    text = docgen.render()
    for code, rule in all_rules().items():
        assert f'<a id="{code.lower()}"></a>' in text
        assert f"## {code} {rule.name}" in text
        assert f"| [{code}](#{code.lower()}) | `{rule.name}` | {rule.fix_safety} |" in text
    for section in DOC_SECTIONS:
        assert text.count(f"### {section}") == len(all_rules())


def test_docgen_check_mode(tmp_path):
    out = tmp_path / "rules.md"
    assert docgen.main(["--check", "--output", str(out)]) == 1  # missing
    assert docgen.main(["--output", str(out)]) == 0
    assert docgen.main(["--check", "--output", str(out)]) == 0
    out.write_text(out.read_text() + "edited by hand\n")
    assert docgen.main(["--check", "--output", str(out)]) == 1


def test_rule_all_json_lists_every_rule():
    result = CliRunner().invoke(main, ["rule", "--all", "--output-format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [r["code"] for r in data] == list(all_rules())
    for entry in data:
        rule = all_rules()[entry["code"]]
        assert set(entry) == {"code", "name", "fix_safety", "enabled_by_default", "summary", "documentation"}
        assert entry["name"] == rule.name
        assert entry["fix_safety"] in ("safe", "unsafe", "safe/unsafe")
        assert entry["enabled_by_default"] is rule.enabled_by_default
        assert entry["documentation"] == rule.documentation()
        assert entry["summary"] and "\n" not in entry["summary"]


def test_rule_single_json():
    code = next(iter(all_rules()))
    result = CliRunner().invoke(main, ["rule", code.lower(), "--output-format", "json"])
    assert result.exit_code == 0
    assert json.loads(result.output)["code"] == code
    bad = CliRunner().invoke(main, ["rule", "DL999"])
    assert bad.exit_code == 2


def test_install_docs_point_at_nothing_that_does_not_exist():
    """No repository URL or release tag that does not exist (devlint is not
    published yet): README and docs install from a checkout."""
    texts = {p.name: p.read_text(encoding="utf-8") for p in [ROOT / "README.md", ROOT / ".pre-commit-hooks.yaml", *(ROOT / "docs").glob("*.md")]}
    for name, text in texts.items():
        assert "github.com/devlint" not in text, name
        assert "rev: v0.1.0" not in text, name
        assert "\n      - run: pip install devlint\n" not in text, name
    for name in ("README.md", "integrations.md", "ci.md"):
        assert "repo: local" in texts[name] and "language: python" in texts[name], name
    assert "pip install ." in texts["README.md"]
    assert "once published" in texts["integrations.md"].lower()


def test_exit_codes_are_documented():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    for text in (readme, ci):
        for code, words in (("0", "nothing found"), ("1", "findings"), ("2", "usage or configuration error"), ("130", "interrupted")):
            assert re.search(rf"^\| {code} \| [^\n]*{words}", text, re.M), (code, words)
