"""A checkpoint case (tests/test_harness.py): loading a GPU-saved
checkpoint without map_location on a machine without that GPU."""

import torch
from torch import nn


def build():
    return nn.Linear(3, 2)


def restore(path):
    model = build()
    model.load_state_dict(torch.load(path))
    return model


def devlint_cases():
    return [
        {"name": "cpu_only_machine", "placement": "checkpoint", "state": lambda: build().state_dict(), "load": restore},
    ]
