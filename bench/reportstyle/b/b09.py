import torch
import torch.nn as nn
import torch.nn.functional as F


def edges_to_index(edges, num_nodes, add_self_loops=True):
    edge_index = torch.tensor(edges, dtype=torch.long).t().contiguous()
    if add_self_loops:
        loops = torch.arange(num_nodes, dtype=torch.long).unsqueeze(0).repeat(2, 1)
        edge_index = torch.cat([edge_index, loops], dim=1)
    return edge_index


def degree(index, num_nodes, dtype):
    out = torch.zeros(num_nodes, dtype=dtype, device=index.device)
    return out.index_add_(0, index, torch.ones_like(index, dtype=dtype))


class GCNLayer(nn.Module):
    def __init__(self, in_dim, out_dim, bias=True):
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim)) if bias else None

    def forward(self, x, edge_index):
        src, dst = edge_index
        h = self.lin(x)
        deg = degree(dst, x.size(0), h.dtype)
        norm = deg.pow(-0.5)
        norm[torch.isinf(norm)] = 0
        coef = norm[src] * norm[dst]
        msg = h.index_select(0, src) * coef.unsqueeze(-1)
        out = torch.zeros_like(h).index_add_(0, dst, msg)
        if self.bias is not None:
            out = out + self.bias
        return out


class GCN(nn.Module):
    def __init__(self, in_dim, hidden_dim, num_classes, num_layers=2, dropout=0.5):
        super().__init__()
        dims = [in_dim] + [hidden_dim] * (num_layers - 1) + [num_classes]
        self.layers = nn.ModuleList(GCNLayer(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, x, edges):
        edge_index = edges_to_index(edges, x.size(0))
        for i, layer in enumerate(self.layers):
            x = layer(x, edge_index)
            if i < len(self.layers) - 1:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x
