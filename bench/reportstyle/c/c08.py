import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(out)))


class SmallResNet(nn.Module):
    def __init__(self, num_classes=10, width=64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(inplace=True))
        self.layers = nn.Sequential(ResidualBlock(width), nn.MaxPool2d(2),
                                    ResidualBlock(width), nn.MaxPool2d(2), ResidualBlock(width))
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--gpu", type=int, default=1)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=128)
    return p.parse_args()


def train_one_epoch(model, loader, optimizer, scheduler, device, epoch):
    model.train()
    start, seen, loss_sum = time.time(), 0, 0.0
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.cuda(non_blocking=True)
        outputs = model(images)
        loss = F.cross_entropy(outputs, labels, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        seen += images.size(0)
        loss_sum += loss.item() * images.size(0)
    print(f"[epoch {epoch}] loss={loss_sum / seen:.4f} ({time.time() - start:.1f}s)")


def main():
    args = get_args()
    device = torch.device(f"cuda:{args.gpu}")
    dataset = TensorDataset(torch.randn(5000, 3, 32, 32), torch.randint(0, 10, (5000,)))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                        num_workers=4, pin_memory=True, drop_last=True)
    model = SmallResNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9,
                                weight_decay=5e-4, nesterov=True)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=len(loader))
    for epoch in range(args.epochs):
        train_one_epoch(model, loader, optimizer, scheduler, device, epoch)
    torch.save(model.state_dict(), "smallresnet.pt")


if __name__ == "__main__":
    main()
