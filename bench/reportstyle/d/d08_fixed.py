"""Launch with: torchrun --nproc_per_node=4 train_lm_ddp.py --steps 1000"""
import argparse
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class RandomTokens(Dataset):
    def __init__(self, n, seq_len, vocab):
        g = torch.Generator().manual_seed(1234)
        self.data = torch.randint(0, vocab, (n, seq_len + 1), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i, :-1], self.data[i, 1:]


class TinyLM(nn.Module):
    def __init__(self, vocab, d_model=256, nhead=4, layers=4, seq_len=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, d_model))
        block = nn.TransformerEncoderLayer(d_model, nhead, 4 * d_model, 0.1, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers)
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        T = idx.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=idx.device)
        h = self.blocks(self.tok(idx) + self.pos[:, :T], mask=mask, is_causal=True)
        return self.head(self.ln(h))


def setup_distributed():
    dist.init_process_group(backend="nccl")
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(local_rank)
    return rank, local_rank, world_size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--seq-len", type=int, default=128)
    args = ap.parse_args()

    rank, local_rank, world_size = setup_distributed()
    torch.manual_seed(42 + rank)

    ds = RandomTokens(20000, args.seq_len, args.vocab)
    sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank, shuffle=True)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler, num_workers=2, pin_memory=True)

    model = TinyLM(args.vocab, seq_len=args.seq_len)
    model.to(local_rank)
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (1 + math.cos(math.pi * s / args.steps)))

    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.cuda(local_rank, non_blocking=True), y.cuda(local_rank, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            if step % 50 == 0 and rank == 0:
                print(f"step {step} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.2e}")
            if step >= args.steps:
                break
        epoch += 1

    if rank == 0:
        torch.save(model.module.state_dict(), "tinylm.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
