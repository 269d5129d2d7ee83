"""Tiny data-parallel training loop (torch gloo on CPU) with one injectable fault.

Launched by srun: identity comes from SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID, the rendezvous
from MASTER_ADDR / MASTER_PORT set by the batch script. The injected fault and the collective
sequence number where it happens are written to $TRUTH_DIR (outside the user's logs) so that
expected.json is built from the run itself, not from reading the logs.
"""
import argparse
import ctypes
import faulthandler
import json
import logging
import os
import signal
import socket
import threading
import time

import torch
import torch.distributed as dist

GRAD_NUMEL = 1024
FAULTS = ("none", "exception", "segfault", "sigkill", "oom", "stall", "skip_allreduce", "wrong_numel", "hang_at_exit")


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--step-seconds", type=float, default=0.5, help="simulated compute per step")
    parser.add_argument("--fault", choices=FAULTS, default="none")
    parser.add_argument("--fault-rank", type=int, default=-1)
    parser.add_argument("--fault-step", type=int, default=5)
    return parser.parse_args()


class CollectiveCounter:
    """Counts collectives on the default PG; equals PyTorch's 1-based per-PG SeqNum of the last one."""

    def __init__(self):
        self.seq = 0

    def all_reduce(self, tensor):
        self.seq += 1
        dist.all_reduce(tensor)

    def broadcast(self, tensor, src):
        self.seq += 1
        dist.broadcast(tensor, src)


def record_truth(rank, host, fault, step, seq):
    truth_dir = os.environ.get("TRUTH_DIR")
    if not truth_dir:
        return
    os.makedirs(truth_dir, exist_ok=True)
    record = {"rank": rank, "host": host, "fault": fault, "step": step, "seq": seq, "time": time.time()}
    with open(os.path.join(truth_dir, f"fault-rank{rank}.json"), "w") as out:
        json.dump(record, out)


def allocate_until_killed():
    """Grow RSS by 100 MB per 0.2 s; the scheduler's memory poll (1 s) kills the step."""
    hoard = []
    while True:
        hoard.append(torch.ones(25 * 1024 * 1024))  # 100 MB, touched so it is resident
        time.sleep(0.2)


def sync_gradients(grad, collectives, mode):
    """This step's gradient allreduce, or the injected fault (`mode`) in its place; names stay neutral because they show in tracebacks."""
    if mode == "exception":
        raise RuntimeError("corrupt batch: label index 1187 out of range for 1000 classes")
    if mode == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV in the interpreter, no Python traceback
    if mode == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "oom":
        allocate_until_killed()
    if mode == "stall":
        while True:  # e.g. a dataloader worker deadlock: alive, silent, never reaches the allreduce
            time.sleep(3600)
    if mode == "skip_allreduce":
        return  # e.g. a rank-dependent branch that skips gradient sync for this step
    if mode == "wrong_numel":
        collectives.all_reduce(torch.cat([grad, grad]))  # a bucket of a different size
        return
    collectives.all_reduce(grad)


def main():
    args = parse_args()
    rank = int(os.environ["SLURM_PROCID"])
    world_size = int(os.environ["SLURM_NTASKS"])
    local_rank = int(os.environ["SLURM_LOCALID"])
    host = os.environ.get("SLURMD_NODENAME", socket.gethostname())
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(local_rank))
    torch.set_num_threads(1)
    # Print every thread's Python stack when SLURM sends SIGTERM (time limit, scancel, --kill-on-bad-exit),
    # then die of SIGTERM as before: shows where each rank was waiting.
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)

    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s [rank {rank}] %(message)s")
    log = logging.getLogger("train")
    print(f"[rank {rank}] host={host} pid={os.getpid()} local_rank={local_rank} world_size={world_size}", flush=True)

    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    log.info("process group ready: backend=gloo master=%s:%s", os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])
    collectives = CollectiveCounter()

    torch.manual_seed(rank)
    weights = torch.randn(GRAD_NUMEL)
    collectives.broadcast(weights, src=0)

    for step in range(1, args.steps + 1):
        time.sleep(args.step_seconds)
        grad = torch.randn(GRAD_NUMEL) * 0.01 + weights * 1e-3
        mode = args.fault if rank == args.fault_rank and step == args.fault_step else "none"
        if mode != "none":  # nothing logged: a real fault does not announce itself
            record_truth(rank, host, mode, step, collectives.seq + 1)
        sync_gradients(grad, collectives, mode)
        weights -= 0.1 * grad / world_size
        loss = torch.tensor([float(weights.pow(2).mean())])
        collectives.all_reduce(loss)
        print(f"[rank {rank}] step {step}/{args.steps} loss {loss.item() / world_size:.6f}", flush=True)

    log.info("training done after %d collectives", collectives.seq)
    dist.destroy_process_group()
    if args.fault == "hang_at_exit" and rank == args.fault_rank:
        # every rank completed every collective: no seq where they diverged
        record_truth(rank, host, "hang_at_exit", args.steps, None)
        # e.g. a checkpoint upload thread that never returns: the interpreter waits for it at exit
        threading.Thread(target=lambda: time.sleep(1e9), name="upload").start()


if __name__ == "__main__":
    main()
