import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class TagDataset(Dataset):
    def __init__(self, features, labels):
        self.features = features.astype(np.float32)
        self.labels = labels.astype(np.float32)

    def __len__(self):
        return len(self.features)

    def __getitem__(self, idx):
        return torch.from_numpy(self.features[idx]), torch.from_numpy(self.labels[idx])


class TagPredictor(nn.Module):
    def __init__(self, in_dim=300, num_tags=50, hidden=512):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Dropout(0.3),
            nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Dropout(0.3),
        )
        self.out = nn.Linear(hidden, num_tags)

    def forward(self, x):
        return self.out(self.mlp(x))


def compute_pos_weight(labels, clip=50.0):
    pos = labels.sum(axis=0)
    neg = labels.shape[0] - pos
    return torch.from_numpy(np.clip(neg / np.maximum(pos, 1), 1.0, clip)).float()


def weighted_bce(logits, targets, pos_weight):
    pos_weight.to(logits.device)
    return F.binary_cross_entropy_with_logits(logits, targets, pos_weight=pos_weight)


@torch.no_grad()
def micro_f1(model, loader, device, threshold=0.5):
    model.eval()
    tp = fp = fn = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        pred = (torch.sigmoid(model(x)) > threshold).float()
        tp += (pred * y).sum().item()
        fp += (pred * (1 - y)).sum().item()
        fn += ((1 - pred) * y).sum().item()
    return 2 * tp / max(2 * tp + fp + fn, 1.0)


def main():
    rng = np.random.default_rng(7)
    features = rng.standard_normal((12000, 300))
    proj = rng.standard_normal((300, 50))
    labels = (features @ proj > 2.2 * np.sqrt(300) * 0.9).astype(np.float32)

    train_ds = TagDataset(features[:10000], labels[:10000])
    val_ds = TagDataset(features[10000:], labels[10000:])
    train_loader = DataLoader(train_ds, batch_size=256, shuffle=True, num_workers=2)
    val_loader = DataLoader(val_ds, batch_size=512)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pos_weight = compute_pos_weight(labels[:10000])
    model = TagPredictor().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)

    for epoch in range(8):
        model.train()
        running = 0.0
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            loss = weighted_bce(model(x), y, pos_weight)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
        f1 = micro_f1(model, val_loader, device)
        print(f"epoch {epoch}: loss {running / len(train_loader):.4f} micro-F1 {f1:.3f}")


if __name__ == "__main__":
    main()
