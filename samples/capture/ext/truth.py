"""Fault injection and ground-truth recording for the ext/ capture scripts.

Imported by every training script in this folder. It does nothing unless the
capture harness (capture.py) set these environment variables:

  FAULT_SCENARIO     healthy | crash_exception | crash_sigkill | hang_dataload |
                     missing_collective | size_mismatch | early_exit
  FAULT_RANK         global rank that misbehaves
  FAULT_STEP         0-based training step (batch index, counted over the
                     whole run) at which it misbehaves
  CAPTURE_TRUTH_DIR  folder OUTSIDE the run's logs/ where the truth goes

Nothing here prints: the truth goes to json files in CAPTURE_TRUTH_DIR only,
so the logs hold exactly what the script and the launcher printed.
"""
import json
import os
import signal
import time

SCENARIO = os.environ.get("FAULT_SCENARIO", "healthy")
FAULT_RANK = int(os.environ.get("FAULT_RANK", "-1"))
FAULT_STEP = int(os.environ.get("FAULT_STEP", "-1"))
TRUTH_DIR = os.environ.get("CAPTURE_TRUTH_DIR")

_fired = set()
_fetched = 0


def _next_seq():
    """1-based SeqNum the next collective on the default PG will get."""
    try:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d as c10d
        if not dist.is_initialized():
            return None
        return int(c10d._get_default_group()._get_sequence_number_for_group()) + 1
    except Exception:  # pragma: no cover - private API may move
        return None


def _write(name, payload):
    if not TRUTH_DIR:
        return
    os.makedirs(TRUTH_DIR, exist_ok=True)
    tmp = os.path.join(TRUTH_DIR, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(TRUTH_DIR, name))


def record(rank, step, action, **extra):
    payload = {"rank": rank, "scenario": SCENARIO, "step": step,
               "seq": _next_seq(), "pg": "0", "action": action,
               "pid": os.getpid(), "time": time.time()}
    payload.update(extra)
    _write(f"injected-rank{rank}.json", payload)


def _mine(rank, scenario, step):
    return (SCENARIO == scenario and rank == FAULT_RANK and step == FAULT_STEP
            and scenario not in _fired)


def on_fetch(rank, batch_size):
    """Call from Dataset.__getitem__ (num_workers=0) for data-loading faults.

    Counts the samples this process fetched; on the first sample of batch
    FAULT_STEP it records the truth and returns "corrupt" (the caller raises
    its own data error, so the traceback is the script's) for crash_exception,
    or sleeps forever for hang_dataload. Otherwise returns None.
    """
    global _fetched
    step = _fetched // batch_size
    first = _fetched % batch_size == 0
    _fetched += 1
    if not first:
        return None
    if _mine(rank, "crash_exception", step):
        _fired.add("crash_exception")
        record(rank, step, "raise a data error (OSError: truncated image) from Dataset.__getitem__")
        return "corrupt"
    if _mine(rank, "hang_dataload", step):
        _fired.add("hang_dataload")
        record(rank, step, "sleep forever in Dataset.__getitem__ (stalled reader)")
        while True:
            time.sleep(3600)
    return None


def at_step(rank, step):
    """Call at the top of each training step. Returns True if the loop must
    stop early (early_exit); kills the process for crash_sigkill."""
    if _mine(rank, "crash_sigkill", step):
        _fired.add("crash_sigkill")
        record(rank, step, "SIGKILL to self at the start of the step (as the OOM killer would)")
        os.kill(os.getpid(), signal.SIGKILL)
    if _mine(rank, "early_exit", step):
        _fired.add("early_exit")
        record(rank, step, "leave the training loop early and exit cleanly (exit code 0)")
        return True
    return False


_step_for_collectives = {"step": -1}


def set_step(step):
    _step_for_collectives["step"] = step


def skip_collective(rank, what):
    """True when this rank must skip the collective `what` (missing_collective)."""
    step = _step_for_collectives["step"]
    if _mine(rank, "missing_collective", step):
        _fired.add("missing_collective")
        record(rank, step, f"skip one collective: {what}")
        return True
    return False


def wrong_size(rank, what):
    """True when this rank must issue `what` with a tensor of another size."""
    step = _step_for_collectives["step"]
    if _mine(rank, "size_mismatch", step):
        _fired.add("size_mismatch")
        record(rank, step, f"issue {what} with a tensor of another size")
        return True
    return False


_spawn_contexts = []


def _install_spawn_recorder():
    """Record each mp.spawn child's exit code from the parent, at its exit.

    Keeps a reference to every ProcessContext the parent makes and dumps the
    children's exit codes from an atexit hook (after mp.spawn has joined them
    and after any traceback was printed), so no frame of this module shows up
    in the console.
    """
    import atexit
    import sys
    try:
        import torch.multiprocessing  # noqa: F401  (loads torch.multiprocessing.spawn)
        sp = sys.modules["torch.multiprocessing.spawn"]
    except Exception:
        return
    if getattr(sp.ProcessContext.__init__, "_truth", False):
        return
    orig = sp.ProcessContext.__init__

    def __init__(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        _spawn_contexts.append(self)

    __init__._truth = True
    sp.ProcessContext.__init__ = __init__

    def _dump():
        if not _spawn_contexts:
            return
        codes = {}
        for ctx in _spawn_contexts:
            for i, p in enumerate(ctx.processes):
                if p.exitcode is None and p.is_alive():
                    p.join(5)
                codes[str(i)] = p.exitcode
        _write("spawn-exits.json", {"exit_codes": codes, "time": time.time()})

    atexit.register(_dump)


if TRUTH_DIR:
    _install_spawn_recorder()
