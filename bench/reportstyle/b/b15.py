import torch
import torch.nn.functional as F


def init_beam_scores(batch_size, num_beams, device=None):
    scores = torch.zeros(batch_size, num_beams, device=device)
    scores[:, 1:] = -1e9
    return scores.view(-1)


def length_penalty(lengths, alpha=0.6):
    return ((5.0 + lengths) / 6.0) ** alpha


class BeamSearchDecoder:
    """Batched beam search for encoder-decoder models exposing encode()/decode()."""

    def __init__(self, model, bos_id, eos_id, pad_id, num_beams=4, max_len=64, alpha=0.6):
        self.model = model
        self.bos_id, self.eos_id, self.pad_id = bos_id, eos_id, pad_id
        self.num_beams = num_beams
        self.max_len = max_len
        self.alpha = alpha
        self.device = next(model.parameters()).device

    @torch.no_grad()
    def search(self, src, src_mask):
        batch_size, k = src.size(0), self.num_beams
        device = src.device
        memory = self.model.encode(src, src_mask).repeat_interleave(k, dim=0)
        mem_mask = src_mask.repeat_interleave(k, dim=0)
        tokens = torch.full((batch_size * k, 1), self.bos_id, dtype=torch.long, device=device)
        finished = torch.zeros(batch_size * k, dtype=torch.bool, device=device)
        lengths = torch.zeros(batch_size * k, device=device)
        beam_scores = init_beam_scores(batch_size, k, device=self.device)
        offsets = (torch.arange(batch_size, device=device) * k).unsqueeze(-1)
        for _ in range(self.max_len):
            log_probs = F.log_softmax(self.model.decode(tokens, memory, mem_mask)[:, -1].float(), dim=-1)
            vocab = log_probs.size(-1)
            pad_row = torch.full_like(log_probs[0], -1e9)
            pad_row[self.pad_id] = 0.0
            log_probs = torch.where(finished.unsqueeze(-1), pad_row, log_probs)
            cand = (beam_scores.unsqueeze(-1) + log_probs).view(batch_size, k * vocab)
            top_scores, top_idx = cand.topk(k, dim=-1)
            beam_idx = (torch.div(top_idx, vocab, rounding_mode="floor") + offsets).view(-1)
            next_tok = (top_idx % vocab).view(-1, 1)
            tokens = torch.cat([tokens.index_select(0, beam_idx), next_tok], dim=-1)
            finished = finished.index_select(0, beam_idx)
            lengths = lengths.index_select(0, beam_idx) + (~finished).float()
            finished = finished | next_tok.squeeze(-1).eq(self.eos_id)
            beam_scores = top_scores.view(-1)
            if finished.all():
                break
        normed = (beam_scores / length_penalty(lengths, self.alpha)).view(batch_size, k)
        best = normed.argmax(-1) + offsets.squeeze(-1)
        return tokens.index_select(0, best), normed.max(-1).values
