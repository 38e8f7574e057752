"""Harness verdict cases (tests/test_harness.py): a finding the case runs
without the bug showing (evidence of a false alarm), and a bug devlint
does not report (missed)."""

import torch
from torch import nn


class OnesInForward(nn.Module):
    """DL001 on `torch.ones(3)`: a real bug on a GPU, but this file's case
    keeps everything on the CPU, so the finding's line runs without error."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def forward(self, x):
        return self.proj(x) + torch.ones(3)


class FirstNamedParameter(nn.Module):
    """Fine on one device; inside a DataParallel replica named_parameters()
    is empty (a spelling devlint does not report)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        first = next(self.named_parameters())[1]
        return self.proj(x) + first.sum() * 0


def devlint_cases():
    return [
        {"name": "finding_on_cpu", "model": OnesInForward, "inputs": lambda: torch.randn(2, 3),
         "placement": "as_written", "input_device": None},
        {"name": "missed", "model": FirstNamedParameter, "inputs": lambda: torch.randn(4, 4), "placement": "data_parallel"},
    ]
