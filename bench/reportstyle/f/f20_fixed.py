import torch
import torch.nn as nn
import torch.nn.functional as F


def double_conv(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
    )


class TwoGPUUNet(nn.Module):
    """Encoder on cuda:0, bottleneck + decoder on cuda:1 (the full model does not fit on one card)."""

    def __init__(self, in_ch=1, n_classes=4, base=64, dev0="cuda:0", dev1="cuda:1"):
        super().__init__()
        self.dev0, self.dev1 = torch.device(dev0), torch.device(dev1)
        self.enc1 = double_conv(in_ch, base).to(self.dev0)
        self.enc2 = double_conv(base, base * 2).to(self.dev0)
        self.enc3 = double_conv(base * 2, base * 4).to(self.dev0)
        self.bottleneck = double_conv(base * 4, base * 8).to(self.dev1)
        self.up3 = nn.ConvTranspose2d(base * 8, base * 4, 2, stride=2).to(self.dev1)
        self.dec3 = double_conv(base * 8, base * 4).to(self.dev1)
        self.head = nn.Conv2d(base * 4, n_classes, 1).to(self.dev1)

    def forward(self, x):
        x = x.to(self.dev0)
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        e3 = self.enc3(F.max_pool2d(e2, 2))
        b = self.bottleneck(F.max_pool2d(e3, 2).to(self.dev1))
        d3 = self.dec3(torch.cat([self.up3(b), e3.to(self.dev1)], dim=1))
        logits = self.head(d3)
        return F.interpolate(logits, scale_factor=4, mode="bilinear", align_corners=False)


def dice_loss(logits, target, n_classes, eps=1.0):
    probs = logits.softmax(1)
    onehot = F.one_hot(target, n_classes).permute(0, 3, 1, 2).float()
    inter = (probs * onehot).sum((0, 2, 3))
    union = probs.sum((0, 2, 3)) + onehot.sum((0, 2, 3))
    return 1 - ((2 * inter + eps) / (union + eps)).mean()


if __name__ == "__main__":
    assert torch.cuda.device_count() >= 2, "needs two GPUs"
    model = TwoGPUUNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    out_device = model.dev1

    for step in range(200):
        images = torch.randn(8, 1, 256, 256)
        masks = torch.randint(0, 4, (8, 256, 256))
        logits = model(images)
        masks = masks.to(out_device)
        loss = F.cross_entropy(logits, masks) + dice_loss(logits, masks, 4)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
