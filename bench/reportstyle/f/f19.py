import torch
import torch.nn as nn
import torch.nn.functional as F


class CondGenerator(nn.Module):
    """Class-conditional DCGAN generator for 32x32 images."""

    def __init__(self, n_classes=10, z_dim=100, ngf=64):
        super().__init__()
        self.z_dim = z_dim
        self.label_emb = nn.Embedding(n_classes, z_dim)
        self.net = nn.Sequential(
            nn.ConvTranspose2d(z_dim, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh(),
        )

    @property
    def device(self):
        return next(self.parameters()).device

    def forward(self, labels):
        z = torch.randn(labels.size(0), self.z_dim, device=self.device)
        h = z * self.label_emb(labels)
        return self.net(h[:, :, None, None])


class CondDiscriminator(nn.Module):
    def __init__(self, n_classes=10, ndf=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, True),
            nn.Flatten(),
        )
        self.out = nn.Linear(ndf * 4 * 4 * 4, 1)
        self.proj = nn.Embedding(n_classes, ndf * 4 * 4 * 4)

    def forward(self, x, labels):
        h = self.net(x)
        return self.out(h).squeeze(1) + (self.proj(labels) * h).sum(1)


if __name__ == "__main__":
    device = torch.device("cuda")
    netG, netD = CondGenerator().to(device), CondDiscriminator().to(device)
    if torch.cuda.device_count() > 1:
        print(f"Using {torch.cuda.device_count()} GPUs")
        netG, netD = nn.DataParallel(netG), nn.DataParallel(netD)
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))

    for step in range(1000):
        real = torch.rand(128, 3, 32, 32, device=device) * 2 - 1
        labels = torch.randint(0, 10, (128,), device=device)
        fake = netG(labels)

        d_loss = F.softplus(-netD(real, labels)).mean() + F.softplus(netD(fake.detach(), labels)).mean()
        optD.zero_grad()
        d_loss.backward()
        optD.step()

        g_loss = F.softplus(-netD(fake, labels)).mean()
        optG.zero_grad()
        g_loss.backward()
        optG.step()
        if step % 100 == 0:
            print(f"step {step}: D {d_loss.item():.3f} G {g_loss.item():.3f}")
