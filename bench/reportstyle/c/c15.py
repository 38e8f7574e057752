import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class GPUAugment(nn.Module):
    """Batched flip / brightness / contrast / cutout, applied on whatever device the batch lives on."""

    def __init__(self, brightness=0.2, contrast=0.2, cutout=8, p_flip=0.5, seed=1234):
        super().__init__()
        self.brightness = brightness
        self.contrast = contrast
        self.cutout = cutout
        self.p_flip = p_flip
        self.gen = torch.Generator()
        self.gen.manual_seed(seed)

    @torch.no_grad()
    def forward(self, x):
        B, C, H, W = x.shape
        u = torch.rand(B, 5, device=x.device, generator=self.gen)
        x = torch.where((u[:, 0] < self.p_flip).view(B, 1, 1, 1), x.flip(-1), x)
        b = 1.0 + (u[:, 1] * 2 - 1) * self.brightness
        c = 1.0 + (u[:, 2] * 2 - 1) * self.contrast
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        x = ((x - mean) * c.view(B, 1, 1, 1) + mean) * b.view(B, 1, 1, 1)
        cy = (u[:, 3] * H).long().view(B, 1, 1)
        cx = (u[:, 4] * W).long().view(B, 1, 1)
        ys = torch.arange(H, device=x.device).view(1, H, 1)
        xs = torch.arange(W, device=x.device).view(1, 1, W)
        hole = ((ys - cy).abs() <= self.cutout // 2) & ((xs - cx).abs() <= self.cutout // 2)
        return x.masked_fill(hole.unsqueeze(1), 0.0).clamp(0.0, 1.0)


def build_model(num_classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(128, num_classes),
    )


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    images = torch.rand(8000, 3, 32, 32)
    labels = torch.randint(0, 10, (8000,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=256, shuffle=True,
                        pin_memory=True, num_workers=2)
    augment = GPUAugment()
    model = build_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(20):
        model.train()
        correct = total = 0
        for xb, yb in loader:
            xb = augment(xb.to(device, non_blocking=True))
            yb = yb.to(device, non_blocking=True)
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += (logits.argmax(1) == yb).sum().item()
            total += yb.numel()
        print(f"epoch {epoch}: train acc {correct / total:.3f}")


if __name__ == "__main__":
    main()
