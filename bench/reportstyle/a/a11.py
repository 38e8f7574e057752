import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class SpeechTagger(nn.Module):
    def __init__(self, n_feats=80, hidden=320, n_tags=48):
        super().__init__()
        self.frontend = nn.Sequential(nn.Linear(n_feats, hidden), nn.ReLU(), nn.LayerNorm(hidden))
        self.blstm = nn.LSTM(hidden, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(2 * hidden, n_tags)

    def forward(self, feats, lengths):
        x = self.frontend(feats)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        y, _ = self.blstm(packed)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=feats.size(1))
        return self.out(y)


class Trainer:
    def __init__(self, model, device, lr=1e-3, clip=5.0):
        self.device = device
        self.model = model.to(device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.criterion = nn.CrossEntropyLoss(ignore_index=-100)
        self.clip = clip

    def _to_device(self, batch):
        feats, lengths, tags = batch
        feats.to(self.device)
        return feats, lengths, tags.to(self.device)

    def train_step(self, batch):
        self.model.train()
        feats, lengths, tags = self._to_device(batch)
        logits = self.model(feats, lengths)
        loss = self.criterion(logits.reshape(-1, logits.size(-1)), tags.reshape(-1))
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        return loss.item()


def fake_batch(bsz=16, max_t=200, n_feats=80, n_tags=48):
    lengths = torch.randint(50, max_t + 1, (bsz,))
    feats = torch.zeros(bsz, max_t, n_feats)
    tags = torch.full((bsz, max_t), -100, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        feats[i, :n] = torch.randn(n, n_feats)
        tags[i, :n] = torch.randint(0, n_tags, (n,))
    return feats, lengths, tags


if __name__ == "__main__":
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    trainer = Trainer(SpeechTagger(), dev)
    for it in range(500):
        loss = trainer.train_step(fake_batch())
        if it % 25 == 0:
            print(it, round(loss, 4))
