import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class TicketDataset(Dataset):
    def __init__(self, n=5000, vocab=20000, max_len=64):
        self.tokens = torch.randint(1, vocab, (n, max_len))
        self.priority = torch.multinomial(torch.tensor([0.7, 0.2, 0.1]), n, replacement=True)
        self.category = torch.randint(0, 12, (n,))

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, i):
        return self.tokens[i], {"priority": self.priority[i], "category": self.category[i]}


class TicketClassifier(nn.Module):
    def __init__(self, vocab, dim, task_sizes, class_counts):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.encoder = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Dropout(0.1))
        self.heads = nn.ModuleDict({t: nn.Linear(dim, n) for t, n in task_sizes.items()})
        self.class_weights = {t: self._inverse_frequency(c) for t, c in class_counts.items()}

    @staticmethod
    def _inverse_frequency(counts):
        counts = torch.as_tensor(counts, dtype=torch.float).clamp(min=1)
        return counts.sum() / (len(counts) * counts)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens))
        return {t: head(h) for t, head in self.heads.items()}

    def compute_loss(self, logits, targets):
        losses = {}
        for task, out in logits.items():
            losses[task] = F.cross_entropy(out, targets[task], weight=self.class_weights[task].to(out.device))
        return sum(losses.values()), losses


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ds = TicketDataset()
    counts = {
        "priority": torch.bincount(ds.priority, minlength=3).tolist(),
        "category": torch.bincount(ds.category, minlength=12).tolist(),
    }
    model = TicketClassifier(20000, 128, {"priority": 3, "category": 12}, counts).to(device)
    loader = DataLoader(ds, batch_size=64, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(4):
        model.train()
        for tokens, targets in loader:
            tokens = tokens.to(device)
            targets = {k: v.to(device) for k, v in targets.items()}
            loss, parts = model.compute_loss(model(tokens), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(epoch, {k: round(v.item(), 4) for k, v in parts.items()})


if __name__ == "__main__":
    main()
