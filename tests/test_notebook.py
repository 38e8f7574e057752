"""Jupyter notebooks: found, checked and fixed; findings name the cell and the
line in it; fixes change only the changed cells' source and keep the JSON
layout, metadata and outputs; IPython syntax never crashes the check."""

from __future__ import annotations

import codecs
import json
import shutil
import textwrap

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from devlint.cli import main
from devlint.notebook import mask_ipython, unmask

TUTORIAL = FIXTURES / "notebooks" / "transformer_tutorial.ipynb"
FIXED_LINE = "        pos = torch.arange(0, length, device=src.device).unsqueeze(0).repeat(batch, 1)\n"


def _run(*args):
    return CliRunner().invoke(main, ["--help"] if not args else list(args), catch_exceptions=False)


def _notebook(*sources, layout=None, kernel="python"):
    cells = []
    for i, src in enumerate(sources, start=1):
        lines = textwrap.dedent(src).strip("\n").split("\n")
        cells.append(
            {
                "cell_type": "code",
                "execution_count": i,
                "metadata": {},
                "outputs": [],
                "source": [l + "\n" for l in lines[:-1]] + [lines[-1]],
            }
        )
    nb = {
        "cells": cells,
        "metadata": {"kernelspec": {"display_name": kernel, "language": kernel, "name": kernel}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(nb, **(layout or {"indent": 1, "sort_keys": True, "ensure_ascii": False})) + "\n"


MODEL_CELL = """
import torch
import torch.nn as nn

class M(nn.Module):
    def forward(self, x):
        return x + torch.zeros(3)  # é
"""


@pytest.fixture
def tutorial(tmp_path, monkeypatch):
    shutil.copy(TUTORIAL, tmp_path / "tutorial.ipynb")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "tutorial.ipynb"


def test_check_points_at_the_cell_and_line(tutorial):
    result = _run("check", "tutorial.ipynb")
    assert result.exit_code == 1
    first = result.output.splitlines()[0]
    assert first == (
        "tutorial.ipynb:In [3]:13:15: DL001 `torch.arange` in `Encoder.forward` creates its tensor on the CPU; "
        "it meets `self.pos_embedding` through a submodule's weights, which fails when that is on a GPU [*]"
    )
    assert "    pos = torch.arange(0, length).unsqueeze(0).repeat(batch, 1)" in result.output
    # the %%bash cell is not Python, the magics and `!= 0` continuation do not break the parse
    assert "DL000" not in result.output and "Found 1 problem in 1 file" in result.output


def test_notebooks_are_discovered(tutorial):
    (tutorial.parent / ".ipynb_checkpoints").mkdir()
    shutil.copy(TUTORIAL, tutorial.parent / ".ipynb_checkpoints" / "tutorial-checkpoint.ipynb")
    result = _run("check", ".")
    assert "tutorial.ipynb:In [3]:13:15" in result.output
    assert "checkpoint" not in result.output


def test_fix_rewrites_only_the_changed_cell(tutorial):
    before = tutorial.read_text(encoding="utf-8")
    result = _run("fix", "--apply", "tutorial.ipynb")
    assert result.exit_code == 0, result.output
    after = tutorial.read_text(encoding="utf-8")
    changed = [(a, b) for a, b in zip(before.splitlines(True), after.splitlines(True)) if a != b]
    assert len(before.splitlines()) == len(after.splitlines())
    assert changed == [(
        '    "        pos = torch.arange(0, length).unsqueeze(0).repeat(batch, 1)\\n",\n',
        '    "        pos = torch.arange(0, length, device=src.device).unsqueeze(0).repeat(batch, 1)\\n",\n',
    )]
    old, new = json.loads(before), json.loads(after)
    assert new["metadata"] == old["metadata"] and len(new["cells"]) == len(old["cells"])
    for i, (a, b) in enumerate(zip(old["cells"], new["cells"]), start=1):
        if i != 5:
            assert a == b
        else:
            assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}
            assert FIXED_LINE in b["source"]
    assert _run("check", "tutorial.ipynb").exit_code == 0
    # fixing twice changes nothing
    assert _run("fix", "--apply", "tutorial.ipynb").exit_code == 0
    assert tutorial.read_text(encoding="utf-8") == after


@pytest.mark.parametrize(
    "layout",
    [
        {"indent": 1, "sort_keys": True, "ensure_ascii": False},  # Jupyter / nbformat
        {"indent": 2, "ensure_ascii": True},  # other writers: key order as written, \\u escapes
        {"indent": "\t", "ensure_ascii": False},
        {"separators": (",", ":")},  # minified
    ],
    ids=["nbformat", "indent2-ascii", "tabs", "minified"],
)
@pytest.mark.parametrize("ending", ["lf", "crlf-bom-no-final-newline"])
def test_fix_keeps_the_json_layout(tmp_path, layout, ending):
    text = _notebook(MODEL_CELL, "%time y = 1", layout=layout)
    if ending != "lf":
        text = text.rstrip("\n").replace("\n", "\r\n")
    raw = (codecs.BOM_UTF8 if ending != "lf" else b"") + text.encode("utf-8")
    path = tmp_path / "nb.ipynb"
    path.write_bytes(raw)
    result = _run("fix", "--apply", "--no-cache", str(path))
    assert result.exit_code == 0, result.output
    fixed = path.read_bytes()
    expected_text = text.replace("torch.zeros(3)", "torch.zeros(3, device=x.device)")
    assert fixed == (codecs.BOM_UTF8 if ending != "lf" else b"") + expected_text.encode("utf-8")


def test_a_layout_that_cannot_be_reproduced_is_not_rewritten(tmp_path):
    text = _notebook(MODEL_CELL).replace('"cells": [', '"cells":   [')  # hand-edited
    path = tmp_path / "nb.ipynb"
    path.write_text(text, encoding="utf-8")
    check = _run("check", "--no-cache", str(path))
    assert check.exit_code == 1 and "In [1]:6:20: DL001" in check.output
    result = _run("fix", "--apply", "--no-cache", str(path))
    assert result.exit_code == 1
    assert "JSON layout cannot be written back unchanged" in result.output
    assert path.read_text(encoding="utf-8") == text


def test_ipython_syntax_is_masked_and_restored():
    cell = textwrap.dedent(
        """\
        !pip install torch \\
            torchvision
        %matplotlib inline
        files = !ls
        t = %timeit -o f()
        model?
        torch.zeros??
        for i in range(3):
            %time f(i)
        ok = (a
              != b)
        msg = ("%d items"
               % n)
        text = '''
        %not a magic inside a string
        '''
        x = 1 if y else 2  # what?
        """
    )
    masked, masks = mask_ipython(cell)
    lines = masked.splitlines()
    assert [l.strip().startswith("pass  # devlint-masked-") for l in lines] == [
        True, True, True, True, True, True, True, False, True, False, False, False, False, False, False, False, False,
    ]
    assert lines[8] == "    pass  # devlint-masked-8"  # indentation kept inside the block
    import libcst

    libcst.parse_module(masked)
    assert unmask(masked, masks) == cell
    assert mask_ipython("%%bash\necho hi\n") is None
    assert mask_ipython("%%writefile model.py\nimport torch\n") is None
    assert mask_ipython("%%time\nx = 1\n")[0] == "pass  # devlint-masked-0\nx = 1\n"


def test_cell_magics_that_are_not_python_are_skipped(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(_notebook("%%writefile model.py\n" + MODEL_CELL.strip("\n"), "%%time\n" + MODEL_CELL.strip("\n")))
    result = _run("check", "--no-cache", str(path))
    assert [l.split(": DL")[0] for l in result.output.splitlines() if ": DL" in l] == [f"{path}:In [2]:7:20"]


def test_a_cell_with_a_syntax_error_does_not_hide_the_others(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(_notebook("def broken(:\n    pass", MODEL_CELL))
    result = _run("check", "--no-cache", str(path))
    assert result.exit_code == 1
    assert f"{path}:In [1]:2:1: DL000 SyntaxError" in result.output
    assert f"{path}:In [2]:6:20: DL001" in result.output
    # fixing leaves the broken cell alone and fixes the other
    fix = _run("fix", "--apply", "--no-cache", str(path))
    assert "DL000" in fix.output
    data = json.loads(path.read_text())
    assert data["cells"][0]["source"] == ["def broken(:\n", "    pass"]
    assert "        return x + torch.zeros(3, device=x.device)  # é" in data["cells"][1]["source"]


def test_not_python_or_not_a_notebook(tmp_path):
    r_nb = tmp_path / "r.ipynb"
    r_nb.write_text(_notebook("x <- torch.zeros(3)", kernel="R"))
    assert _run("check", "--no-cache", str(r_nb)).exit_code == 0
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [')
    result = _run("check", "--no-cache", str(broken))
    assert result.exit_code == 1
    assert "broken.ipynb: not a notebook: invalid JSON" in result.output
    old = tmp_path / "old.ipynb"
    old.write_text(json.dumps({"nbformat": 3, "worksheets": []}))
    assert "nbformat 3 notebooks are not supported" in _run("check", "--no-cache", str(old)).output


def test_json_and_sarif_name_the_cell(tutorial):
    data = json.loads(_run("check", "--output-format", "json", "tutorial.ipynb").output)
    (d,) = data
    assert (d["cell"], d["location"], d["filename"]) == (5, {"line": 13, "column": 15}, "tutorial.ipynb")
    assert d["cell_label"] == "In [3]"  # the third code cell (not executed: no execution count)
    json_line = tutorial.read_text(encoding="utf-8").splitlines()[d["notebook_line"] - 1]
    assert "pos = torch.arange(0, length)" in json_line
    assert d["fix"]["edits"][0]["start"] == {"line": 13, "column": 15}

    sarif = json.loads(_run("check", "--output-format", "sarif", "tutorial.ipynb").output)
    (res,) = sarif["runs"][0]["results"]
    assert res["properties"] == {"cell": 5, "cellLabel": "In [3]", "cellLine": 13, "cellColumn": 15}
    assert res["message"]["text"].endswith("(In [3], line 13, column 15)")
    assert res["locations"][0]["physicalLocation"]["region"] == {"startLine": d["notebook_line"]}
    assert "fixes" not in res
    from test_ci_output import _sarif_schema

    schema = _sarif_schema()
    if schema is not None:
        import jsonschema

        jsonschema.Draft4Validator(schema).validate(sarif)

    github = _run("check", "--output-format", "github", "tutorial.ipynb").output
    assert github.startswith(f"::error title=devlint (DL001),file=tutorial.ipynb,line={d['notebook_line']}::DL001 ")
    assert github.rstrip().endswith("(In [3], line 13, column 15)")


def test_results_from_the_cache_keep_the_cell(tutorial):
    first = _run("check", "tutorial.ipynb").output
    second = _run("check", "-v", "tutorial.ipynb")
    assert "1 from the cache" in second.output
    assert second.output.splitlines()[0] == first.splitlines()[0]


def test_add_noqa_and_unused_noqa_in_a_notebook(tutorial):
    result = _run("check", "--add-noqa", "tutorial.ipynb")
    assert result.exit_code == 0, result.output
    cell = json.loads(tutorial.read_text(encoding="utf-8"))["cells"][4]["source"]
    assert "        pos = torch.arange(0, length).unsqueeze(0).repeat(batch, 1)  # noqa: DL001\n" in cell
    assert _run("check", "tutorial.ipynb").exit_code == 0
    # the line gets fixed by hand: the noqa is now stale
    text = tutorial.read_text(encoding="utf-8").replace("torch.arange(0, length)", "torch.arange(0, length, device=src.device)")
    tutorial.write_text(text, encoding="utf-8")
    stale = _run("check", "--extend-select", "DL100", "tutorial.ipynb")
    assert "tutorial.ipynb:In [3]:13:" in stale.output and "DL100" in stale.output
    assert _run("fix", "--apply", "--extend-select", "DL100", "tutorial.ipynb").exit_code == 0
    cell = json.loads(tutorial.read_text(encoding="utf-8"))["cells"][4]["source"]
    assert FIXED_LINE in cell
    assert tutorial.read_text(encoding="utf-8") == TUTORIAL.read_text(encoding="utf-8").replace(
        "torch.arange(0, length)", "torch.arange(0, length, device=src.device)"
    )
