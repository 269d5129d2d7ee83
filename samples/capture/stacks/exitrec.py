"""Run one rank's command and record how it ended, for expected.json (mpirun and srun have no torchrun-like
record of every worker). Usage: python exitrec.py -- COMMAND...

Writes $CAPTURE_TRUTH_DIR/exit_rank<R>.json (pid, exit code, negative = signal, end time), outside
logs/, then ends the same way as the child (same exit code, or the same signal re-raised on itself),
so the launcher sees what it would have seen without the wrapper. Signals the launcher sends
(SIGTERM, SIGINT, SIGCONT, SIGUSR1/2) are passed on to the child. A rank killed together with
its wrapper (SLURM's memory kill SIGKILLs the whole step) leaves no record.
"""
import json
import os
import signal
import subprocess
import sys
import time


def rank_from_env() -> str:
    for var in ("OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"):
        if var in os.environ:
            return os.environ[var]
    return "0"


def main() -> None:
    command = sys.argv[sys.argv.index("--") + 1:]
    child = subprocess.Popen(command)
    forwarded = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCONT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: (forwarded.append(s), child.send_signal(s)))
    code = child.wait()
    truth_dir = os.environ.get("CAPTURE_TRUTH_DIR")
    if truth_dir:
        rank = rank_from_env()
        with open(os.path.join(truth_dir, f"exit_rank{rank}.json"), "w") as f:
            json.dump({"rank": int(rank), "pid": child.pid, "exit_code": code, "end_time": time.time(),
                       "signals_forwarded": [signal.Signals(s).name for s in forwarded]}, f)
    sys.stdout.flush()
    sys.stderr.flush()
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(5)
    sys.exit(code)


if __name__ == "__main__":
    main()
