import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Embedder(nn.Module):
    def __init__(self, in_dim=64, dim=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, 256), nn.ReLU(), nn.Linear(256, dim))

    def forward(self, x):
        return F.normalize(self.net(x), dim=-1)


@torch.no_grad()
def compute_centroids(model, loader, num_classes, device):
    sums = torch.zeros(num_classes, 128, device=device)
    counts = torch.zeros(num_classes, device=device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        sums.index_add_(0, y, model(x))
        counts.index_add_(0, y, torch.ones_like(y, dtype=torch.float))
    dist.all_reduce(sums)
    dist.all_reduce(counts)
    return F.normalize(sums / counts.clamp(min=1).unsqueeze(1), dim=-1)


def prototype_logits(features, centroids, temperature=0.1):
    return -torch.cdist(features, centroids) / temperature


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--num-classes", type=int, default=20)
    parser.add_argument("--resume", type=str, default="")
    parser.add_argument("--save", type=str, default="proto_ckpt.pt")
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8000, 64, generator=g)
    y = torch.randint(0, args.num_classes, (8000,), generator=g)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=128, sampler=sampler)

    model = Embedder().to(device)
    centroids = None
    if args.resume and os.path.exists(args.resume):
        ckpt = torch.load(args.resume)
        model.load_state_dict(ckpt["model"])
        centroids = ckpt["centroids"]
    model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    if centroids is None:
        centroids = compute_centroids(model.module, loader, args.num_classes, device)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            logits = prototype_logits(model(xb), centroids)
            loss = F.cross_entropy(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        centroids = compute_centroids(model.module, loader, args.num_classes, device)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    if dist.get_rank() == 0:
        torch.save({"model": model.module.state_dict(), "centroids": centroids}, args.save)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
