"""Style 3: a "research repo" train script: argparse + logging.basicConfig with
a pipe-separated format, the rank put into every message by the author, the
elastic @record decorator on main, DDP, a validation loss all_reduce'd by hand.
Run under the legacy launcher or torchrun:

    python -m torch.distributed.launch --use-env --nproc_per_node 3 log_train.py --epochs 2
    torchrun --tee 3 --log-dir runs/logs --nproc_per_node 2 log_train.py --epochs 2
"""
import argparse
import logging
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

import truth  # fault injection + ground truth (silent unless the capture harness asks)

logging.basicConfig(
    format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
    datefmt="%Y-%m-%d %H:%M:%S",
    level=logging.INFO,
)
logger = logging.getLogger("train")


class TokenDataset(Dataset):
    """Fake next-token data: (context ids, target id) pairs."""

    def __init__(self, n, vocab=256, ctx=16, seed=0, rank=0, batch_size=16, train=True):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randint(0, vocab, (n, ctx), generator=g)
        self.y = (self.x.sum(dim=1) % vocab)
        self.rank, self.batch_size, self.train = rank, batch_size, train

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.train and truth.on_fetch(self.rank, self.batch_size) == "corrupt":
            raise OSError(f"shard-00003.bin: unexpected end of record at offset {i * 4096} (truncated write?)")
        return self.x[i], self.y[i]


class TinyLM(nn.Module):
    def __init__(self, vocab=256, dim=64, ctx=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim * ctx, 256), nn.GELU(), nn.Linear(256, vocab))

    def forward(self, x):
        return self.mlp(self.emb(x).flatten(1))


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--train-samples", type=int, default=640)
    p.add_argument("--val-samples", type=int, default=128)
    return p.parse_args()


@torch.no_grad()
def validate(model, loader, rank, world_size):
    model.eval()
    total = torch.zeros(2)
    for x, y in loader:
        total[0] += nn.functional.cross_entropy(model(x), y, reduction="sum")
        total[1] += len(y)
    if truth.wrong_size(rank, "all_reduce of the validation loss"):
        total = torch.cat([total, torch.zeros(1)])
    if not truth.skip_collective(rank, "all_reduce of the validation loss"):
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
    model.train()
    return (total[0] / total[1]).item()


@record
def main():
    args = parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=20))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    logger.info(f"[rank {rank}/{world_size}] initialized process group (backend=gloo, local_rank={local_rank})")
    torch.manual_seed(1234)

    train_ds = TokenDataset(args.train_samples, seed=0, rank=rank, batch_size=args.batch_size)
    val_ds = TokenDataset(args.val_samples, seed=1, rank=rank, train=False)
    train_sampler = DistributedSampler(train_ds, shuffle=True)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=64, sampler=DistributedSampler(val_ds, shuffle=False))

    model = DDP(TinyLM())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    n_params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        logger.info(f"[rank {rank}] model has {n_params/1e6:.2f}M parameters, {len(train_dl)} steps/epoch")

    step = 0
    stopped = False
    t0 = time.time()
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        for x, y in train_dl:
            if truth.at_step(rank, step):
                logger.info(f"[rank {rank}] reached end of local shard at step {step}, finishing")
                stopped = True
                break
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step % args.log_every == 0:
                logger.info(f"[rank {rank}] epoch {epoch} step {step} | loss {loss.item():.4f} | "
                            f"{(time.time() - t0) * 1000 / (step + 1):.1f} ms/step")
            step += 1
        if stopped:
            break
        truth.set_step(epoch)
        val_loss = validate(model, val_dl, rank, world_size)
        logger.info(f"[rank {rank}] epoch {epoch} done | val_loss {val_loss:.4f} | ppl {math.exp(val_loss):.1f}")
        dist.barrier()

    if rank == 0:
        logger.info("training finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
