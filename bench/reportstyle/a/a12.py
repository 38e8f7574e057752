import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class PatchClassifier(nn.Module):
    def __init__(self, in_ch=3, patch=16, dim=384, depth=6, heads=6, num_classes=100, max_patches=256):
        super().__init__()
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.patch_embed = nn.Conv2d(in_ch, dim, kernel_size=patch, stride=patch)
        self.pos_embed = nn.Embedding(max_patches + 1, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, dim * 4, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def embed(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(x.size(0), -1, -1)
        x = torch.cat([cls, x], dim=1)
        positions = torch.arange(x.size(1), device=self.device)
        return x + self.pos_embed(positions).unsqueeze(0)

    def forward(self, images):
        x = self.encoder(self.embed(images))
        return self.head(self.norm(x[:, 0]))


def evaluate(model, data, device):
    model.eval()
    hits = total = 0
    with torch.no_grad():
        for images, labels in data:
            preds = model(images.to(device)).argmax(dim=-1)
            hits += (preds.cpu() == labels).sum().item()
            total += labels.numel()
    return hits / total


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    device = torch.device(f"cuda:{args.gpu}")

    model = PatchClassifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.05)
    train = [(torch.randn(32, 3, 128, 128), torch.randint(0, 100, (32,))) for _ in range(50)]
    val = [(torch.randn(32, 3, 128, 128), torch.randint(0, 100, (32,))) for _ in range(10)]
    for epoch in range(args.epochs):
        model.train()
        for images, labels in train:
            logits = model(images.to(device))
            loss = F.cross_entropy(logits, labels.to(device), label_smoothing=0.1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: val acc {evaluate(model, val, device):.3f}")
