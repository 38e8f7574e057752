from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import AutoTokenizer


class IntentClassifier(nn.Module):
    def __init__(self, vocab_size, n_intents, label_counts, emb_dim=200, hidden=256):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, emb_dim, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(emb_dim, hidden), nn.ReLU(), nn.Dropout(0.2), nn.Linear(hidden, n_intents))
        counts = torch.tensor([label_counts.get(i, 1) for i in range(n_intents)], dtype=torch.float)
        self.register_buffer("class_weights", counts.sum() / (n_intents * counts))

    def forward(self, input_ids, offsets):
        return self.mlp(self.embedding(input_ids, offsets))

    def compute_loss(self, logits, labels):
        return F.cross_entropy(logits, labels, weight=self.class_weights)


def collate(examples, tokenizer):
    ids, offsets, labels = [], [0], []
    for text, label in examples:
        toks = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids.extend(toks)
        offsets.append(offsets[-1] + len(toks))
        labels.append(label)
    return torch.tensor(ids), torch.tensor(offsets[:-1]), torch.tensor(labels)


def train(model, data, tokenizer, device, epochs=3, bs=32):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        model.train()
        for start in range(0, len(data), bs):
            ids, offsets, labels = collate(data[start:start + bs], tokenizer)
            ids, offsets, labels = ids.to(device), offsets.to(device), labels.to(device)
            logits = model(ids, offsets)
            loss = model.compute_loss(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
    data = [("book a flight to boston", 0), ("what's the weather tomorrow", 1),
            ("play some jazz", 2), ("set an alarm for 7am", 3)] * 500
    label_counts = Counter(label for _, label in data)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = IntentClassifier(tokenizer.vocab_size, 4, label_counts).to(device)
    train(model, data, tokenizer, device)
