"""Binarized MLP (Courbariaux et al. 2016) with stochastic binarization during training."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class StochasticBinarize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        prob = torch.clamp((x + 1) / 2, 0, 1)
        noise = torch.rand(x.size())
        return torch.where(noise < prob, torch.ones_like(x), -torch.ones_like(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() <= 1).to(grad_output.dtype)


class SignSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() <= 1).to(grad_output.dtype)


def binarize(x, stochastic):
    return StochasticBinarize.apply(x) if stochastic else SignSTE.apply(x)


class BinaryLinear(nn.Linear):
    def forward(self, x):
        w = binarize(self.weight, stochastic=self.training)
        return F.linear(x, w, self.bias)


class BinaryMLP(nn.Module):
    def __init__(self, n_in=64, hidden=256, n_out=10):
        super().__init__()
        self.fc1 = BinaryLinear(n_in, hidden)
        self.bn1 = nn.BatchNorm1d(hidden)
        self.fc2 = BinaryLinear(hidden, hidden)
        self.bn2 = nn.BatchNorm1d(hidden)
        self.fc3 = BinaryLinear(hidden, n_out)
        self.bn3 = nn.BatchNorm1d(n_out)

    def forward(self, x):
        x = binarize(self.bn1(self.fc1(x)), stochastic=False)
        x = binarize(self.bn2(self.fc2(x)), stochastic=False)
        return self.bn3(self.fc3(x))


@torch.no_grad()
def clip_weights(model):
    for m in model.modules():
        if isinstance(m, BinaryLinear):
            m.weight.clamp_(-1, 1)


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    centers = torch.randn(10, 64) * 2
    y = torch.randint(0, 10, (2048,))
    x = centers[y] + torch.randn(2048, 64)

    model = BinaryMLP().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        model.train()
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 128):
            idx = perm[i : i + 128]
            xb, yb = x[idx].to(device), y[idx].to(device)
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            clip_weights(model)
        model.eval()
        with torch.no_grad():
            acc = (model(x.to(device)).argmax(1).cpu() == y).float().mean().item()
        print(f"epoch {epoch} loss {loss.item():.3f} acc {acc:.3f}")
