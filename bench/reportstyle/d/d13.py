import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def linear_beta_schedule(timesteps, start=1e-4, end=0.02):
    return torch.linspace(start, end, timesteps)


def extract(a, t, x_shape):
    out = a.gather(-1, t)
    return out.reshape(t.shape[0], *((1,) * (len(x_shape) - 1)))


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)


class Denoiser(nn.Module):
    def __init__(self, data_dim=2, hidden=128, t_dim=32):
        super().__init__()
        self.t_dim = t_dim
        self.net = nn.Sequential(
            nn.Linear(data_dim + t_dim, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, data_dim),
        )

    def forward(self, x, t):
        return self.net(torch.cat([x, timestep_embedding(t, self.t_dim)], dim=-1))


class GaussianDiffusion:
    def __init__(self, timesteps=200):
        self.num_timesteps = timesteps
        self.betas = linear_beta_schedule(timesteps)
        alphas = 1.0 - self.betas
        self.alphas_cumprod = torch.cumprod(alphas, dim=0)
        self.sqrt_alphas_cumprod = self.alphas_cumprod.sqrt()
        self.sqrt_one_minus_alphas_cumprod = (1.0 - self.alphas_cumprod).sqrt()
        self.sqrt_recip_alphas = (1.0 / alphas).sqrt()
        prev = F.pad(self.alphas_cumprod[:-1], (1, 0), value=1.0)
        self.posterior_variance = self.betas * (1.0 - prev) / (1.0 - self.alphas_cumprod)

    def q_sample(self, x0, t, noise):
        return (extract(self.sqrt_alphas_cumprod, t, x0.shape) * x0
                + extract(self.sqrt_one_minus_alphas_cumprod, t, x0.shape) * noise)

    def p_losses(self, model, x0):
        t = torch.randint(0, self.num_timesteps, (x0.size(0),), device=x0.device)
        noise = torch.randn_like(x0)
        return F.mse_loss(model(self.q_sample(x0, t, noise), t), noise)

    @torch.no_grad()
    def p_sample(self, model, x, t, i):
        coef = extract(self.betas, t, x.shape) / extract(self.sqrt_one_minus_alphas_cumprod, t, x.shape)
        mean = extract(self.sqrt_recip_alphas, t, x.shape) * (x - coef * model(x, t))
        if i == 0:
            return mean
        return mean + extract(self.posterior_variance, t, x.shape).sqrt() * torch.randn_like(x)

    @torch.no_grad()
    def sample(self, model, n, dim, device):
        x = torch.randn(n, dim, device=device)
        for i in reversed(range(self.num_timesteps)):
            t = torch.full((n,), i, device=device, dtype=torch.long)
            x = self.p_sample(model, x, t, i)
        return x


def two_moons(n):
    theta = torch.rand(n) * math.pi
    upper = torch.rand(n) < 0.5
    x = torch.where(upper, torch.cos(theta), 1 - torch.cos(theta))
    y = torch.where(upper, torch.sin(theta), 0.5 - torch.sin(theta))
    return torch.stack([x, y], 1) + 0.05 * torch.randn(n, 2)


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    diffusion = GaussianDiffusion(timesteps=100)
    model = Denoiser().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    data = two_moons(4096)
    for step in range(200):
        x0 = data[torch.randint(0, len(data), (256,))].to(device)
        loss = diffusion.p_losses(model, x0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    samples = diffusion.sample(model, 512, 2, device)
    print("sample mean", samples.mean(0).tolist(), "std", samples.std(0).tolist())
