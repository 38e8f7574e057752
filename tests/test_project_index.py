"""The project index (``devlint/project/``): module names, imports read
without a parse, the import order, summaries and lookups, and the cache
that depends on the summaries a file consulted."""

from __future__ import annotations

import json
import os

import pytest
from conftest import check_tree

from devlint.engine import lint_source
from devlint.project.imports import imported_names, read_imports
from devlint.project.index import ProjectContext, ProjectIndex, waves
from devlint.project.names import absolute, module_name
from devlint.project.plan import make_plan
from devlint.project.index import digest
from devlint.project.summary import SUMMARY_VERSION
from devlint.rule import all_rules

CODES = [c for c, r in all_rules().items() if r.enabled_by_default]


# -- module names ---------------------------------------------------------------
def test_module_name_below_the_deepest_root(tmp_path):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    f = tmp_path / "src" / "pkg" / "models.py"
    f.write_text("")
    roots = [str(tmp_path), str(tmp_path / "src")]
    assert module_name(str(f), roots) == "pkg.models"
    assert module_name(str(tmp_path / "src" / "pkg" / "__init__.py"), roots) == "pkg"
    assert module_name(str(tmp_path / "my-scripts" / "x.py"), roots) is None  # not an identifier
    assert module_name(str(tmp_path / "notes.txt"), roots) is None


def test_a_file_in_a_package_is_named_by_its_packages_whatever_the_roots(tmp_path):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("")
    f = tmp_path / "src" / "pkg" / "models.py"
    f.write_text("")
    assert module_name(str(f), [str(tmp_path)]) == "pkg.models"  # not src.pkg.models


def test_module_name_outside_the_roots_crawls_up_the_packages(tmp_path):
    (tmp_path / "proj" / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "proj" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "proj" / "pkg" / "sub" / "__init__.py").write_text("")
    f = tmp_path / "proj" / "pkg" / "sub" / "mod.py"
    f.write_text("")
    assert module_name(str(f), [str(tmp_path / "elsewhere")]) == "pkg.sub.mod"
    loose = tmp_path / "proj" / "train.py"
    loose.write_text("")
    assert module_name(str(loose), [str(tmp_path / "elsewhere")]) == "train"


@pytest.mark.parametrize(
    "target, module, is_package, expected",
    [
        (".models.Net", "pkg.train", False, "pkg.models.Net"),
        (".Net", "pkg", True, "pkg.Net"),
        ("..base.Head", "pkg.heads.anchor", False, "pkg.base.Head"),
        (".x", "top", False, "x"),
        ("..x", "top", False, None),  # above the top package
        ("torch.nn.Module", "pkg.train", False, "torch.nn.Module"),
        (".x", None, False, None),
    ],
)
def test_absolute(target, module, is_package, expected):
    assert absolute(target, module, is_package) == expected


# -- imports read without a parse -------------------------------------------------
def test_read_imports():
    text = (
        "import torch.nn as nn\n"
        "import os, pkg.models\n"
        "from .lm import LanguageModel as LM, Block\n"
        "from . import (\n    heads,\n    utils as u,\n)\n"
        "from pkg.data import \\\n    make_loader\n"
    )
    got = read_imports(text, "pkg.train", False)
    assert got.aliases["LM"] == "pkg.lm.LanguageModel"
    assert got.aliases["Block"] == "pkg.lm.Block"
    assert got.aliases["heads"] == "pkg.heads"
    assert got.aliases["u"] == "pkg.utils"
    assert got.aliases["make_loader"] == "pkg.data.make_loader"
    assert got.aliases["nn"] == "torch.nn"
    assert {"pkg.models", "os", "pkg.lm.LanguageModel", "pkg.heads"} <= got.targets


def project_edges(targets, importer, modules):
    return sorted({m for m, _ in imported_names(targets, importer, modules)})


def test_project_edges_name_the_module_not_its_parents():
    modules = {"pkg", "pkg.lm", "pkg.train", "models"}
    assert project_edges({"pkg.lm.LanguageModel", "torch.nn"}, "pkg.train", modules) == ["pkg.lm"]
    # a class re-exported by the package: the package
    assert project_edges({"pkg.LanguageModel"}, "pkg.train", modules) == ["pkg"]
    # a script's sibling import by bare name
    assert project_edges({"lm.Block"}, "pkg.train", modules) == ["pkg.lm"]
    # ``import torch`` inside pkg never names pkg
    assert project_edges({"torch", "torch.nn"}, "pkg.lm", modules) == []


def test_waves_put_dependencies_first_and_cycles_together():
    edges = {"pkg": ["pkg.embed", "pkg.unet"], "pkg.unet": ["pkg", "pkg.embed"], "train": ["pkg"]}
    assert waves(["pkg", "pkg.embed", "pkg.unet", "train"], edges) == [["pkg.embed"], ["pkg", "pkg.unet"], ["train"]]
    assert waves([], {}) == []


# -- summaries and lookups --------------------------------------------------------
MODELS = """
import torch
import torch.nn as nn

devices = ["cuda:0", "cuda:1"]


class Base(nn.Module):
    pass


class Split(Base):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4).to(devices[0])
        self.b = nn.Linear(4, 4).to(devices[1])

    def forward(self, x):
        return self.b(self.a(x).to(devices[1]))
"""


def _summary_of(text: str, module: str) -> dict:
    index = ProjectIndex()
    result = lint_source(text, f"{module}.py", CODES, project=ProjectContext(module, False, index), summarize=True)
    assert result.summary is not None
    return result.summary


def test_summary_is_versioned_json_with_absolute_names():
    summary = _summary_of(MODELS, "pkg.models")
    assert summary["version"] == SUMMARY_VERSION
    assert json.loads(json.dumps(summary)) == summary
    split = summary["classes"]["Split"]
    assert split["bases"] == ["pkg.models.Base"]
    assert split["is_module"] and split["line"] == 12
    assert split["attributes"]["a"]["device"] == "devices[0]"
    assert "assignments" not in split  # what only the file's own rules read stays home


def test_a_summary_keeps_what_differs_from_the_defaults_and_reads_back_whole():
    from dataclasses import asdict

    from devlint.engine import parse
    from devlint.facts.classes import build_facts
    from devlint.project.summary import class_from_summary

    summary = _summary_of(MODELS, "pkg.models")
    split = summary["classes"]["Split"]
    a = split["attributes"]["a"]
    assert "scalar" not in a and "str_keys" not in a  # False, the default: left out
    assert a["device"] == "devices[0]" and a["kind"] == "module"
    forward = split["methods"]["forward"]
    assert forward["params"] == ["self", "x"] and "is_static" not in forward
    # read back, every field is there, as the file's own facts have it
    facts = build_facts(parse(MODELS))
    rebuilt = class_from_summary(split, "pkg.models")
    own = facts.classes["Split"]
    for name, rec in own.attributes.items():
        back = asdict(rebuilt.attributes[name])
        mine = asdict(rec)
        for key in ("line", "module_class", "element_class"):  # absolute names, store lines
            back.pop(key), mine.pop(key)
        assert back == mine
    for name, fn in own.methods.items():
        assert asdict(rebuilt.methods[name]) == dict(asdict(fn), self_calls=sorted(fn.self_calls))


def test_a_lookup_follows_reexports_and_records_what_it_read():
    summary = _summary_of(MODELS, "pkg.models")
    index = ProjectIndex({"pkg.models": summary}, aliases={"pkg": {"Split": "pkg.models.Split"}}, paths={"pkg.models": "pkg/models.py"})
    cls = index.class_facts("pkg.Split", "train")
    assert cls is not None and cls.is_module and cls.origin == "pkg.models"
    assert cls.pinned_devices() == {"a": "devices[0]", "b": "devices[1]"}
    assert index.consulted == {"pkg.models": digest(summary)}
    assert index.class_facts("pkg.Missing", "train") is None
    assert index.class_facts("torch.nn.Linear", "train") is None
    # a script's sibling import by bare name
    assert index.class_facts("models.Split", "pkg.train") is not None


def test_alias_cycles_end():
    index = ProjectIndex({"a": {"version": 1, "module": "a", "classes": {}}},
                         aliases={"a": {"X": "b.X"}, "b": {"X": "a.X"}})
    assert index.class_facts("a.X", None) is None


def test_a_subclass_of_a_project_module_is_a_module():
    index = ProjectIndex({"pkg.models": _summary_of(MODELS, "pkg.models")})
    text = (
        "import torch\n"
        "from pkg.models import Base\n\n\n"
        "class Head(Base):\n"
        "    def forward(self, x):\n"
        "        return x + torch.ones(3)\n"
    )
    alone = lint_source(text, "head.py", CODES)
    with_index = lint_source(text, "head.py", CODES, project=ProjectContext("pkg.head", False, index))
    assert [d.code for d in with_index.diagnostics] == ["DL001"]
    assert with_index.consulted == {"pkg.models": index.digest_of("pkg.models")}
    assert [d.code for d in alone.diagnostics] == ["DL001"] or alone.diagnostics == []


def test_torch_names_are_the_vocabularys_even_when_the_run_checks_torch():
    """Checking torch's own package, ``torch.nn.Module`` resolves through the
    index to a project class (torch/nn/modules/module.py, no base, so no
    summary calls it a module): the vocabulary describes torch's names."""
    modules = _summary_of(MODELS, "torch.nn.modules.module")
    modules["classes"] = {"Module": dict(modules["classes"]["Base"], name="Module", bases=[], is_module=False)}
    index = ProjectIndex({"torch.nn.modules.module": modules},
                         aliases={"torch.nn": {"*torch.nn.modules": "torch.nn.modules"},
                                  "torch.nn.modules": {"Module": "torch.nn.modules.module.Module"}})
    text = (
        "import torch\n\n\n"
        "class Linear(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.weight = torch.rand(5, 5)\n\n"
        "    def forward(self, x):\n"
        "        return x @ self.weight\n"
    )
    assert index.resolve("torch.nn.modules.Module") is None
    found = lint_source(text, "torch/testing/fixtures.py", CODES,
                        project=ProjectContext("torch.testing.fixtures", False, index)).diagnostics
    assert [d.code for d in found] == ["DL006"]
    assert "no `nn.Module`" not in found[0].message and "plain tensor attribute" in found[0].message


# -- runs -------------------------------------------------------------------------
TRAIN = """
import torch.nn as nn

from models import Split

model = nn.DataParallel(Split())
"""


def _project(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "train.py").write_text(TRAIN)


def _check(tmp_path, cache=None, project=True):
    return {os.path.normpath(r.path): r for r in check_tree(tmp_path, project=project, cache=cache)}


def test_a_cross_file_finding_says_where_the_other_half_is(tmp_path):
    _project(tmp_path)
    found = _check(tmp_path)["train.py"].diagnostics
    assert [d.code for d in found] == ["DL004"]
    assert "`Split` (models.py:12)" in found[0].message
    assert found[0].related == [("models.py", 12, "Split places its parts on devices itself")]
    data = found[0].to_json()
    assert data["related"] == [{"filename": "models.py", "line": 12, "message": "Split places its parts on devices itself"}]
    assert _check(tmp_path, project=False)["train.py"].diagnostics == []


def test_the_cache_depends_on_the_summaries_consulted(tmp_path):
    from devlint.cache import ResultCache

    _project(tmp_path)
    folder = str(tmp_path / ".cache")
    first = _check(tmp_path, ResultCache(folder, "k"))
    assert [d.code for d in first["train.py"].diagnostics] == ["DL004"]
    # an edit of a body that leaves the summary unchanged: train.py's cached result stands
    (tmp_path / "models.py").write_text(MODELS.replace("return self.b(self.a(x).to(devices[1]))", "y = self.a(x)\n        return self.b(y.to(devices[1]))"))
    cache = ResultCache(folder, "k")
    second = _check(tmp_path, cache)
    assert second["train.py"].consulted == first["train.py"].consulted
    # an edit that changes the summary (no more manual placement): train.py is checked again
    (tmp_path / "models.py").write_text(MODELS.replace(".to(devices[0])", "").replace(".to(devices[1])", ""))
    third = _check(tmp_path, ResultCache(folder, "k"))
    assert third["train.py"].diagnostics == []
    assert third["train.py"].consulted != first["train.py"].consulted


def test_a_result_checked_alone_never_stands_for_a_project_one(tmp_path):
    from devlint.cache import ResultCache

    _project(tmp_path)
    folder = str(tmp_path / ".cache")
    assert _check(tmp_path, ResultCache(folder, "k"), project=False)["train.py"].diagnostics == []
    assert [d.code for d in _check(tmp_path, ResultCache(folder, "k"))["train.py"].diagnostics] == ["DL004"]


def test_the_cli_checks_the_project_and_no_project_turns_it_off(tmp_path):
    from click.testing import CliRunner

    from devlint.cli import main

    _project(tmp_path)
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        on = runner.invoke(main, ["check", "--no-cache", "--output-format", "sarif", "."])
        off = runner.invoke(main, ["check", "--no-cache", "--no-project", "."])
    finally:
        os.chdir(cwd)
    assert on.exit_code == 1, on.output
    sarif = json.loads(on.output)
    result = sarif["runs"][0]["results"][0]
    assert result["ruleId"] == "DL004"
    assert result["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "models.py"
    assert result["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 12
    assert off.exit_code == 0, off.output


def test_a_module_that_does_not_parse_leaves_its_importers_checked(tmp_path):
    (tmp_path / "models.py").write_text("import torch\n\n\nclass Broken(:\n")
    (tmp_path / "train.py").write_text(TRAIN.replace("Split", "Broken"))
    results = _check(tmp_path)
    assert results["models.py"].diagnostics[0].code == "DL000"  # the syntax error
    assert results["train.py"].diagnostics == [] and not results["train.py"].internal_errors


def test_a_warm_project_run_never_imports_libcst(tmp_path):
    import subprocess
    import sys

    _project(tmp_path)
    env = dict(os.environ)
    env["DEVLINT_CACHE_DIR"] = str(tmp_path / ".cache")
    cmd = [sys.executable, "-X", "importtime", "-m", "devlint", "check", "."]
    cold = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    warm = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert cold.returncode == warm.returncode == 1 and "DL004" in warm.stdout
    assert "libcst" not in warm.stderr


# -- function summaries -------------------------------------------------------------
GRID = """
import torch


def create_grid(n):
    return torch.linspace(0, 1, n)


def like(x):
    return torch.zeros_like(x)


def placed(n, device):
    return torch.arange(n, device=device)


def device_of(m):
    return next(m.parameters()).device


def guarded_device_of(m):
    try:
        return next(m.parameters()).device
    except StopIteration:
        return torch.device("cpu")
"""


def test_only_functions_that_return_a_cpu_tensor_whatever_they_get_are_summarised():
    index = ProjectIndex()
    result = lint_source(GRID, "grid.py", CODES, project=ProjectContext("pkg.grid", False, index), summarize=True, exports=("*",))
    assert result.summary["functions"] == {
        "create_grid": {"returns": "cpu", "line": 5, "made_by": "linspace"},
        # computed on (or placed by) what they are given
        "like": {"follows": True, "line": 9},
        "placed": {"follows": True, "line": 13},
        "device_of": {"first_parameter": [0], "line": 17},  # guarded_device_of: a StopIteration fallback, as DL013 reads it
    }
    only = lint_source(GRID, "grid.py", CODES, project=ProjectContext("pkg.grid", False, ProjectIndex()), summarize=True,
                       exports=("like",))
    assert only.summary["functions"] == {"like": {"follows": True, "line": 9}}


def test_the_plan_knows_which_names_each_module_exports(tmp_path):
    (tmp_path / "grid.py").write_text(GRID)
    (tmp_path / "a.py").write_text("from grid import create_grid\n")
    (tmp_path / "b.py").write_text("import grid as G\n")
    (tmp_path / "c.py").write_text("import torch\n")
    (tmp_path / "d.py").write_text("from grid import like\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        plan = make_plan(["grid.py", "a.py", "c.py", "d.py"], ["."])
        with_module = make_plan(["grid.py", "a.py", "b.py"], ["."])
    finally:
        os.chdir(cwd)
    assert plan.files["grid.py"].exports == {"create_grid", "like"}
    assert with_module.files["grid.py"].exports == {"create_grid", "*"}
    assert plan.files["grid.py"].summarize and not plan.files["c.py"].summarize


@pytest.mark.parametrize("spelling, call", [
    ("from grid import create_grid", "create_grid(x.shape[-1])"),
    ("import grid as G", "G.create_grid(x.shape[-1])"),
])
def test_a_cpu_tensor_made_by_a_project_function_meets_the_inputs(tmp_path, spelling, call):
    (tmp_path / "grid.py").write_text(GRID)
    (tmp_path / "model.py").write_text(
        f"import torch.nn as nn\n\n{spelling}\n\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x - {call}\n"
    )
    found = _check(tmp_path)["model.py"].diagnostics
    assert [d.code for d in found] == ["DL001"]
    assert "returns a tensor it creates on the CPU with `torch.linspace` (grid.py:5)" in found[0].message
    assert found[0].related == [("grid.py", 5, "`create_grid` creates its tensor on the CPU")]
    assert found[0].fix is not None and found[0].fix.is_safe
    assert _check(tmp_path, project=False)["model.py"].diagnostics == []


def test_a_module_no_rule_needs_is_summarised_from_the_scan_unless_importers_need_more(tmp_path):
    (tmp_path / "blocks.py").write_text(
        "import torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.proj = nn.Linear(4, 4)\n\n    def forward(self, x):\n        return self.proj(x)\n"
    )
    (tmp_path / "pinned.py").write_text(
        "import torch.nn as nn\n\n\nclass Pinned(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.proj = nn.Linear(4, 4).to('cuda:1')\n\n    def forward(self, x):\n        return self.proj(x)\n"
    )
    (tmp_path / "train.py").write_text("from blocks import Block\nfrom pinned import Pinned\n")
    results = _check(tmp_path)
    light = results["blocks.py"].summary["classes"]["Block"]
    assert light["light"] and light["is_module"] and light["anchor_tensor"] == "proj.weight"
    full = results["pinned.py"].summary["classes"]["Pinned"]
    assert "light" not in full and full["attributes"]["proj"]["device"] == "'cuda:1'"


def test_a_class_that_registers_buffers_is_summarised_from_the_scan_with_them(tmp_path):
    # no rule needs base.py: its summary comes from the scan (no parse), and
    # still says which names Base registered, for a subclass in another file
    (tmp_path / "base.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Base(nn.Module):\n    def __init__(self, n):\n"
        "        super().__init__()\n        self.register_buffer('table', torch.zeros(n))\n"
        "        self.proj = nn.Linear(n, n)\n\n    def forward(self, x):\n        return self.proj(x) + self.table\n"
    )
    (tmp_path / "model.py").write_text(
        "import torch\n\nfrom base import Base\n\n\nclass Model(Base):\n    def __init__(self, n):\n"
        "        super().__init__(n)\n        self.table = torch.ones(n)\n        self.extra = torch.ones(n)\n\n"
        "    def forward(self, x):\n        return super().forward(x * self.extra + self.table)\n"
    )
    results = _check(tmp_path)
    light = results["base.py"].summary["classes"]["Base"]
    assert light["light"] and light["buffers"] == ["table"] and light["anchor_tensor"] == "table"
    found = [(d.code, d.line) for d in results["model.py"].diagnostics]
    assert found == [("DL006", 10)]  # self.extra; self.table updates the base's buffer


def test_an_exported_function_calling_getattr_needs_a_parse_only_to_unwrap_module(tmp_path):
    from devlint.project.summary import exported_function_kinds
    from devlint.scan import scan_source

    plain = scan_source("def pick(obj, name):\n    return getattr(obj, name)\n")
    unwrap = scan_source("def unwrap(model):\n    return getattr(model, 'module', model)\n")
    assert exported_function_kinds(plain, ["pick"]) == {}
    assert exported_function_kinds(unwrap, ["unwrap"]) == {"unwrap": {"unwraps"}}


def test_lazy_and_type_checking_imports_do_not_order_the_files():
    text = (
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from .models.bert import BertModel\n"
        "try:\n"
        "    from .x import Y\n"
        "except ImportError:\n"
        "    pass\n\n\n"
        "def f():\n"
        "    from .lazy import Z\n"
        "    return Z\n"
    )
    got = read_imports(text, "pkg", True)
    assert "pkg.x.Y" in got.targets  # a guarded import runs with the module
    assert not any(t.startswith(("pkg.models", "pkg.lazy")) for t in got.targets)
    assert got.aliases["BertModel"] == "pkg.models.bert.BertModel"  # still a name of the module
    assert "Z" not in got.aliases


def test_a_module_of_another_file_meets_only_its_main_input(tmp_path):
    (tmp_path / "text.py").write_text(
        "import torch.nn as nn\n\n\nclass TextModel(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.embed = nn.Embedding(10, 4)\n\n    def forward(self, ids, encoder_attention_mask=None):\n"
        "        return self.embed(ids)\n"
    )
    (tmp_path / "model.py").write_text(
        "import torch\nimport torch.nn as nn\n\nfrom text import TextModel\n\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.text = TextModel()\n\n"
        "    def forward(self, ids, feats):\n"
        "        mask = torch.ones(feats.shape[:-1], dtype=torch.long)\n"
        "        a = self.text(ids, encoder_attention_mask=mask)\n"
        "        return a + self.text(torch.arange(ids.shape[1]))\n"
    )
    found = _check(tmp_path)["model.py"].diagnostics
    # the mask goes to a forward devlint does not see (it may move it); the main input meets the weights
    assert [(d.code, d.line) for d in found] == [("DL001", 15)]


def test_a_run_on_a_few_files_reads_the_summaries_the_last_whole_run_stored(tmp_path):
    from click.testing import CliRunner

    from devlint.cli import main

    _project(tmp_path)
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    env = {"DEVLINT_CACHE_DIR": str(tmp_path / ".cache")}
    try:
        alone_first = runner.invoke(main, ["check", "train.py"], env=env)
        whole = runner.invoke(main, ["check", "."], env=env)
        alone = runner.invoke(main, ["check", "train.py"], env=env)
        hook = runner.invoke(main, ["check", "--hook", "train.py"], env=env)
        no_project = runner.invoke(main, ["check", "--no-project", "--no-cache", "train.py"], env=env)
        # models.py changed since: its stored summary no longer stands, nothing stale is reported
        (tmp_path / "models.py").write_text(MODELS.replace(".to(devices[0])", "").replace(".to(devices[1])", ""))
        after_edit = runner.invoke(main, ["check", "train.py"], env=env)
    finally:
        os.chdir(cwd)
    # nothing stored yet: train.py alone follows its import of models.py
    assert alone_first.exit_code == 1 and "DL004" in alone_first.output and "(models.py:12)" in alone_first.output
    assert whole.exit_code == 1 and "DL004" in whole.output
    assert alone.exit_code == 1 and "DL004" in alone.output and "models.py:12" in alone.output
    assert hook.exit_code == 1 and "DL004" in hook.output
    assert no_project.exit_code == 0, no_project.output
    assert after_edit.exit_code == 0, after_edit.output


def test_a_run_follows_the_imports_of_its_files(tmp_path, monkeypatch):
    """A run on one file reads the summaries of the project files it
    imports, transitively (a base class two modules away), and never
    reports a finding of theirs; a name that resolves to no file of the
    project (torch) stays unknown."""
    from devlint.project.plan import follow_imports

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .kernels import Scaled\n")
    (tmp_path / "pkg" / "base.py").write_text("import torch\n\n\nclass Base(torch.nn.Module):\n    pass\n")
    (tmp_path / "pkg" / "kernels.py").write_text(
        "import torch\nfrom .base import Base\n\n\nclass Kernel(Base):\n    def forward(self, x):\n"
        "        return x + torch.zeros(3)\n\n\nclass Scaled(Kernel):\n    pass\n"
    )
    (tmp_path / "pkg" / "scaled.py").write_text(
        "import torch\nfrom .kernels import Kernel\n\n\nclass Wide(Kernel):\n"
        "    def __init__(self):\n        super().__init__()\n        self.w = torch.nn.Parameter(torch.ones(4))\n\n"
        "    def reset(self, x):\n        d = torch.zeros(4)\n        self.w.data.div_(d)\n"
    )
    assert sorted(follow_imports(["pkg/scaled.py"], ["."])) == ["pkg/base.py", "pkg/kernels.py"]
    found = _cli_check(tmp_path, "pkg/scaled.py")
    assert "pkg/scaled.py:11" in found and "DL001" in found
    assert "kernels.py" not in found.split("DL001")[0]  # kernels.py's own finding is not this run's


def _cli_check(tmp_path, *args) -> str:
    from click.testing import CliRunner

    from devlint.cli import main

    result = CliRunner().invoke(main, ["check", "--no-cache", *args])
    return result.output


def test_a_star_import_re_exports_the_public_names(tmp_path, monkeypatch):
    """``from .models import *`` in ``pkg/__init__.py``: ``pkg.Split`` is
    the class of ``pkg.models`` (public names only), found on a cold run on
    train.py alone too."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .models import *\n")
    (tmp_path / "pkg" / "models.py").write_text(MODELS)
    (tmp_path / "train.py").write_text(TRAIN.replace("from models import", "from pkg import"))
    assert "from pkg import" in (tmp_path / "train.py").read_text()
    assert "DL004" in _cli_check(tmp_path, "train.py")
    assert "DL004" in _cli_check(tmp_path, ".")
    index = ProjectIndex(summaries={"pkg.models": {"classes": {"Split": {}, "_Hidden": {}}}},
                         aliases={"pkg": {"*pkg.models": "pkg.models"}}, paths={})
    assert index.resolve("pkg.Split", None) == ("pkg.models", "Split")
    assert index.resolve("pkg._Hidden", None) is None  # a star import brings no private name


def test_a_cold_run_orders_a_package_whose_init_relays_its_modules(tmp_path, monkeypatch):
    """``pkg/__init__.py`` imports every module and one of them imports
    ``pkg``: the relay closes an import cycle. The __init__ defines nothing,
    so the cycle does not hold: the base class's module runs first and the
    subclass's sees it on a cold run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .base import Base\nfrom .wide import Wide\n")
    (tmp_path / "pkg" / "base.py").write_text("import torch\nimport pkg\n\n\nclass Base(torch.nn.Module):\n    pass\n")
    (tmp_path / "pkg" / "wide.py").write_text(
        "import torch\nfrom .base import Base\n\n\nclass Wide(Base):\n"
        "    def __init__(self):\n        super().__init__()\n        self.w = torch.nn.Parameter(torch.ones(4))\n\n"
        "    def reset(self):\n        d = torch.zeros(4)\n        self.w.data.div_(d)\n"
    )
    plan = make_plan(["pkg/__init__.py", "pkg/base.py", "pkg/wide.py"], ["."])
    assert plan.waves == [["pkg/base.py"], ["pkg/wide.py"], ["pkg/__init__.py"]]
    assert "pkg/wide.py:11" in _cli_check(tmp_path, ".")


def test_seeded_summaries_bring_their_import_aliases(tmp_path, monkeypatch):
    """A run on a few files seeds the other files' summaries from the cache;
    their import aliases (how re-exports resolve) come with the summary, not
    from reading the file's imports again; an older summary without them
    still works."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .lm import LanguageModel\n")
    (tmp_path / "train.py").write_text("from pkg import LanguageModel\n")
    stored = {"version": 2, "module": "pkg", "classes": {}, "aliases": {"LanguageModel": "pkg.lm.LanguageModel"}}
    seed = [("pkg/__init__.py", "pkg", True, stored, "this text is not read for its imports")]
    plan = make_plan(["train.py"], ["."], seed)
    assert plan.aliases["pkg"] == {"LanguageModel": "pkg.lm.LanguageModel"}
    older = dict(stored)
    del older["aliases"]
    plan = make_plan(["train.py"], ["."], [("pkg/__init__.py", "pkg", True, older, "from .lm import LanguageModel\n")])
    assert plan.aliases["pkg"] == {"LanguageModel": "pkg.lm.LanguageModel"}


def test_a_script_in_a_subfolder_follows_its_sibling_modules(tmp_path, monkeypatch):
    """``python scripts/train.py`` finds ``scripts/models.py`` as ``models``
    (its folder is on sys.path): a run on the script alone, from the
    project root, follows it there as the run's own resolution does."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.devlint]\n")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "models.py").write_text(MODELS)
    (tmp_path / "scripts" / "train.py").write_text(TRAIN)
    assert "DL004" in _cli_check(tmp_path, "scripts/train.py")
    # a package's module is no script: its folder is not on sys.path
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "models.py").write_text(MODELS)
    (tmp_path / "pkg" / "train.py").write_text(TRAIN)
    assert "DL004" not in _cli_check(tmp_path, "pkg/train.py")


def test_standard_input_named_in_the_project_sees_the_project(tmp_path, monkeypatch):
    """``check - --stdin-filename train.py`` (an editor piping its buffer)
    uses the project the name places it in, with the buffer's own imports;
    without a name, with --isolated, or with ``project = false`` the source
    is checked alone."""
    from click.testing import CliRunner

    from devlint.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "train.py").write_text("print('the file on disk imports nothing')\n")

    def run(*args: str) -> str:
        return CliRunner().invoke(main, ["check", *args], input=TRAIN).output

    assert "DL004" in run("-", "--stdin-filename", "train.py")
    assert "DL004" not in run("-")
    assert "DL004" not in run("-", "--stdin-filename", "train.py", "--isolated")
    (tmp_path / "pyproject.toml").write_text("[tool.devlint]\nproject = false\n")
    assert "DL004" not in run("-", "--stdin-filename", "train.py")
    assert "DL004" not in _cli_check(tmp_path, "train.py", "models.py")
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "pyproject.toml").write_text("[tool.devlint]\nproject = true\n")
    assert "DL004" in _cli_check(tmp_path, "train.py", "models.py")


@pytest.mark.parametrize("relay", ["from .rotations import random_angles\n", "from .rotations import *  # noqa\n"])
def test_a_relay_taken_as_a_module_orders_its_importer_after_what_it_relays(tmp_path, monkeypatch, relay):
    """``from pkg import geometry`` then ``geometry.random_angles()``, where
    ``pkg/geometry/__init__.py`` relays ``rotations.py`` (by name, or by a
    star import): the importer runs after ``rotations.py`` on a cold run, so
    it sees the summary, and the pre-filter knows the relayed helper; a
    module inside the relayed package importing it orders nothing (the cycle)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg" / "geometry").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "geometry" / "__init__.py").write_text(relay)
    (tmp_path / "pkg" / "geometry" / "rotations.py").write_text(
        "import torch\nimport pkg.geometry\n\n\ndef random_angles(n):\n    return torch.rand(n), torch.rand(n)\n"
    )
    (tmp_path / "pkg" / "spin.py").write_text(
        "import torch\nfrom pkg import geometry\n\n\nclass Spin(torch.nn.Module):\n"
        "    def forward(self, x):\n        a, b = geometry.random_angles(x.shape[0])\n        return x * a\n"
    )
    files = ["pkg/__init__.py", "pkg/geometry/__init__.py", "pkg/geometry/rotations.py", "pkg/spin.py"]
    plan = make_plan(files, ["."])
    waves = [set(w) for w in plan.waves]
    first = next(i for i, w in enumerate(waves) if "pkg/geometry/rotations.py" in w)
    assert first < next(i for i, w in enumerate(waves) if "pkg/spin.py" in w)
    out = _cli_check(tmp_path, ".")
    assert "pkg/spin.py:7" in out and "returns tensors it creates on the CPU with `torch.rand`" in out


def test_a_function_returning_a_sequence_of_cpu_tensors_is_summarised():
    src = (
        "import torch\n\n\ndef angles(n):\n    return torch.rand(n), torch.rand(n), torch.tensor(0.5)\n\n\n"
        "def axes(sizes):\n    out = []\n    for s in sizes:\n        out.append(torch.linspace(0, 1, s))\n    return out\n\n\n"
        "def scalars(n):\n    return torch.tensor(1.0), torch.tensor(2.0)\n\n\n"
        "def mixed(x):\n    return torch.rand(3), x\n"
    )
    result = lint_source(src, "geo.py", CODES, project=ProjectContext("geo", False, ProjectIndex()), summarize=True, exports=("*",))
    functions = result.summary["functions"]
    assert functions["angles"] == {"returns": "cpu", "made_by": "rand", "items": [False, False, True], "elem_scalar": False, "line": 4}
    assert functions["axes"]["returns"] == "cpu" and functions["axes"]["items"] == []
    assert "scalars" not in functions  # 0-dim tensors mix with any device
    assert "mixed" not in functions  # one element follows the argument


def test_a_function_computing_on_its_arguments_follows_them_across_files(tmp_path):
    """``rotation_z(alpha)`` of another module returns a tensor on its
    argument's device: a CPU-made argument comes back on the CPU, an input's
    tensor stays on the inputs' device."""
    (tmp_path / "geo.py").write_text(
        "import torch\n\n\ndef rotation_z(alpha):\n    c, s = alpha.cos(), alpha.sin()\n"
        "    return torch.stack([c, -s, s, c], dim=-1).view(-1, 2, 2)\n"
    )
    result = lint_source((tmp_path / "geo.py").read_text(), "geo.py", CODES, project=ProjectContext("geo", False, ProjectIndex()),
                         summarize=True, exports=("*",))
    assert result.summary["functions"] == {"rotation_z": {"follows": True, "line": 4}}
    (tmp_path / "model.py").write_text(
        "import torch\nimport torch.nn as nn\n\nfrom geo import rotation_z\n\n\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        r = rotation_z(torch.rand(x.shape[0]))\n        return torch.bmm(x, r)\n\n"
        "    def fine(self, x):\n        return torch.bmm(x, rotation_z(x[:, 0, 0]))\n"
    )
    found = _check(tmp_path)["model.py"].diagnostics
    assert [(d.code, d.line) for d in found] == [("DL001", 9)]
    assert _check(tmp_path, project=False)["model.py"].diagnostics == []


def test_a_project_function_that_returns_its_argument_unwrapped_is_summarised(tmp_path):
    """``model = bare(model)`` with ``bare`` in another file returning
    ``getattr(m, "module", m)``: what comes back is no wrapper, so wrapping
    it again in a method that runs often wraps once each time."""
    (tmp_path / "parallel.py").write_text(
        'def bare(model):\n    return getattr(model, "module", model)\n\n\ndef same(model):\n    return model\n\n\n'
        'def inner(model):\n    return model.module\n'
    )
    trainer = (
        "import torch\nfrom torch import nn\n\nfrom parallel import bare\n\n\nclass Trainer:\n"
        "    def __init__(self, model):\n        self.model = model.cuda()\n\n"
        "    def stage(self):\n        self.model = bare(self.model)\n        self.model = nn.DataParallel(self.model)\n"
    )
    (tmp_path / "train.py").write_text(trainer)
    summary = lint_source((tmp_path / "parallel.py").read_text(), "parallel.py", CODES,
                          project=ProjectContext("parallel", False, ProjectIndex()), summarize=True, exports=("*",))
    assert summary.summary["functions"] == {"bare": {"unwraps": [0], "line": 1}, "inner": {"unwraps": [0], "line": 9}}
    assert _check(tmp_path)["train.py"].diagnostics == []
    # alone, ``bare`` is a callee devlint cannot see: it may return the wrapper
    assert [d.code for d in _check(tmp_path, project=False)["train.py"].diagnostics] == ["DL003"]


def test_a_following_function_given_a_device_is_read_as_any_unknown_call(tmp_path):
    """``_gaussian(n, dtype, device)`` of another module places its tensor by
    the device it is given: the summary's ``follows`` (which follows tensor
    arguments) says nothing there, and the kernel built on the other branch
    with ``torch.ones`` still meets the inputs (as file by file)."""
    (tmp_path / "helper.py").write_text(
        "import torch\n\n\ndef gaussian(n, dtype, device):\n"
        "    x = torch.arange(n, dtype=dtype, device=device)\n    return torch.exp(-x ** 2)\n"
    )
    (tmp_path / "ssim.py").write_text(
        "import torch\nimport torch.nn.functional as F\n\nfrom helper import gaussian\n\n\n"
        "def ssim(preds, smooth):\n    if smooth:\n        kernel = gaussian(5, preds.dtype, preds.device)\n"
        "    else:\n        kernel = torch.ones(5) / 5\n    return F.conv1d(preds, kernel.view(1, 1, -1))\n"
    )
    alone = [(d.code, d.line) for d in _check(tmp_path, project=False)["ssim.py"].diagnostics]
    assert alone == [("DL001", 11)]
    assert [(d.code, d.line) for d in _check(tmp_path)["ssim.py"].diagnostics] == alone


def _detection_package(tmp_path, monkeypatch, head: str) -> None:
    """``det/outputs.py`` (an output dataclass of tensor fields) and
    ``det/post.py``: ``head`` (its imports and the ``def`` line of
    ``rescale``) then CPU sizes multiplied with ``outputs.boxes``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "det").mkdir()
    (tmp_path / "det" / "__init__.py").write_text("")
    (tmp_path / "det" / "outputs.py").write_text(
        "from dataclasses import dataclass\nfrom typing import Optional\n\nimport torch\n\n\n"
        "@dataclass\nclass DetectionOutput:\n    boxes: Optional[torch.FloatTensor] = None\n"
    )
    (tmp_path / "det" / "post.py").write_text(head + "    scale = torch.tensor([w, h, w, h])\n    return outputs.boxes * scale\n")


def test_an_output_class_of_another_module_lends_its_tensor_fields(tmp_path, monkeypatch):
    """``outputs: DetectionOutput`` imported from the modeling module, whose
    body annotates tensors (a module with no nn.Module class of its own
    still gets a summary for it): the post-processing file passes the
    pre-filter and its CPU sizes meet ``outputs.boxes``."""
    _detection_package(
        tmp_path,
        monkeypatch,
        "import torch\n\nfrom .outputs import DetectionOutput\n\n\n"
        "def rescale(outputs: DetectionOutput, h: int, w: int):\n",
    )
    out = _cli_check(tmp_path, ".")
    assert "det/post.py:7" in out and "meets `outputs.boxes`" in out
    from devlint.scan import scan_source

    scan = scan_source((tmp_path / "det" / "post.py").read_text())
    assert not scan.may_hold_local_tensors()  # alone the scan sees no tensor here
    scan.record_classes = {"DetectionOutput"}
    assert scan.may_hold_local_tensors() and scan.may_hold_local_tensors_in(None, "rescale")


def test_an_import_for_annotations_orders_the_files_where_it_closes_no_cycle(tmp_path, monkeypatch):
    """``if TYPE_CHECKING: from .outputs import DetectionOutput``: the
    importer is checked after ``outputs.py`` (whose summary then lends the
    class's tensor fields); an annotation-only import whose target already
    waits for the importer is left out (it would close a cycle), and of two
    such imports between the same modules only the first is taken."""
    from devlint.project.plan import _after_typing_imports

    _detection_package(
        tmp_path,
        monkeypatch,
        "from typing import TYPE_CHECKING\n\nimport torch\n\nif TYPE_CHECKING:\n    from .outputs import DetectionOutput\n\n\n"
        "def rescale(outputs: \"DetectionOutput\", h: int, w: int):\n",
    )
    files = ["det/__init__.py", "det/outputs.py", "det/post.py"]
    waves = [set(w) for w in make_plan(files, ["."]).waves]
    at = {f: next(i for i, w in enumerate(waves) if f in w) for f in files}
    assert at["det/outputs.py"] < at["det/post.py"]
    out = _cli_check(tmp_path, ".")
    assert "det/post.py:10" in out and "meets `outputs.boxes`" in out
    # a typing import whose target already waits for its source is left out
    assert _after_typing_imports([["a"], ["b"]], {"b": ["a"]}, {"a": {"b"}}) == [["a"], ["b"]]
    assert _after_typing_imports([["a", "b"]], {}, {"a": {"b"}}) == [["b"], ["a"]]
    assert _after_typing_imports([["a", "b"]], {}, {"a": {"b"}, "b": {"a"}}) in ([["b"], ["a"]], [["a"], ["b"]])
