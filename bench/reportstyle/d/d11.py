import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class EMA:
    """Exponential moving average of model weights (shadow copy kept per parameter name)."""

    def __init__(self, model, decay=0.999):
        self.decay = decay
        self.shadow = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        self.backup = {}

    @torch.no_grad()
    def update(self, model):
        for n, p in model.named_parameters():
            if n in self.shadow:
                self.shadow[n].mul_(self.decay).add_(p.detach(), alpha=1.0 - self.decay)

    @torch.no_grad()
    def apply_shadow(self, model):
        for n, p in model.named_parameters():
            if n in self.shadow:
                self.backup[n] = p.detach().clone()
                p.copy_(self.shadow[n])

    @torch.no_grad()
    def restore(self, model):
        for n, p in model.named_parameters():
            if n in self.backup:
                p.copy_(self.backup[n])
        self.backup = {}


class DenoisingAE(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(1, ch, 3, 2, 1), nn.GELU(), nn.Conv2d(ch, 2 * ch, 3, 2, 1), nn.GELU()
        )
        self.dec = nn.Sequential(
            nn.ConvTranspose2d(2 * ch, ch, 4, 2, 1), nn.GELU(), nn.ConvTranspose2d(ch, 1, 4, 2, 1)
        )

    def forward(self, x):
        return self.dec(self.enc(x))


def make_blobs(n, size=28):
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    c = torch.randint(6, size - 6, (n, 2, 1, 1)).float()
    r = torch.randint(3, 7, (n, 1, 1)).float()
    img = ((yy - c[:, 0]) ** 2 + (xx - c[:, 1]) ** 2 <= r**2).float()
    return img.unsqueeze(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--ema-decay", type=float, default=0.99)
    ap.add_argument("--noise", type=float, default=0.3)
    args = ap.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = DenoisingAE()
    ema = EMA(model, decay=args.ema_decay)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    for step in range(1, args.steps + 1):
        clean = make_blobs(args.batch_size).to(device)
        noisy = clean + args.noise * torch.randn_like(clean)
        loss = F.mse_loss(model(noisy), clean)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update(model)
        if step % 25 == 0:
            print(f"step {step} loss {loss.item():.4f}")

    val = make_blobs(64).to(device)
    val_noisy = val + args.noise * torch.randn_like(val)
    model.eval()
    with torch.no_grad():
        raw = F.mse_loss(model(val_noisy), val).item()
        ema.apply_shadow(model)
        smoothed = F.mse_loss(model(val_noisy), val).item()
        ema.restore(model)
    print(f"val mse raw {raw:.4f} ema {smoothed:.4f}")


if __name__ == "__main__":
    main()
