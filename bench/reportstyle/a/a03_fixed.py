import math

import torch
from torch import nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0)]
        return self.dropout(x)


class TransformerClassifier(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, nclass, dropout=0.2):
        super().__init__()
        self.embedding = nn.Embedding(ntoken, d_model)
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers)
        self.classifier = nn.Linear(d_model, nclass)
        self.d_model = d_model

    def forward(self, src, src_key_padding_mask=None):
        src = self.embedding(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        out = self.transformer_encoder(src, src_key_padding_mask=src_key_padding_mask)
        return self.classifier(out.mean(dim=0))


def run(model, batches, device, epochs=5):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    for epoch in range(epochs):
        model.train()
        running = 0.0
        for tokens, labels in batches:
            tokens, labels = tokens.to(device), labels.to(device)
            pad_mask = (tokens == 0).t()
            logits = model(tokens, src_key_padding_mask=pad_mask)
            loss = criterion(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
        print(f"epoch {epoch}: loss {running / len(batches):.4f}")


if __name__ == "__main__":
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    batches = [(torch.randint(1, 20000, (64, 16)), torch.randint(0, 4, (16,))) for _ in range(100)]
    model = TransformerClassifier(20000, 256, 8, 512, 3, 4).to(device)
    run(model, batches, device)
