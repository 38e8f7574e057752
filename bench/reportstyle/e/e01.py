import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class BinarizeSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inp):
        ctx.save_for_backward(inp)
        return torch.where(inp >= 0, torch.ones_like(inp), -torch.ones_like(inp))

    @staticmethod
    def backward(ctx, grad_output):
        (inp,) = ctx.saved_tensors
        grad_input = torch.zeros(inp.shape)
        keep = inp.abs() <= 1
        grad_input[keep] = grad_output[keep]
        return grad_input


binarize = BinarizeSTE.apply


class BinaryLinear(nn.Linear):
    def forward(self, x):
        return F.linear(binarize(x), binarize(self.weight), self.bias)


class BinaryMLP(nn.Module):
    def __init__(self, in_features=784, hidden=512, num_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.bn1 = nn.BatchNorm1d(hidden)
        self.fc2 = BinaryLinear(hidden, hidden)
        self.bn2 = nn.BatchNorm1d(hidden)
        self.fc3 = nn.Linear(hidden, num_classes)

    def forward(self, x):
        x = self.bn1(self.fc1(x.flatten(1)))
        x = self.bn2(self.fc2(x))
        return self.fc3(F.hardtanh(x))


def make_loaders(batch_size):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(6000, 1, 28, 28, generator=g)
    y = (x.mean(dim=(1, 2, 3)) * 37).long() % 10
    train = TensorDataset(x[:5000], y[:5000])
    val = TensorDataset(x[5000:], y[5000:])
    return (
        DataLoader(train, batch_size=batch_size, shuffle=True, drop_last=True),
        DataLoader(val, batch_size=512),
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader, val_loader = make_loaders(args.batch_size)
    model = BinaryMLP().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    for epoch in range(args.epochs):
        model.train()
        running = 0.0
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                model.fc2.weight.clamp_(-1, 1)
            running += loss.item()
        scheduler.step()

        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in val_loader:
                preds = model(images.to(device)).argmax(dim=1)
                correct += (preds == labels.to(device)).sum().item()
        print(f"epoch {epoch}: loss {running / len(train_loader):.4f} "
              f"val acc {correct / len(val_loader.dataset):.3f}")


if __name__ == "__main__":
    main()
