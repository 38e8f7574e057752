import torch
import torch.nn as nn
import torch.nn.functional as F


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, max_seq_len=128, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._build_cache(max_seq_len)

    def _build_cache(self, seq_len):
        t = torch.arange(seq_len, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, q, k):
        seq_len = q.size(-2)
        if seq_len > self.cos_cached.size(0):
            self._build_cache(seq_len)
        cos = self.cos_cached[:seq_len].to(q.dtype)
        sin = self.sin_cached[:seq_len].to(q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class RoPEAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.rotary = RotaryEmbedding(dim // n_heads)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        q, k = self.rotary(q, k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, C))


class TinyLM(nn.Module):
    def __init__(self, vocab=256, dim=192, n_heads=6, n_layers=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(RoPEAttention(dim, n_heads) for _ in range(n_layers))
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(n_layers))
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        for norm, attn in zip(self.norms, self.layers):
            h = h + attn(norm(h))
        return self.lm_head(h)


def byte_batches(text, seq_len, batch_size, device):
    data = torch.tensor(list(text.encode("utf-8")), dtype=torch.long)
    starts = torch.randint(0, len(data) - seq_len - 1, (batch_size,))
    x = torch.stack([data[s : s + seq_len] for s in starts])
    y = torch.stack([data[s + 1 : s + seq_len + 1] for s in starts])
    return x.to(device), y.to(device)


@torch.no_grad()
def eval_perplexity(model, text, seq_len, device, batches=10):
    model.eval()
    losses = []
    for _ in range(batches):
        x, y = byte_batches(text, seq_len, 8, device)
        losses.append(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item())
    return torch.tensor(losses).mean().exp().item()


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    corpus = " ".join(f"line {i}: the value of {i} squared is {i * i}." for i in range(5000))
    model = TinyLM().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    for step in range(1000):
        model.train()
        x, y = byte_batches(corpus, 128, 32, device)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 200 == 0:
            print(f"step {step}: loss {loss.item():.3f}")
    for seq_len in (128, 256, 512):
        print(f"ppl@{seq_len}: {eval_perplexity(model, corpus, seq_len, device):.2f}")


if __name__ == "__main__":
    main()
