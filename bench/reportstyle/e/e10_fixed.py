import torch
import torch.nn as nn
import torch.nn.functional as F


def double_conv(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
    )


class Encoder(nn.Module):
    def __init__(self, in_ch=3, base=32):
        super().__init__()
        self.enc1 = double_conv(in_ch, base)
        self.enc2 = double_conv(base, base * 2)
        self.bottleneck = double_conv(base * 2, base * 4)

    def forward(self, x):
        s1 = self.enc1(x)
        s2 = self.enc2(F.max_pool2d(s1, 2))
        bottom = self.bottleneck(F.max_pool2d(s2, 2))
        return s1, s2, bottom


class Decoder(nn.Module):
    def __init__(self, base=32, num_classes=2):
        super().__init__()
        self.up2 = nn.ConvTranspose2d(base * 4, base * 2, 2, stride=2)
        self.dec2 = double_conv(base * 4, base * 2)
        self.up1 = nn.ConvTranspose2d(base * 2, base, 2, stride=2)
        self.dec1 = double_conv(base * 2, base)
        self.out = nn.Conv2d(base, num_classes, 1)

    def forward(self, bottom, s2, s1):
        x = self.dec2(torch.cat([self.up2(bottom), s2], dim=1))
        x = self.dec1(torch.cat([self.up1(x), s1], dim=1))
        return self.out(x)


class PipelinedUNet(nn.Module):
    def __init__(self, dev0, dev1, num_classes=2):
        super().__init__()
        self.dev0, self.dev1 = dev0, dev1
        self.encoder = Encoder().to(dev0)
        self.decoder = Decoder(num_classes=num_classes).to(dev1)

    def forward(self, x):
        s1, s2, bottom = self.encoder(x.to(self.dev0))
        return self.decoder(bottom.to(self.dev1), s2.to(self.dev1), s1.to(self.dev1))


def random_blobs(batch_size, size=128):
    images = torch.rand(batch_size, 3, size, size)
    masks = (F.avg_pool2d(images[:, :1], 9, stride=1, padding=4) > 0.5).long().squeeze(1)
    return images, masks


def main():
    if torch.cuda.is_available():
        dev0 = torch.device("cuda:0")
        dev1 = torch.device("cuda:1" if torch.cuda.device_count() > 1 else "cuda:0")
    else:
        dev0 = dev1 = torch.device("cpu")
    model = PipelinedUNet(dev0, dev1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for step in range(500):
        model.train()
        images, masks = random_blobs(16)
        logits = model(images)
        loss = F.cross_entropy(logits, masks.to(dev1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            with torch.no_grad():
                pred = logits.argmax(1)
                target = masks.to(dev1)
                inter = ((pred == 1) & (target == 1)).sum().item()
                union = ((pred == 1) | (target == 1)).sum().item()
            print(f"step {step}: loss {loss.item():.4f} fg IoU {inter / max(union, 1):.3f}")


if __name__ == "__main__":
    main()
