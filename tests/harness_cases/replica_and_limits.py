"""Harness behaviour cases (tests/test_harness.py): a bug that only a
DataParallel replica shows, a model-parallel model, and a model whose
original runs fine (nothing to confirm)."""

import torch
from torch import nn


class UsesParameters(nn.Module):
    """Fine on one device; inside a replica parameters() is empty."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        scale = torch.ones(4)
        # a spelling DL013 does not read (it reads parameters(), not
        # named_parameters()): devlint's fix leaves this failure in place
        first = next(self.named_parameters())[1]
        return self.proj(x) * scale + first.sum() * 0


class TwoStage(nn.Module):
    """Model parallel: stage one on cuda:0, stage two on cuda:1."""

    def __init__(self):
        super().__init__()
        self.one = nn.Linear(6, 8).to("cuda:0")
        self.two = nn.Linear(8, 3).to("cuda:1")

    def forward(self, x):
        h = torch.relu(self.one(x))  # DL008: never moved to stage two's device
        return self.two(h)


class AlreadyFine(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 2)

    def forward(self, x):
        return self.proj(x) + torch.zeros(2, device=x.device)


def devlint_cases():
    return [
        {"name": "replica_only", "model": UsesParameters, "inputs": lambda: torch.randn(6, 4), "placement": "data_parallel"},
        {"name": "model_parallel", "model": TwoStage, "inputs": lambda: torch.randn(5, 6), "placement": "as_written"},
        {"name": "nothing_to_reproduce", "model": AlreadyFine, "inputs": lambda: torch.randn(4, 3), "placement": "data_parallel"},
    ] + devlint_more_cases()


def evaluate(model, device, loader):
    """A loop that moves the model but not the batches (what DL011 reports)."""
    model = model.to(device)
    outputs = []
    for data, target in loader:
        outputs.append(model(data))
    return outputs


def _device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def devlint_more_cases():
    return [{"name": "loop", "run": lambda: evaluate(AlreadyFine(), _device(), [(torch.randn(2, 3), torch.zeros(2))] * 2), "placement": "call"}]
