import argparse
from collections import Counter

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class ToyReviews(Dataset):
    def __init__(self, n, vocab_size, seq_len, num_classes, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(1, vocab_size, (n, seq_len), generator=g)
        probs = torch.tensor([0.7, 0.2, 0.1, 0.05, 0.05][:num_classes])
        self.labels = torch.multinomial(probs, n, replacement=True, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i], self.labels[i]


class BagClassifier(nn.Module):
    def __init__(self, vocab_size, dim, num_classes, dropout=0.1):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab_size, dim, mode="mean", padding_idx=0)
        self.fc = nn.Sequential(
            nn.Linear(dim, dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(dim, num_classes)
        )

    def forward(self, tokens):
        return self.fc(self.emb(tokens))


def class_weights(labels, num_classes):
    counts = Counter(labels.tolist())
    total = sum(counts.values())
    return [total / (num_classes * counts.get(c, 1)) for c in range(num_classes)]


def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for tokens, labels in loader:
            tokens, labels = tokens.to(device), labels.to(device)
            correct += (model(tokens).argmax(1) == labels).sum().item()
            total += labels.numel()
    return correct / max(total, 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--vocab", type=int, default=500)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--classes", type=int, default=3)
    args = p.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_ds = ToyReviews(512, args.vocab, 40, args.classes)
    val_ds = ToyReviews(128, args.vocab, 40, args.classes, seed=1)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=args.batch_size)

    model = BagClassifier(args.vocab, args.dim, args.classes).to(device)
    weights = torch.tensor(class_weights(train_ds.labels, args.classes), dtype=torch.float)
    criterion = nn.CrossEntropyLoss(weight=weights)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        model.train()
        running = 0.0
        for tokens, labels in train_loader:
            tokens, labels = tokens.to(device), labels.to(device)
            logits = model(tokens)
            loss = criterion(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            running += loss.item() * labels.size(0)
        acc = evaluate(model, val_loader, device)
        print(f"epoch {epoch}: loss {running / len(train_ds):.4f} val_acc {acc:.3f}")


if __name__ == "__main__":
    main()
