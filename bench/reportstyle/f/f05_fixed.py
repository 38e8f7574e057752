import torch
import torch.nn as nn
import torch.nn.functional as F


class GCNConv(nn.Module):
    """Plain-PyTorch GCN layer: D^-1/2 (A + I) D^-1/2 X W."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels))
        nn.init.xavier_uniform_(self.lin.weight)

    def add_self_loops(self, edge_index, num_nodes):
        loops = torch.arange(num_nodes, device=edge_index.device)
        loops = loops.unsqueeze(0).repeat(2, 1)
        return torch.cat([edge_index, loops], dim=1)

    def gcn_norm(self, edge_index, num_nodes):
        row, col = edge_index
        deg = torch.zeros(num_nodes, device=col.device)
        deg.scatter_add_(0, col, torch.ones(col.size(0), device=col.device))
        deg_inv_sqrt = deg.pow(-0.5)
        deg_inv_sqrt[torch.isinf(deg_inv_sqrt)] = 0
        return deg_inv_sqrt[row] * deg_inv_sqrt[col]

    def forward(self, x, edge_index):
        num_nodes = x.size(0)
        edge_index = self.add_self_loops(edge_index, num_nodes)
        norm = self.gcn_norm(edge_index, num_nodes)
        h = self.lin(x)
        row, col = edge_index
        messages = h[row] * norm.unsqueeze(-1)
        out = torch.zeros_like(h).index_add_(0, col, messages)
        return out + self.bias


class GCN(nn.Module):
    def __init__(self, in_channels, hidden, num_classes, dropout=0.5):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden)
        self.conv2 = GCNConv(hidden, num_classes)
        self.dropout = dropout

    def forward(self, x, edge_index):
        x = F.dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, edge_index)


def random_graph(num_nodes=2708, num_edges=10556, num_feats=1433, num_classes=7):
    x = torch.rand(num_nodes, num_feats)
    src = torch.randint(0, num_nodes, (num_edges,))
    dst = torch.randint(0, num_nodes, (num_edges,))
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    y = torch.randint(0, num_classes, (num_nodes,))
    train_mask = torch.zeros(num_nodes, dtype=torch.bool)
    train_mask[:140] = True
    return x, edge_index, y, train_mask


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x, edge_index, y, train_mask = random_graph()
    x, edge_index, y, train_mask = x.to(device), edge_index.to(device), y.to(device), train_mask.to(device)

    model = GCN(x.size(1), 16, 7).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for epoch in range(200):
        model.train()
        optimizer.zero_grad()
        out = model(x, edge_index)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()
        if epoch % 20 == 0:
            model.eval()
            with torch.no_grad():
                pred = model(x, edge_index).argmax(dim=1)
                acc = (pred[~train_mask] == y[~train_mask]).float().mean().item()
            print(f"epoch {epoch:03d} loss {loss.item():.4f} acc {acc:.3f}")
