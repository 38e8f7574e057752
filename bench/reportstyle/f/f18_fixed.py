import os
from functools import partial

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

class SensorWindows(Dataset):
    """Sliding windows over a synthetic multivariate time series -> next-step regression."""

    def __init__(self, length=100000, channels=8, window=64):
        t = torch.arange(length, dtype=torch.float32)
        freqs = torch.linspace(0.001, 0.05, channels)
        self.series = torch.sin(t[:, None] * freqs[None, :]) + 0.05 * torch.randn(length, channels)
        self.window = window

    def __len__(self):
        return len(self.series) - self.window - 1

    def __getitem__(self, i):
        return self.series[i:i + self.window], self.series[i + self.window]


def collate_to_device(batch, device):
    xs, ys = zip(*batch)
    return torch.stack(xs).to(device), torch.stack(ys).to(device)


class Forecaster(nn.Module):
    def __init__(self, channels=8, hidden=128):
        super().__init__()
        self.conv = nn.Conv1d(channels, hidden, kernel_size=5, padding=2)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, channels)

    def forward(self, x):
        h = F.gelu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        _, last = self.gru(h)
        return self.out(last[-1])


def worker(rank, world_size, epochs=3):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)

    dataset = SensorWindows()
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank)
    loader = DataLoader(dataset, batch_size=128, sampler=sampler,
                        collate_fn=partial(collate_to_device, device=torch.device("cuda", rank)))

    model = DDP(Forecaster().to(rank), device_ids=[rank])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            pred = model(x)
            loss = F.mse_loss(pred, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch}: mse {loss.item():.5f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(worker, args=(world_size,), nprocs=world_size, join=True)
