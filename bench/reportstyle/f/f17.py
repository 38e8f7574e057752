# launch: torchrun --nproc_per_node=4 f17.py
import os
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class TabularNet(nn.Module):
    def __init__(self, n_num, cat_cardinalities, emb_dim=8, hidden=256, n_out=2):
        super().__init__()
        self.embs = nn.ModuleList([nn.Embedding(c, emb_dim) for c in cat_cardinalities])
        self.mlp = nn.Sequential(
            nn.Linear(n_num + emb_dim * len(cat_cardinalities), hidden), nn.ReLU(), nn.Dropout(0.1),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_out),
        )

    def forward(self, x_num, x_cat):
        embs = [emb(x_cat[:, i]) for i, emb in enumerate(self.embs)]
        return self.mlp(torch.cat([x_num] + embs, dim=1))


def setup():
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)
    device = torch.device("cuda")
    return rank, local_rank, world_size, device


def main():
    rank, local_rank, world_size, device = setup()
    cards = [10, 25, 7]
    n = 50000
    x_num = torch.randn(n, 12)
    x_cat = torch.stack([torch.randint(0, c, (n,)) for c in cards], dim=1)
    y = (x_num[:, 0] > 0).long()
    dataset = TensorDataset(x_num, x_cat, y)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True)
    loader = DataLoader(dataset, batch_size=256, sampler=sampler, num_workers=2, pin_memory=True)

    model = TabularNet(12, cards).to(device)
    model = DDP(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)

    for epoch in range(5):
        sampler.set_epoch(epoch)
        model.train()
        for xn, xc, yb in loader:
            xn, xc, yb = xn.to(device), xc.to(device), yb.to(device)
            loss = F.cross_entropy(model(xn, xc), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
