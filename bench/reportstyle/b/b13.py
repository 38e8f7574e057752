import torch
import torch.nn as nn
import torch.nn.functional as F


def sample_negative_indices(batch_size, seq_len, num_negatives, generator=None, device=None):
    """Draw distractors from the same utterance, never the positive frame itself."""
    neg = torch.randint(0, seq_len - 1, (batch_size, seq_len * num_negatives), generator=generator, device=device)
    pos = torch.arange(seq_len, device=device).repeat_interleave(num_negatives)
    neg = neg + (neg >= pos).long()
    offsets = torch.arange(batch_size, device=device).unsqueeze(-1) * seq_len
    return (neg + offsets).view(batch_size, seq_len, num_negatives)


class ContrastiveDiversityLoss(nn.Module):
    """wav2vec 2.0 style objective: InfoNCE over quantized targets plus codebook diversity."""

    def __init__(self, num_negatives=100, temperature=0.1, diversity_weight=0.1, seed=None):
        super().__init__()
        self.num_negatives = num_negatives
        self.temperature = temperature
        self.diversity_weight = diversity_weight
        self.generator = torch.Generator()
        if seed is not None:
            self.generator.manual_seed(seed)

    def forward(self, context, quantized, mask_time_indices, perplexity, num_codevectors):
        b, t, d = quantized.shape
        neg_idx = sample_negative_indices(
            b, t, self.num_negatives, generator=self.generator, device=quantized.device
        )
        negatives = quantized.reshape(b * t, d)[neg_idx.view(-1)].view(b, t, self.num_negatives, d)
        targets = torch.cat([quantized.unsqueeze(2), negatives], dim=2)
        logits = F.cosine_similarity(context.unsqueeze(2).float(), targets.float(), dim=-1)
        logits = logits / self.temperature
        same = (negatives == quantized.unsqueeze(2)).all(-1)
        logits[:, :, 1:][same] = float("-inf")
        logits = logits[mask_time_indices]
        labels = torch.zeros(logits.size(0), dtype=torch.long, device=logits.device)
        contrastive = F.cross_entropy(logits, labels, reduction="sum")
        diversity = (num_codevectors - perplexity) / num_codevectors
        num_masked = mask_time_indices.sum()
        return contrastive + self.diversity_weight * diversity * num_masked, num_masked
