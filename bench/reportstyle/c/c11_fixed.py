#!/usr/bin/env python3
"""Score a CSV of transactions with a trained fraud model and write the probabilities."""
import argparse
import csv

import numpy as np
import torch
import torch.nn as nn


class FraudNet(nn.Module):
    def __init__(self, n_features, hidden=(256, 128), dropout=0.1):
        super().__init__()
        layers, prev = [], n_features
        for h in hidden:
            layers += [nn.Linear(prev, h), nn.LayerNorm(h), nn.GELU(), nn.Dropout(dropout)]
            prev = h
        layers.append(nn.Linear(prev, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x):
        return self.mlp(x).squeeze(-1)


def load_model(path, device):
    ckpt = torch.load(path, map_location=device)
    model = FraudNet(ckpt["n_features"], tuple(ckpt["hidden"]))
    model.load_state_dict(ckpt["state_dict"])
    model.to(device).eval()
    stats = {k: torch.as_tensor(ckpt[k], dtype=torch.float32).to(device)
             for k in ("feature_mean", "feature_std")}
    return model, stats, ckpt["feature_names"]


def read_rows(path, feature_names):
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        ids, rows = [], []
        for rec in reader:
            ids.append(rec["transaction_id"])
            rows.append([float(rec.get(name) or 0.0) for name in feature_names])
    return ids, np.asarray(rows, dtype=np.float32)


@torch.no_grad()
def score(model, stats, features, device, batch_size=4096):
    out = []
    for start in range(0, len(features), batch_size):
        x = torch.from_numpy(features[start:start + batch_size]).to(device)
        x = (x - stats["feature_mean"]) / stats["feature_std"].clamp(min=1e-6)
        out.append(torch.sigmoid(model(x)).cpu())
    return torch.cat(out).numpy()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint")
    parser.add_argument("input_csv")
    parser.add_argument("--output", default="scores.csv")
    parser.add_argument("--threshold", type=float, default=0.5)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model, stats, feature_names = load_model(args.checkpoint, device)
    ids, features = read_rows(args.input_csv, feature_names)
    probs = score(model, stats, features, device)

    with open(args.output, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["transaction_id", "fraud_probability", "flagged"])
        for tid, p in zip(ids, probs):
            writer.writerow([tid, f"{p:.6f}", int(p >= args.threshold)])
    print(f"scored {len(ids)} rows on {device}, flagged {(probs >= args.threshold).sum()}")


if __name__ == "__main__":
    main()
