import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class SpeakerEncoder(nn.Module):
    def __init__(self, n_mels=40, hidden=256, emb_dim=128, num_layers=3):
        super().__init__()
        self.num_layers = num_layers
        self.hidden = hidden
        self.lstm = nn.LSTM(n_mels, hidden, num_layers, batch_first=True)
        self.proj = nn.Linear(hidden, emb_dim)

    def _zero_state(self, batch_size, dev):
        h = torch.zeros(self.num_layers, batch_size, self.hidden, device=dev)
        c = torch.zeros(self.num_layers, batch_size, self.hidden, device=dev)
        return h, c

    def forward(self, mels):
        state = self._zero_state(mels.size(0), mels.device)
        out, _ = self.lstm(mels, state)
        emb = self.proj(out[:, -1])
        return F.normalize(emb, dim=1)


class SpeakerClassifier(nn.Module):
    def __init__(self, n_speakers, **kw):
        super().__init__()
        self.encoder = SpeakerEncoder(**kw)
        self.fc = nn.Linear(128, n_speakers)

    def forward(self, mels):
        return self.fc(self.encoder(mels))


def main():
    feats = torch.randn(4096, 160, 40)
    spk = torch.randint(0, 100, (4096,))
    loader = DataLoader(TensorDataset(feats, spk), batch_size=64, shuffle=True, drop_last=True)

    model = SpeakerClassifier(100).cuda()
    model = nn.DataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(20):
        for mels, labels in loader:
            mels, labels = mels.cuda(), labels.cuda()
            loss = F.cross_entropy(model(mels), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(epoch, loss.item())


if __name__ == "__main__":
    main()
