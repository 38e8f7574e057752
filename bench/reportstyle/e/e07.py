import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class ModelEMA:
    def __init__(self, model, decay=0.999, warmup=100):
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)
        self.decay = decay
        self.warmup = warmup
        self.updates = 0

    @torch.no_grad()
    def update(self, model):
        self.updates += 1
        d = min(self.decay, (1 + self.updates) / (self.warmup + self.updates))
        for ema_p, p in zip(self.shadow.parameters(), model.parameters()):
            ema_p.mul_(d).add_(p.detach(), alpha=1 - d)
        for ema_b, b in zip(self.shadow.buffers(), model.buffers()):
            ema_b.copy_(b)


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SmallConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(conv_bn(3, 32), conv_bn(32, 64, 2),
                                      conv_bn(64, 128, 2), conv_bn(128, 128))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.fc(self.pool(self.features(x)).flatten(1))


@torch.no_grad()
def accuracy(model, loader, device):
    model.eval()
    correct = 0
    for x, y in loader:
        correct += (model(x.to(device)).argmax(1) == y.to(device)).sum().item()
    return correct / len(loader.dataset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--ema-decay", type=float, default=0.999)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.randn(5000, 3, 32, 32)
    y = torch.randint(0, 10, (5000,))
    train_loader = DataLoader(TensorDataset(x[:4000], y[:4000]), batch_size=128, shuffle=True)
    val_loader = DataLoader(TensorDataset(x[4000:], y[4000:]), batch_size=256)

    model = SmallConvNet()
    ema = ModelEMA(model, decay=args.ema_decay)
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                weight_decay=5e-4)

    for epoch in range(args.epochs):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            ema.update(model)
        print(f"epoch {epoch}: model acc {accuracy(model, val_loader, device):.3f} "
              f"ema acc {accuracy(ema.shadow, val_loader, device):.3f}")

    torch.save({"model": model.state_dict(), "ema": ema.shadow.state_dict()}, "ckpt.pt")


if __name__ == "__main__":
    main()
