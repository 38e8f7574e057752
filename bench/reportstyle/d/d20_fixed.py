import torch
import torch.nn as nn
import torch.nn.functional as F


class AnchorFreeHead(nn.Module):
    """Shared bits for dense anchor-free heads: per-level conv towers and grid helpers."""

    def __init__(self, in_channels, num_classes, strides=(8, 16, 32), feat_ch=64):
        super().__init__()
        self.num_classes = num_classes
        self.strides = strides
        self.towers = nn.ModuleList(
            nn.Sequential(nn.Conv2d(in_channels, feat_ch, 3, padding=1), nn.GroupNorm(8, feat_ch), nn.ReLU())
            for _ in strides
        )
        self.cls_out = nn.Conv2d(feat_ch, num_classes, 3, padding=1)
        self.reg_out = nn.Conv2d(feat_ch, 4, 3, padding=1)

    @staticmethod
    def make_grid(h, w):
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        return torch.stack((xs, ys), dim=-1).float()

    def flatten_level(self, t):
        b, c, h, w = t.shape
        return t.permute(0, 2, 3, 1).reshape(b, h * w, c)


class FCOSLiteHead(AnchorFreeHead):
    def __init__(self, in_channels, num_classes, strides=(8, 16, 32), feat_ch=64):
        super().__init__(in_channels, num_classes, strides, feat_ch)
        self.centerness = nn.Conv2d(feat_ch, 1, 3, padding=1)
        self.scales = nn.Parameter(torch.ones(len(strides)))

    def forward(self, feats):
        boxes, scores = [], []
        for lvl, (f, tower, stride) in enumerate(zip(feats, self.towers, self.strides)):
            t = tower(f)
            h, w = f.shape[-2:]
            ltrb = F.relu(self.flatten_level(self.reg_out(t)) * self.scales[lvl]) * stride
            cls = self.flatten_level(self.cls_out(t)).sigmoid()
            ctr = self.flatten_level(self.centerness(t)).sigmoid()
            centers = (self.make_grid(h, w).to(f.device).view(1, h * w, 2) + 0.5) * stride
            boxes.append(torch.cat([centers - ltrb[..., :2], centers + ltrb[..., 2:]], dim=-1))
            scores.append(torch.sqrt(cls * ctr))
        return torch.cat(boxes, dim=1), torch.cat(scores, dim=1)


class TinyBackbone(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.c1 = nn.Sequential(nn.Conv2d(3, ch, 3, 2, 1), nn.ReLU(), nn.Conv2d(ch, ch, 3, 2, 1), nn.ReLU())
        self.c2 = nn.Sequential(nn.Conv2d(ch, ch, 3, 2, 1), nn.ReLU())
        self.c3 = nn.Sequential(nn.Conv2d(ch, ch, 3, 2, 1), nn.ReLU())
        self.c4 = nn.Sequential(nn.Conv2d(ch, ch, 3, 2, 1), nn.ReLU())

    def forward(self, x):
        p3 = self.c2(self.c1(x))
        p4 = self.c3(p3)
        return [p3, p4, self.c4(p4)]


class Detector(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.backbone = TinyBackbone()
        self.head = FCOSLiteHead(32, num_classes)

    @torch.no_grad()
    def predict(self, images, score_thresh=0.3, max_det=50):
        boxes, scores = self.head(self.backbone(images))
        results = []
        for b, s in zip(boxes, scores):
            conf, labels = s.max(dim=-1)
            keep = conf > score_thresh
            b, conf, labels = b[keep], conf[keep], labels[keep]
            top = conf.argsort(descending=True)[:max_det]
            results.append({"boxes": b[top].clamp(0, images.shape[-1]), "scores": conf[top], "labels": labels[top]})
        return results


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Detector().to(device).eval()
    images = torch.rand(2, 3, 128, 128, device=device)
    for i, r in enumerate(model.predict(images, score_thresh=0.2)):
        print(i, {k: tuple(v.shape) for k, v in r.items()})
        if len(r["boxes"]):
            print("   best box", [round(v, 1) for v in r["boxes"][0].tolist()], "score", round(r["scores"][0].item(), 3))
