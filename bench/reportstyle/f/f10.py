import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS = 0, 1, 2


class Seq2SeqTransformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=256, nhead=4, layers=3, max_len=128):
        super().__init__()
        self.src_emb = nn.Embedding(src_vocab, d_model, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(tgt_vocab, d_model, padding_idx=PAD)
        self.pos = nn.Embedding(max_len, d_model)
        self.transformer = nn.Transformer(d_model, nhead, layers, layers, dim_feedforward=512, batch_first=True)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def _embed(self, emb, tokens):
        positions = torch.arange(tokens.size(1), device=tokens.device)
        return emb(tokens) + self.pos(positions)[None]

    def encode(self, src):
        return self.transformer.encoder(self._embed(self.src_emb, src), src_key_padding_mask=src.eq(PAD))

    def decode(self, tgt, memory):
        T = tgt.size(1)
        causal = torch.triu(torch.full((T, T), float("-inf"), device=tgt.device), diagonal=1)
        out = self.transformer.decoder(self._embed(self.tgt_emb, tgt), memory, tgt_mask=causal)
        return self.generator(out)

    def forward(self, src, tgt_in):
        return self.decode(tgt_in, self.encode(src))


@torch.no_grad()
def greedy_decode(model, src, max_len=40):
    model.eval()
    memory = model.encode(src)
    ys = torch.full((src.size(0), 1), BOS, dtype=torch.long)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        logits = model.decode(ys, memory)
        next_tok = logits[:, -1].argmax(dim=-1)
        next_tok = next_tok.masked_fill(finished, PAD)
        ys = torch.cat([ys, next_tok.unsqueeze(1)], dim=1)
        finished |= next_tok.eq(EOS)
        if finished.all():
            break
    return ys


def make_copy_batch(batch_size, length, vocab, device):
    body = torch.randint(3, vocab, (batch_size, length), device=device)
    src = body
    tgt = torch.cat([torch.full((batch_size, 1), BOS, device=device), body.flip(1),
                     torch.full((batch_size, 1), EOS, device=device)], dim=1)
    return src, tgt


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Seq2SeqTransformer(100, 100).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-4, betas=(0.9, 0.98))
    for step in range(1, 501):
        model.train()
        src, tgt = make_copy_batch(64, 12, 100, device)
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            src, tgt = make_copy_batch(4, 12, 100, device)
            pred = greedy_decode(model, src)
            print(f"step {step} loss {loss.item():.3f}")
            print("  target:", tgt[0].tolist())
            print("  pred:  ", pred[0].tolist())
