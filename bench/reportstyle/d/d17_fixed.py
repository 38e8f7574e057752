import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def emb_size_rule(cardinality):
    return min(50, (cardinality + 1) // 2)


class TabularNet(nn.Module):
    """Entity-embedding MLP for mixed categorical / continuous features (fastai-style)."""

    def __init__(self, cardinalities, n_cont, hidden=(128, 64), n_out=1, emb_drop=0.05, drop=0.1):
        super().__init__()
        self.embeddings = nn.ModuleList([nn.Embedding(c, emb_size_rule(c)) for c in cardinalities])
        n_emb = sum(e.embedding_dim for e in self.embeddings)
        self.emb_drop = nn.Dropout(emb_drop)
        self.bn_cont = nn.BatchNorm1d(n_cont)
        layers, d = [], n_emb + n_cont
        for h in hidden:
            layers += [nn.Linear(d, h), nn.ReLU(), nn.BatchNorm1d(h), nn.Dropout(drop)]
            d = h
        layers.append(nn.Linear(d, n_out))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x_cat, x_cont):
        x = torch.cat([emb(x_cat[:, i]) for i, emb in enumerate(self.embeddings)], dim=1)
        x = torch.cat([self.emb_drop(x), self.bn_cont(x_cont)], dim=1)
        return self.mlp(x).squeeze(-1)


def make_dataset(n, cardinalities, n_cont, seed=0):
    g = torch.Generator().manual_seed(seed)
    x_cat = torch.stack([torch.randint(0, c, (n,), generator=g) for c in cardinalities], dim=1)
    x_cont = torch.randn(n, n_cont, generator=g)
    effects = [torch.randn(c, generator=g) for c in cardinalities]
    logit = sum(e[x_cat[:, i]] for i, e in enumerate(effects)) + x_cont @ torch.randn(n_cont, generator=g)
    y = (torch.sigmoid(logit) > torch.rand(n, generator=g)).float()
    return x_cat, x_cont, y


@torch.no_grad()
def auc(scores, labels):
    order = scores.argsort()
    ranks = torch.empty_like(order, dtype=torch.float)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float, device=scores.device)
    pos = labels.bool()
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return ((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cards = [7, 24, 12, 50]
    x_cat, x_cont, y = make_dataset(4000, cards, 6)
    train = TensorDataset(x_cat[:3200], x_cont[:3200], y[:3200])
    loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, drop_last=True)

    model = TabularNet(cards, n_cont=6).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    for epoch in range(args.epochs):
        model.train()
        for xc, xn, yb in loader:
            xc, xn, yb = xc.to(device), xn.to(device), yb.to(device)
            loss = F.binary_cross_entropy_with_logits(model(xc, xn), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            scores = model(x_cat[3200:].to(device), x_cont[3200:].to(device))
        print(f"epoch {epoch} loss {loss.item():.4f} val auc {auc(scores, y[3200:].to(device)):.3f}")


if __name__ == "__main__":
    main()
