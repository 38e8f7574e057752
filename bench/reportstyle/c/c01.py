import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def cosine_beta_schedule(timesteps, s=0.008):
    steps = timesteps + 1
    x = torch.linspace(0, timesteps, steps, dtype=torch.float64)
    alphas_cumprod = torch.cos(((x / timesteps) + s) / (1 + s) * math.pi * 0.5) ** 2
    alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
    betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
    return torch.clip(betas, 0.0001, 0.9999).float()


class TinyDenoiser(nn.Module):
    def __init__(self, dim=2, hidden=128, timesteps=1000):
        super().__init__()
        self.t_embed = nn.Embedding(timesteps, hidden)
        self.inp = nn.Linear(dim, hidden)
        self.net = nn.Sequential(
            nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, dim)
        )

    def forward(self, x, t):
        return self.net(self.inp(x) + self.t_embed(t))


class GaussianDiffusion(nn.Module):
    def __init__(self, denoiser, timesteps=1000):
        super().__init__()
        self.denoiser = denoiser
        self.num_timesteps = timesteps
        alphas_cumprod = torch.cumprod(1.0 - cosine_beta_schedule(timesteps), dim=0)
        self.sqrt_alphas_cumprod = torch.sqrt(alphas_cumprod)
        self.sqrt_one_minus_alphas_cumprod = torch.sqrt(1.0 - alphas_cumprod)

    @staticmethod
    def _extract(coeffs, t, x_shape):
        out = coeffs[t]
        return out.reshape(t.shape[0], *((1,) * (len(x_shape) - 1)))

    def q_sample(self, x_start, t, noise):
        a = self._extract(self.sqrt_alphas_cumprod, t, x_start.shape)
        s = self._extract(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape)
        return a * x_start + s * noise

    def forward(self, x_start):
        t = torch.randint(0, self.num_timesteps, (x_start.shape[0],), device=x_start.device)
        noise = torch.randn_like(x_start)
        x_noisy = self.q_sample(x_start, t, noise)
        return F.mse_loss(self.denoiser(x_noisy, t), noise)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = GaussianDiffusion(TinyDenoiser()).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4)
    data = torch.randn(10000, 2) * torch.tensor([1.0, 0.3])
    for step in range(2000):
        idx = torch.randint(0, data.shape[0], (256,))
        batch = data[idx].to(device)
        loss = model(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 200 == 0:
            print(f"step {step:5d}  loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
