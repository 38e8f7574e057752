import torch
import torch.nn as nn


class CRF(nn.Module):
    """Linear-chain conditional random field on top of per-token emission scores."""

    def __init__(self, num_tags, pad_idx=None):
        super().__init__()
        self.num_tags = num_tags
        self.start_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.end_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))
        if pad_idx is not None:
            with torch.no_grad():
                self.transitions[pad_idx, :] = -10000.0
                self.transitions[:, pad_idx] = -10000.0

    def _prepare_mask(self, tags, mask):
        if mask is None:
            mask = torch.ones(tags.shape, dtype=torch.uint8).cuda()
        return mask.bool()

    def forward(self, emissions, tags, mask=None, reduction="mean"):
        mask = self._prepare_mask(tags, mask)
        llh = self._score(emissions, tags, mask) - self._partition(emissions, mask)
        if reduction == "sum":
            return -llh.sum()
        if reduction == "token_mean":
            return -llh.sum() / mask.float().sum()
        return -llh.mean()

    def _score(self, emissions, tags, mask):
        batch_size, seq_len = tags.shape
        batch_idx = torch.arange(batch_size, device=tags.device)
        score = self.start_transitions[tags[:, 0]] + emissions[batch_idx, 0, tags[:, 0]]
        for i in range(1, seq_len):
            step = self.transitions[tags[:, i - 1], tags[:, i]] + emissions[batch_idx, i, tags[:, i]]
            score = score + step * mask[:, i]
        lengths = mask.long().sum(1) - 1
        last_tags = tags.gather(1, lengths.unsqueeze(1)).squeeze(1)
        return score + self.end_transitions[last_tags]

    def _partition(self, emissions, mask):
        alpha = self.start_transitions + emissions[:, 0]
        for i in range(1, emissions.size(1)):
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.transitions + emissions[:, i].unsqueeze(1), dim=1)
            alpha = torch.where(mask[:, i].unsqueeze(1), nxt, alpha)
        return torch.logsumexp(alpha + self.end_transitions, dim=1)

    @torch.no_grad()
    def decode(self, emissions, mask=None):
        if mask is None:
            mask = emissions.new_ones(emissions.shape[:2], dtype=torch.bool)
        mask = mask.bool()
        score = self.start_transitions + emissions[:, 0]
        history = []
        for i in range(1, emissions.size(1)):
            cand = score.unsqueeze(2) + self.transitions + emissions[:, i].unsqueeze(1)
            nxt, idx = cand.max(dim=1)
            score = torch.where(mask[:, i].unsqueeze(1), nxt, score)
            history.append(idx)
        score = score + self.end_transitions
        lengths = mask.long().sum(1).tolist()
        paths = []
        for b in range(emissions.size(0)):
            tag = score[b].argmax().item()
            path = [tag]
            for idx in reversed(history[: lengths[b] - 1]):
                tag = idx[b, tag].item()
                path.append(tag)
            paths.append(path[::-1])
        return paths
