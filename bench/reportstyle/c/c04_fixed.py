import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class MLPTagger(nn.Module):
    def __init__(self, in_dim, num_labels, hidden=512):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.ReLU(), nn.Dropout(0.2), nn.Linear(hidden, num_labels)
        )

    def forward(self, x):
        return self.net(x)


@torch.no_grad()
def collect_predictions(model, loader, device):
    model.eval()
    all_probs, all_targets = [], []
    for feats, targets in loader:
        all_probs.append(torch.sigmoid(model(feats.to(device))))
        all_targets.append(targets.to(device))
    return torch.cat(all_probs), torch.cat(all_targets)


def tune_thresholds(probs, targets):
    grid = torch.linspace(0.05, 0.95, 19, device=probs.device)
    best = []
    for c in range(probs.shape[1]):
        p, y = probs[:, c], targets[:, c].bool()
        f1s = []
        for th in grid:
            pred = p >= th
            tp = (pred & y).sum()
            fp = (pred & ~y).sum()
            fn = (~pred & y).sum()
            f1s.append((2 * tp / (2 * tp + fp + fn).clamp(min=1)).item())
        best.append(grid[int(np.argmax(f1s))].item())
    return best


def multilabel_report(probs, targets, thresholds):
    thr = torch.tensor(thresholds).clamp(0.1, 0.9)
    preds = torch.zeros_like(targets)
    for c, t in enumerate(thr.tolist()):
        preds[:, c] = (probs[:, c] >= t).long()
    tp = (preds * targets).sum(0).float()
    fp = (preds * (1 - targets)).sum(0).float()
    fn = ((1 - preds) * targets).sum(0).float()
    precision = tp / (tp + fp).clamp(min=1)
    recall = tp / (tp + fn).clamp(min=1)
    f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-8)
    return {"precision": precision.cpu().numpy(), "recall": recall.cpu().numpy(),
            "f1": f1.cpu().numpy(), "macro_f1": f1.mean().item()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", default="tagger.pt")
    parser.add_argument("--num-labels", type=int, default=12)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    model = MLPTagger(300, args.num_labels)
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.to(device)

    feats = torch.from_numpy(np.load("val_feats.npy")).float()
    labels = torch.from_numpy(np.load("val_labels.npy")).long()
    loader = DataLoader(TensorDataset(feats, labels), batch_size=256)

    probs, targets = collect_predictions(model, loader, device)
    thresholds = tune_thresholds(probs, targets)
    report = multilabel_report(probs, targets, thresholds)
    for i, (p, r, f) in enumerate(zip(report["precision"], report["recall"], report["f1"])):
        print(f"label {i:2d}  thr={thresholds[i]:.2f}  P={p:.3f}  R={r:.3f}  F1={f:.3f}")
    print("macro F1:", report["macro_f1"])


if __name__ == "__main__":
    main()
