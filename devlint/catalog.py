"""The rule catalogue (codes, on by default or not) read from the rule modules'
text, so that a run answered from the result cache knows which rules are
enabled without importing them (importing a rule imports libcst, which costs
more than the whole warm run). ``tests/test_cache.py`` checks that it agrees
with :func:`devlint.rule.all_rules`; a module it cannot read falls back to
importing every rule.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Dict, List, Tuple

_CODE = re.compile(r"^    code(?:\s*:\s*[\w\[\]]+)?\s*=\s*[\"'](DL\d{3})[\"']\s*$", re.M)
_DEFAULT = re.compile(r"^    enabled_by_default(?:\s*:\s*[\w\[\]]+)?\s*=\s*(True|False)\s*$", re.M)


def rule_sources() -> List[Tuple[str, str]]:
    """(module file name, path) of every rule module, sorted."""
    import devlint.rules as package

    out = []
    for folder in package.__path__:
        for name in os.listdir(folder):
            if name.endswith(".py") and not name.startswith("_"):
                out.append((name, os.path.join(folder, name)))
    return sorted(out)


@functools.lru_cache(maxsize=None)
def rule_table() -> Dict[str, bool]:
    """Every rule code -> whether it is enabled by default, sorted by code."""
    table: Dict[str, bool] = {}
    for _, path in rule_sources():
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError:
            return _imported_table()
        codes = _CODE.findall(text)
        defaults = _DEFAULT.findall(text)
        if len(codes) != 1 or len(defaults) > 1 or codes[0] in table:
            return _imported_table()
        table[codes[0]] = not defaults or defaults[0] == "True"
    return dict(sorted(table.items()))


def _imported_table() -> Dict[str, bool]:
    from devlint.rule import all_rules

    return {code: rule.enabled_by_default for code, rule in all_rules().items()}
