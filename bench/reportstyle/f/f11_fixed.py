import random
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LineWorld:
    """Tiny 1-D environment: walk left/right, reward at the right edge."""

    def __init__(self, size=10):
        self.size = size

    def reset(self):
        self.pos = self.size // 2
        return self._obs()

    def _obs(self):
        obs = np.zeros(self.size, dtype=np.float32)
        obs[self.pos] = 1.0
        return obs

    def step(self, action):
        self.pos = max(0, min(self.size - 1, self.pos + (1 if action == 1 else -1)))
        done = self.pos in (0, self.size - 1)
        reward = 1.0 if self.pos == self.size - 1 else -0.01
        return self._obs(), reward, done


class ReplayBuffer:
    def __init__(self, capacity=10000):
        self.buffer = deque(maxlen=capacity)

    def push(self, *transition):
        self.buffer.append(transition)

    def sample(self, batch_size):
        s, a, r, s2, d = zip(*random.sample(self.buffer, batch_size))
        return (torch.as_tensor(np.stack(s)), torch.as_tensor(a, dtype=torch.long),
                torch.as_tensor(r, dtype=torch.float32), torch.as_tensor(np.stack(s2)),
                torch.as_tensor(d, dtype=torch.float32))

    def __len__(self):
        return len(self.buffer)


def optimize(policy, target, buffer, optimizer, device, batch_size=64, gamma=0.99):
    states, actions, rewards, next_states, dones = buffer.sample(batch_size)
    states, next_states = states.to(device), next_states.to(device)
    rewards, dones = rewards.to(device), dones.to(device)
    actions = actions.to(device)
    q = policy(states).gather(1, actions.unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        target_q = rewards + gamma * (1 - dones) * target(next_states).max(1).values
    loss = F.smooth_l1_loss(q, target_q)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env = LineWorld()
    make_net = lambda: nn.Sequential(nn.Linear(env.size, 64), nn.ReLU(), nn.Linear(64, 2))
    policy, target = make_net().to(device), make_net().to(device)
    target.load_state_dict(policy.state_dict())
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    buffer = ReplayBuffer()
    eps = 1.0
    for episode in range(300):
        state, done, steps = env.reset(), False, 0
        while not done and steps < 100:
            if random.random() < eps:
                action = random.randrange(2)
            else:
                with torch.no_grad():
                    action = policy(torch.as_tensor(state, device=device)[None]).argmax(1).item()
            next_state, reward, done = env.step(action)
            buffer.push(state, action, reward, next_state, float(done))
            state, steps = next_state, steps + 1
            if len(buffer) >= 64:
                optimize(policy, target, buffer, optimizer, device)
        eps = max(0.05, eps * 0.98)
        if episode % 20 == 0:
            target.load_state_dict(policy.state_dict())
            print(f"episode {episode} steps {steps} eps {eps:.2f}")
