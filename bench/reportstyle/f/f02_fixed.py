import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class MultiTaskNet(nn.Module):
    """Shared MLP trunk with one classification head per task."""

    def __init__(self, in_features, hidden, task_classes, dropout=0.2):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
        )
        self.task_names = list(task_classes.keys())
        self.heads = nn.ModuleList([nn.Linear(hidden, n) for n in task_classes.values()])

    def forward(self, x):
        h = self.trunk(x)
        return {name: head(h) for name, head in zip(self.task_names, self.heads)}


def make_fake_data(n=4096, in_features=32):
    x = torch.randn(n, in_features)
    churn = (x[:, 0] + x[:, 1] > 0).long()
    segment = torch.bucketize(x[:, 2], torch.tensor([-0.5, 0.5]))
    plan = torch.randint(0, 5, (n,))
    return TensorDataset(x, churn, segment, plan)


def train(epochs=5):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    task_classes = {"churn": 2, "segment": 3, "plan": 5}
    loader = DataLoader(make_fake_data(), batch_size=128, shuffle=True)

    model = MultiTaskNet(32, 256, task_classes).to(device)
    params = list(model.trunk.parameters())
    for head in model.heads:
        params += list(head.parameters())
    optimizer = torch.optim.Adam(params, lr=1e-3)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(epochs):
        model.train()
        running = 0.0
        for x, churn, segment, plan in loader:
            x = x.to(device)
            targets = {"churn": churn.to(device), "segment": segment.to(device), "plan": plan.to(device)}
            outputs = model(x)
            loss = sum(criterion(outputs[t], targets[t]) for t in task_classes)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item() * x.size(0)
        print(f"epoch {epoch}: loss={running / len(loader.dataset):.4f}")


if __name__ == "__main__":
    train()
