"""Batch inference for the churn model trained with train_churn.py.

usage: python predict.py --ckpt runs/churn/best.pt --input customers.csv --out preds.json
"""
import argparse
import csv
import json

import torch
import torch.nn as nn


class ChurnMLP(nn.Module):
    def __init__(self, n_in, hidden=128, depth=3, dropout=0.2):
        super().__init__()
        layers, d = [], n_in
        for _ in range(depth):
            layers += [nn.Linear(d, hidden), nn.BatchNorm1d(hidden), nn.SiLU(), nn.Dropout(dropout)]
            d = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        return self.head(self.body(x)).squeeze(-1)


def read_rows(path, feature_names):
    ids, feats = [], []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            ids.append(row.get("customer_id", str(len(ids))))
            feats.append([float(row.get(name) or 0.0) for name in feature_names])
    return ids, torch.tensor(feats, dtype=torch.float32)


def load_model(ckpt_path, device):
    ckpt = torch.load(ckpt_path)
    cfg = ckpt["config"]
    model = ChurnMLP(cfg["n_in"], cfg["hidden"], cfg["depth"], cfg["dropout"])
    model.load_state_dict(ckpt["model"])
    model.to(device).eval()
    return model, ckpt["features"], ckpt["mean"].to(device), ckpt["std"].to(device)


@torch.no_grad()
def predict(model, x, mean, std, batch_size=1024, threshold=0.5):
    probs = []
    for chunk in x.split(batch_size):
        chunk = (chunk.to(mean.device) - mean) / std.clamp_min(1e-6)
        probs.append(torch.sigmoid(model(chunk)).cpu())
    probs = torch.cat(probs)
    return probs, probs >= threshold


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", default="preds.json")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()

    device = torch.device(args.device)
    model, features, mean, std = load_model(args.ckpt, device)
    ids, x = read_rows(args.input, features)
    probs, labels = predict(model, x, mean, std, threshold=args.threshold)

    results = [
        {"customer_id": cid, "churn_prob": round(p, 4), "churn": bool(l)}
        for cid, p, l in zip(ids, probs.tolist(), labels.tolist())
    ]
    with open(args.out, "w") as fh:
        json.dump(results, fh, indent=2)
    print(f"wrote {len(results)} predictions to {args.out} ({sum(labels.tolist())} flagged)")


if __name__ == "__main__":
    main()
