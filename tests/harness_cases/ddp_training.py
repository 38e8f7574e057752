"""Two training steps on every rank (tests/test_harness_ddp.py): its
variants in the tests change one thing (the learning rate, DDP itself) and
step 3 must see it in the parameters after the steps."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

LR = 0.1


def train():
    rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")
    torch.cuda.set_device(rank)
    model = DDP(nn.Linear(4, 2).cuda(), device_ids=[0])
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(2):
        x = torch.randn(8, 4, device="cuda") * (rank + 1)  # each rank its own batch
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def devlint_cases():
    return [{"name": "two_steps", "placement": "ddp", "run": train}]
