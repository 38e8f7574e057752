import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def compute_class_weights(labels, num_classes, beta=0.999):
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    effective = 1.0 - np.power(beta, counts)
    weights = (1.0 - beta) / np.maximum(effective, 1e-12)
    return weights / weights.sum() * num_classes


class TabularNet(nn.Module):
    def __init__(self, in_features, num_classes, hidden=256, p_drop=0.3):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(in_features, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(p_drop),
            nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(p_drop),
        )
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.classifier(self.backbone(x))


def per_class_recall(model, X, y, device, num_classes):
    model.eval()
    with torch.no_grad():
        preds = model(torch.from_numpy(X).to(device)).argmax(1).cpu().numpy()
    return [float((preds[y == c] == c).mean()) if (y == c).any() else float("nan")
            for c in range(num_classes)]


def main():
    num_classes = 5
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20000, 64)).astype(np.float32)
    y = rng.choice(num_classes, size=20000, p=[0.6, 0.2, 0.1, 0.07, 0.03])
    X[:, :num_classes] += 2.0 * np.eye(num_classes, dtype=np.float32)[y]
    X_train, y_train, X_val, y_val = X[:16000], y[:16000], X[16000:], y[16000:]

    class_w = compute_class_weights(y_train, num_classes)
    model = TabularNet(64, num_classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    model.to(device)
    criterion = nn.CrossEntropyLoss(weight=torch.tensor(class_w, dtype=torch.float32))
    loader = DataLoader(TensorDataset(torch.from_numpy(X_train), torch.from_numpy(y_train)),
                        batch_size=256, shuffle=True, drop_last=True)

    for epoch in range(15):
        model.train()
        epoch_loss = 0.0
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = criterion(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
        recalls = per_class_recall(model, X_val, y_val, device, num_classes)
        print(f"epoch {epoch:2d} loss {epoch_loss / len(loader):.4f} "
              f"recall {' '.join(f'{r:.2f}' for r in recalls)}")


if __name__ == "__main__":
    main()
