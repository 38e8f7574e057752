import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def load_housing(n=8000, n_features=13, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(loc=50.0, scale=20.0, size=(n, n_features)).astype(np.float32)
    w = rng.normal(size=n_features).astype(np.float32)
    y = (X - 50.0) / 20.0 @ w + 0.1 * rng.normal(size=n).astype(np.float32)
    return torch.from_numpy(X), torch.from_numpy(y).unsqueeze(1)


def fit_scaler(X):
    mean = X.mean(dim=0, keepdim=True)
    std = X.std(dim=0, keepdim=True).clamp_min(1e-6)
    return mean, std


def make_preprocess(mean, std):
    def preprocess(x):
        return (x - mean) / std
    return preprocess


def build_model(n_features):
    return nn.Sequential(
        nn.Linear(n_features, 128), nn.ReLU(),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 1),
    )


def fit(model, loader, preprocess, device, epochs=20):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-5)
    loss_fn = nn.MSELoss()
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            xb = preprocess(xb).to(device)
            yb = yb.to(device)
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model


@torch.no_grad()
def predict(model, X, preprocess, device, batch_size=1024):
    model.eval()
    preds = []
    for i in range(0, len(X), batch_size):
        xb = preprocess(X[i:i + batch_size]).to(device)
        preds.append(model(xb).cpu())
    return torch.cat(preds)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    X, y = load_housing()
    n_train = int(0.8 * len(X))
    X_train, y_train, X_test, y_test = X[:n_train], y[:n_train], X[n_train:], y[n_train:]

    preprocess = make_preprocess(*fit_scaler(X_train))
    loader = DataLoader(TensorDataset(X_train, y_train), batch_size=128, shuffle=True)
    model = fit(build_model(X.shape[1]).to(device), loader, preprocess, device)

    pred = predict(model, X_test, preprocess, device)
    rmse = torch.sqrt(((pred - y_test) ** 2).mean()).item()
    print(f"test RMSE: {rmse:.4f}")


if __name__ == "__main__":
    main()
