import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class BirdDataset(Dataset):
    """Fake stand-in for an image folder with two label columns."""

    def __init__(self, n=2000, n_species=50, n_habitats=6):
        self.images = torch.rand(n, 3, 64, 64)
        self.species = torch.randint(0, n_species, (n,))
        self.habitat = torch.randint(0, n_habitats, (n,))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return {
            "image": self.images[idx],
            "target": {"species": self.species[idx], "habitat": self.habitat[idx]},
        }


class TwoHeadCNN(nn.Module):
    def __init__(self, n_species=50, n_habitats=6):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.species = nn.Linear(128, n_species)
        self.habitat = nn.Linear(128, n_habitats)

    def forward(self, x):
        h = self.body(x)
        return {"species": self.species(h), "habitat": self.habitat(h)}


def to_device(obj, device):
    if torch.is_tensor(obj):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(o, device) for o in obj)
    return obj


def train_one_epoch(model, loader, optimizer, criterion, device, loss_weights):
    model.train()
    total = 0.0
    for batch in loader:
        images = to_device(batch["image"], device)
        targets = to_device(batch["target"], device)
        outputs = model(images)
        loss = sum(loss_weights[k] * criterion(outputs[k], targets[k]) for k in outputs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(BirdDataset(), batch_size=32, shuffle=True, pin_memory=True)
    model = TwoHeadCNN().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(3):
        avg = train_one_epoch(model, loader, optimizer, criterion, device, {"species": 1.0, "habitat": 0.5})
        print(f"epoch {epoch}: {avg:.4f}")
