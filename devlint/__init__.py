"""devlint: find and fix PyTorch device-placement bugs before they reach a GPU."""

__version__ = "0.1.0"

from devlint.diagnostic import Diagnostic, Edit, Fix, FixSafety  # noqa: E402
from devlint.engine import FileResult, fix_source, lint_source  # noqa: E402

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
