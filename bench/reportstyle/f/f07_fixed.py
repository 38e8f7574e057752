import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class PrunedCNN(nn.Module):
    """Small CIFAR CNN that soft-prunes the weakest filters of selected convs."""

    def __init__(self, num_classes=10, prune_layers=("features.2.0", "features.3.0"), keep_ratio=0.6):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(3, 32),
            conv_bn(32, 64, stride=2),
            conv_bn(64, 128, stride=2),
            conv_bn(128, 256, stride=2),
        )
        self.classifier = nn.Linear(256, num_classes)
        self._handles = []
        for name in prune_layers:
            self._handles.append(self.add_channel_gate(name, keep_ratio))

    def add_channel_gate(self, layer_name, keep_ratio):
        conv = dict(self.named_modules())[layer_name]
        with torch.no_grad():
            importance = conv.weight.abs().sum(dim=(1, 2, 3))
        k = max(1, int(keep_ratio * importance.numel()))
        threshold = importance.topk(k).values[-1]
        gate = (importance >= threshold).float().view(1, -1, 1, 1)

        def hook(module, inputs, output):
            return output * gate.to(output.device)

        return conv.register_forward_hook(hook)

    def remove_gates(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


if __name__ == "__main__":
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    model = PrunedCNN().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=300)

    for step in range(300):
        images = torch.randn(64, 3, 32, 32, device=device)
        labels = torch.randint(0, 10, (64,), device=device)
        logits = model(images)
        loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.3f}")
