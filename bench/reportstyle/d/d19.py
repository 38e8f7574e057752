import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class ShapesDataset(Dataset):
    def __init__(self, n, size=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        self.noise = torch.randn(n, 3, size, size, generator=g) * 0.3
        self.size = size

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.noise[i].clone()
        c, s = int(self.labels[i]), self.size
        if c == 0:
            img[:, s // 4 : 3 * s // 4, s // 4 : 3 * s // 4] += 1
        elif c == 1:
            img[:, :, s // 2 - 2 : s // 2 + 2] += 1
        elif c == 2:
            img[:, s // 2 - 2 : s // 2 + 2, :] += 1
        else:
            img += torch.eye(s).expand(3, s, s)
        return img, self.labels[i]


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class Net(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.features = nn.Sequential(conv_bn(3, 32), nn.MaxPool2d(2), conv_bn(32, 64), nn.MaxPool2d(2), conv_bn(64, 128))
        self.head = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.head(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


def prepare_batch(batch, device, non_blocking=True):
    images, targets = batch
    images.to(device, non_blocking=non_blocking)
    return images, targets.to(device, non_blocking=non_blocking)


def train_one_epoch(model, loader, optimizer, scaler, device, amp):
    model.train()
    total, correct, loss_sum = 0, 0, 0.0
    for batch in loader:
        images, targets = prepare_batch(batch, device)
        with torch.autocast(device_type=device.type, enabled=amp):
            logits = model(images)
            loss = F.cross_entropy(logits, targets, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        loss_sum += loss.item() * targets.size(0)
        correct += (logits.argmax(1) == targets).sum().item()
        total += targets.size(0)
    return loss_sum / total, correct / total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(ShapesDataset(256), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, pin_memory=device.type == "cuda")
    model = Net().to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True)
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp and device.type == "cuda")

    for epoch in range(args.epochs):
        t0 = time.time()
        loss, acc = train_one_epoch(model, loader, optimizer, scaler, device, args.amp)
        print(f"epoch {epoch} loss {loss:.3f} acc {acc:.3f} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
