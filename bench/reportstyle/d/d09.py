"""Naive model parallelism for a char-level LSTM LM whose softmax doesn't fit next to the encoder."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


def pick_devices():
    n = torch.cuda.device_count()
    if n == 0:
        return torch.device("cpu"), torch.device("cpu")
    return torch.device("cuda:0"), torch.device(f"cuda:{n - 1}")


class SplitLSTMLM(nn.Module):
    def __init__(self, vocab, emb=128, hidden=512, layers=2, dev0=None, dev1=None):
        super().__init__()
        self.dev0, self.dev1 = dev0, dev1
        self.embed = nn.Embedding(vocab, emb).to(dev0)
        self.lstm = nn.LSTM(emb, hidden, layers, batch_first=True, dropout=0.1).to(dev0)
        self.proj = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden)).to(dev1)
        self.decoder = nn.Linear(hidden, vocab).to(dev1)

    def forward(self, tokens, state=None):
        h, state = self.lstm(self.embed(tokens.to(self.dev0)), state)
        h = self.proj(h.to(self.dev1))
        return self.decoder(h), state


def batches(text_ids, batch_size, seq_len):
    n = (len(text_ids) - 1) // (batch_size * seq_len) * batch_size * seq_len
    x = text_ids[:n].view(batch_size, -1)
    y = text_ids[1 : n + 1].view(batch_size, -1)
    for i in range(0, x.size(1), seq_len):
        yield x[:, i : i + seq_len], y[:, i : i + seq_len]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    args = ap.parse_args()

    text = "the quick brown fox jumps over the lazy dog. " * 200
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([stoi[c] for c in text], dtype=torch.long)

    dev0, dev1 = pick_devices()
    model = SplitLSTMLM(len(chars), hidden=args.hidden, dev0=dev0, dev1=dev1)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        state, total, count = None, 0.0, 0
        for x, y in batches(ids, args.batch_size, args.seq_len):
            if state is not None:
                state = tuple(s.detach() for s in state)
            logits, state = model(x, state)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.to(model.dev0).reshape(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            total, count = total + loss.item(), count + 1
        print(f"epoch {epoch} loss {total / count:.3f}")

    with torch.no_grad():
        out, state, tok = [], None, torch.tensor([[stoi["t"]]])
        for _ in range(40):
            logits, state = model(tok, state)
            tok = logits[:, -1].argmax(-1, keepdim=True)
            out.append(chars[tok.item()])
        print("sample:", "t" + "".join(out))


if __name__ == "__main__":
    main()
