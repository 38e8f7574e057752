import torch
import torch.nn as nn


def batch_vector(num_nodes_per_graph, device=None):
    return torch.cat(
        [torch.full((n,), i, dtype=torch.long, device=device) for i, n in enumerate(num_nodes_per_graph)]
    )


def scatter_mean(src, index, dim_size):
    out = src.new_zeros(dim_size, src.size(-1))
    out.scatter_add_(0, index.unsqueeze(-1).expand_as(src), src)
    count = src.new_zeros(dim_size).index_add_(0, index, src.new_ones(index.size(0)))
    return out / count.clamp(min=1).unsqueeze(-1)


class EdgeConditionedMessagePassing(nn.Module):
    def __init__(self, dim, edge_dim):
        super().__init__()
        self.message = nn.Sequential(nn.Linear(2 * dim + edge_dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.update = nn.GRUCell(dim, dim)

    def forward(self, h, edge_index, edge_attr):
        src, dst = edge_index
        m = self.message(torch.cat([h[dst], h[src], edge_attr], dim=-1))
        agg = scatter_mean(m, dst, h.size(0))
        return self.update(agg, h)


class MoleculeRegressor(nn.Module):
    """MPNN over a mini-batch of molecular graphs concatenated into one disconnected graph."""

    def __init__(self, node_dim, edge_dim, hidden=128, steps=3, num_targets=1):
        super().__init__()
        self.embed = nn.Linear(node_dim, hidden)
        self.layers = nn.ModuleList(EdgeConditionedMessagePassing(hidden, edge_dim) for _ in range(steps))
        self.readout = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, num_targets))

    def forward(self, x, edge_index, edge_attr, num_nodes_per_graph):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h, edge_index, edge_attr)
        batch = batch_vector(num_nodes_per_graph, device=h.device)
        pooled = scatter_mean(h, batch, len(num_nodes_per_graph))
        return self.readout(pooled)
