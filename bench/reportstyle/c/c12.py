import torch
import torch.nn as nn
import torch.nn.functional as F


class Generator(nn.Module):
    def __init__(self, num_classes=10, z_dim=100, ngf=64):
        super().__init__()
        self.z_dim = z_dim
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.label_emb = nn.Embedding(num_classes, 50)
        self.net = nn.Sequential(
            nn.ConvTranspose2d(z_dim + 50, ngf * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, 1, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, labels):
        z = torch.randn(labels.size(0), self.z_dim, device=self.device)
        h = torch.cat([z, self.label_emb(labels)], dim=1)
        return self.net(h.view(h.size(0), -1, 1, 1))


class Discriminator(nn.Module):
    def __init__(self, num_classes=10, ndf=64):
        super().__init__()
        self.label_emb = nn.Embedding(num_classes, 16 * 16)
        self.net = nn.Sequential(
            nn.Conv2d(2, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0),
        )

    def forward(self, img, labels):
        lab = self.label_emb(labels).view(-1, 1, 16, 16)
        return self.net(torch.cat([img, lab], dim=1)).view(-1)


def main():
    device = torch.device("cuda:0")
    netG, netD = Generator(), Discriminator()
    if torch.cuda.device_count() > 1:
        netG, netD = nn.DataParallel(netG), nn.DataParallel(netD)
    netG.to(device)
    netD.to(device)
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real_images = torch.rand(10000, 1, 16, 16) * 2 - 1
    real_labels = torch.randint(0, 10, (10000,))

    for step in range(5000):
        idx = torch.randint(0, real_images.size(0), (256,))
        real, labels = real_images[idx].to(device), real_labels[idx].to(device)
        fake = netG(labels)
        d_real, d_fake = netD(real, labels), netD(fake.detach(), labels)
        loss_d = (F.binary_cross_entropy_with_logits(d_real, torch.ones_like(d_real))
                  + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake)))
        optD.zero_grad()
        loss_d.backward()
        optD.step()

        d_gen = netD(fake, labels)
        loss_g = F.binary_cross_entropy_with_logits(d_gen, torch.ones_like(d_gen))
        optG.zero_grad()
        loss_g.backward()
        optG.step()
        if step % 500 == 0:
            print(f"step {step}: loss_D={loss_d.item():.3f} loss_G={loss_g.item():.3f}")


if __name__ == "__main__":
    main()
