import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvVAE(nn.Module):
    def __init__(self, in_ch=1, latent_dim=16, base=32, img_size=28):
        super().__init__()
        self.latent_dim = latent_dim
        self.feat = img_size // 4
        self.encoder = nn.Sequential(
            nn.Conv2d(in_ch, base, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(base, 2 * base, 4, 2, 1), nn.BatchNorm2d(2 * base), nn.LeakyReLU(0.2),
            nn.Flatten(),
        )
        flat = 2 * base * self.feat * self.feat
        self.fc_mu = nn.Linear(flat, latent_dim)
        self.fc_logvar = nn.Linear(flat, latent_dim)
        self.fc_dec = nn.Linear(latent_dim, flat)
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(2 * base, base, 4, 2, 1), nn.BatchNorm2d(base), nn.ReLU(),
            nn.ConvTranspose2d(base, in_ch, 4, 2, 1),
        )
        self.base = base

    def encode(self, x):
        h = self.encoder(x)
        return self.fc_mu(h), self.fc_logvar(h)

    def reparameterize(self, mu, logvar):
        return mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)

    def decode(self, z):
        h = self.fc_dec(z).view(-1, 2 * self.base, self.feat, self.feat)
        return self.decoder(h)

    def forward(self, x):
        mu, logvar = self.encode(x)
        return self.decode(self.reparameterize(mu, logvar)), mu, logvar

    @torch.no_grad()
    def sample(self, n):
        z = torch.randn(n, self.latent_dim, device=self.fc_dec.weight.device)
        return torch.sigmoid(self.decode(z))

    @torch.no_grad()
    def interpolate(self, x1, x2, steps=8):
        mu1, _ = self.encode(x1)
        mu2, _ = self.encode(x2)
        alphas = torch.linspace(0, 1, steps, device=mu1.device).view(-1, 1)
        return torch.sigmoid(self.decode((1 - alphas) * mu1 + alphas * mu2))


def vae_loss(logits, x, mu, logvar, beta=1.0):
    rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / x.size(0)
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / x.size(0)
    return rec + beta * kld, rec, kld


def toy_digits(n, size=28):
    imgs = torch.zeros(n, 1, size, size)
    for i in range(n):
        r, c = torch.randint(4, 20, (2,)).tolist()
        if i % 2:
            imgs[i, 0, r : r + 8, c : c + 2] = 1.0
        else:
            imgs[i, 0, r : r + 2, c : c + 8] = 1.0
    return imgs


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = toy_digits(256)
    model = ConvVAE().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        model.train()
        for i in range(0, len(data), 64):
            x = data[i : i + 64].to(device)
            logits, mu, logvar = model(x)
            loss, rec, kld = vae_loss(logits, x, mu, logvar)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.2f} rec {rec.item():.2f} kld {kld.item():.2f}")

    model.eval()
    samples = model.sample(16)
    print("samples", tuple(samples.shape), "mean intensity", samples.mean().item())
    path = model.interpolate(data[:1].to(device), data[1:2].to(device))
    print("interpolation", tuple(path.shape))
