import torch
import torch.nn as nn

PAD, BOS, EOS = 0, 1, 2


class Seq2SeqTransformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=512, nhead=8, layers=3):
        super().__init__()
        self.src_tok = nn.Embedding(src_vocab, d_model, padding_idx=PAD)
        self.tgt_tok = nn.Embedding(tgt_vocab, d_model, padding_idx=PAD)
        self.pos = nn.Parameter(torch.randn(1, 512, d_model) * 0.02)
        self.transformer = nn.Transformer(d_model, nhead, layers, layers, batch_first=True)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def encode(self, src):
        x = self.src_tok(src) + self.pos[:, :src.size(1)]
        return self.transformer.encoder(x, src_key_padding_mask=src.eq(PAD))

    def decode(self, tgt, memory, memory_mask):
        y = self.tgt_tok(tgt) + self.pos[:, :tgt.size(1)]
        causal = self.transformer.generate_square_subsequent_mask(tgt.size(1)).to(tgt.device)
        out = self.transformer.decoder(y, memory, tgt_mask=causal, memory_key_padding_mask=memory_mask)
        return self.generator(out)


@torch.no_grad()
def greedy_decode(model, src, max_len=100):
    memory = model.encode(src)
    ys = torch.full((src.size(0), 1), BOS, dtype=torch.long).cuda()
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits = model.decode(ys, memory, src.eq(PAD))
        next_tok = logits[:, -1].argmax(-1)
        next_tok = next_tok.masked_fill(finished, PAD)
        ys = torch.cat([ys, next_tok.unsqueeze(1)], dim=1)
        finished |= next_tok.eq(EOS)
        if finished.all():
            break
    return ys[:, 1:]


def translate(model, batches, device, id2tok):
    model.eval()
    results = []
    for src in batches:
        out = greedy_decode(model, src.to(device))
        for row in out.tolist():
            toks = [id2tok[i] for i in row if i not in (PAD, EOS)]
            results.append(" ".join(toks))
    return results


if __name__ == "__main__":
    device = torch.device("cuda:1" if torch.cuda.device_count() > 1 else "cuda:0")
    model = Seq2SeqTransformer(8000, 8000).to(device)
    model.load_state_dict(torch.load("nmt_best.pt", map_location=device))
    id2tok = {i: f"tok{i}" for i in range(8000)}
    batches = [torch.randint(3, 8000, (16, 40)) for _ in range(5)]
    for line in translate(model, batches, device, id2tok):
        print(line)
