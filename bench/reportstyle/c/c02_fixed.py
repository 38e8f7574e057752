import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class TextClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model=256, nhead=8,
                 num_layers=4, max_len=512, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.tok_emb = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=4 * d_model, dropout=0.1, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def embed(self, input_ids):
        bsz, seq_len = input_ids.shape
        positions = torch.arange(seq_len, device=input_ids.device).unsqueeze(0).expand(bsz, seq_len)
        return self.tok_emb(input_ids) + self.pos_emb(positions)

    def forward(self, input_ids):
        pad_mask = input_ids.eq(self.pad_id)
        h = self.encoder(self.embed(input_ids), src_key_padding_mask=pad_mask)
        h = self.norm(h)
        keep = (~pad_mask).unsqueeze(-1).type_as(h)
        pooled = (h * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        return self.head(pooled)


def make_fake_data(n=2048, seq_len=64, vocab=5000, classes=4):
    ids = torch.randint(1, vocab, (n, seq_len))
    lengths = torch.randint(8, seq_len + 1, (n,))
    ids[torch.arange(seq_len).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    labels = torch.randint(0, classes, (n,))
    return TensorDataset(ids, labels)


def train(epochs=3):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = TextClassifier(vocab_size=5000, num_classes=4).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    loader = DataLoader(make_fake_data(), batch_size=32, shuffle=True)
    for epoch in range(epochs):
        model.train()
        total, correct, running = 0, 0, 0.0
        for ids, labels in loader:
            ids, labels = ids.to(device), labels.to(device)
            logits = model(ids)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            running += loss.item() * ids.size(0)
            correct += (logits.argmax(-1) == labels).sum().item()
            total += ids.size(0)
        print(f"epoch {epoch}: loss={running / total:.4f} acc={correct / total:.3f}")


if __name__ == "__main__":
    train()
