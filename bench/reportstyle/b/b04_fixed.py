import math

import torch
import torch.nn as nn


def sample_rff_params(in_features, num_features, lengthscale=1.0, generator=None):
    weight = torch.randn(in_features, num_features, generator=generator) / lengthscale
    bias = 2 * math.pi * torch.rand(num_features, generator=generator)
    return weight, bias


def rff_features(x, weight, bias):
    scale = math.sqrt(2.0 / weight.shape[1])
    return scale * torch.cos(torch.addmm(bias, x, weight))


class RandomFeatureGaussianProcess(nn.Module):
    """Last-layer Gaussian process approximated with random Fourier features (SNGP style)."""

    def __init__(self, in_features, num_classes, num_features=1024, lengthscale=2.0, ridge=1.0, momentum=0.999):
        super().__init__()
        self.num_features = num_features
        self.ridge = ridge
        self.momentum = momentum
        self.input_norm = nn.LayerNorm(in_features)
        weight, bias = sample_rff_params(in_features, num_features, lengthscale)
        self.register_buffer("feature_weight", weight)
        self.register_buffer("feature_bias", bias)
        self.beta = nn.Linear(num_features, num_classes, bias=False)
        self.register_buffer("precision", ridge * torch.eye(num_features))

    def reset_precision(self):
        self.precision.copy_(self.ridge * torch.eye(self.num_features, device=self.precision.device))

    @torch.no_grad()
    def update_precision(self, phi, logits):
        probs = logits.softmax(-1).max(-1).values
        weighted = phi * (probs * (1 - probs)).unsqueeze(-1)
        batch_prec = weighted.t() @ phi
        self.precision.mul_(self.momentum).add_(batch_prec, alpha=1 - self.momentum)

    def predictive_covariance(self, phi):
        cov = torch.linalg.inv(self.precision) * self.ridge
        return phi @ cov @ phi.t()

    def forward(self, x, return_cov=False, update_cov=None):
        phi = rff_features(self.input_norm(x), self.feature_weight, self.feature_bias)
        logits = self.beta(phi)
        if update_cov is None:
            update_cov = self.training
        if update_cov:
            self.update_precision(phi, logits)
        if return_cov:
            return logits, self.predictive_covariance(phi)
        return logits


def mean_field_logits(logits, covariance, lambda_=math.pi / 8):
    variances = torch.diagonal(covariance)
    scale = torch.sqrt(1.0 + variances * lambda_)
    return logits / scale.unsqueeze(-1)
