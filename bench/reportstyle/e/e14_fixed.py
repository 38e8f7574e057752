import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class FocalLoss(nn.Module):
    class_alpha = torch.tensor([0.1, 0.3, 0.3, 0.3])

    def __init__(self, gamma=2.0, reduction="mean"):
        super().__init__()
        self.gamma = gamma
        self.reduction = reduction

    def forward(self, logits, targets):
        log_probs = F.log_softmax(logits, dim=-1)
        log_pt = log_probs.gather(1, targets.unsqueeze(1)).squeeze(1)
        pt = log_pt.exp()
        alpha_t = self.class_alpha.to(logits.device)[targets]
        loss = -alpha_t * (1 - pt) ** self.gamma * log_pt
        if self.reduction == "mean":
            return loss.mean()
        return loss.sum() if self.reduction == "sum" else loss


class DefectClassifier(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 32, 9, padding=4), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(32, 64, 9, padding=4), nn.BatchNorm1d(64), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(64, 128, 9, padding=4), nn.BatchNorm1d(128), nn.ReLU(),
            nn.AdaptiveMaxPool1d(1),
        )
        self.fc = nn.Linear(128, num_classes)

    def forward(self, signal):
        return self.fc(self.features(signal).squeeze(-1))


def make_signals(n=6000, length=1024, seed=3):
    g = torch.Generator().manual_seed(seed)
    labels = torch.multinomial(torch.tensor([0.85, 0.05, 0.05, 0.05]), n, replacement=True, generator=g)
    t = torch.linspace(0, 1, length)
    freqs = torch.tensor([5.0, 40.0, 90.0, 150.0])[labels]
    signals = torch.sin(2 * math.pi * freqs[:, None] * t) * (labels[:, None] > 0)
    signals = signals + 0.5 * torch.randn(n, length, generator=g)
    return TensorDataset(signals.unsqueeze(1), labels)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = make_signals()
    train_ds, val_ds = torch.utils.data.random_split(dataset, [5000, 1000])
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=256)

    model = DefectClassifier().to(device)
    criterion = FocalLoss(gamma=2.0).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(6):
        model.train()
        for signal, label in train_loader:
            signal, label = signal.to(device), label.to(device)
            loss = criterion(model(signal), label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        model.eval()
        per_class_hits = torch.zeros(4)
        per_class_total = torch.zeros(4)
        with torch.no_grad():
            for signal, label in val_loader:
                pred = model(signal.to(device)).argmax(1).cpu()
                per_class_total += torch.bincount(label, minlength=4)
                per_class_hits += torch.bincount(label[pred == label], minlength=4)
        recall = (per_class_hits / per_class_total.clamp(min=1)).tolist()
        print(f"epoch {epoch}: loss {loss.item():.4f} recall per class {[round(r, 3) for r in recall]}")


if __name__ == "__main__":
    main()
