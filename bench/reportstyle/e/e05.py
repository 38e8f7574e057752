import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class BiLSTMTagger(nn.Module):
    def __init__(self, vocab_size, num_tags, embed_dim=100, hidden_dim=256, num_layers=2):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, num_layers=num_layers,
                            bidirectional=True, batch_first=True, dropout=0.2)
        self.classifier = nn.Linear(2 * hidden_dim, num_tags)

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        shape = (2 * self.num_layers, batch_size, self.hidden_dim)
        return weight.new_zeros(shape), weight.new_zeros(shape)

    def forward(self, tokens):
        hidden = self.init_hidden(tokens.size(0))
        self.lstm.flatten_parameters()
        out, _ = self.lstm(self.embedding(tokens), hidden)
        return self.classifier(out)


def synthetic_ner(num_sentences=6000, seq_len=40, vocab_size=10000, num_tags=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, vocab_size, (num_sentences, seq_len), generator=g)
    tags = (tokens % num_tags).roll(1, dims=1)
    return TensorDataset(tokens, tags)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()

    vocab_size, num_tags = 10000, 9
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = synthetic_ner(vocab_size=vocab_size, num_tags=num_tags)
    train_ds, val_ds = torch.utils.data.random_split(dataset, [5000, 1000])
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=args.batch_size)

    model = BiLSTMTagger(vocab_size, num_tags)
    if torch.cuda.device_count() > 1:
        print(f"using {torch.cuda.device_count()} GPUs")
        model = nn.DataParallel(model)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    for epoch in range(args.epochs):
        model.train()
        for tokens, tags in train_loader:
            tokens, tags = tokens.to(device), tags.to(device)
            logits = model(tokens)
            loss = F.cross_entropy(logits.reshape(-1, num_tags), tags.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()

        model.eval()
        correct = total = 0
        with torch.no_grad():
            for tokens, tags in val_loader:
                tokens, tags = tokens.to(device), tags.to(device)
                preds = model(tokens).argmax(dim=-1)
                correct += (preds == tags).sum().item()
                total += tags.numel()
        print(f"epoch {epoch}: loss {loss.item():.4f} token acc {correct / total:.3f}")


if __name__ == "__main__":
    main()
