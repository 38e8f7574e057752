import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def relative_position_bucket(query_len, key_len, num_buckets=32, max_distance=128, device=None):
    """T5-style bidirectional bucketing of relative positions."""
    context = torch.arange(query_len, dtype=torch.long, device=device)[:, None]
    memory = torch.arange(key_len, dtype=torch.long, device=device)[None, :]
    relative = memory - context
    num_buckets //= 2
    buckets = (relative > 0).long() * num_buckets
    n = relative.abs()
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = max_exact + (
        torch.log(n.float().clamp(min=1) / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).long()
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(is_small, n, large)


class RelativeSelfAttention(nn.Module):
    def __init__(self, dim, num_heads=8, num_buckets=32, max_distance=128):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.out = nn.Linear(dim, dim)
        self.rel_bias = nn.Embedding(num_buckets, num_heads)

    def position_bias(self, q_len, k_len):
        buckets = relative_position_bucket(q_len, k_len, self.num_buckets, self.max_distance,
                                           device=self.rel_bias.weight.device)
        bias = self.rel_bias(buckets)
        return bias.permute(2, 0, 1).unsqueeze(0)

    def forward(self, x, key_padding_mask=None):
        B, L, D = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        scores = scores + self.position_bias(L, L)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        attn = F.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(B, L, D)
        return self.out(out)


class Encoder(nn.Module):
    def __init__(self, vocab, dim=256, depth=4, heads=8, n_classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.layers = nn.ModuleList([RelativeSelfAttention(dim, heads) for _ in range(depth)])
        self.norms = nn.ModuleList([nn.LayerNorm(dim) for _ in range(depth)])
        self.cls = nn.Linear(dim, n_classes)

    def forward(self, tokens):
        pad = tokens.eq(0)
        x = self.embed(tokens)
        for attn, norm in zip(self.layers, self.norms):
            x = x + attn(norm(x), key_padding_mask=pad)
        x = x.masked_fill(pad[..., None], 0.0).sum(1) / (~pad).sum(1, keepdim=True).clamp(min=1)
        return self.cls(x)


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Encoder(vocab=5000).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    for step in range(100):
        tokens = torch.randint(1, 5000, (16, 96), device=device)
        tokens[:, 80:] = 0
        labels = torch.randint(0, 4, (16,), device=device)
        loss = F.cross_entropy(model(tokens), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("final loss", loss.item())
