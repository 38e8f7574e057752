import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.pe = pe

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)]
        return self.dropout(x)


class TSTransformer(nn.Module):
    """Encoder-only forecaster: lookback window -> next `horizon` steps."""

    def __init__(self, n_features, d_model=64, nhead=4, num_layers=2, horizon=12, dropout=0.1):
        super().__init__()
        self.input_proj = nn.Linear(n_features, d_model)
        self.pos = PositionalEncoding(d_model, dropout=dropout)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=4 * d_model, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, horizon * n_features)
        self.d_model = d_model
        self.horizon = horizon
        self.n_features = n_features

    def forward(self, x):
        h = self.input_proj(x) * math.sqrt(self.d_model)
        h = self.pos(h)
        h = self.encoder(h)
        out = self.head(h[:, -1])
        return out.view(-1, self.horizon, self.n_features)


def make_windows(series, lookback, horizon):
    xs, ys = [], []
    for i in range(len(series) - lookback - horizon + 1):
        xs.append(series[i : i + lookback])
        ys.append(series[i + lookback : i + lookback + horizon])
    return torch.stack(xs), torch.stack(ys)


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    t = torch.arange(600, dtype=torch.float32)
    series = torch.stack([torch.sin(t / 12), torch.cos(t / 30), 0.01 * t], dim=1)
    series = (series - series.mean(0)) / series.std(0)
    x, y = make_windows(series, lookback=48, horizon=12)
    n_train = int(0.8 * len(x))

    model = TSTransformer(n_features=3).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(20):
        model.train()
        idx = torch.randint(0, n_train, (32,))
        xb, yb = x[idx].to(device), y[idx].to(device)
        loss = F.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} mse {loss.item():.4f}")

    model.eval()
    with torch.no_grad():
        pred = model(x[n_train:].to(device))
        print("val mse", F.mse_loss(pred, y[n_train:].to(device)).item())
