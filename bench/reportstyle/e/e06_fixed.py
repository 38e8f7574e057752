import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS = 0, 1, 2
VOCAB = 32
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def square_subsequent_mask(size):
    return torch.triu(torch.full((size, size), float("-inf"), device=DEVICE), diagonal=1)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, vocab=VOCAB, d_model=128, nhead=4, layers=2, max_len=64):
        super().__init__()
        self.d_model = d_model
        self.tok = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.pos = nn.Embedding(max_len, d_model)
        self.transformer = nn.Transformer(d_model, nhead, layers, layers, dim_feedforward=256,
                                          dropout=0.1, batch_first=True)
        self.generator = nn.Linear(d_model, vocab)

    def embed(self, ids):
        positions = torch.arange(ids.size(1), device=ids.device)
        return self.tok(ids) * math.sqrt(self.d_model) + self.pos(positions)

    def encode(self, src):
        return self.transformer.encoder(self.embed(src), src_key_padding_mask=src == PAD)

    def decode(self, tgt, memory, tgt_mask):
        return self.transformer.decoder(self.embed(tgt), memory, tgt_mask=tgt_mask)

    def forward(self, src, tgt_in):
        memory = self.encode(src)
        out = self.decode(tgt_in, memory, square_subsequent_mask(tgt_in.size(1)))
        return self.generator(out)


def make_reverse_batch(batch_size, seq_len=12):
    body = torch.randint(3, VOCAB, (batch_size, seq_len))
    src = torch.cat([body, torch.full((batch_size, 1), EOS)], dim=1)
    tgt = torch.cat([torch.full((batch_size, 1), BOS), body.flip(1),
                     torch.full((batch_size, 1), EOS)], dim=1)
    return src.to(DEVICE), tgt.to(DEVICE)


@torch.no_grad()
def greedy_decode(model, src, max_len=20):
    model.eval()
    memory = model.encode(src)
    ys = torch.full((1, 1), BOS, dtype=torch.long, device=DEVICE)
    for _ in range(max_len - 1):
        out = model.decode(ys, memory, square_subsequent_mask(ys.size(1)))
        next_word = model.generator(out[:, -1]).argmax(dim=-1).item()
        ys = torch.cat([ys, torch.full((1, 1), next_word, dtype=torch.long, device=DEVICE)], dim=1)
        if next_word == EOS:
            break
    return ys[0, 1:].tolist()


def main():
    torch.manual_seed(0)
    model = Seq2SeqTransformer().to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98))
    for step in range(3000):
        model.train()
        src, tgt = make_reverse_batch(64)
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 500 == 0:
            print(f"step {step}: loss {loss.item():.4f}")

    src, _ = make_reverse_batch(1)
    print("source:    ", src[0].tolist())
    print("prediction:", greedy_decode(model, src))


if __name__ == "__main__":
    main()
