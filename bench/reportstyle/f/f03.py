import torch
import torch.nn as nn
import torch.nn.functional as F


class WordLSTM(nn.Module):
    def __init__(self, vocab_size, emb_dim=128, hidden_size=256, num_layers=2, dropout=0.3):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.lstm = nn.LSTM(emb_dim, hidden_size, num_layers, dropout=dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(hidden_size, vocab_size)
        self.device = next(self.parameters()).device

    def init_hidden(self, batch_size):
        h = torch.zeros(self.num_layers, batch_size, self.hidden_size, device=self.device)
        c = torch.zeros(self.num_layers, batch_size, self.hidden_size, device=self.device)
        return h, c

    def forward(self, x, hidden):
        emb = self.dropout(self.embedding(x))
        out, hidden = self.lstm(emb, hidden)
        logits = self.fc(self.dropout(out))
        return logits, hidden


def batchify(data, batch_size):
    n = data.size(0) // batch_size
    return data[: n * batch_size].view(batch_size, n)


def detach(hidden):
    return tuple(h.detach() for h in hidden)


def train_epoch(model, data, optimizer, bptt=35, clip=0.25):
    model.train()
    hidden = model.init_hidden(data.size(0))
    total = 0.0
    for i in range(0, data.size(1) - 1, bptt):
        seq_len = min(bptt, data.size(1) - 1 - i)
        x = data[:, i:i + seq_len]
        y = data[:, i + 1:i + 1 + seq_len]
        hidden = detach(hidden)
        logits, hidden = model(x, hidden)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        total += loss.item()
    return total / max(1, (data.size(1) - 1) // bptt)


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    vocab_size = 1000
    corpus = torch.randint(0, vocab_size, (200_000,))
    train_data = batchify(corpus, 20).to(device)

    model = WordLSTM(vocab_size)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(3):
        loss = train_epoch(model, train_data, optimizer)
        print(f"epoch {epoch} | train loss {loss:.3f} | ppl {torch.exp(torch.tensor(loss)):.1f}")
