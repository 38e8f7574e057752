import torch
import torch.nn as nn
import torch.nn.functional as F


def normalized_adjacency(edge_index, num_nodes):
    device = edge_index.device
    loops = torch.arange(num_nodes, device=device)
    src = torch.cat([edge_index[0], loops])
    dst = torch.cat([edge_index[1], loops])
    adj = torch.zeros(num_nodes, num_nodes, device=device)
    adj[src, dst] = 1.0
    adj = ((adj + adj.t()) > 0).float()
    deg_inv_sqrt = adj.sum(1).pow(-0.5)
    return deg_inv_sqrt.unsqueeze(1) * adj * deg_inv_sqrt.unsqueeze(0)


class MixHopConv(nn.Module):
    def __init__(self, in_dim, out_dim, powers=(0, 1, 2)):
        super().__init__()
        self.powers = sorted(powers)
        self.lins = [nn.Linear(in_dim, out_dim) for _ in self.powers]

    def forward(self, x, adj):
        outs, h, k = [], x, 0
        for p in range(self.powers[-1] + 1):
            if p > 0:
                h = adj @ h
            if p == self.powers[k]:
                outs.append(self.lins[k](h))
                k += 1
        return torch.cat(outs, dim=-1)


class MixHopNet(nn.Module):
    def __init__(self, in_dim, hidden, num_classes, powers=(0, 1, 2), dropout=0.5):
        super().__init__()
        self.conv1 = MixHopConv(in_dim, hidden, powers)
        self.norm = nn.BatchNorm1d(hidden * len(powers))
        self.conv2 = MixHopConv(hidden * len(powers), hidden, powers)
        self.out = nn.Linear(hidden * len(powers), num_classes)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, self.training)
        x = F.relu(self.norm(self.conv1(x, adj)))
        x = F.dropout(x, self.dropout, self.training)
        return self.out(F.relu(self.conv2(x, adj)))


def accuracy(logits, y, mask):
    return (logits[mask].argmax(-1) == y[mask]).float().mean().item()


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    num_nodes, num_feats, num_classes = 2708, 1433, 7
    x = torch.randn(num_nodes, num_feats, device=device)
    y = torch.randint(0, num_classes, (num_nodes,), device=device)
    edge_index = torch.randint(0, num_nodes, (2, 10556), device=device)
    adj = normalized_adjacency(edge_index, num_nodes)
    perm = torch.randperm(num_nodes, device=device)
    train_mask = torch.zeros(num_nodes, dtype=torch.bool, device=device)
    train_mask[perm[:140]] = True
    val_mask = torch.zeros_like(train_mask)
    val_mask[perm[140:640]] = True

    model = MixHopNet(num_feats, 64, num_classes).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for epoch in range(200):
        model.train()
        logits = model(x, adj)
        loss = F.cross_entropy(logits[train_mask], y[train_mask])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if epoch % 20 == 0:
            model.eval()
            with torch.no_grad():
                val_logits = model(x, adj)
            print(f"epoch {epoch:3d} loss {loss.item():.4f} val acc {accuracy(val_logits, y, val_mask):.3f}")
