import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal, kl_divergence
from torch.utils.data import DataLoader, TensorDataset


class Encoder(nn.Module):
    def __init__(self, in_dim, hidden, latent_dim):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
        )
        self.mu = nn.Linear(hidden, latent_dim)
        self.log_var = nn.Linear(hidden, latent_dim)

    def forward(self, x):
        h = self.body(x)
        return self.mu(h), self.log_var(h).clamp(-10.0, 10.0)


class VAE(nn.Module):
    def __init__(self, in_dim=784, hidden=400, latent_dim=20):
        super().__init__()
        self.latent_dim = latent_dim
        self.encoder = Encoder(in_dim, hidden, latent_dim)
        self.decoder = nn.Sequential(
            nn.Linear(latent_dim, hidden), nn.ReLU(), nn.Linear(hidden, in_dim)
        )
        self.prior = Normal(torch.zeros(latent_dim), torch.ones(latent_dim))

    def forward(self, x):
        mu, log_var = self.encoder(x)
        posterior = Normal(mu, torch.exp(0.5 * log_var))
        z = posterior.rsample()
        recon_logits = self.decoder(z)
        kl = kl_divergence(posterior, self.prior).sum(-1)
        return recon_logits, kl

    @torch.no_grad()
    def sample(self, n):
        device = next(self.parameters()).device
        z = torch.randn(n, self.latent_dim, device=device)
        return torch.sigmoid(self.decoder(z))


def elbo_loss(recon_logits, x, kl, beta):
    rec = F.binary_cross_entropy_with_logits(recon_logits, x, reduction="none").sum(-1)
    return (rec + beta * kl).mean(), rec.mean(), kl.mean()


def train(model, loader, device, epochs=20, warmup_epochs=5):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        beta = min(1.0, (epoch + 1) / warmup_epochs)
        for (x,) in loader:
            x = x.to(device).view(x.size(0), -1)
            recon_logits, kl = model(x)
            loss, rec, kl_mean = elbo_loss(recon_logits, x, kl, beta)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch:02d} beta={beta:.2f} loss={loss.item():.2f} "
              f"rec={rec.item():.2f} kl={kl_mean.item():.2f}")


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    images = (torch.rand(6000, 1, 28, 28) > 0.7).float()
    loader = DataLoader(TensorDataset(images), batch_size=128, shuffle=True)
    vae = VAE().to(device)
    train(vae, loader, device)
    samples = vae.sample(64)
    print(samples.shape, samples.mean().item())
