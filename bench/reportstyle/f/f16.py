import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_mixup(alpha, num_classes):
    beta = torch.distributions.Beta(torch.tensor([alpha]), torch.tensor([alpha]))

    def mixup(x, y):
        lam = beta.sample((x.size(0),)).view(-1)
        perm = torch.randperm(x.size(0), device=x.device)
        lam_x = lam.view(-1, 1, 1, 1)
        mixed_x = lam_x * x + (1 - lam_x) * x[perm]
        y_onehot = F.one_hot(y, num_classes).float()
        mixed_y = lam.view(-1, 1) * y_onehot + (1 - lam.view(-1, 1)) * y_onehot[perm]
        return mixed_x, mixed_y

    return mixup


def soft_cross_entropy(logits, soft_targets):
    return torch.sum(-soft_targets * F.log_softmax(logits, dim=-1), dim=-1).mean()


def build_model(num_classes):
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, num_classes),
    )


def run(epochs=12, mixup_from_epoch=4, num_classes=10):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(2048, 3, 32, 32), torch.randint(0, num_classes, (2048,)))
    loader = DataLoader(data, batch_size=128, shuffle=True, drop_last=True)
    model = build_model(num_classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=epochs * len(loader))
    mixup = make_mixup(alpha=0.4, num_classes=num_classes)

    for epoch in range(epochs):
        model.train()
        running = 0.0
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if epoch >= mixup_from_epoch:
                x, targets = mixup(x, y)
            else:
                targets = F.one_hot(y, num_classes).float()
            loss = soft_cross_entropy(model(x), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            running += loss.item()
        print(f"epoch {epoch:2d} | mixup={'on' if epoch >= mixup_from_epoch else 'off'} | loss {running / len(loader):.4f}")


if __name__ == "__main__":
    run()
