import copy
import random
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CorridorEnv:
    def __init__(self, length=12, max_steps=50):
        self.length, self.max_steps = length, max_steps

    def reset(self):
        self.pos, self.steps = self.length // 2, 0
        return self._obs()

    def _obs(self):
        obs = np.zeros(self.length, dtype=np.float32)
        obs[self.pos] = 1.0
        return obs

    def step(self, action):
        self.pos = int(np.clip(self.pos + (1 if action == 1 else -1), 0, self.length - 1))
        self.steps += 1
        done = self.pos == self.length - 1 or self.steps >= self.max_steps
        reward = 1.0 if self.pos == self.length - 1 else -0.01
        return self._obs(), reward, done


class ReplayBuffer:
    def __init__(self, capacity=20000):
        self.buffer = deque(maxlen=capacity)

    def push(self, *transition):
        self.buffer.append(transition)

    def sample(self, batch_size, device):
        obs, act, rew, next_obs, done = zip(*random.sample(self.buffer, batch_size))
        as_t = lambda a, dt: torch.as_tensor(np.array(a), dtype=dt, device=device)
        return (as_t(obs, torch.float32), as_t(act, torch.long), as_t(rew, torch.float32),
                as_t(next_obs, torch.float32), as_t(done, torch.float32))


class DQNAgent:
    def __init__(self, obs_dim, n_actions, device, gamma=0.99, lr=1e-3):
        self.n_actions, self.gamma, self.device = n_actions, gamma, device
        self.q_net = nn.Sequential(nn.Linear(obs_dim, 128), nn.ReLU(),
                                   nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, n_actions)).to(device)
        self.target_net = copy.deepcopy(self.q_net)
        self.optimizer = torch.optim.Adam(self.q_net.parameters(), lr=lr)

    def act(self, obs, epsilon):
        if random.random() < epsilon:
            return random.randrange(self.n_actions)
        with torch.no_grad():
            q = self.q_net(torch.as_tensor(obs, dtype=torch.float32, device=self.device).unsqueeze(0))
        return int(q.argmax(dim=1).item())

    def learn(self, batch):
        obs, act, rew, next_obs, done = batch
        q = self.q_net(obs).gather(1, act.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            target = rew + self.gamma * (1 - done) * self.target_net(next_obs).max(dim=1).values
        loss = F.smooth_l1_loss(q, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def sync_target(self):
        self.target_net.load_state_dict(self.q_net.state_dict())


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    env, buffer = CorridorEnv(), ReplayBuffer()
    agent = DQNAgent(obs_dim=env.length, n_actions=2, device=device)
    total_steps = 0
    for episode in range(300):
        obs, done, ep_return = env.reset(), False, 0.0
        while not done:
            epsilon = max(0.05, 1.0 - total_steps / 3000)
            action = agent.act(obs, epsilon)
            next_obs, reward, done = env.step(action)
            buffer.push(obs, action, reward, next_obs, float(done))
            obs, ep_return, total_steps = next_obs, ep_return + reward, total_steps + 1
            if len(buffer.buffer) >= 500:
                agent.learn(buffer.sample(64, device))
            if total_steps % 500 == 0:
                agent.sync_target()
        if episode % 25 == 0:
            print(f"episode {episode}: return {ep_return:.2f} epsilon {epsilon:.2f}")


if __name__ == "__main__":
    main()
