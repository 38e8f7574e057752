import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F


class SentimentGRU(nn.Module):
    def __init__(self, vocab_size=30000, emb=200, hidden=256, n_classes=3):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb, padding_idx=0)
        self.gru = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, n_classes)

    def forward(self, tokens):
        out, _ = self.gru(self.embedding(tokens))
        return self.fc(out.max(dim=1).values)


def train(args):
    device = torch.device("cuda")
    model = SentimentGRU().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(args.steps):
        tokens = torch.randint(1, 30000, (64, 50), device=device)
        labels = torch.randint(0, 3, (64,), device=device)
        loss = F.cross_entropy(model(tokens), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "step": args.steps, "loss": loss.item()}, args.ckpt)
    print("saved", args.ckpt)


def load_for_inference(path):
    checkpoint = torch.load(path)
    model = SentimentGRU()
    model.load_state_dict(checkpoint["model"])
    model.eval()
    print(f"loaded checkpoint from step {checkpoint['step']} (loss {checkpoint['loss']:.3f})")
    return model


@torch.no_grad()
def serve(args):
    # the inference box has no GPU, everything runs on the CPU here
    torch.set_num_threads(4)
    model = load_for_inference(args.ckpt)
    batch = torch.randint(1, 30000, (8, 50))
    probs = F.softmax(model(batch), dim=-1)
    for i, p in enumerate(probs):
        print(i, ["neg", "neu", "pos"][p.argmax().item()], f"{p.max().item():.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["train", "serve"])
    parser.add_argument("--ckpt", default="sentiment_gru.pt")
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()
    if args.mode == "train":
        train(args)
    else:
        serve(args)
