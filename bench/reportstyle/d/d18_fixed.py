"""Minimal CLIP-style contrastive pretraining: small CNN image tower + GRU caption tower."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ImageTower(nn.Module):
    def __init__(self, embed_dim, ch=32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, ch, 3, 2, 1), nn.GELU(),
            nn.Conv2d(ch, 2 * ch, 3, 2, 1), nn.GELU(),
            nn.Conv2d(2 * ch, 4 * ch, 3, 2, 1), nn.GELU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.proj = nn.Linear(4 * ch, embed_dim, bias=False)

    def forward(self, x):
        return self.proj(self.net(x))


class TextTower(nn.Module):
    def __init__(self, vocab, embed_dim, width=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, width, padding_idx=0)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.proj = nn.Linear(width, embed_dim, bias=False)

    def forward(self, tokens):
        _, h = self.gru(self.tok(tokens))
        return self.proj(h[-1])


class MiniCLIP(nn.Module):
    def __init__(self, vocab, embed_dim=64):
        super().__init__()
        self.visual = ImageTower(embed_dim)
        self.text = TextTower(vocab, embed_dim)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, images, tokens):
        img = F.normalize(self.visual(images), dim=-1)
        txt = F.normalize(self.text(tokens), dim=-1)
        return img, txt, self.logit_scale.exp().clamp(max=100)


def clip_loss(img_emb, txt_emb, scale):
    logits_per_image = scale * img_emb @ txt_emb.t()
    logits_per_text = logits_per_image.t()
    labels = torch.arange(img_emb.size(0), device=img_emb.device)
    loss_i = F.cross_entropy(logits_per_image, labels)
    loss_t = F.cross_entropy(logits_per_text, labels)
    return (loss_i + loss_t) / 2


def synthetic_pairs(n, vocab, seq_len=6, n_concepts=8):
    concept = torch.randint(0, n_concepts, (n,))
    colors = torch.rand(n_concepts, 3)
    images = colors[concept][:, :, None, None] + 0.2 * torch.randn(n, 3, 32, 32)
    tokens = torch.randint(1, vocab, (n, seq_len))
    tokens[:, 0] = 1 + concept
    return images, tokens


@torch.no_grad()
def retrieval_accuracy(model, images, tokens):
    img, txt, _ = model(images, tokens)
    sims = img @ txt.t()
    return (sims.argmax(1) == torch.arange(len(img), device=sims.device)).float().mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=200)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = MiniCLIP(args.vocab).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
    for step in range(1, args.steps + 1):
        images, tokens = synthetic_pairs(args.batch_size, args.vocab)
        img, txt, scale = model(images.to(device), tokens.to(device))
        loss = clip_loss(img, txt, scale)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.3f} scale {scale.item():.1f}")
    images, tokens = synthetic_pairs(128, args.vocab)
    model.eval()
    print("img->txt top1", retrieval_accuracy(model, images.to(device), tokens.to(device)))


if __name__ == "__main__":
    main()
