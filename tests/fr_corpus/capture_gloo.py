"""Real Flight Recorder dumps from PyTorch's gloo backend (CPU), for the cases of this corpus that
gloo can produce. Run with a torch 2.x CPU install (not needed by the tests; the dumps are committed):

    /work/torchenv-fr/bin/python tests/fr_corpus/capture_gloo.py tests/fr_corpus

gloo records collectives in the Flight Recorder (profiling names `gloo:<op>`, state always
`scheduled`: it records no start/completion), but no point-to-point op, and no usable pg_config
(one entry named '' whose ranks are the last group registered). gloo writes no dump by itself
either: each rank writes `_dump_fr_trace()` itself, as samples/capture/torchrun/train.py does.

gloo_real_healthy_rooted_alltoall/: 4 ranks; uneven all_to_all_single, scatter (root 0), gather
    (root 2), broadcast (root 1), reduce (root 3), all_gather, all_reduce; every rank dumps at the end.
gloo_real_killed_rank/: 4 ranks; rank 2 is SIGKILLed at step 3 before its all_reduce and leaves
    no dump; the others fail in that all_reduce (peer gone) and dump.
"""
import datetime
import os
import signal
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch._C._distributed_c10d import _dump_fr_trace

WORLD = 4
TIMEOUT = datetime.timedelta(seconds=6)


def dump(out_dir: str, rank: int) -> None:
    with open(os.path.join(out_dir, f"fr_trace_rank_{rank}"), "wb") as f:
        f.write(_dump_fr_trace(includeStackTraces=False))


def rooted_alltoall(rank: int, out_dir: str) -> None:
    grads = torch.ones(8)
    dist.all_reduce(grads)
    in_splits = [rank + 1] * WORLD                     # rank r sends r+1 elements to everyone
    out_splits = [r + 1 for r in range(WORLD)]         # and receives r+1 from rank r
    out = torch.zeros(sum(out_splits))
    dist.all_to_all_single(out, torch.full((sum(in_splits),), float(rank)), out_splits, in_splits)
    dist.scatter(torch.zeros(2), [torch.ones(2) for _ in range(WORLD)] if rank == 0 else None, src=0)
    dist.gather(torch.ones(3), [torch.zeros(3) for _ in range(WORLD)] if rank == 2 else None, dst=2)
    dist.broadcast(grads, src=1)
    dist.reduce(grads, dst=3)
    dist.all_gather([torch.zeros(2) for _ in range(WORLD)], torch.ones(2))
    dist.all_reduce(grads)
    dump(out_dir, rank)


def killed_rank(rank: int, out_dir: str) -> None:
    params = torch.zeros(16)
    dist.broadcast(params, src=0)
    for step in range(1, 6):
        if step == 3 and rank == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            dist.all_reduce(torch.full((8,), float(rank)))
            dist.all_reduce(torch.ones(2))
        except Exception as e:   # the peer is gone: gloo fails the collective on the others
            print(f"[rank {rank}] step {step}: {type(e).__name__}", flush=True)
            dump(out_dir, rank)
            return


def worker(rank: int, port: int, scenario: str, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORLD), TORCH_FR_BUFFER_SIZE="200")
    dist.init_process_group("gloo", timeout=TIMEOUT)
    {"rooted_alltoall": rooted_alltoall, "killed_rank": killed_rank}[scenario](rank, out_dir)
    os._exit(0)   # a failed gloo PG cannot be torn down cleanly


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(root: str) -> None:
    for scenario, case in (("rooted_alltoall", "gloo_real_healthy_rooted_alltoall"),
                           ("killed_rank", "gloo_real_killed_rank")):
        out_dir = os.path.join(root, case)
        os.makedirs(out_dir, exist_ok=True)
        ctx = mp.start_processes(worker, args=(free_port(), scenario, out_dir), nprocs=WORLD,
                                 join=False, start_method="spawn")
        while not ctx.join(timeout=60, grace_period=1):
            pass


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except mp.ProcessExitedException as e:   # the killed rank: expected
        print(f"(expected) {e}")
