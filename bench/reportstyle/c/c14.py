import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class ConvNet(nn.Module):
    def __init__(self, num_classes=100):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.Conv2d(128, 256, 3, stride=2, padding=1), nn.BatchNorm2d(256), nn.ReLU(),
        )
        self.fc = nn.Linear(256, num_classes)

    def forward(self, x):
        return self.fc(self.features(x).mean(dim=(2, 3)))


def setup():
    dist.init_process_group(backend="nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    return local_rank, dist.get_rank(), dist.get_world_size()


def main():
    local_rank, rank, world_size = setup()
    device = torch.device("cuda", local_rank)

    model = nn.SyncBatchNorm.convert_sync_batchnorm(ConvNet()).to(device)
    ddp_model = DDP(model, device_ids=[0], output_device=0)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1 * world_size, momentum=0.9)

    dataset = TensorDataset(torch.randn(50000, 3, 32, 32), torch.randint(0, 100, (50000,)))
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True)
    loader = DataLoader(dataset, batch_size=128, sampler=sampler, num_workers=4, pin_memory=True)

    for epoch in range(10):
        sampler.set_epoch(epoch)
        ddp_model.train()
        total_loss = torch.zeros(2, device=device)
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.cross_entropy(ddp_model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += torch.stack([loss.detach() * x.size(0), x.new_tensor(x.size(0))])
        dist.all_reduce(total_loss)
        if rank == 0:
            print(f"epoch {epoch}: mean loss {(total_loss[0] / total_loss[1]).item():.4f}")
            torch.save(ddp_model.module.state_dict(), f"ckpt_{epoch}.pt")
        dist.barrier()

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
