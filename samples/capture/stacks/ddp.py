"""Plain PyTorch DDP on gloo/CPU: a 4-layer MLP, SGD, --steps steps of 16 synthetic samples.

Launched by torchrun, mpirun (identity from OMPI_COMM_WORLD_*) or srun (SLURM_PROCID/...); env://
rendezvous (MASTER_ADDR/MASTER_PORT). Per step: DDP's gradient ALLREDUCE (one bucket), then the app's
metrics ALLREDUCE (numel 2) and stop-flag BROADCAST (numel 1); a final BARRIER. Faults: faults.py. The identity line (host, pid, ranks, world size)
is logged before init_process_group, as the launcher gave it.
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
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

COMPUTE_SECONDS = 0.1


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


def batches(n: int, rank: int):
    generator = torch.Generator().manual_seed(1234 + rank)
    for _ in range(n):
        yield torch.randn(16, 32, generator=generator), torch.randint(0, 4, (16,), generator=generator)


def main() -> None:
    parser = argparse.ArgumentParser()
    faults.add_fault_args(parser)
    args = parser.parse_args()
    rank, world_size, local_rank = faults.identity()
    log = faults.setup_logging("train", f"%(asctime)s %(levelname)s [rank {rank}] %(message)s")
    log.info("host=%s pid=%d local_rank=%d world_size=%d", faults.hostname(), os.getpid(), local_rank, world_size)
    fault = faults.Fault(args, rank, world_size, log)
    fault.before_init()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    ddp = DistributedDataParallel(model())
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
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
            loss = nn.functional.cross_entropy(ddp(inputs), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            metrics = fault.sync_metrics(step, loss.item(), len(labels))
            log.info("step %d/%d loss %.4f data_time %.3fs step_time %.3fs", step, args.steps,
                     (metrics[0] / metrics[1]).item(), data_time, time.monotonic() - started)
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
        return  # exits cleanly; the others are still training
    log.info("training finished")
    dist.barrier()
    fault.after_training()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
