import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class ConfusionMatrix:
    def __init__(self, num_classes, ignore_index=255):
        self.num_classes = num_classes
        self.ignore_index = ignore_index
        self.mat = torch.zeros(num_classes, num_classes, dtype=torch.int64)

    def update(self, target, pred):
        n = self.num_classes
        keep = target != self.ignore_index
        inds = n * target[keep].long() + pred[keep]
        self.mat += torch.bincount(inds, minlength=n * n).reshape(n, n).to(self.mat.device)

    def reset(self):
        self.mat.zero_()

    def compute(self):
        h = self.mat.double()
        acc_global = torch.diag(h).sum() / h.sum()
        iou = torch.diag(h) / (h.sum(1) + h.sum(0) - torch.diag(h)).clamp(min=1)
        return acc_global.item(), iou.tolist(), iou.mean().item()


class SyntheticScenes(Dataset):
    def __init__(self, n=400, size=96, num_classes=4, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.rand(n, 3, size, size, generator=g)
        labels = self.images.argmax(dim=1)
        labels[(self.images > 0.6).all(dim=1)] = 3
        labels[:, :4, :] = 255
        self.labels = labels
        self.num_classes = num_classes

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class FCN(nn.Module):
    def __init__(self, num_classes=4, width=48):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride=2, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=2, dilation=2), nn.BatchNorm2d(width), nn.ReLU(),
        )
        self.classifier = nn.Conv2d(width, num_classes, 1)

    def forward(self, x):
        logits = self.classifier(self.backbone(x))
        return F.interpolate(logits, size=x.shape[-2:], mode="bilinear", align_corners=False)


@torch.no_grad()
def evaluate(model, loader, device, num_classes):
    model.eval()
    confmat = ConfusionMatrix(num_classes)
    for image, target in loader:
        image, target = image.to(device), target.to(device)
        output = model(image)
        confmat.update(target.flatten(), output.argmax(1).flatten())
    return confmat.compute()


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = DataLoader(SyntheticScenes(seed=0), batch_size=16, shuffle=True)
    val_loader = DataLoader(SyntheticScenes(n=100, seed=1), batch_size=16)
    model = FCN().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    for epoch in range(5):
        model.train()
        for image, target in train_loader:
            image, target = image.to(device), target.to(device)
            loss = F.cross_entropy(model(image), target, ignore_index=255)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        acc, ious, miou = evaluate(model, val_loader, device, num_classes=4)
        print(f"epoch {epoch}: loss {loss.item():.3f} pixel acc {acc:.3f} mIoU {miou:.3f}")


if __name__ == "__main__":
    main()
