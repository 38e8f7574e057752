import math

import torch
import torch.nn as nn
import torch.nn.functional as F

SAMPLE_RATE = 8000


def log_spectrogram(wav, n_fft=256, hop_length=128, eps=1e-6):
    window = torch.hann_window(n_fft)
    spec = torch.stft(wav, n_fft, hop_length=hop_length, window=window, return_complex=True)
    return torch.log(spec.abs().pow(2) + eps)


class SpecAugment(nn.Module):
    def __init__(self, freq_mask=8, time_mask=10):
        super().__init__()
        self.freq_mask, self.time_mask = freq_mask, time_mask

    def forward(self, spec):
        if not self.training:
            return spec
        spec = spec.clone()
        _, F_, T_ = spec.shape
        f0 = int(torch.randint(0, F_ - self.freq_mask, (1,)))
        t0 = int(torch.randint(0, max(1, T_ - self.time_mask), (1,)))
        spec[:, f0 : f0 + self.freq_mask] = spec.mean()
        spec[:, :, t0 : t0 + self.time_mask] = spec.mean()
        return spec


class KeywordSpotter(nn.Module):
    def __init__(self, n_classes, n_fft=256, hop_length=128, ch=32):
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.augment = SpecAugment()
        self.norm = nn.InstanceNorm2d(1)
        self.features = nn.Sequential(
            nn.Conv2d(1, ch, 3, padding=1), nn.BatchNorm2d(ch), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(ch, 2 * ch, 3, padding=1), nn.BatchNorm2d(2 * ch), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * ch, 2 * ch, 3, padding=1), nn.BatchNorm2d(2 * ch), nn.ReLU(),
        )
        self.classifier = nn.Linear(2 * ch, n_classes)

    def forward(self, wav):
        spec = self.augment(log_spectrogram(wav, self.n_fft, self.hop_length))
        x = self.features(self.norm(spec.unsqueeze(1)))
        return self.classifier(x.mean(dim=(2, 3)))


def synth_keywords(n, n_classes, seconds=0.5):
    t = torch.arange(int(SAMPLE_RATE * seconds)) / SAMPLE_RATE
    labels = torch.randint(0, n_classes, (n,))
    base = 300.0 + 250.0 * labels.float()
    chirp = torch.sin(2 * math.pi * (base[:, None] * t + 400.0 * labels[:, None] * t**2))
    env = torch.hann_window(t.numel(), periodic=False)
    return chirp * env + 0.1 * torch.randn(n, t.numel()), labels


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n_classes = 5
    wav, labels = synth_keywords(320, n_classes)
    model = KeywordSpotter(n_classes).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-2)
    for epoch in range(3):
        model.train()
        perm = torch.randperm(len(wav))
        for i in range(0, len(wav), 64):
            idx = perm[i : i + 64]
            x, y = wav[idx].to(device), labels[idx].to(device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            acc = (model(wav[:256].to(device)).argmax(1).cpu() == labels[:256]).float().mean()
        print(f"epoch {epoch} loss {loss.item():.3f} acc {acc.item():.3f}")
