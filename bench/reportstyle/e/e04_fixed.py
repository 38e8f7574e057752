import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LinearNoiseSchedule:
    def __init__(self, timesteps=1000, beta_start=1e-4, beta_end=0.02):
        self.timesteps = timesteps
        self.betas = torch.linspace(beta_start, beta_end, timesteps)
        self.alphas = 1.0 - self.betas
        self.alphas_cumprod = torch.cumprod(self.alphas, dim=0)

    def add_noise(self, x0, noise, t):
        ac = self.alphas_cumprod.to(t.device)[t].view(-1, 1, 1, 1)
        return ac.sqrt() * x0 + (1.0 - ac).sqrt() * noise

    @torch.no_grad()
    def sample(self, model, shape, device):
        x = torch.randn(shape, device=device)
        for i in reversed(range(self.timesteps)):
            t = torch.full((shape[0],), i, device=device, dtype=torch.long)
            eps = model(x, t)
            alpha, ac, beta = self.alphas[i], self.alphas_cumprod[i], self.betas[i]
            x = (x - beta / (1.0 - ac).sqrt() * eps) / alpha.sqrt()
            if i > 0:
                x = x + beta.sqrt() * torch.randn_like(x)
        return x


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([args.sin(), args.cos()], dim=-1)


class TinyDenoiser(nn.Module):
    def __init__(self, channels=1, width=64, temb_dim=128):
        super().__init__()
        self.temb_dim = temb_dim
        self.temb = nn.Sequential(nn.Linear(temb_dim, width), nn.SiLU(), nn.Linear(width, width))
        self.conv_in = nn.Conv2d(channels, width, 3, padding=1)
        self.block1 = nn.Sequential(nn.GroupNorm(8, width), nn.SiLU(), nn.Conv2d(width, width, 3, padding=1))
        self.block2 = nn.Sequential(nn.GroupNorm(8, width), nn.SiLU(), nn.Conv2d(width, width, 3, padding=1))
        self.conv_out = nn.Conv2d(width, channels, 3, padding=1)

    def forward(self, x, t):
        h = self.conv_in(x)
        h = h + self.temb(timestep_embedding(t, self.temb_dim))[:, :, None, None]
        h = h + self.block1(h)
        h = h + self.block2(h)
        return self.conv_out(h)


def toy_batch(batch_size, device):
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 28), torch.linspace(-1, 1, 28), indexing="ij")
    radius = torch.rand(batch_size, 1, 1) * 0.5 + 0.2
    imgs = ((xx ** 2 + yy ** 2).unsqueeze(0) < radius ** 2).float() * 2 - 1
    return imgs.unsqueeze(1).to(device)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    schedule = LinearNoiseSchedule(timesteps=1000)
    model = TinyDenoiser().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)

    for step in range(2000):
        x0 = toy_batch(128, device)
        t = torch.randint(0, schedule.timesteps, (x0.size(0),), device=device)
        noise = torch.randn_like(x0)
        xt = schedule.add_noise(x0, noise, t)
        loss = F.mse_loss(model(xt, t), noise)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 200 == 0:
            print(f"step {step}: loss {loss.item():.4f}")

    model.eval()
    samples = schedule.sample(model, (16, 1, 28, 28), device)
    print("sample range:", samples.min().item(), samples.max().item())


if __name__ == "__main__":
    main()
