import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class WindowDataset(Dataset):
    def __init__(self, series, context=96, horizon=24):
        self.series = torch.as_tensor(series, dtype=torch.float32)
        self.context = context
        self.horizon = horizon

    def __len__(self):
        return len(self.series) - self.context - self.horizon

    def __getitem__(self, i):
        x = self.series[i : i + self.context]
        y = self.series[i + self.context : i + self.context + self.horizon]
        return x.unsqueeze(-1), y


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + self.pe[:, : x.size(1)])


class TransformerForecaster(nn.Module):
    def __init__(self, d_model=64, nhead=4, num_layers=3, context=96, horizon=24):
        super().__init__()
        self.input_proj = nn.Linear(1, d_model)
        self.pos_enc = SinusoidalPositionalEncoding(d_model, max_len=context)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model,
                                           dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.head = nn.Linear(d_model * context, horizon)

    def forward(self, x):
        h = self.pos_enc(self.input_proj(x))
        h = self.encoder(h)
        return self.head(h.flatten(1))


def make_series(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    daily = np.sin(2 * np.pi * t / 24)
    weekly = 0.5 * np.sin(2 * np.pi * t / (24 * 7))
    series = daily + weekly + 0.1 * rng.standard_normal(n)
    return (series - series.mean()) / series.std()


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    series = make_series()
    split = int(0.8 * len(series))
    train_ds = WindowDataset(series[:split])
    val_ds = WindowDataset(series[split:])
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_ds, batch_size=256)

    model = TransformerForecaster().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)
    criterion = nn.MSELoss()

    for epoch in range(10):
        model.train()
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        model.eval()
        val_loss, n = 0.0, 0
        with torch.no_grad():
            for x, y in val_loader:
                x, y = x.to(device), y.to(device)
                val_loss += criterion(model(x), y).item() * x.size(0)
                n += x.size(0)
        print(f"epoch {epoch}: val mse {val_loss / n:.4f}")

    torch.save(model.state_dict(), "forecaster.pt")


if __name__ == "__main__":
    main()
