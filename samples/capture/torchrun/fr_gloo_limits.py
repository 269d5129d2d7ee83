"""What gloo's Flight Recorder records, and what it cannot: why some Flight Recorder rules have no gloo capture.

Usage (from the repository root, ~15 s): /work/torchenv/bin/python samples/capture/torchrun/fr_gloo_limits.py

Two ranks on gloo (CPU) run, in this order: an all_reduce; send/recv, isend/irecv and
batch_isend_irecv between them; an empty coalescing block; a monitored_barrier; an all_reduce;
then an all_reduce that rank 1 never joins (rank 0 times out in it). Each rank then dumps its
buffer with _dump_fr_trace() and prints, per entry, collective_seq_id, op, state and whether a
start time was seen, plus pg_status. What it shows on torch 2.13.0+cpu:

* no point-to-point entry at all (send, recv, isend, irecv, batch_isend_irecv): a gloo dump
  cannot show a wrong peer, a send/recv size mismatch or an unposted recv;
* every entry `scheduled`, with no start or completion time, whether it completed, failed or
  timed out (last_started_collective -1): a gloo dump cannot show "some ranks started, one is
  still scheduled", nor "every rank started and none completed";
* the empty coalescing block takes no seq; monitored_barrier takes two collective seqs without
  an entry (the hole that tr-lone_health_check-4-fr is made of).
"""

import datetime
import os
import pickle
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.distributed_c10d import _coalescing_manager

WORLD = 2


def worker(rank: int, port: int) -> None:
    os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=5))
    from torch._C._distributed_c10d import _dump_fr_trace

    peer = 1 - rank
    dist.all_reduce(torch.ones(4))
    if rank == 0:
        dist.send(torch.ones(3), peer)
    else:
        dist.recv(torch.zeros(3), peer)
    for work in [dist.isend(torch.ones(2), peer), dist.irecv(torch.zeros(2), peer)]:
        work.wait()
    for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(5), peer),
                                        dist.P2POp(dist.irecv, torch.zeros(5), peer)]):
        work.wait()
    with _coalescing_manager(async_ops=True) as coalesced:
        pass
    coalesced.wait()
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=5))
    dist.all_reduce(torch.ones(4))
    if rank == 0:
        try:
            dist.all_reduce(torch.ones(6))  # rank 1 never joins: times out
        except RuntimeError as exc:
            print(f"rank 0: all_reduce timed out: {str(exc)[:80]}", flush=True)
    dump = pickle.loads(_dump_fr_trace())
    lines = [f"rank {rank}: {len(dump['entries'])} entries, pg_status {dump['pg_status']}"]
    for e in dump["entries"]:
        lines.append(f"rank {rank}:   seq {e['collective_seq_id']} p2p_seq {e['p2p_seq_id']} {e['profiling_name']} "
                     f"state={e['state']} started_ns={e['time_discovered_started_ns']} "
                     f"completed_ns={e['time_discovered_completed_ns']} retired={e['retired']}")
    if rank == 1:
        time.sleep(8)  # outlive rank 0's timeout, so it times out with a live peer
    print("\n".join(lines), flush=True)


def main() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.start_processes(worker, args=(port,), nprocs=WORLD, start_method="spawn")


if __name__ == "__main__":
    main()
