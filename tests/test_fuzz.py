"""Fuzzing: generated and mutated Python through check and fix. No internal
error, and a fix never turns parseable code into unparseable code.

CI runs a modest number of examples. The long run (docs/reliability.md):

    DEVLINT_FUZZ_EXAMPLES=3000 .venv/bin/python -m pytest -q tests/test_fuzz.py
"""

from __future__ import annotations

import os

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from devlint.engine import fix_source, lint_source

EXAMPLES = int(os.environ.get("DEVLINT_FUZZ_EXAMPLES", "25"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 100,  # CI: the same examples every run
    suppress_health_check=list(HealthCheck),
)

SOURCES = sorted(p for p in FIXTURES.glob("DL*/*.py"))
TEXTS = [p.read_text() for p in SOURCES]


def _parses(text: str) -> bool:
    try:
        cst.parse_module(text)
        return True
    except Exception:
        return False


def _check_and_fix(text: str) -> None:
    for unsafe in (False, True):
        checked = lint_source(text, "fuzz.py")
        assert not checked.internal_errors, checked.internal_errors
        fixed = fix_source(text, "fuzz.py", unsafe=unsafe)
        assert not fixed.internal_errors, fixed.internal_errors
        if fixed.fixed_text is not None and fixed.fixed_text != text:
            assert _parses(text), "an unparseable file was changed"
            assert _parses(fixed.fixed_text), "the fix broke a file that parsed"
            again = fix_source(fixed.fixed_text, "fuzz.py", unsafe=unsafe)
            assert again.fixed_text == fixed.fixed_text, "fixing twice changed the code"


@st.composite
def mutated_fixture(draw) -> str:
    """A real fixture with lines deleted, duplicated, swapped or truncated,
    or cut short in the middle of a line."""
    lines = draw(st.sampled_from(TEXTS)).splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "truncate", "swap", "dedent", "indent"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "truncate":
            cut = draw(st.integers(0, max(len(lines[i]) - 1, 0)))
            lines[i] = lines[i][:cut] + "\n"
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "dedent":
            lines[i] = lines[i].lstrip(" ")
        else:
            lines[i] = "    " + lines[i]
    text = "".join(lines)
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]  # a file cut short
    return text


@SETTINGS
@given(mutated_fixture())
def test_mutated_fixtures(text):
    _check_and_fix(text)


def _hypothesmith():
    try:
        import hypothesmith
    except ImportError:  # pragma: no cover - optional test dependency
        return None
    return hypothesmith


@pytest.mark.skipif(_hypothesmith() is None, reason="hypothesmith is not installed")
@SETTINGS
@given(st.data())
def test_generated_programs(data):
    import hypothesmith

    program = data.draw(hypothesmith.from_node())
    # give the rules something to look at: torch imported, a module, a forward
    prelude = "import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n    def forward(self, x):\n        return torch.zeros(3)\n\n"
    _check_and_fix(prelude + program)


_SNIPPETS = [
    "torch.zeros(3)", "torch.arange(n)", "x.cuda()", "x.to('cuda:1')", "self.device", "nn.DataParallel(m)",
    "torch.load(f)", "nn.ModuleList(blocks)", "[Block() for _ in range(3)]", "x.device", "next(self.parameters())",
]


@st.composite
def torch_shaped_program(draw) -> str:
    """Small modules assembled from the fragments the rules look for."""
    body = []
    for _ in range(draw(st.integers(1, 6))):
        target = draw(st.sampled_from(["y", "self.x", "self.blocks", "z"]))
        body.append(f"        {target} = {draw(st.sampled_from(_SNIPPETS))}")
    method = draw(st.sampled_from(["forward", "__init__", "helper"]))
    wrap = draw(st.sampled_from(["", "model = M()\nmodel = nn.DataParallel(model)\nmodel.to('cuda:0')\n"]))
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n"
        f"    def {method}(self, x):\n" + "\n".join(body) + "\n        return x\n\n\n" + wrap
    )


@SETTINGS
@given(torch_shaped_program())
def test_torch_shaped_programs(text):
    _check_and_fix(text)
