import torch
import torch.nn as nn
import torch.nn.functional as F


class SupConLoss(nn.Module):
    """Supervised contrastive loss; falls back to SimCLR when no labels are given."""

    def __init__(self, temperature=0.07, base_temperature=0.07, contrast_mode="all"):
        super().__init__()
        if contrast_mode not in ("all", "one"):
            raise ValueError(f"unknown contrast_mode {contrast_mode}")
        self.temperature = temperature
        self.base_temperature = base_temperature
        self.contrast_mode = contrast_mode

    def forward(self, features, labels=None):
        if features.dim() < 3:
            raise ValueError("features must be [batch, n_views, ...]")
        bsz, n_views = features.shape[:2]
        features = F.normalize(features.reshape(bsz, n_views, -1), dim=-1)
        if labels is None:
            labels = torch.arange(bsz)
        elif labels.numel() != bsz:
            raise ValueError("number of labels does not match batch size")
        labels = labels.reshape(-1, 1)

        contrast = torch.cat(torch.unbind(features, dim=1), dim=0)
        if self.contrast_mode == "one":
            anchor, anchor_count = features[:, 0], 1
        else:
            anchor, anchor_count = contrast, n_views

        logits = anchor @ contrast.T / self.temperature
        logits = logits - logits.max(dim=1, keepdim=True).values.detach()

        pos_mask = labels.eq(labels.T).float().repeat(anchor_count, n_views)
        logits_mask = 1.0 - torch.eye(anchor.size(0), contrast.size(0), device=features.device)
        pos_mask = pos_mask * logits_mask

        exp_logits = logits.exp() * logits_mask
        log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
        mean_log_prob_pos = (pos_mask * log_prob).sum(1) / pos_mask.sum(1).clamp(min=1.0)
        loss = -(self.temperature / self.base_temperature) * mean_log_prob_pos
        return loss.view(anchor_count, bsz).mean()
