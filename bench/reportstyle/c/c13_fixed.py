import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SegmentationValSet(Dataset):
    def __init__(self, image_file, mask_file):
        self.images = np.load(image_file, mmap_mode="r")
        self.masks = np.load(mask_file, mmap_mode="r")

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image = torch.from_numpy(np.ascontiguousarray(self.images[i])).float().div(255.0)
        mask = torch.from_numpy(np.ascontiguousarray(self.masks[i])).long()
        return {"image": image.permute(2, 0, 1), "mask": mask, "index": i}


class TinyUNet(nn.Module):
    def __init__(self, in_ch=3, num_classes=6, base=32):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(in_ch, base, 3, padding=1), nn.ReLU(inplace=True))
        self.enc2 = nn.Sequential(nn.Conv2d(base, base * 2, 3, padding=1), nn.ReLU(inplace=True))
        self.dec = nn.Sequential(nn.Conv2d(base * 3, base, 3, padding=1), nn.ReLU(inplace=True))
        self.head = nn.Conv2d(base, num_classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        up = F.interpolate(e2, size=e1.shape[-2:], mode="bilinear", align_corners=False)
        return self.head(self.dec(torch.cat([e1, up], dim=1)))


def move_to_device(batch, device):
    return {key: value.to(device, non_blocking=True) if isinstance(value, torch.Tensor) else value
            for key, value in batch.items()}


@torch.no_grad()
def evaluate(model, loader, device, num_classes, ignore_index=255):
    model.eval()
    confmat = torch.zeros(num_classes, num_classes, dtype=torch.long, device=device)
    for batch in loader:
        batch = move_to_device(batch, device)
        logits = model(batch["image"])
        pred = logits.argmax(1).flatten()
        target = batch["mask"].flatten()
        valid = target != ignore_index
        idx = target[valid] * num_classes + pred[valid]
        confmat += torch.bincount(idx, minlength=num_classes ** 2).view(num_classes, num_classes)
    iou = confmat.diag().float() / (confmat.sum(0) + confmat.sum(1) - confmat.diag()).clamp(min=1)
    pixel_acc = confmat.diag().sum().float() / confmat.sum().clamp(min=1)
    return iou.cpu().tolist(), pixel_acc.item()


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = TinyUNet(num_classes=6)
    model.load_state_dict(torch.load("tinyunet_best.pt", map_location="cpu"))
    model = model.to(device)
    loader = DataLoader(SegmentationValSet("val_images.npy", "val_masks.npy"),
                        batch_size=8, num_workers=4, pin_memory=True)
    iou, acc = evaluate(model, loader, device, num_classes=6)
    for c, v in enumerate(iou):
        print(f"class {c}: IoU {v:.3f}")
    print(f"mIoU {sum(iou) / len(iou):.3f}  pixel acc {acc:.3f}")
