"""bench/precision.py: counts per rule, a deterministic sample with source
lines, internal errors surfaced (on a three-file stand-in corpus)."""

from __future__ import annotations

import importlib.util
import json
import textwrap

from conftest import ROOT


def _load_bench():
    spec = importlib.util.spec_from_file_location("precision_bench", ROOT / "bench" / "precision.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_precision_report_on_small_corpus(tmp_path):
    corpus = tmp_path / "corpus"
    for project in ("timm", "transformers", "torch"):
        (corpus / project / "pkg").mkdir(parents=True)
    (corpus / "timm" / "pkg" / "ckpt.py").write_text(
        textwrap.dedent(
            """
            import torch

            def resume(model, path):
                model.load_state_dict(torch.load(path))
            """
        )
    )
    (corpus / "torch" / "pkg" / "clean.py").write_text("import torch\nx = torch.load('a.pt', map_location='cpu')\n")
    (corpus / "transformers" / "pkg" / "broken.py").write_text("def f(:\n")
    out = tmp_path / "out"
    bench = _load_bench()
    status = bench.main([str(corpus), "--out", str(out), "--sample", "5", "--jobs", "1"])
    assert status == 0
    summary = json.loads((out / "precision.json").read_text())
    assert summary["counts"]["DL010"] == 1
    assert summary["samples"]["DL010"] == ["timm/pkg/ckpt.py:5"]
    assert summary["internal_errors"] == []
    report = (out / "precision-report.md").read_text()
    assert "| DL010 | 1 | 1 | 0 | 0 | 1 | 1 |" in report
    assert ">     5      model.load_state_dict(torch.load(path))" in report


def test_select_and_paths_restrict_the_run(tmp_path):
    corpus = tmp_path / "corpus"
    for project in ("timm", "transformers", "torch"):
        (corpus / project / "pkg").mkdir(parents=True)
        (corpus / project / "pkg" / "ckpt.py").write_text(
            "import torch\n\ndef resume(model, path):\n    model.load_state_dict(torch.load(path))\n"
        )
    out = tmp_path / "out"
    bench = _load_bench()
    status = bench.main([str(corpus), "--out", str(out), "--jobs", "1", "--select", "DL010", "--paths", "torch"])
    assert status == 0
    summary = json.loads((out / "precision.json").read_text())
    assert summary["counts"] == {"DL010": 1}
    assert summary["samples"]["DL010"] == ["torch/pkg/ckpt.py:4"]
    report = (out / "precision-report.md").read_text()
    assert "--select DL010" in report and "torch`" in report


def test_missing_corpus_without_builder_is_an_error(tmp_path):
    bench = _load_bench()
    try:
        bench.ensure_corpus(tmp_path / "nothing", None)
    except SystemExit as exc:
        assert "make_corpus.sh was not found" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("a missing corpus without a builder must stop the run")
