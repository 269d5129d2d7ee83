"""Exit-code recorder for one rank: `python rankexit.py -- CMD ARGS...`.

Used by capture.py between the launcher (torchrun, torch.distributed.launch,
mpirun) and the training script, so every rank's exit code is known even when
the launcher reports only the first failure. It prints nothing. It runs CMD as
its child, forwards the signals a launcher sends (SIGTERM, SIGINT, SIGHUP,
SIGUSR1, SIGUSR2), writes CAPTURE_TRUTH_DIR/exit-rank<R>.json, and then exits
the way the child did (same code, or the same signal), so the launcher sees
what it would have seen without it. The child is killed if this wrapper is.
"""
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time


def _rank():
    for k in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        if k in os.environ:
            return int(os.environ[k])
    return -1


def _pdeathsig():
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def main():
    argv = sys.argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    rank = _rank()
    start = time.time()
    child = subprocess.Popen(argv, preexec_fn=_pdeathsig)
    forwarded = []

    def fwd(signum, _frame):
        forwarded.append(signal.Signals(signum).name)
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(s, fwd)
    while True:
        try:
            rc = child.wait()
            break
        except InterruptedError:
            continue
    out = os.environ.get("CAPTURE_TRUTH_DIR")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"exit-rank{rank}.json"), "w") as f:
            json.dump({"rank": rank, "exit_code": rc, "pid": child.pid,
                       "start": start, "time": time.time(),
                       "signals_forwarded": forwarded}, f)
    sys.stdout.flush()
    if rc < 0:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
        time.sleep(5)
        sys.exit(128 - rc)
    sys.exit(rc)


if __name__ == "__main__":
    main()
