import torch
import torch.nn as nn

DEVICE = torch.device("cuda:1")
Z_DIM, IMG_DIM, BATCH = 64, 28 * 28, 128


class Generator(nn.Module):
    def __init__(self, z_dim, img_dim):
        super().__init__()
        self.z_dim = z_dim
        self.net = nn.Sequential(
            nn.Linear(z_dim, 256), nn.LeakyReLU(0.2),
            nn.Linear(256, 512), nn.LeakyReLU(0.2),
            nn.Linear(512, img_dim), nn.Tanh(),
        )

    def sample(self, n):
        z = torch.randn(n, self.z_dim, device=self.net[0].weight.device)
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, img_dim):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(img_dim, 512), nn.LeakyReLU(0.2),
            nn.Linear(512, 256), nn.LeakyReLU(0.2),
            nn.Linear(256, 1),
        )

    def forward(self, x):
        return self.net(x)


gen = Generator(Z_DIM, IMG_DIM).to(DEVICE)
disc = Discriminator(IMG_DIM).to(DEVICE)
opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
real_data = torch.rand(60000, IMG_DIM) * 2 - 1

for epoch in range(50):
    perm = torch.randperm(real_data.size(0))
    for i in range(0, real_data.size(0), BATCH):
        real = real_data[perm[i:i + BATCH]].to(DEVICE)
        fake = gen.sample(real.size(0))

        d_real = disc(real)
        d_fake = disc(fake.detach())
        loss_d = bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()

        out = disc(fake)
        loss_g = bce(out, torch.ones_like(out))
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
    print(f"epoch {epoch} loss_d {loss_d.item():.4f} loss_g {loss_g.item():.4f}")
    torch.save(gen.state_dict(), f"gen_{epoch}.pt")
