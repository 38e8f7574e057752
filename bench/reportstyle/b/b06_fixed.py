import torch
import torch.nn as nn
import torch.nn.functional as F


class MLPHead(nn.Module):
    def __init__(self, in_dim, hidden_dim, out_dim, dropout=0.1):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, out_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.dropout(F.gelu(self.fc1(x))))


class MultiTaskModel(nn.Module):
    """Shared encoder with one head per task and learned homoscedastic task weighting."""

    def __init__(self, encoder, hidden_size, tasks, head_hidden=256, pooling="cls"):
        super().__init__()
        self.encoder = encoder
        self.pooling = pooling
        self.task_names = sorted(tasks)
        self.heads = nn.ModuleDict({name: MLPHead(hidden_size, head_hidden, n_out) for name, n_out in tasks.items()})
        self.log_vars = nn.Parameter(torch.zeros(len(tasks)))

    def pool(self, hidden, mask):
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = mask.unsqueeze(-1).type_as(hidden)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-6)

    def forward(self, input_ids, attention_mask, task=None):
        hidden = self.encoder(input_ids, attention_mask)
        pooled = self.pool(hidden, attention_mask)
        names = [task] if task is not None else self.task_names
        return {name: self.heads[name](pooled) for name in names}

    def loss(self, outputs, targets):
        total = 0.0
        for i, name in enumerate(self.task_names):
            if name not in outputs:
                continue
            out = outputs[name]
            if out.shape[-1] == 1:
                task_loss = F.mse_loss(out.squeeze(-1), targets[name].float())
            else:
                task_loss = F.cross_entropy(out, targets[name])
            precision = torch.exp(-self.log_vars[i])
            total = total + precision * task_loss + self.log_vars[i]
        return total
