import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(size):
    return torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.1):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        mask = causal_mask(T)
        att = att.masked_fill(mask, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class MiniGPT(nn.Module):
    def __init__(self, vocab_size, block_size=128, d_model=256, n_heads=8, n_layers=4):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Parameter(torch.zeros(1, block_size, d_model))
        self.blocks = nn.Sequential(*[Block(d_model, n_heads) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx, targets=None):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe[:, :T]
        logits = self.lm_head(self.ln_f(self.blocks(x)))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0):
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.block_size:])
            probs = F.softmax(logits[:, -1] / temperature, dim=-1)
            idx = torch.cat([idx, torch.multinomial(probs, 1)], dim=1)
        return idx


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    text = open(__file__).read()
    stoi = {ch: i for i, ch in enumerate(sorted(set(text)))}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    model = MiniGPT(len(stoi)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for it in range(500):
        ix = torch.randint(len(data) - 129, (16,))
        xb = torch.stack([data[i:i + 128] for i in ix]).to(device)
        yb = torch.stack([data[i + 1:i + 129] for i in ix]).to(device)
        _, loss = model(xb, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(model.generate(torch.zeros((1, 1), dtype=torch.long, device=device), 100)[0].tolist())
