from contextlib import contextmanager

import torch
import torch.nn as nn


class ModelEMA(nn.Module):
    """Wraps a model and keeps an exponential moving average of its floating point state."""

    def __init__(self, model, decay=0.9999, warmup_steps=2000, exclude_bn_stats=False):
        super().__init__()
        self.model = model
        self.decay = decay
        self.warmup_steps = warmup_steps
        self.exclude_bn_stats = exclude_bn_stats
        self.num_updates = 0
        self._shadow_keys = {}
        for name, tensor in model.state_dict().items():
            if tensor.dtype.is_floating_point:
                key = "shadow_" + name.replace(".", "__")
                self.register_buffer(key, tensor.detach().clone())
                self._shadow_keys[name] = key

    @property
    def shadow(self):
        return {name: getattr(self, key) for name, key in self._shadow_keys.items()}

    def current_decay(self):
        step = self.num_updates
        return min(self.decay, (1 + step) / (self.warmup_steps + step + 1))

    def _tracked(self):
        state = self.model.state_dict()
        for name, shadow in self.shadow.items():
            if self.exclude_bn_stats and ("running_mean" in name or "running_var" in name):
                continue
            yield name, shadow, state[name]

    @torch.no_grad()
    def update(self):
        self.num_updates += 1
        d = self.current_decay()
        for _, shadow, current in self._tracked():
            shadow.lerp_(current.detach(), 1.0 - d)

    @torch.no_grad()
    def copy_to(self, target=None):
        target = self.model if target is None else target
        target.load_state_dict(self.shadow, strict=False)

    @contextmanager
    def average_parameters(self):
        backup = {name: t.detach().clone() for name, t in self.model.state_dict().items()}
        self.copy_to()
        try:
            yield self.model
        finally:
            self.model.load_state_dict(backup)

    def forward(self, *args, **kwargs):
        return self.model(*args, **kwargs)
