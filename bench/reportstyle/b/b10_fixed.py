import math

import torch
import torch.nn as nn


def alibi_slopes(num_heads):
    def power_of_2_slopes(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]

    if math.log2(num_heads).is_integer():
        return power_of_2_slopes(num_heads)
    closest = 2 ** math.floor(math.log2(num_heads))
    return power_of_2_slopes(closest) + alibi_slopes(2 * closest)[0::2][: num_heads - closest]


class ALiBiAttention(nn.Module):
    def __init__(self, dim, num_heads, dropout=0.0, causal=True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.causal = causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.slopes = alibi_slopes(num_heads)
        self._bias_cache = None

    def _get_bias(self, seq_len, device):
        cache = self._bias_cache
        if cache is None or cache.size(-1) < seq_len or cache.device != device:
            pos = torch.arange(seq_len, dtype=torch.float32, device=device)
            rel = (pos[None, :] - pos[:, None]).abs()
            bias = torch.stack([-s * rel for s in self.slopes])
            if self.causal:
                bias = bias.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
            self._bias_cache = bias
        return self._bias_cache[:, :seq_len, :seq_len]

    def forward(self, x, key_padding_mask=None):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores + self._get_bias(n, scores.device).to(scores.dtype)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        attn = self.dropout(scores.softmax(-1))
        out = (attn @ v).transpose(1, 2).reshape(b, n, -1)
        return self.proj(out)
