import argparse
import json

import numpy as np
import torch
import torch.nn as nn


class SentimentCNN(nn.Module):
    def __init__(self, vocab_size, embed_dim=128, n_filters=100, kernel_sizes=(3, 4, 5), n_classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.convs = nn.ModuleList([nn.Conv1d(embed_dim, n_filters, k) for k in kernel_sizes])
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(n_filters * len(kernel_sizes), n_classes)

    def forward(self, tokens):
        x = self.embed(tokens).transpose(1, 2)
        pooled = [torch.relu(conv(x)).max(dim=2).values for conv in self.convs]
        return self.fc(self.dropout(torch.cat(pooled, dim=1)))


def encode(text, vocab, max_len=64):
    ids = [vocab.get(w, 1) for w in text.lower().split()][:max_len]
    ids += [0] * (max_len - len(ids))
    return ids


def load_model(ckpt_path, vocab_size, device):
    model = SentimentCNN(vocab_size)
    checkpoint = torch.load(ckpt_path)
    model.load_state_dict(checkpoint["state_dict"])
    model.to(device)
    model.eval()
    return model


@torch.no_grad()
def predict(model, sentences, vocab, device):
    batch = torch.tensor(np.array([encode(s, vocab) for s in sentences]), device=device)
    probs = torch.softmax(model(batch), dim=-1)
    return probs[:, 1].tolist()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Run sentiment model on a text file")
    parser.add_argument("--checkpoint", default="checkpoints/best_model.pt")
    parser.add_argument("--vocab", default="checkpoints/vocab.json")
    parser.add_argument("--input", required=True)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with open(args.vocab) as f:
        vocab = json.load(f)
    model = load_model(args.checkpoint, len(vocab), device)
    with open(args.input) as f:
        lines = [l.strip() for l in f if l.strip()]
    for line, p in zip(lines, predict(model, lines, vocab, device)):
        print(f"{p:.3f}\t{line}")
