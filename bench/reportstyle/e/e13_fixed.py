import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
CLASS_NAMES = ["cat", "dog", "bird", "horse", "ship"]


class TinyResNet(nn.Module):
    def __init__(self, num_classes=len(CLASS_NAMES)):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 7, 2, 3, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.block = nn.Sequential(
            nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
        )
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = F.relu(x + self.block(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


def preprocess(batch_uint8, size=224):
    x = batch_uint8.permute(0, 3, 1, 2).float().div_(255.0)
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return (x - IMAGENET_MEAN.to(x.device)) / IMAGENET_STD.to(x.device)


class Predictor:
    def __init__(self, checkpoint=None, device=None):
        self.device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = TinyResNet()
        if checkpoint and os.path.exists(checkpoint):
            self.model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
        self.model.to(self.device).eval()

    @torch.no_grad()
    def predict(self, images, topk=3):
        batch = torch.from_numpy(np.stack(images)).to(self.device, non_blocking=True)
        probs = self.model(preprocess(batch)).softmax(dim=-1)
        scores, idx = probs.topk(topk, dim=-1)
        return [
            [(CLASS_NAMES[i], round(s, 4)) for i, s in zip(row_i.tolist(), row_s.tolist())]
            for row_i, row_s in zip(idx.cpu(), scores.cpu())
        ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", default="tiny_resnet.pt")
    parser.add_argument("--num-images", type=int, default=8)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, size=(240, 320, 3), dtype=np.uint8) for _ in range(args.num_images)]
    predictor = Predictor(args.checkpoint)
    for i, preds in enumerate(predictor.predict(images)):
        print(f"image {i}: {preds}")


if __name__ == "__main__":
    main()
