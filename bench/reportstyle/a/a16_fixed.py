import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class SpectrogramDataset(Dataset):
    def __init__(self, n=2000, n_classes=12):
        self.x = np.random.randn(n, 1, 64, 101).astype(np.float32)
        self.y = np.random.randint(0, n_classes, size=n)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, idx):
        return torch.from_numpy(self.x[idx]), int(self.y[idx])


class KeywordSpotter(nn.Module):
    def __init__(self, n_classes=12):
        super().__init__()
        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))
        self.features = nn.Sequential(block(1, 32), block(32, 64), block(64, 128))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(128, n_classes)

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)).flatten(1))


def train_one_epoch(model, loader, optimizer, criterion, device):
    model.train()
    for specs, labels in loader:
        specs, labels = specs.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = criterion(model(specs), labels)
        loss.backward()
        optimizer.step()


@torch.no_grad()
def evaluate(model, loader, criterion, device):
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    for batch in loader:
        specs = batch[0].to(device)
        labels = batch[1].to(device)
        logits = model(specs)
        total_loss += criterion(logits, labels).item() * labels.size(0)
        correct += (logits.argmax(dim=1) == labels).sum().item()
        count += labels.size(0)
    return total_loss / count, correct / count


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = DataLoader(SpectrogramDataset(), batch_size=64, shuffle=True, num_workers=2)
    val_loader = DataLoader(SpectrogramDataset(400), batch_size=128)
    model = KeywordSpotter().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    best = 0.0
    for epoch in range(15):
        train_one_epoch(model, train_loader, optimizer, criterion, device)
        val_loss, val_acc = evaluate(model, val_loader, criterion, device)
        print(f"epoch {epoch}: val_loss={val_loss:.4f} val_acc={val_acc:.3f}")
        if val_acc > best:
            best = val_acc
            torch.save(model.state_dict(), "kws_best.pt")


if __name__ == "__main__":
    main()
