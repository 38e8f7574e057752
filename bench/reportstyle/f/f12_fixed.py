import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def two_moons(n):
    t = torch.rand(n) * math.pi
    upper = torch.stack([torch.cos(t), torch.sin(t)], 1)
    lower = torch.stack([1 - torch.cos(t), 0.5 - torch.sin(t)], 1)
    x = torch.where(torch.rand(n, 1) < 0.5, upper, lower)
    return (x + 0.05 * torch.randn_like(x)) * 2


class TimeEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, t):
        half = self.dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
        args = t.float()[:, None] * freqs[None]
        return torch.cat([args.sin(), args.cos()], dim=-1)


class Denoiser(nn.Module):
    def __init__(self, hidden=256, t_dim=64):
        super().__init__()
        self.t_emb = nn.Sequential(TimeEmbedding(t_dim), nn.Linear(t_dim, hidden), nn.SiLU())
        self.inp = nn.Linear(2, hidden)
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 2))

    def forward(self, x, t):
        return self.mlp(self.inp(x) + self.t_emb(t))


@torch.no_grad()
def sample(model, n, betas, alphas_cumprod, device, generator=None):
    model.eval()
    x = torch.randn((n, 2), generator=generator, device=device)
    for i in reversed(range(len(betas))):
        t = torch.full((n,), i, device=device, dtype=torch.long)
        eps = model(x, t)
        alpha = 1 - betas[i]
        x = (x - betas[i] / torch.sqrt(1 - alphas_cumprod[i]) * eps) / torch.sqrt(alpha)
        if i > 0:
            x = x + torch.sqrt(betas[i]) * torch.randn_like(x)
    model.train()
    return x


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    T = 200
    betas = torch.linspace(1e-4, 0.02, T, device=device)
    alphas_cumprod = torch.cumprod(1 - betas, dim=0)
    data = two_moons(20000).to(device)

    model = Denoiser().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    preview_gen = torch.Generator(device=device).manual_seed(1234)

    for step in range(1, 3001):
        x0 = data[torch.randint(0, len(data), (512,), device=device)]
        t = torch.randint(0, T, (x0.size(0),), device=device)
        noise = torch.randn_like(x0)
        a = alphas_cumprod[t][:, None]
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(model(xt, t), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 1000 == 0:
            samples = sample(model, 1000, betas, alphas_cumprod, device, generator=preview_gen)
            print(f"step {step} loss {loss.item():.4f} sample mean {samples.mean(0).tolist()}")
