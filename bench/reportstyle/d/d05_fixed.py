import copy
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class ChainEnv:
    """Walk right along a chain of length n to reach the reward."""

    def __init__(self, n=8, max_steps=30):
        self.n, self.max_steps = n, max_steps

    def reset(self):
        self.pos, self.t = 0, 0
        return self._obs()

    def _obs(self):
        o = [0.0] * self.n
        o[self.pos] = 1.0
        return o

    def step(self, action):
        self.t += 1
        self.pos = min(self.n - 1, self.pos + 1) if action == 1 else max(0, self.pos - 1)
        done = self.pos == self.n - 1 or self.t >= self.max_steps
        reward = 1.0 if self.pos == self.n - 1 else -0.01
        return self._obs(), reward, done


class ReplayBuffer:
    def __init__(self, capacity, obs_dim, device):
        self.obs = torch.zeros(capacity, obs_dim)
        self.next_obs = torch.zeros(capacity, obs_dim)
        self.actions = torch.zeros(capacity, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.dones = torch.zeros(capacity)
        self.capacity, self.device = capacity, device
        self.ptr = self.size = 0

    def add(self, o, a, r, o2, d):
        i = self.ptr
        self.obs[i] = torch.as_tensor(o)
        self.next_obs[i] = torch.as_tensor(o2)
        self.actions[i], self.rewards[i], self.dones[i] = a, r, float(d)
        self.ptr = (self.ptr + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size):
        idx = torch.randint(0, self.size, (batch_size,))
        batch = (self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx], self.dones[idx])
        return tuple(t.to(self.device) for t in batch)


class DQNAgent:
    def __init__(self, obs_dim, n_actions, device, gamma=0.99, lr=1e-3):
        self.q = nn.Sequential(nn.Linear(obs_dim, 64), nn.ReLU(), nn.Linear(64, n_actions)).to(device)
        self.target = copy.deepcopy(self.q)
        self.opt = torch.optim.Adam(self.q.parameters(), lr=lr)
        self.n_actions, self.gamma, self.device = n_actions, gamma, device

    @torch.no_grad()
    def act(self, obs, eps):
        if random.random() < eps:
            return random.randrange(self.n_actions)
        state = torch.tensor(obs, dtype=torch.float32, device=self.device).unsqueeze(0)
        return self.q(state).argmax(1).item()

    def learn(self, buffer, batch_size=64):
        o, a, r, o2, d = buffer.sample(batch_size)
        q = self.q(o).gather(1, a.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            target = r + self.gamma * (1 - d) * self.target(o2).max(1).values
        loss = F.smooth_l1_loss(q, target)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


if __name__ == "__main__":
    random.seed(0)
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env = ChainEnv()
    agent = DQNAgent(env.n, 2, device)
    buffer = ReplayBuffer(5000, env.n, device)
    steps = 0
    for episode in range(40):
        obs, done, ep_ret = env.reset(), False, 0.0
        while not done:
            eps = max(0.05, 1.0 - steps / 500)
            action = agent.act(obs, eps)
            next_obs, reward, done = env.step(action)
            buffer.add(obs, action, reward, next_obs, done)
            obs, ep_ret, steps = next_obs, ep_ret + reward, steps + 1
            if buffer.size >= 64:
                agent.learn(buffer)
            if steps % 200 == 0:
                agent.target.load_state_dict(agent.q.state_dict())
        if episode % 10 == 0:
            print(f"episode {episode} return {ep_ret:.2f}")
