import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class ExpectedCalibrationError:
    """Accumulates confidences over an evaluation loop and reports the binned calibration gap."""

    def __init__(self, n_bins=15, norm="l1"):
        self.n_bins = n_bins
        self.norm = norm
        self.reset()

    def reset(self):
        self.confidences = []
        self.accuracies = []

    @torch.no_grad()
    def update(self, logits, target):
        conf, pred = F.softmax(logits, dim=-1).max(dim=-1)
        self.confidences.append(conf)
        self.accuracies.append(pred.eq(target).to(conf.dtype))

    def _bin_stats(self, conf, acc):
        edges = torch.tensor(np.linspace(0.0, 1.0, self.n_bins + 1), dtype=conf.dtype)
        counts, conf_sum, acc_sum = [], [], []
        for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist()):
            in_bin = (conf > lo) & (conf <= hi)
            counts.append(in_bin.sum().to(conf.dtype))
            conf_sum.append(conf[in_bin].sum())
            acc_sum.append(acc[in_bin].sum())
        return torch.stack(counts), torch.stack(conf_sum), torch.stack(acc_sum)

    def compute(self):
        conf = torch.cat(self.confidences)
        acc = torch.cat(self.accuracies)
        counts, conf_sum, acc_sum = self._bin_stats(conf, acc)
        nonempty = counts > 0
        avg_conf = conf_sum[nonempty] / counts[nonempty]
        avg_acc = acc_sum[nonempty] / counts[nonempty]
        gaps = (avg_conf - avg_acc).abs()
        if self.norm == "max":
            return gaps.max()
        return (counts[nonempty] / counts.sum() * gaps).sum()


class TemperatureScaler(nn.Module):
    def __init__(self, init_temperature=1.5):
        super().__init__()
        self.log_temperature = nn.Parameter(torch.tensor(float(np.log(init_temperature))))

    def forward(self, logits):
        return logits / self.log_temperature.exp()

    def fit(self, logits, labels, lr=0.01, max_iter=50):
        optimizer = torch.optim.LBFGS([self.log_temperature], lr=lr, max_iter=max_iter)

        def closure():
            optimizer.zero_grad()
            loss = F.cross_entropy(self(logits), labels)
            loss.backward()
            return loss

        optimizer.step(closure)
        return self.log_temperature.exp().item()
