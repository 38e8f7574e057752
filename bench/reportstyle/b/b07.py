import torch
import torch.nn as nn


def get_extended_attention_mask(attention_mask, dtype):
    if attention_mask.dim() == 3:
        extended = attention_mask[:, None, :, :]
    else:
        extended = attention_mask[:, None, None, :]
    extended = extended.to(dtype=dtype)
    return (1.0 - extended) * torch.finfo(dtype).min


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads, dropout=0.1):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, bias):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).unbind(2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / (d // self.heads) ** 0.5
        attn = self.drop((scores + bias).softmax(-1))
        return self.out(torch.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, n, d))


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, ffn, dropout=0.1):
        super().__init__()
        self.attn = SelfAttention(hidden, heads, dropout)
        self.norm1 = nn.LayerNorm(hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.ffn = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden), nn.Dropout(dropout))

    def forward(self, x, bias):
        x = self.norm1(x + self.attn(x, bias))
        return self.norm2(x + self.ffn(x))


class TransformerEncoder(nn.Module):
    def __init__(self, vocab_size, hidden=256, layers=4, heads=4, ffn=1024, max_len=512):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, hidden)
        self.pos = nn.Embedding(max_len, hidden)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    def forward(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.tok(input_ids) + self.pos(positions)[None]
        bias = get_extended_attention_mask(attention_mask, self.dtype)
        for layer in self.layers:
            x = layer(x, bias)
        return x


if __name__ == "__main__":
    model = TransformerEncoder(1000)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model.cuda())
    ids = torch.randint(0, 1000, (8, 32))
    print(model(ids.to(next(model.parameters()).device)).shape)
