import torch
import torch.nn as nn
import torch.nn.functional as F


def rbf_kernel(x1, x2, lengthscale, outputscale):
    x1 = x1 / lengthscale
    x2 = x2 / lengthscale
    sq = x1.pow(2).sum(-1, keepdim=True) - 2 * x1 @ x2.transpose(-1, -2) + x2.pow(2).sum(-1).unsqueeze(-2)
    return outputscale * torch.exp(-0.5 * sq.clamp_min(0))


class SVGPLayer(nn.Module):
    """Whitened sparse variational GP layer, one independent GP per output dimension."""

    def __init__(self, in_features, out_features, num_inducing=64, jitter=1e-5):
        super().__init__()
        self.jitter = jitter
        self.inducing_points = nn.Parameter(torch.randn(out_features, num_inducing, in_features))
        self.variational_mean = nn.Parameter(torch.zeros(out_features, num_inducing))
        self.variational_chol = nn.Parameter(0.1 * torch.eye(num_inducing).repeat(out_features, 1, 1))
        self.raw_lengthscale = nn.Parameter(torch.zeros(out_features, 1, in_features))
        self.raw_outputscale = nn.Parameter(torch.zeros(out_features, 1, 1))

    @property
    def lengthscale(self):
        return F.softplus(self.raw_lengthscale)

    @property
    def outputscale(self):
        return F.softplus(self.raw_outputscale)

    def _jitter(self, like):
        return self.jitter * torch.eye(like.size(-1), device=like.device, dtype=like.dtype)

    def forward(self, x):
        z = self.inducing_points
        xb = x.unsqueeze(0).expand(z.size(0), -1, -1)
        kzz = rbf_kernel(z, z, self.lengthscale, self.outputscale)
        kzz = kzz + self._jitter(kzz)
        kzx = rbf_kernel(z, xb, self.lengthscale, self.outputscale)
        lz = torch.linalg.cholesky(kzz)
        a = torch.linalg.solve_triangular(lz, kzx, upper=False)
        s = torch.tril(self.variational_chol)
        mean = (a * self.variational_mean.unsqueeze(-1)).sum(-2)
        sa = s.transpose(-1, -2) @ a
        var = self.outputscale.squeeze(-1) - a.pow(2).sum(-2) + sa.pow(2).sum(-2)
        return mean.t(), var.clamp_min(1e-8).t()

    def kl_divergence(self):
        s = torch.tril(self.variational_chol)
        m = self.variational_mean
        logdet = 2 * torch.log(torch.diagonal(s, dim1=-2, dim2=-1).abs()).sum(-1)
        trace = s.pow(2).sum((-1, -2))
        return 0.5 * (trace + m.pow(2).sum(-1) - m.size(-1) - logdet).sum()


class GPRegressionHead(nn.Module):
    def __init__(self, in_features, out_features, num_inducing=64):
        super().__init__()
        self.gp = SVGPLayer(in_features, out_features, num_inducing)
        self.raw_noise = nn.Parameter(torch.tensor(-2.0))

    def elbo(self, x, y, num_data):
        mean, var = self.gp(x)
        noise = F.softplus(self.raw_noise)
        exp_ll = -0.5 * (torch.log(2 * torch.pi * noise) + ((y - mean) ** 2 + var) / noise)
        return exp_ll.sum() * (num_data / x.size(0)) - self.gp.kl_divergence()
