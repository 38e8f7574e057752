"""The flake8 plugin: ``flake8 --select DL`` reports devlint's findings, with
flake8's own ``# noqa``, configuration (select / ignore / per-file-ignores)
and formatters deciding what is shown and how.

Registered under the ``flake8.extension`` entry point with the prefix ``DL``.
Every devlint rule that is on by default runs; DL100 (unused noqa) does not:
under flake8, suppressions are flake8's business. Syntax errors are left to
flake8 (E999).
"""

from __future__ import annotations

from typing import Any, Iterator, List, Sequence, Tuple, Type

from devlint import __version__


class DevlintChecker:
    """A flake8 "tree" plugin (flake8 requires the ``tree`` parameter to
    classify it); devlint parses ``lines`` with its own engine."""

    name = "devlint"
    version = __version__

    def __init__(self, tree: Any, lines: Sequence[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[Tuple[int, int, str, Type["DevlintChecker"]]]:
        from devlint.engine import lint_source

        result = lint_source("".join(self.lines), self.filename, _codes(), suppress=False)
        for d in result.diagnostics:
            if d.code == "DL000":
                continue
            yield d.line, max(d.col - 1, 0), f"{d.code} {d.message}", type(self)


def _codes() -> List[str]:
    from devlint.catalog import rule_table

    return [code for code, on in rule_table().items() if on]
