"""devlint: find and fix PyTorch device-placement bugs before they reach a GPU."""

__version__ = "0.1.0"

from devlint.diagnostic import Diagnostic, Edit, FileResult, Fix, FixSafety  # noqa: E402

__all__ = [
    "Diagnostic",
    "Edit",
    "FileResult",
    "Fix",
    "FixSafety",
    "__version__",
    "fix_source",
    "lint_source",
]


def __getattr__(name: str):
    # the engine (and libcst with it) loads on first use, so that a run
    # answered from the result cache never imports libcst
    if name in ("fix_source", "lint_source"):
        from devlint import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'devlint' has no attribute {name!r}")
