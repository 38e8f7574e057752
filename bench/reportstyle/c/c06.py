import torch
import torch.nn as nn
import torch.nn.functional as F


class Expert(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w_in = nn.Linear(d_model, d_ff)
        self.w_out = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.w_out(F.gelu(self.w_in(x)))


class CapacityMoE(nn.Module):
    def __init__(self, d_model=512, d_ff=2048, num_experts=8, capacity_factor=1.25):
        super().__init__()
        self.num_experts = num_experts
        self.capacity_factor = capacity_factor
        self.router = nn.Linear(d_model, num_experts, bias=False)
        self.experts = nn.ModuleList(Expert(d_model, d_ff) for _ in range(num_experts))

    def _assign(self, router_logits):
        n_tokens = router_logits.shape[0]
        capacity = int(self.capacity_factor * n_tokens / self.num_experts) + 1
        load = [0] * self.num_experts
        choice = []
        for ranking in router_logits.argsort(dim=-1, descending=True).tolist():
            for e in ranking:
                if load[e] < capacity:
                    break
            else:
                e = ranking[0]
            load[e] += 1
            choice.append(e)
        return torch.tensor(choice, dtype=torch.long), load

    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(B * T, D)
        router_logits = self.router(tokens)
        probs = F.softmax(router_logits, dim=-1)
        expert_idx, load = self._assign(router_logits.detach())
        gate = probs.gather(1, expert_idx.unsqueeze(1)).squeeze(1)

        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            sel = (expert_idx == e).nonzero(as_tuple=True)[0]
            if sel.numel() == 0:
                continue
            out[sel] = expert(tokens[sel]) * gate[sel].unsqueeze(-1)

        frac_tokens = tokens.new_tensor(load) / (B * T)
        frac_probs = probs.mean(0)
        aux_loss = self.num_experts * (frac_tokens * frac_probs).sum()
        return out.view(B, T, D), aux_loss


class MoEBlock(nn.Module):
    def __init__(self, d_model=512, n_heads=8, **moe_kwargs):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.moe = CapacityMoE(d_model, **moe_kwargs)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        moe_out, aux = self.moe(self.ln2(x))
        return x + moe_out, aux


if __name__ == "__main__":
    device = torch.device("cuda:0")
    block = MoEBlock().to(device)
    opt = torch.optim.Adam(block.parameters(), lr=1e-4)
    for step in range(100):
        x = torch.randn(8, 64, 512, device=device)
        y, aux = block(x)
        loss = y.pow(2).mean() + 0.01 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(step, loss.item(), aux.item())
