import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Encoder(nn.Module):
    def __init__(self, in_dim, hidden, latent_dim):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.mu = nn.Linear(hidden, latent_dim)
        self.logvar = nn.Linear(hidden, latent_dim)

    def forward(self, x):
        h = self.body(x)
        return self.mu(h), self.logvar(h)


class VAE(nn.Module):
    def __init__(self, in_dim=784, hidden=400, latent_dim=20, device="cpu"):
        super().__init__()
        self.device = device
        self.latent_dim = latent_dim
        self.encoder = Encoder(in_dim, hidden, latent_dim)
        self.decoder = nn.Sequential(nn.Linear(latent_dim, hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, in_dim))

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn(std.shape, device=self.device)
        return mu + eps * std

    def forward(self, x):
        mu, logvar = self.encoder(x.flatten(1))
        z = self.reparameterize(mu, logvar)
        return self.decoder(z), mu, logvar


def vae_loss(recon_logits, x, mu, logvar, beta=1.0):
    recon = F.binary_cross_entropy_with_logits(recon_logits, x.flatten(1), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (recon + beta * kld) / x.size(0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--latent-dim", type=int, default=20)
    args = parser.parse_args()

    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    data = (torch.rand(20000, 1, 28, 28) > 0.7).float()
    loader = DataLoader(TensorDataset(data), batch_size=args.batch_size, shuffle=True,
                        num_workers=4, pin_memory=True)

    model = VAE(latent_dim=args.latent_dim, device=device)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for (x,) in loader:
            x = x.to(device, non_blocking=True)
            recon, mu, logvar = model(x)
            loss = vae_loss(recon, x, mu, logvar)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * x.size(0)
        print(f"epoch {epoch}: loss per sample {total / len(loader.dataset):.2f}")

    base = model.module if isinstance(model, nn.DataParallel) else model
    base.eval()
    with torch.no_grad():
        z = torch.randn(64, args.latent_dim, device=device)
        samples = torch.sigmoid(base.decoder(z)).view(64, 1, 28, 28)
    torch.save(samples.cpu(), "vae_samples.pt")


if __name__ == "__main__":
    main()
