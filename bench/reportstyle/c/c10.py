import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvEmbedder(nn.Module):
    def __init__(self, in_ch=3, dim=128):
        super().__init__()
        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout),
                                 nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.features = nn.Sequential(block(in_ch, 64), block(64, 64), block(64, 128), block(128, 128))
        self.proj = nn.Linear(128, dim)

    def forward(self, x):
        return self.proj(self.features(x).mean(dim=(2, 3)))


class PrototypeClassifier(nn.Module):
    def __init__(self, embedder, num_classes, dim=128, momentum=0.9, temperature=0.1):
        super().__init__()
        self.embedder = embedder
        self.num_classes = num_classes
        self.momentum = momentum
        self.temperature = temperature
        self.prototypes = torch.zeros(num_classes, dim)

    def embed(self, x):
        return F.normalize(self.embedder(x), dim=-1)

    def forward(self, x):
        feats = self.embed(x)
        dists = torch.cdist(feats, self.prototypes)
        return -dists / self.temperature, feats

    @torch.no_grad()
    def update_prototypes(self, feats, labels):
        onehot = F.one_hot(labels, self.num_classes).type_as(feats)
        sums = onehot.t() @ feats
        counts = onehot.sum(0)
        present = counts > 0
        means = sums[present] / counts[present].unsqueeze(1)
        updated = self.momentum * self.prototypes[present] + (1 - self.momentum) * means
        self.prototypes[present] = F.normalize(updated, dim=-1)


def run_episode(model, optimizer, images, labels):
    logits, feats = model(images)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.update_prototypes(feats.detach(), labels)
    acc = (logits.argmax(1) == labels).float().mean()
    return loss.item(), acc.item()


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = PrototypeClassifier(ConvEmbedder(), num_classes=20).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    history = []
    for it in range(1000):
        images = torch.randn(64, 3, 32, 32, device=device)
        labels = torch.randint(0, 20, (64,), device=device)
        history.append(run_episode(model, optimizer, images, labels))
        if (it + 1) % 100 == 0:
            losses, accs = zip(*history[-100:])
            print(f"iter {it + 1}: loss {sum(losses) / 100:.3f} acc {sum(accs) / 100:.3f}")
    torch.save(model.state_dict(), "protonet.pt")
