import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, in_dim=784, hidden=(512, 256), num_classes=10):
        super().__init__()
        dims = (in_dim,) + tuple(hidden)
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.out = nn.Linear(dims[-1], num_classes)

    def forward(self, x):
        x = x.flatten(1)
        for layer in self.hidden:
            x = F.relu(layer(x))
        return self.out(x)


@torch.no_grad()
def magnitude_masks(model, sparsity):
    masks = {}
    for name, p in model.named_parameters():
        if p.dim() < 2:
            continue
        k = max(1, int(p.numel() * sparsity))
        threshold = p.abs().flatten().kthvalue(k).values
        masks[name] = (p.abs() > threshold).float()
    return masks


def apply_masks(model, masks):
    for name, p in model.named_parameters():
        if name in masks:
            mask = masks[name]
            p.data.mul_(mask)
            p.register_hook(lambda grad, mask=mask: grad * mask)


def sparsity_report(model):
    zeros = total = 0
    for p in model.parameters():
        if p.dim() > 1:
            zeros += (p == 0).sum().item()
            total += p.numel()
    return zeros / total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pretrained", default="")
    parser.add_argument("--sparsity", type=float, default=0.8)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.rand(10000, 1, 28, 28)
    y = (x.flatten(1)[:, :392].sum(1) > x.flatten(1)[:, 392:].sum(1)).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True)

    model = MLP()
    if args.pretrained:
        model.load_state_dict(torch.load(args.pretrained, map_location="cpu"))
    model.to(device)
    masks = magnitude_masks(model, args.sparsity)
    apply_masks(model, masks)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    for epoch in range(args.epochs):
        model.train()
        correct = 0
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += (logits.argmax(1) == labels).sum().item()
        print(f"epoch {epoch}: loss {loss.item():.4f} acc {correct / len(loader.dataset):.3f} "
              f"sparsity {sparsity_report(model):.3f}")

    torch.save(model.state_dict(), "pruned_mlp.pt")


if __name__ == "__main__":
    main()
