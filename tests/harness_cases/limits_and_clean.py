"""Harness verdict cases (tests/test_harness.py): code the simulation
cannot follow (it reads a tensor's value) and code with no bug."""

import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 2)

    def forward(self, x):
        return self.proj(x)


def accuracy():
    """Reads values: fake tensors have none."""
    model = Scorer().to("cuda")
    x = torch.randn(4, 3, device="cuda")
    hits = (model(x).argmax(1) == 0).sum().item()
    return torch.tensor([hits])


def devlint_cases():
    return [
        {"name": "reads_values", "run": accuracy, "placement": "call"},
        {"name": "clean", "model": Scorer, "inputs": lambda: torch.randn(4, 3), "placement": "data_parallel"},
    ]
