import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class ReviewDataset(Dataset):
    def __init__(self, num_samples=4000, vocab_size=8000, max_len=96, seed=0):
        rng = random.Random(seed)
        self.samples = []
        for _ in range(num_samples):
            length = rng.randint(8, max_len)
            ids = [rng.randint(2, vocab_size - 1) for _ in range(length)]
            label = int(sum(ids) / length > vocab_size / 2)
            self.samples.append((ids, label))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        return self.samples[idx]


def collate_reviews(batch, pad_id=0):
    max_len = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), max_len), pad_id, dtype=torch.long)
    attention_mask = torch.zeros(len(batch), max_len, dtype=torch.long)
    for i, (ids, _) in enumerate(batch):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention_mask[i, : len(ids)] = 1
    labels = torch.tensor([label for _, label in batch])
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class MeanPoolClassifier(nn.Module):
    def __init__(self, vocab_size=8000, dim=128, num_classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.proj = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim))
        self.head = nn.Linear(dim, num_classes)

    def forward(self, input_ids, attention_mask):
        hidden = self.proj(self.embed(input_ids))
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return self.head(pooled)


def train_one_epoch(model, loader, optimizer, device):
    model.train()
    total = 0.0
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        logits = model(batch["input_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits, batch["labels"])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        total += loss.item()
    return total / len(loader)


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    for batch in loader:
        logits = model(batch["input_ids"].to(device), batch["attention_mask"])
        preds = logits.argmax(dim=-1).cpu()
        correct += (preds == batch["labels"]).sum().item()
        total += batch["labels"].numel()
    return correct / total


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_ds = ReviewDataset(seed=0)
    val_ds = ReviewDataset(num_samples=800, seed=1)
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True,
                              collate_fn=collate_reviews, num_workers=2, pin_memory=True)
    val_loader = DataLoader(val_ds, batch_size=128, collate_fn=collate_reviews)

    model = MeanPoolClassifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    for epoch in range(4):
        loss = train_one_epoch(model, train_loader, optimizer, device)
        acc = evaluate(model, val_loader, device)
        print(f"epoch {epoch} | train loss {loss:.4f} | val acc {acc:.3f}")


if __name__ == "__main__":
    main()
