"""Harness isolation cases (tests/test_harness.py): one case aborts the
process, one hangs, and the last one must still run and be confirmed."""

import os
import time

import torch
from torch import nn


class Aborts(nn.Module):
    def forward(self, x):
        os.abort()


class Hangs(nn.Module):
    def forward(self, x):
        time.sleep(3600)


class Offsets(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def forward(self, x):
        return self.proj(x) + torch.arange(3)


def devlint_cases():
    return [
        {"name": "aborts", "model": Aborts, "inputs": lambda: torch.randn(4, 3), "placement": "data_parallel"},
        {"name": "hangs", "model": Hangs, "inputs": lambda: torch.randn(4, 3), "placement": "data_parallel"},
        {"name": "survivor", "model": Offsets, "inputs": lambda: torch.randn(4, 3), "placement": "data_parallel"},
        {"name": "malformed", "model": Offsets, "placement": "data_parallel"},
    ]
