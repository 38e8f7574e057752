import math

import numpy as np
import torch
import torch.nn as nn


def generate_base_anchors(base_size, ratios, scales):
    ctr = 0.5 * (base_size - 1)
    anchors = []
    for r in ratios:
        w = np.round(np.sqrt(base_size * base_size / r))
        h = np.round(w * r)
        for s in scales:
            ws, hs = w * s, h * s
            anchors.append([ctr - 0.5 * (ws - 1), ctr - 0.5 * (hs - 1), ctr + 0.5 * (ws - 1), ctr + 0.5 * (hs - 1)])
    return np.array(anchors, dtype=np.float32)


def grid_anchors(base_anchors, feat_h, feat_w, stride):
    shift_x = np.arange(feat_w) * stride
    shift_y = np.arange(feat_h) * stride
    sx, sy = np.meshgrid(shift_x, shift_y)
    shifts = np.stack([sx.ravel(), sy.ravel(), sx.ravel(), sy.ravel()], axis=1)
    all_anchors = base_anchors[None, :, :] + shifts[:, None, :]
    return all_anchors.reshape(-1, 4).astype(np.float32)


def decode_boxes(anchors, deltas, max_ratio=math.log(1000.0 / 16)):
    widths = anchors[:, 2] - anchors[:, 0] + 1.0
    heights = anchors[:, 3] - anchors[:, 1] + 1.0
    ctr_x = anchors[:, 0] + 0.5 * widths
    ctr_y = anchors[:, 1] + 0.5 * heights
    dx, dy, dw, dh = deltas.unbind(-1)
    dw = dw.clamp(max=max_ratio)
    dh = dh.clamp(max=max_ratio)
    pred_ctr_x = dx * widths + ctr_x
    pred_ctr_y = dy * heights + ctr_y
    pred_w = dw.exp() * widths
    pred_h = dh.exp() * heights
    return torch.stack(
        [pred_ctr_x - 0.5 * pred_w, pred_ctr_y - 0.5 * pred_h, pred_ctr_x + 0.5 * pred_w, pred_ctr_y + 0.5 * pred_h],
        dim=-1,
    )


class RPNHead(nn.Module):
    def __init__(self, in_channels, stride=16, ratios=(0.5, 1.0, 2.0), scales=(8, 16, 32)):
        super().__init__()
        self.stride = stride
        self.base_anchors = generate_base_anchors(stride, ratios, scales)
        num_anchors = len(ratios) * len(scales)
        self.conv = nn.Conv2d(in_channels, in_channels, 3, padding=1)
        self.cls_logits = nn.Conv2d(in_channels, num_anchors, 1)
        self.bbox_pred = nn.Conv2d(in_channels, num_anchors * 4, 1)

    def forward(self, feat, image_size):
        n, _, h, w = feat.shape
        t = torch.relu(self.conv(feat))
        scores = self.cls_logits(t).permute(0, 2, 3, 1).reshape(n, -1)
        deltas = self.bbox_pred(t).permute(0, 2, 3, 1).reshape(n, -1, 4)
        anchors = torch.from_numpy(grid_anchors(self.base_anchors, h, w, self.stride))
        anchors = anchors.to(device=feat.device, dtype=deltas.dtype)
        boxes = decode_boxes(anchors, deltas)
        boxes[..., 0::2] = boxes[..., 0::2].clamp(0, image_size[1] - 1)
        boxes[..., 1::2] = boxes[..., 1::2].clamp(0, image_size[0] - 1)
        return scores.sigmoid(), boxes
