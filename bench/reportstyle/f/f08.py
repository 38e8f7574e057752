import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def hz_to_mel(f):
    return 2595.0 * math.log10(1.0 + f / 700.0)


class LogMelFrontend(nn.Module):
    def __init__(self, sample_rate=16000, n_fft=512, hop_length=160, n_mels=40, f_min=20.0, f_max=None):
        super().__init__()
        self.sample_rate = sample_rate
        self.n_fft = n_fft
        self.hop_length = hop_length
        self.n_mels = n_mels
        self.f_min = f_min
        self.f_max = f_max or sample_rate / 2
        self.register_buffer("window", torch.hann_window(n_fft))
        self.mel_fb = None

    def _build_filterbank(self, n_freqs):
        freqs = torch.linspace(0, self.sample_rate / 2, n_freqs)
        mels = torch.linspace(hz_to_mel(self.f_min), hz_to_mel(self.f_max), self.n_mels + 2)
        hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
        lower, center, upper = hz[:-2], hz[1:-1], hz[2:]
        up = (freqs[:, None] - lower[None, :]) / (center - lower)[None, :]
        down = (upper[None, :] - freqs[:, None]) / (upper - center)[None, :]
        return torch.clamp(torch.minimum(up, down), min=0.0)

    def forward(self, wav):
        spec = torch.stft(wav, self.n_fft, self.hop_length, window=self.window, return_complex=True)
        power = spec.abs().pow(2)
        if self.mel_fb is None:
            self.mel_fb = self._build_filterbank(power.size(1))
        mel = torch.matmul(power.transpose(1, 2), self.mel_fb)
        return torch.log(mel + 1e-6).transpose(1, 2)


class KeywordSpotter(nn.Module):
    def __init__(self, n_keywords=12, n_mels=40):
        super().__init__()
        self.frontend = LogMelFrontend(n_mels=n_mels)
        self.norm = nn.InstanceNorm1d(n_mels)
        self.net = nn.Sequential(
            nn.Conv1d(n_mels, 64, 5, padding=2), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Conv1d(64, 64, 5, padding=2, dilation=1), nn.BatchNorm1d(64), nn.ReLU(),
            nn.Conv1d(64, 128, 3, padding=2, dilation=2), nn.BatchNorm1d(128), nn.ReLU(),
        )
        self.fc = nn.Linear(128, n_keywords)

    def forward(self, wav):
        feats = self.norm(self.frontend(wav))
        h = self.net(feats)
        return self.fc(h.mean(dim=-1))


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = KeywordSpotter().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(50):
        wav = torch.randn(32, 16000, device=device) * 0.1
        target = torch.randint(0, 12, (32,), device=device)
        loss = F.cross_entropy(model(wav), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f}")
