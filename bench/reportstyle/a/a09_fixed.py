import torch
import torch.nn as nn
import torch.nn.functional as F


class ShardedLM(nn.Module):
    def __init__(self, vocab, d_model=1024, n_layers=12, n_heads=16, devices=("cuda:0", "cuda:1")):
        super().__init__()
        self.devices = [torch.device(d) for d in devices]
        half = n_layers // 2
        self.embed = nn.Embedding(vocab, d_model).to(self.devices[0])
        self.lower = nn.ModuleList(
            [nn.TransformerEncoderLayer(d_model, n_heads, batch_first=True) for _ in range(half)]
        ).to(self.devices[0])
        self.upper = nn.ModuleList(
            [nn.TransformerEncoderLayer(d_model, n_heads, batch_first=True) for _ in range(n_layers - half)]
        ).to(self.devices[1])
        self.lm_head = nn.Linear(d_model, vocab).to(self.devices[1])

    def forward(self, ids, attn_mask):
        h = self.embed(ids.to(self.devices[0]))
        for layer in self.lower:
            h = layer(h, src_mask=attn_mask.to(self.devices[0]))
        h = h.to(self.devices[1])
        for layer in self.upper:
            h = layer(h, src_mask=attn_mask.to(self.devices[1]))
        return self.lm_head(h)


def causal(n):
    return torch.triu(torch.full((n, n), float("-inf")), diagonal=1)


def train_step(model, optimizer, batch):
    ids, targets = batch
    ids, targets = ids.to(model.devices[0]), targets.to(model.devices[-1])
    logits = model(ids, causal(ids.size(1)))
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    model = ShardedLM(32000)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(1000):
        seq = torch.randint(0, 32000, (8, 257))
        loss = train_step(model, optimizer, (seq[:, :-1], seq[:, 1:]))
        if step % 20 == 0:
            print(f"step {step}: {loss:.3f}")
