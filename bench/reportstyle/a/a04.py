import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class ResidualMLP(nn.Module):
    def __init__(self, in_features, hidden, out_features, depth=4, p=0.1):
        super().__init__()
        self.stem = nn.Linear(in_features, hidden)
        self.blocks = [self._make_block(hidden, p) for _ in range(depth)]
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, out_features)

    @staticmethod
    def _make_block(width, p):
        return nn.Sequential(
            nn.LayerNorm(width),
            nn.Linear(width, width * 2),
            nn.ReLU(),
            nn.Dropout(p),
            nn.Linear(width * 2, width),
        )

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(self.norm(h))


def load_tabular(n=5000, d=32):
    X = np.random.randn(n, d).astype(np.float32)
    y = (X[:, :4].sum(axis=1) > 0).astype(np.int64)
    return TensorDataset(torch.from_numpy(X), torch.from_numpy(y))


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(load_tabular(), batch_size=128, shuffle=True)
    net = ResidualMLP(32, 128, 2).to(device)
    optim = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(10):
        correct, seen = 0, 0
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            out = net(xb)
            loss = loss_fn(out, yb)
            optim.zero_grad()
            loss.backward()
            optim.step()
            correct += (out.argmax(1) == yb).sum().item()
            seen += yb.numel()
        print(f"epoch {epoch} acc {correct / seen:.3f}")


if __name__ == "__main__":
    main()
