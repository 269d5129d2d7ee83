"""`torchrun`, plus a record of how every worker ended, for the sample's expected.json.

The `torchrun` console script is `torch.distributed.run:main`; this runs the same function with the
same arguments, so the console output is torchrun's. torchrun itself only reports the exit codes
of the workers it saw fail in one monitoring pass; the workers it then terminates are never
reported. This wrapper notes, per local rank, the pid, the global rank, the exit code and whether
the agent had to signal the worker, and writes them to $CAPTURE_TRUTH_DIR/workers.json (outside the log directory).
"""

import json
import os
import sys
import threading
import time

from torch.distributed.elastic.multiprocessing.subprocess_handler.subprocess_handler import SubprocessHandler
from torch.distributed.run import main

workers: list[SubprocessHandler] = []
global_ranks: dict[int, int] = {}  # local rank -> the global rank the agent gave it (its RANK)
signalled_by_agent: set[int] = set()
exit_seen_at: dict[int, float] = {}  # local rank -> wall time its exit was first observed
EXIT_POLL_SECONDS = 0.05
original_init = SubprocessHandler.__init__
original_close = SubprocessHandler.close


def tracking_init(self, entrypoint, args, env, *rest, **kwargs):
    original_init(self, entrypoint, args, env, *rest, **kwargs)
    workers.append(self)
    global_ranks[self.local_rank_id] = int(env["RANK"])


def tracking_close(self, death_sig=None):
    if self.proc.poll() is None:  # still running: the agent is about to kill it
        signalled_by_agent.add(self.local_rank_id)
    original_close(self, death_sig)


def watch_exits() -> None:
    """Note when each worker ends, to 50 ms, so the true order of failures is known."""
    while True:
        for worker in list(workers):
            if worker.local_rank_id not in exit_seen_at and worker.proc.poll() is not None:
                exit_seen_at[worker.local_rank_id] = time.time()
        time.sleep(EXIT_POLL_SECONDS)


def write_worker_outcomes() -> None:
    outcomes = {}
    for worker in workers:
        try:
            worker.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - still record what is known
            pass
        outcomes[str(worker.local_rank_id)] = {
            "pid": worker.proc.pid,
            "global_rank": global_ranks.get(worker.local_rank_id),
            "exit_code": worker.proc.returncode,
            "signalled_by_agent": worker.local_rank_id in signalled_by_agent,
            "exit_seen_at": exit_seen_at.get(worker.local_rank_id),
        }
    with open(os.path.join(os.environ["CAPTURE_TRUTH_DIR"], "workers.json"), "w") as f:
        json.dump(outcomes, f, indent=1)


if __name__ == "__main__":
    SubprocessHandler.__init__ = tracking_init
    SubprocessHandler.close = tracking_close
    threading.Thread(target=watch_exits, daemon=True).start()
    try:
        main()
    finally:
        write_worker_outcomes()
    sys.exit(0)
