import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class ConfusionMatrix:
    def __init__(self, num_classes, ignore_index=255):
        self.num_classes = num_classes
        self.ignore_index = ignore_index
        self.mat = torch.zeros(num_classes, num_classes, dtype=torch.int64)

    @torch.no_grad()
    def update(self, pred, target):
        n = self.num_classes
        k = (target != self.ignore_index) & (target >= 0) & (target < n)
        inds = n * target[k].to(torch.int64) + pred[k]
        self.mat += torch.bincount(inds, minlength=n**2).reshape(n, n)

    def reset(self):
        self.mat.zero_()

    def compute(self):
        h = self.mat.float()
        acc_global = torch.diag(h).sum() / h.sum()
        acc = torch.diag(h) / h.sum(1)
        iu = torch.diag(h) / (h.sum(1) + h.sum(0) - torch.diag(h))
        return acc_global.item(), acc.tolist(), iu.tolist()

    def __str__(self):
        acc_global, acc, iu = self.compute()
        return "global acc {:.2f}  per-class acc {}  IoU {}  mIoU {:.2f}".format(
            100 * acc_global,
            ["{:.1f}".format(100 * a) for a in acc],
            ["{:.1f}".format(100 * i) for i in iu],
            100 * sum(iu) / len(iu),
        )


class TinySegNet(nn.Module):
    def __init__(self, num_classes, ch=16):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, ch, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(ch, 2 * ch, 3, 1, 1), nn.ReLU())
        self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                nn.Conv2d(2 * ch, ch, 3, 1, 1), nn.ReLU(), nn.Conv2d(ch, num_classes, 1))

    def forward(self, x):
        return self.up(self.down(x))


def fake_scenes(n, num_classes, size=32):
    target = torch.zeros(n, size, size, dtype=torch.long)
    target[:, size // 2 :, :] = 1
    target[:, :, : size // 4] = 2 % num_classes
    target[:, :2, :] = 255
    img = F.one_hot(target.clamp(max=num_classes - 1), num_classes).permute(0, 3, 1, 2).float()
    img = img[:, :3] + 0.5 * torch.randn(n, 3, size, size)
    return img, target


def evaluate(model, loader, device, num_classes):
    model.eval()
    cm = ConfusionMatrix(num_classes)
    with torch.no_grad():
        for img, target in loader:
            img, target = img.to(device), target.to(device)
            cm.update(model(img).argmax(1).flatten(), target.flatten())
    return cm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-classes", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    img, target = fake_scenes(128, args.num_classes)
    train = list(zip(img[:96].split(16), target[:96].split(16)))
    val = list(zip(img[96:].split(16), target[96:].split(16)))

    model = TinySegNet(args.num_classes).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(args.epochs):
        model.train()
        for x, y in train:
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y, ignore_index=255)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.3f} | {evaluate(model, val, device, args.num_classes)}")


if __name__ == "__main__":
    main()
