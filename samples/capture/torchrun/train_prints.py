"""A DDP fine-tuning script of the print-and-progress-bar kind, on gloo/CPU, with one fault.

Unlike train.py (logging module, one log line per step), this one reports like many hand-written
training scripts: plain `print(f"Rank {rank}: ...")` lines per setup stage and a tqdm bar per rank
over its own data loader. Run under torchrun; --scenario picks the fault:

  stall_before_ddp  the fault rank's "moving model" stage blocks (a slow read of the pretrained
                    weights from shared storage); the others print "wrapping model in
                    DistributedDataParallel" and wait in DDP's first collective. Nobody times out
                    first: the user presses Ctrl-C (capture.py sends SIGINT to the agent).
  uneven_shards_val the training set is 4*world-1 shard files dealt round-robin, so the last rank
                    has one shard (3 batches) fewer; with gradient accumulation (no_sync) it
                    finishes its epoch, validates, and all_reduces its validation totals on a
                    separate metrics process group (created by every rank at setup) while the
                    others are still issuing gradient all-reduces on the default group: every rank
                    waits until the process-group timeout. (On the default group that all_reduce
                    would meet the others' gradient bucket: gloo aborts the receiver of the larger
                    message, "op.preamble.length <= op.nbytes", a crash rather than an early exit.)
  uneven_shards_health the same uneven shards, with a health check before every synchronised
                    step (dist.monitored_barrier, half the process-group timeout): the short rank
                    finishes its epoch, says its training finished and waits for the others in a
                    final barrier; rank 0's next health check names it as the rank that never came.

The rank where the fault happens writes what it did to $CAPTURE_TRUTH_DIR (outside the logs):
its stage, and the 1-based SeqNum of the next collective on the default PG, the one where it
left the common path.
"""

import argparse
import time
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm

from train import next_seq, write_truth  # the sibling workload's truth record, one format for capture.py

SCENARIOS = ("stall_before_ddp", "uneven_shards_val", "uneven_shards_health")
BATCH_SIZE = 16
BATCHES_PER_SHARD = 3
SHARDS_PER_RANK = 4
ACCUMULATION_STEPS = 2
COMPUTE_SECONDS = 0.25  # simulated per-batch compute (longer than tqdm's 0.1 s refresh interval)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=SCENARIOS, required=True)
    parser.add_argument("--fault-rank", type=int, default=2, help="stall_before_ddp: the rank whose load stalls")
    parser.add_argument("--timeout", type=float, default=20.0, help="process-group timeout, seconds")
    parser.add_argument("--stall-seconds", type=float, default=120.0)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--record", action="store_true", help="accepted for capture.py; unused")
    return parser.parse_args()


class ImageHead(nn.Module):
    """A small classifier head over precomputed 128-d image features."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 256), nn.ReLU(),
                                 nn.Linear(256, 10))

    def forward(self, x):
        return self.net(x)


def load_pretrained(args, rank: int, model: nn.Module) -> None:
    """Read the pretrained weights from shared storage (here: generated)."""
    if args.scenario == "stall_before_ddp" and rank == args.fault_rank:
        write_truth(args, rank, stage="moving model", seq=next_seq(),
                    action=f"blocked {args.stall_seconds:.0f} s reading the pretrained weights before DDP construction")
        time.sleep(args.stall_seconds)  # a hung NFS read
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.5)


def shard_names(world_size: int) -> list[str]:
    return [f"train-{k:05d}.pt" for k in range(SHARDS_PER_RANK * world_size - 1)]


def make_loader(rank: int, names: list[str]) -> DataLoader:
    features, labels = [], []
    for name in names:
        g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
        features.append(torch.randn(BATCHES_PER_SHARD * BATCH_SIZE, 128, generator=g))
        labels.append(torch.randint(0, 10, (BATCHES_PER_SHARD * BATCH_SIZE,), generator=g))
    return DataLoader(TensorDataset(torch.cat(features), torch.cat(labels)), batch_size=BATCH_SIZE, shuffle=False)


def validate(model: nn.Module, loader: DataLoader, group=None) -> torch.Tensor:
    """Accuracy on this rank's validation shard; summed over ranks on `group` if one is given."""
    model.eval()
    totals = torch.zeros(2)
    with torch.no_grad():
        for x, y in loader:
            totals += torch.tensor([float((model.module(x).argmax(1) == y).sum()), float(len(y))])
    model.train()
    if group is not None:
        dist.all_reduce(totals, group=group)
    return totals


def main() -> None:
    args = parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.timeout))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    metrics_group = dist.new_group() if args.scenario == "uneven_shards_val" else None  # CPU-side metrics

    print(f"Rank {rank}: building model", flush=True)
    model = ImageHead()
    print(f"Rank {rank}: moving model to cpu", flush=True)
    load_pretrained(args, rank, model)
    model.to("cpu")
    print(f"Rank {rank}: wrapping model in DistributedDataParallel", flush=True)
    model = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    names = shard_names(world_size)
    mine = names[rank::world_size]
    longest = max(len(names[r::world_size]) for r in range(world_size))
    train_loader = make_loader(rank, mine)
    val_loader = make_loader(rank, [f"val-{rank:05d}.pt"])
    print(f"Rank {rank}: {len(mine)} shards, {len(train_loader)} batches per epoch", flush=True)

    for epoch in range(args.epochs):
        bar = tqdm(train_loader, desc=f"rank {rank} epoch {epoch}")
        for i, (x, y) in enumerate(bar):
            time.sleep(COMPUTE_SECONDS)
            sync = (i + 1) % ACCUMULATION_STEPS == 0 or i + 1 == len(train_loader)
            if sync:
                if args.scenario == "uneven_shards_health":   # every rank still here?
                    dist.monitored_barrier(timeout=timedelta(seconds=args.timeout / 2))
                loss = nn.functional.cross_entropy(model(x), y) / ACCUMULATION_STEPS
                loss.backward()  # gradient ALLREDUCE
                optimizer.step()
                optimizer.zero_grad()
            else:
                with model.no_sync():
                    loss = nn.functional.cross_entropy(model(x), y) / ACCUMULATION_STEPS
                    loss.backward()
            bar.set_postfix(loss=f"{loss.item() * ACCUMULATION_STEPS:.4f}")
        bar.close()
        if args.scenario == "uneven_shards_health" and epoch == args.epochs - 1:
            if len(mine) < longest:
                write_truth(args, rank, stage=f"epoch {epoch} end", seq=next_seq(),
                            action=f"finished its epoch after {len(train_loader)} batches (others have "
                                   f"{longest * BATCHES_PER_SHARD}) and waited in a final barrier while the others "
                                   f"still ran health checks and gradient all-reduces")
            print(f"Rank {rank}: Training finished after {len(train_loader)} batches, waiting for the other ranks", flush=True)
            dist.barrier()
        elif len(mine) < longest and epoch == args.epochs - 1:
            write_truth(args, rank, stage=f"epoch {epoch} validation", seq=next_seq(),
                        action=f"finished its epoch after {len(train_loader)} batches (others have "
                               f"{longest * BATCHES_PER_SHARD}), all_reduced its validation totals on the metrics "
                               f"group while the others still all_reduced gradients")
        correct, seen = validate(model, val_loader, metrics_group).tolist()
        print(f"Rank {rank}: epoch {epoch} val accuracy {correct / seen:.4f}", flush=True)

    print(f"Rank {rank}: training done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
