import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Regressor(nn.Module):
    def __init__(self, d_in=64, d_hidden=512):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, d_hidden), nn.SiLU(),
            nn.Linear(d_hidden, d_hidden), nn.SiLU(),
            nn.Linear(d_hidden, 1),
        )

    def forward(self, x):
        return self.net(x).squeeze(-1)


def setup():
    dist.init_process_group(backend="nccl", init_method=os.environ.get("INIT_METHOD", "env://"))
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    torch.cuda.set_device(rank)
    return rank, world_size


def main():
    rank, world_size = setup()
    device = torch.device("cuda", rank)

    X = torch.randn(100000, 64)
    y = X[:, :8].sum(dim=1) + 0.1 * torch.randn(100000)
    dataset = TensorDataset(X, y)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True)
    loader = DataLoader(dataset, batch_size=256, sampler=sampler, num_workers=2, pin_memory=True)

    model = Regressor().to(device)
    ddp_model = DDP(model, device_ids=[rank], output_device=rank)
    optimizer = torch.optim.Adam(ddp_model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()

    for epoch in range(10):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            loss = criterion(ddp_model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
            torch.save(model.state_dict(), "regressor.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
