"""Plain PyTorch FSDP2 (`fully_shard`) on gloo/CPU: a 4-layer MLP, each Linear its own shard group.

FSDP1 (`FullyShardedDataParallel`) does not run here: on torch 2.13 it raises "FSDP needs a non-CPU
accelerator device, but no accelerator device is detected." FSDP2 runs on CPU with gloo: per step
ALLGATHERs of the parameters in forward and backward and REDUCE_SCATTERs of the gradients, then the
app's metrics ALLREDUCE (numel 2) and stop-flag BROADCAST (numel 1); a final BARRIER. Faults: faults.py.
"""
import argparse
import os
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faults  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402

COMPUTE_SECONDS = 0.1


def sharded_model() -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    for layer in net:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(net)
    return net


def batches(n: int, rank: int):
    generator = torch.Generator().manual_seed(1234 + rank)
    for _ in range(n):
        yield torch.randn(16, 32, generator=generator), torch.randint(0, 4, (16,), generator=generator)


def main() -> None:
    parser = argparse.ArgumentParser()
    faults.add_fault_args(parser)
    args = parser.parse_args()
    rank, world_size, local_rank = faults.identity()
    log = faults.setup_logging("fsdp_train", f"%(asctime)s %(levelname)s [rank {rank}] %(message)s")
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    log.info("host=%s pid=%d local_rank=%d world_size=%d", faults.hostname(), os.getpid(), local_rank, world_size)
    fault = faults.Fault(args, rank, world_size, log)
    net = sharded_model()
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    done = 0
    try:
        data = batches(fault.num_batches(args.steps), rank)
        for step in range(1, args.steps + 1):
            started = time.monotonic()
            fault.data(step)
            batch = next(data, None)
            if batch is None:
                break
            inputs, labels = batch
            data_time = time.monotonic() - started
            fault.before_forward(step)
            time.sleep(COMPUTE_SECONDS)
            loss = nn.functional.cross_entropy(net(inputs), labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            metrics = fault.sync_metrics(step, loss.item(), len(labels))
            log.info("fsdp step=%d/%d loss=%.4f data_ms=%.0f iter_ms=%.0f", step, args.steps,
                     (metrics[0] / metrics[1]).item(), 1000 * data_time, 1000 * (time.monotonic() - started))
            fault.after_step(step)
            done = step
    except RuntimeError:
        log.exception("training failed")
        faults.dump_flight_recorder(rank, log)
        raise
    faults.dump_flight_recorder(rank, log)
    if done < args.steps:
        fault.left_early(done)
        log.info("data exhausted after %d batches, leaving", done)
        return
    log.info("training finished")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
