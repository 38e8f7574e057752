import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD, BOS, EOS = 0, 1, 2


class Seq2Seq(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, emb_dim=256, hidden_size=512, num_layers=2, dropout=0.2):
        super().__init__()
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.src_emb = nn.Embedding(src_vocab, emb_dim, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(tgt_vocab, emb_dim, padding_idx=PAD)
        self.encoder = nn.LSTM(emb_dim, hidden_size, num_layers, batch_first=True, dropout=dropout)
        self.decoder = nn.LSTM(emb_dim, hidden_size, num_layers, batch_first=True, dropout=dropout)
        self.out = nn.Linear(hidden_size, tgt_vocab)

    def init_state(self, batch_size, device):
        h0 = torch.zeros(self.num_layers, batch_size, self.hidden_size, device=device)
        c0 = torch.zeros(self.num_layers, batch_size, self.hidden_size, device=device)
        return h0, c0

    def encode(self, src, src_lens):
        packed = pack_padded_sequence(self.src_emb(src), src_lens.cpu(),
                                      batch_first=True, enforce_sorted=False)
        enc_out, state = self.encoder(packed, self.init_state(src.size(0), src.device))
        enc_out, _ = pad_packed_sequence(enc_out, batch_first=True)
        return enc_out, state

    def forward(self, src, src_lens, tgt_in):
        _, state = self.encode(src, src_lens)
        dec_out, _ = self.decoder(self.tgt_emb(tgt_in), state)
        return self.out(dec_out)

    @torch.no_grad()
    def greedy_decode(self, src, src_lens, max_len=50):
        _, state = self.encode(src, src_lens)
        tokens = torch.full((src.size(0), 1), BOS, dtype=torch.long, device=src.device)
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        for _ in range(max_len):
            dec_out, state = self.decoder(self.tgt_emb(tokens[:, -1:]), state)
            next_tok = self.out(dec_out[:, -1]).argmax(-1)
            next_tok = next_tok.masked_fill(finished, PAD)
            tokens = torch.cat([tokens, next_tok.unsqueeze(1)], dim=1)
            finished |= next_tok.eq(EOS)
            if finished.all():
                break
        return tokens[:, 1:]


def batch_from_pairs(pairs, device):
    src_lens = torch.tensor([len(s) for s, _ in pairs])
    max_src = int(src_lens.max())
    max_tgt = max(len(t) for _, t in pairs) + 1
    src = torch.full((len(pairs), max_src), PAD, dtype=torch.long)
    tgt_in = torch.full((len(pairs), max_tgt), PAD, dtype=torch.long)
    tgt_out = torch.full((len(pairs), max_tgt), PAD, dtype=torch.long)
    for i, (s, t) in enumerate(pairs):
        src[i, :len(s)] = torch.tensor(s)
        tgt_in[i, :len(t) + 1] = torch.tensor([BOS] + t)
        tgt_out[i, :len(t) + 1] = torch.tensor(t + [EOS])
    return src.to(device), src_lens, tgt_in.to(device), tgt_out.to(device)


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Seq2Seq(src_vocab=1000, tgt_vocab=1000).to(device)
    optim = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)
    pairs = [([3 + (i * j) % 900 for j in range(5 + i % 7)],
              [3 + (i + j) % 900 for j in range(4 + i % 5)]) for i in range(64)]
    for epoch in range(10):
        src, src_lens, tgt_in, tgt_out = batch_from_pairs(pairs, device)
        logits = model(src, src_lens, tgt_in)
        loss = criterion(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))
        optim.zero_grad()
        loss.backward()
        optim.step()
    print(model.greedy_decode(src[:4], src_lens[:4]))
