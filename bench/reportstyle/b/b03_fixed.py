import torch
import torch.nn as nn
import torch.nn.functional as F


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q, k, cos, sin):
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0, max_seq_len=2048, scaling_factor=1.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.scaling_factor = scaling_factor
        self.max_seq_len = max_seq_len

    def _freqs(self, seq_len, offset=0):
        t = torch.arange(offset, offset + seq_len, device=self.inv_freq.device, dtype=self.inv_freq.dtype)
        t = t / self.scaling_factor
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        return torch.cat((freqs, freqs), dim=-1)

    def forward(self, q, k, offset=0):
        seq_len = q.shape[-2]
        emb = self._freqs(seq_len, offset)
        cos = emb.cos().to(q.dtype)[None, None]
        sin = emb.sin().to(q.dtype)[None, None]
        return apply_rotary(q, k, cos, sin)


class RotarySelfAttention(nn.Module):
    def __init__(self, dim, num_heads, causal=True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.causal = causal
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.rotary = RotaryEmbedding(self.head_dim)

    def forward(self, x, past_length=0):
        b, n, _ = x.shape
        qkv = self.qkv(x).view(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.rotary(q, k, offset=past_length)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(out.transpose(1, 2).reshape(b, n, -1))
