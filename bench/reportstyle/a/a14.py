import torch
import torch.nn as nn
import torch.nn.functional as F


class BinarizeSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        window = torch.zeros(x.shape)
        window[x.abs() <= 1] = 1.0
        return grad_output * window


binarize = BinarizeSTE.apply


class BinaryLinear(nn.Linear):
    def forward(self, x):
        return F.linear(binarize(x), binarize(self.weight), self.bias)


class BNN(nn.Module):
    def __init__(self, in_dim=784, hidden=1024, n_out=10):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden)
        self.bn1 = nn.BatchNorm1d(hidden)
        self.fc2 = BinaryLinear(hidden, hidden)
        self.bn2 = nn.BatchNorm1d(hidden)
        self.fc3 = BinaryLinear(hidden, n_out)

    def forward(self, x):
        x = F.hardtanh(self.bn1(self.fc1(x.flatten(1))))
        x = F.hardtanh(self.bn2(self.fc2(x)))
        return self.fc3(x)


def fit(model, opt, loader, device, epochs):
    for epoch in range(epochs):
        model.train()
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            loss = F.cross_entropy(model(data), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            for m in model.modules():
                if isinstance(m, BinaryLinear):
                    m.weight.data.clamp_(-1, 1)
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = BNN().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = [(torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,))) for _ in range(200)]
    fit(model, opt, loader, device, epochs=5)
