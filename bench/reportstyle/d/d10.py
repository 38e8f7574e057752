import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class BiLSTMTagger(nn.Module):
    def __init__(self, vocab_size, num_tags, device, emb_dim=100, hidden=128, num_layers=1, pad_idx=0):
        super().__init__()
        self.device = device
        self.hidden = hidden
        self.num_layers = num_layers
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_idx)
        self.lstm = nn.LSTM(emb_dim, hidden, num_layers, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(0.3)
        self.classifier = nn.Linear(2 * hidden, num_tags)

    def init_hidden(self, batch_size):
        shape = (2 * self.num_layers, batch_size, self.hidden)
        return torch.zeros(shape, device=self.device), torch.zeros(shape, device=self.device)

    def forward(self, tokens, lengths):
        emb = self.dropout(self.embedding(tokens))
        packed = nn.utils.rnn.pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed, self.init_hidden(tokens.size(0)))
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=tokens.size(1))
        return self.classifier(self.dropout(out))


def synthetic_corpus(n, vocab_size, num_tags, max_len=25, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(5, max_len + 1, (n,), generator=g)
    tokens = torch.zeros(n, max_len, dtype=torch.long)
    tags = torch.full((n, max_len), -100, dtype=torch.long)
    for i, L in enumerate(lengths.tolist()):
        tokens[i, :L] = torch.randint(1, vocab_size, (L,), generator=g)
        tags[i, :L] = tokens[i, :L] % num_tags
    return tokens, tags, lengths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=300)
    ap.add_argument("--tags", type=int, default=9)
    args = ap.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    tokens, tags, lengths = synthetic_corpus(1024, args.vocab, args.tags)

    model = BiLSTMTagger(args.vocab, args.tags, device).to(device)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)

    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(tokens))
        total = 0.0
        for i in range(0, len(perm), args.batch_size):
            idx = perm[i : i + args.batch_size]
            x, y, L = tokens[idx].to(device), tags[idx].to(device), lengths[idx].to(device)
            logits = model(x, L)
            loss = F.cross_entropy(logits.reshape(-1, args.tags), y.reshape(-1), ignore_index=-100)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        print(f"epoch {epoch} loss {total / len(tokens):.4f}")

    model.eval()
    with torch.no_grad():
        x, y, L = tokens[:256].to(device), tags[:256].to(device), lengths[:256].to(device)
        pred = model(x, L).argmax(-1)
        mask = y != -100
        print("token acc", (pred[mask] == y[mask]).float().mean().item())


if __name__ == "__main__":
    main()
