import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class BatchMixup:
    def __init__(self, num_classes, prob=0.8, label_smoothing=0.1, generator=None):
        self.num_classes = num_classes
        self.prob = prob
        self.label_smoothing = label_smoothing
        self.generator = generator

    def _soft_targets(self, targets):
        off = self.label_smoothing / self.num_classes
        on = 1.0 - self.label_smoothing + off
        return F.one_hot(targets, self.num_classes).float() * (on - off) + off

    def __call__(self, images, targets):
        n = images.size(0)
        u = torch.rand(n, generator=self.generator, device=images.device)
        lam = torch.maximum(u, 1.0 - u)
        apply = torch.rand(n, generator=self.generator, device=images.device) < self.prob
        lam = torch.where(apply, lam, torch.ones_like(lam))
        soft = self._soft_targets(targets)
        lam_img = lam.view(n, 1, 1, 1)
        mixed = images * lam_img + images.flip(0) * (1.0 - lam_img)
        mixed_targets = soft * lam[:, None] + soft.flip(0) * (1.0 - lam[:, None])
        return mixed, mixed_targets


class Classifier(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 48, 3, padding=1), nn.BatchNorm2d(48), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(48, 96, 3, padding=1), nn.BatchNorm2d(96), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(96, 192, 3, padding=1), nn.BatchNorm2d(192), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(192, num_classes)

    def forward(self, x):
        return self.head(self.body(x))


def soft_cross_entropy(logits, soft_targets):
    return torch.sum(-soft_targets * F.log_softmax(logits, dim=-1), dim=-1).mean()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)
    data = TensorDataset(torch.randn(4096, 3, 32, 32), torch.randint(0, 10, (4096,)))
    loader = DataLoader(data, batch_size=128, shuffle=True, num_workers=2, drop_last=True)

    gen = torch.Generator().manual_seed(args.seed)
    mixer = BatchMixup(num_classes=10, generator=gen)
    model = Classifier().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1,
                                                    total_steps=args.epochs * len(loader))

    for epoch in range(args.epochs):
        model.train()
        for images, targets in loader:
            images, targets = images.to(device), targets.to(device)
            images, soft = mixer(images, targets)
            loss = soft_cross_entropy(model(images), soft)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.4f}")


if __name__ == "__main__":
    main()
