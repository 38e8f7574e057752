import torch
import torch.nn as nn
import torch.nn.functional as F


def class_balanced_weights(samples_per_class, beta=0.9999):
    effective = [1.0 - beta ** n for n in samples_per_class]
    weights = [(1.0 - beta) / e for e in effective]
    total = sum(weights)
    return [w * len(weights) / total for w in weights]


class FocalLoss(nn.Module):
    def __init__(self, alpha=None, gamma=2.0, ignore_index=-100, reduction="mean"):
        super().__init__()
        if isinstance(alpha, (list, tuple)):
            alpha = torch.tensor(alpha, dtype=torch.float32)
        self.alpha = alpha
        self.gamma = gamma
        self.ignore_index = ignore_index
        self.reduction = reduction

    @classmethod
    def from_class_counts(cls, samples_per_class, beta=0.9999, **kwargs):
        return cls(alpha=class_balanced_weights(samples_per_class, beta), **kwargs)

    def forward(self, logits, target):
        if logits.dim() > 2:
            c = logits.size(1)
            logits = logits.movedim(1, -1).reshape(-1, c)
            target = target.reshape(-1)
        valid = target != self.ignore_index
        logits, target = logits[valid], target[valid]
        log_p = F.log_softmax(logits.float(), dim=-1)
        log_pt = log_p.gather(1, target.unsqueeze(1)).squeeze(1)
        pt = log_pt.exp()
        loss = -((1 - pt) ** self.gamma) * log_pt
        if self.alpha is not None:
            if isinstance(self.alpha, torch.Tensor):
                at = self.alpha[target]
            else:
                at = torch.where(target == 1, self.alpha, 1 - self.alpha)
            loss = loss * at
        if self.reduction == "mean":
            return loss.sum() / valid.sum().clamp(min=1)
        if self.reduction == "sum":
            return loss.sum()
        return loss
