"""Two-layer GCN (Kipf & Welling) on a synthetic stochastic-block-model graph, dense adjacency."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


def stochastic_block_model(sizes, p_in, p_out, feat_dim, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.cat([torch.full((s,), i, dtype=torch.long) for i, s in enumerate(sizes)])
    n = labels.numel()
    same = labels[:, None] == labels[None, :]
    probs = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    upper = torch.triu(torch.rand(n, n, generator=g) < probs, diagonal=1)
    edge_index = upper.nonzero().t()
    centers = torch.randn(len(sizes), feat_dim, generator=g)
    x = centers[labels] + 2.0 * torch.randn(n, feat_dim, generator=g)
    return x, edge_index, labels


def normalized_adjacency(edge_index, num_nodes):
    A = torch.zeros(num_nodes, num_nodes)
    A[edge_index[0], edge_index[1]] = 1.0
    A = torch.maximum(A, A.t()) + torch.eye(num_nodes)
    d_inv_sqrt = A.sum(1).pow(-0.5)
    return d_inv_sqrt[:, None] * A * d_inv_sqrt[None, :]


class GraphConv(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim)

    def forward(self, x, adj):
        return adj @ self.lin(x)


class GCN(nn.Module):
    def __init__(self, in_dim, hidden, n_classes, dropout=0.5):
        super().__init__()
        self.conv1 = GraphConv(in_dim, hidden)
        self.conv2 = GraphConv(hidden, n_classes)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(x, adj))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, adj)


def split_masks(n, train_frac=0.2, seed=0):
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[perm[: int(train_frac * n)]] = True
    return train_mask, ~train_mask


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    args = ap.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x, edge_index, y = stochastic_block_model([100, 100, 100], 0.1, 0.01, 16)
    adj = normalized_adjacency(edge_index, x.size(0))
    train_mask, test_mask = split_masks(x.size(0))

    model = GCN(x.size(1), args.hidden, int(y.max()) + 1).to(device)
    x, y = x.to(device), y.to(device)
    train_mask, test_mask = train_mask.to(device), test_mask.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    for epoch in range(1, args.epochs + 1):
        model.train()
        out = model(x, adj)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if epoch % 25 == 0:
            model.eval()
            with torch.no_grad():
                pred = model(x, adj).argmax(1)
            acc = (pred[test_mask] == y[test_mask]).float().mean().item()
            print(f"epoch {epoch:3d} loss {loss.item():.4f} test acc {acc:.3f}")


if __name__ == "__main__":
    main()
