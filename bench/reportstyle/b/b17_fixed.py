import torch
import torch.nn as nn


def sample_gumbel_like(x, eps=1e-10):
    u = torch.rand_like(x)
    return -torch.log(-torch.log(u + eps) + eps)


def gumbel_softmax(logits, tau=1.0, hard=True, dim=-1):
    y = ((logits + sample_gumbel_like(logits)) / tau).softmax(dim)
    if hard:
        index = y.argmax(dim, keepdim=True)
        y_hard = torch.zeros_like(y).scatter_(dim, index, 1.0)
        return y_hard - y.detach() + y
    return y


class GumbelVectorQuantizer(nn.Module):
    def __init__(self, dim, num_groups=2, num_vars=320, code_dim=256, temp=(2.0, 0.5, 0.999995)):
        super().__init__()
        self.num_groups = num_groups
        self.num_vars = num_vars
        self.weight_proj = nn.Linear(dim, num_groups * num_vars)
        self.codevectors = nn.Parameter(torch.empty(1, num_groups * num_vars, code_dim // num_groups).uniform_())
        self.max_temp, self.min_temp, self.temp_decay = temp
        self.curr_temp = self.max_temp

    def set_num_updates(self, num_updates):
        self.curr_temp = max(self.max_temp * self.temp_decay ** num_updates, self.min_temp)

    @staticmethod
    def perplexity(probs, mask=None):
        if mask is not None:
            probs = probs[mask.flatten()]
        marginal = probs.mean(0)
        return torch.exp(-(marginal * torch.log(marginal + 1e-7)).sum(-1)).sum()

    def forward(self, x, mask=None):
        b, t, _ = x.shape
        logits = self.weight_proj(x).view(b * t * self.num_groups, -1)
        if self.training:
            onehot = gumbel_softmax(logits.float(), tau=self.curr_temp, hard=True).type_as(logits)
            soft = logits.view(b * t, self.num_groups, -1).float().softmax(-1)
        else:
            idx = logits.argmax(-1, keepdim=True)
            onehot = torch.zeros_like(logits).scatter_(-1, idx, 1.0)
            soft = onehot.view(b * t, self.num_groups, -1).float()
        perplexity = self.perplexity(soft, mask)
        codes = onehot.view(b * t, -1, 1) * self.codevectors
        codes = codes.view(b * t, self.num_groups, self.num_vars, -1).sum(-2)
        return codes.view(b, t, -1), perplexity
