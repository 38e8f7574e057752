import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    ret = 0
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        ret += (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.float() / max_exact + 1e-6)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).long()
    val_if_large = val_if_large.clamp(max=num_buckets - 1)
    return ret + torch.where(is_small, n, val_if_large)


def relative_positions(query_length, key_length, offset=0):
    context = torch.arange(offset, offset + query_length, dtype=torch.long)[:, None]
    memory = torch.arange(key_length, dtype=torch.long)[None, :]
    return memory - context


class RelativePositionBias(nn.Module):
    def __init__(self, num_heads, num_buckets=32, max_distance=128, bidirectional=True):
        super().__init__()
        self.num_heads = num_heads
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)

    def forward(self, query_length, key_length, offset=0):
        rel = relative_positions(query_length, key_length, offset)
        buckets = relative_position_bucket(
            rel,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        values = self.relative_attention_bias(buckets)
        return values.permute(2, 0, 1).unsqueeze(0)


class T5Attention(nn.Module):
    def __init__(self, d_model, num_heads, has_relative_bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)
        self.rel_bias = RelativePositionBias(num_heads) if has_relative_bias else None

    def forward(self, x, mask=None, position_bias=None):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.num_heads, self.d_head).unbind(2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k)
        if position_bias is None and self.rel_bias is not None:
            position_bias = self.rel_bias(t, t)
        if position_bias is not None:
            scores = scores + position_bias
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
        attn = F.softmax(scores.float(), dim=-1).type_as(scores)
        out = torch.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, t, -1)
        return self.o(out), position_bias
