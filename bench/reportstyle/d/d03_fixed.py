import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS = 0, 1, 2


class Encoder(nn.Module):
    def __init__(self, vocab, emb, hid):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb, padding_idx=PAD)
        self.rnn = nn.GRU(emb, hid, batch_first=True)

    def forward(self, src):
        return self.rnn(self.emb(src))


class AttnDecoder(nn.Module):
    def __init__(self, vocab, emb, hid):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb, padding_idx=PAD)
        self.rnn = nn.GRU(emb + hid, hid, batch_first=True)
        self.out = nn.Linear(hid, vocab)

    def step(self, tok, h, enc_out):
        scores = torch.bmm(enc_out, h[-1].unsqueeze(2)).squeeze(2)
        ctx = torch.bmm(torch.softmax(scores, dim=1).unsqueeze(1), enc_out)
        out, h = self.rnn(torch.cat([self.emb(tok).unsqueeze(1), ctx], dim=2), h)
        return F.log_softmax(self.out(out.squeeze(1)), dim=-1), h


class Seq2Seq(nn.Module):
    def __init__(self, vocab=64, emb=32, hid=64):
        super().__init__()
        self.encoder = Encoder(vocab, emb, hid)
        self.decoder = AttnDecoder(vocab, emb, hid)

    def forward(self, src, tgt):
        enc_out, h = self.encoder(src)
        logps = []
        for i in range(tgt.size(1) - 1):
            logp, h = self.decoder.step(tgt[:, i], h, enc_out)
            logps.append(logp)
        return torch.stack(logps, dim=1)

    @torch.no_grad()
    def beam_search(self, src, beam_size=4, max_len=20, alpha=0.7):
        enc_out, h = self.encoder(src)
        enc_out = enc_out.expand(beam_size, -1, -1).contiguous()
        h = h.expand(-1, beam_size, -1).contiguous()
        seqs = torch.full((beam_size, 1), BOS, dtype=torch.long, device=src.device)
        scores = torch.zeros(beam_size, device=src.device)
        scores[1:] = float("-inf")
        done_seqs, done_scores = [], []
        for _ in range(max_len):
            logp, h = self.decoder.step(seqs[:, -1], h, enc_out)
            vocab = logp.size(1)
            top_scores, top_ix = (scores.unsqueeze(1) + logp).view(-1).topk(beam_size)
            beam_ix, tok_ix = top_ix // vocab, top_ix % vocab
            seqs = torch.cat([seqs[beam_ix], tok_ix.unsqueeze(1)], dim=1)
            h = h[:, beam_ix].contiguous()
            scores = top_scores
            ended = tok_ix == EOS
            for i in ended.nonzero().flatten().tolist():
                done_seqs.append(seqs[i])
                done_scores.append(scores[i])
            scores = scores.masked_fill(ended, float("-inf"))
            if len(done_seqs) >= beam_size:
                break
        if len(done_seqs) < beam_size:
            done_seqs.extend(seqs)
            done_scores.extend(scores)
        final = torch.stack(done_scores)
        penalty = torch.tensor([((5 + len(s)) / 6) ** alpha for s in done_seqs], device=final.device)
        best = torch.argmax(final / penalty).item()
        return done_seqs[best].tolist()


def copy_batch(batch, length, vocab, device):
    body = torch.randint(3, vocab, (batch, length), device=device)
    bos = torch.full((batch, 1), BOS, dtype=torch.long, device=device)
    eos = torch.full((batch, 1), EOS, dtype=torch.long, device=device)
    return body, torch.cat([bos, body, eos], dim=1)


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Seq2Seq().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(60):
        src, tgt = copy_batch(32, 6, 64, device)
        logp = model(src, tgt)
        loss = F.nll_loss(logp.reshape(-1, logp.size(-1)), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("train loss", round(loss.item(), 3))
    model.eval()
    src, _ = copy_batch(1, 6, 64, device)
    print("src ", src[0].tolist())
    print("beam", model.beam_search(src))
