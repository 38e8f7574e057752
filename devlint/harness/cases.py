"""The case convention (docs/harness.md): what a ``devlint_cases()`` entry
may hold, with its defaults. No torch here: the parent uses it too."""

from __future__ import annotations

import ast
import os
from typing import Any, Dict

PLACEMENTS = ("data_parallel", "as_written", "call", "checkpoint", "ddp")

#: keys every case of a placement needs (all must be callables but ``name``)
REQUIRED = {
    "data_parallel": ("model", "inputs"),
    "as_written": ("model", "inputs"),
    "call": ("run",),
    "checkpoint": ("state", "load"),
    "ddp": ("run",),
}

#: optional keys and their defaults, per placement
DEFAULTS: Dict[str, Dict[str, Any]] = {
    "data_parallel": {"devices": 2, "seed": 0, "model_device": "cuda:0", "input_device": None, "output_device": None},
    "as_written": {"devices": 2, "seed": 0, "model_device": None, "input_device": "first_parameter", "output_device": None},
    "call": {"devices": 2, "seed": 0, "output_device": None},
    "checkpoint": {"devices": 1, "seed": 0},
    # output_device "rank": each rank's own GPU, cuda:<LOCAL_RANK>
    "ddp": {"world_size": 2, "seed": 0, "argv": (), "checkpoints": {}, "output_device": "rank"},
}

CASES_FUNCTION = "devlint_cases"


class CaseError(Exception):
    """A case that does not follow the convention."""


def check_case(case: Any) -> Dict[str, Any]:
    """The case with its defaults filled in; CaseError when malformed."""
    if not isinstance(case, dict):
        raise CaseError(f"a case must be a dict, got {type(case).__name__}")
    name = case.get("name")
    if not isinstance(name, str) or not name:
        raise CaseError("a case needs a non-empty string 'name'")
    placement = case.get("placement")
    if placement not in PLACEMENTS:
        raise CaseError(f"case {name!r}: 'placement' must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    for key in REQUIRED[placement]:
        if not callable(case.get(key)):
            raise CaseError(f"case {name!r}: {key!r} must be a callable (a lambda or a function)")
    known = {"name", "placement", *REQUIRED[placement], *DEFAULTS[placement]}
    unknown = sorted(set(case) - known)
    if unknown:
        raise CaseError(f"case {name!r}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} for placement {placement!r}")
    out = dict(DEFAULTS[placement])
    out.update(case)
    if placement == "ddp":
        _check_ddp(name, out)
    devices = out["devices"]
    if not isinstance(devices, int) or isinstance(devices, bool) or devices < 1:
        raise CaseError(f"case {name!r}: 'devices' must be a positive int")
    if placement == "data_parallel" and devices < 2:
        raise CaseError(f"case {name!r}: data_parallel needs 'devices' >= 2")
    return out


def _check_ddp(name: str, case: Dict[str, Any]) -> None:
    """The ddp keys; ``devices`` is the number of ranks (one GPU each)."""
    ranks = case["world_size"]
    if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 2:
        raise CaseError(f"case {name!r}: 'world_size' must be an int >= 2")
    argv = case["argv"]
    if isinstance(argv, str) or not isinstance(argv, (list, tuple)) or not all(isinstance(a, str) for a in argv):
        raise CaseError(f"case {name!r}: 'argv' must be a list of strings (the script's arguments)")
    checkpoints = case["checkpoints"]
    if not isinstance(checkpoints, dict) or not all(
        isinstance(k, str) and k and os.path.basename(k) == k and callable(v) for k, v in checkpoints.items()
    ):
        raise CaseError(f"case {name!r}: 'checkpoints' must map file names (no folders) to callables returning what to save")
    case["argv"] = list(argv)
    case["devices"] = ranks


def declares_cases(text: str) -> bool:
    """Whether the source defines a module-level ``devlint_cases`` (read
    without running anything)."""
    if CASES_FUNCTION not in text:
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == CASES_FUNCTION for node in tree.body
    )
