"""A two-node torchrun job on one machine, one of whose nodes is stopped from outside: two agents
(`--nnodes 2`, c10d rendezvous on 127.0.0.1), one worker each, training train.py's healthy DDP job;
once both have logged step 10, the second agent gets SIGTERM, as `docker stop`, a node drain or a
preemption sends it. Writes samples/tr-agent_stopped-2node-2/ (run from the repository root):

    /work/torchenv/bin/python samples/capture/torchrun/two_nodes.py

The truth comes from the run: which agent was stopped, and the global rank its worker had (the
RANK the agent gave it, recorded by launch.py); the logs are read only to wait for step 10.
"""
from __future__ import annotations

import json
import sys
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from capture import LAUNCH, RUN_TIMEOUT_SECONDS, SAMPLES, TRAIN, free_port

NAME = "tr-agent_stopped-2node-2"
STEPS = 400          # ~60 s of training: the stop comes long before the end
STOP_AT_STEP = 10


def agent_command(node: str, logs: Path, port: int) -> list[str]:
    return [
        sys.executable, str(LAUNCH), "--nnodes", "2", "--nproc-per-node", "1",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "stopped-node",
        "--max-restarts", "0", "--log-dir", str(logs / node / "torchrun"), "--redirects", "3", "--tee", "3",
        str(TRAIN), "--scenario", "healthy", "--steps", str(STEPS), "--timeout", "20",
    ]


def wait_for_step(consoles: list[Path], step: int) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if all(f" step {step}/" in c.read_text(errors="replace") for c in consoles if c.exists()) \
                and all(c.exists() for c in consoles):
            return
        time.sleep(0.1)
    raise TimeoutError(f"no step {step} within {RUN_TIMEOUT_SECONDS} s")


def main() -> None:
    out = SAMPLES / NAME
    shutil.rmtree(out, ignore_errors=True)
    logs = out / "logs"
    logs.mkdir(parents=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL_"))}
    env["PYTHONUNBUFFERED"] = "1"
    with tempfile.TemporaryDirectory() as truth_a, tempfile.TemporaryDirectory() as truth_b:
        truths = {"node1": Path(truth_a), "node2": Path(truth_b)}
        procs, consoles = {}, {}
        started = time.monotonic()
        for node, truth in truths.items():
            consoles[node] = logs / f"{node}_console.log"
            with open(consoles[node], "w") as console:
                procs[node] = subprocess.Popen(agent_command(node, logs, port), stdout=console, stderr=subprocess.STDOUT,
                                               env={**env, "CAPTURE_TRUTH_DIR": str(truth)})
        wait_for_step(list(consoles.values()), STOP_AT_STEP)
        stopped_at = time.time()
        procs["node2"].send_signal(signal.SIGTERM)
        codes = {node: proc.wait(timeout=RUN_TIMEOUT_SECONDS) for node, proc in procs.items()}
        workers = {node: json.loads((truth / "workers.json").read_text()) for node, truth in truths.items()}
        elapsed = time.monotonic() - started
    stopped_ranks = sorted(w["global_rank"] for w in workers["node2"].values())
    exit_codes = {str(w["global_rank"]): w["exit_code"] for node in workers for w in workers[node].values()}
    expected = {
        "scenario": "agent_stopped",
        "kind": "scheduler_termination",
        "culprit_ranks": stopped_ranks,
        "world_size": 2,
        "divergence": None,
        "launcher": "torchrun",
        "truth": ("Two torchrun agents on one machine (--nnodes 2, c10d rendezvous), one worker each; two_nodes.py sent "
                  "SIGTERM to the second agent (node2) once both workers had logged step 10, and launch.py recorded "
                  "the global rank (RANK) the agent gave each worker and how each ended."),
        "notes": ("node2's agent passes the SIGTERM to its worker; node1's worker loses its peer in the next gradient "
                  "all_reduce (gloo: Connection closed by peer) and its agent reports the failure. gloo prints no "
                  "sequence numbers: no divergence."),
        "description": "a two-node DDP job whose second node's torchrun agent is stopped from outside (SIGTERM) while it trains",
        "stopped_agent": "node2",
        "stopped_at": stopped_at,
        "exit_codes": exit_codes,
        "agent_exit_codes": codes,
        "worker_pids": {str(w["global_rank"]): w["pid"] for node in workers for w in workers[node].values()},
        "run_seconds": round(elapsed, 1),
        "command": " ".join(["torchrun", *agent_command("nodeN", Path("logs"), 0)[2:]]).replace(str(SAMPLES.parent) + "/", ""),
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    print(f"{NAME}: {elapsed:.1f} s, node2's rank(s) {stopped_ranks}, exit codes {exit_codes}, agents {codes}")


if __name__ == "__main__":
    main()
