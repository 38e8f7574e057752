"""DL100 unused-noqa

## What it does
Reports a `# noqa: DLxxx` code that suppresses nothing: no finding of that
code is reported on its line (or the code names no devlint rule). Off by
default: enable it with `--extend-select DL100` or
`extend-select = ["DL100"]` in `[tool.devlint]`.

Only codes of rules that ran on the file are judged: a `# noqa: DL003` is
left alone when DL003 is not enabled, and so are other tools' codes
(`# noqa: E501`), a bare `# noqa` and the file-level `# devlint: noqa`. A
line can opt out with `# noqa: DL100`.

It is implemented by the engine (`devlint/noqa.py`) in its suppression step,
not as a visitor: whether a suppression is used depends on what every other
rule found.

## Why is this bad?
A stale suppression hides the next real bug on that line. After
`devlint check --add-noqa` baselined a codebase, each `# noqa: DL001` marks a
line that would crash with

```
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!
```

Once the line is fixed (or rewritten) the comment no longer suppresses
anything, but it would silently suppress a new error introduced there later.

## Example
```python
def forward(self, x):
    mask = torch.ones(x.shape, device=x.device)  # noqa: DL001
```

## Use instead
```python
def forward(self, x):
    mask = torch.ones(x.shape, device=x.device)
```

## Fix safety
Safe: it removes only the unused codes from the comment (the whole comment
when nothing else is left in it); nothing that was suppressed reappears.
"""

from __future__ import annotations

from devlint.rule import Invalid, Rule, Valid


class UnusedNoqa(Rule):
    # The engine reports this code itself (devlint/noqa.py): the class carries
    # the documentation, the examples and the default.
    code = "DL100"
    name = "unused-noqa"
    brief = "A `# noqa: DLxxx` comment that suppresses nothing"
    message = "`# noqa` suppresses nothing here"
    fix_safety = "safe"
    tokens = ("noqa", "NOQA")
    enabled_by_default = False

    VALID = [
        Valid(
            """
import torch

x = 1  # noqa: E501
y = 2  # noqa
z = 3  # noqa: DL001
"""
        ),
    ]
    INVALID = [
        Invalid(
            """
import torch

x = torch.zeros(3)  # noqa: DL999
""",
            """
import torch

x = torch.zeros(3)
""",
        ),
        Invalid(
            """
import torch

# noqa: DL099, E501
x = torch.zeros(3)  # keep this  # noqa: DL998
""",
            """
import torch

# noqa: E501
x = torch.zeros(3)  # keep this
""",
            count=2,
        ),
    ]
