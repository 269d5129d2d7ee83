"""A Ray Train job (TorchTrainer, gloo, CPU) on a two-node Ray cluster on one machine
(ray.cluster_utils.Cluster: a head node and a second raylet), one training worker per node. Once
both workers have logged step 5, the second node is killed (its raylet and its workers, as when a
machine goes down); the head's health check marks it dead. The driver's console (Ray's own log
lines and every worker's, prefixed as Ray prints them) is the log; the truth is what the run
itself recorded: which world rank ran on the killed node, never read from the log.

    /work/torchenv/bin/python samples/capture/ray/capture.py     # torch and ray[train] 2.60
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NAME = "ext-ray-node_died-2"


def driver(truth_dir: str) -> None:
    """Runs in a child process whose stdout+stderr is the captured console."""
    import ray
    from ray.cluster_utils import Cluster
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    # a dead node is declared after ~3 missed 1 s health checks, not the default 30 s
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "resources": {"node_head": 1},
        "_system_config": {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}})
    second = cluster.add_node(num_cpus=1, resources={"node_second": 1})
    ray.init(address=cluster.address)

    def train_loop(config):
        import torch
        import torch.distributed as dist
        import ray.train as train
        rank = train.get_context().get_world_rank()
        node = ray.get_runtime_context().get_node_id()
        Path(config["truth_dir"], f"rank{rank}.json").write_text(json.dumps({"rank": rank, "node": node, "pid": os.getpid()}))
        model = train.torch.prepare_model(torch.nn.Linear(16, 4))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(1, 400):
            x = torch.randn(32, 16)
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"step {step} loss {loss.item():.4f}", flush=True)
            if step >= 5:
                Path(config["truth_dir"], f"step5_rank{rank}").touch()
            time.sleep(0.5)

    trainer = TorchTrainer(
        train_loop, train_loop_config={"truth_dir": truth_dir},
        scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 1}, placement_strategy="STRICT_SPREAD"),
        run_config=RunConfig(storage_path=tempfile.mkdtemp(prefix="raytrain-")))

    import threading

    def kill_second_node() -> None:
        while not all(Path(truth_dir, f"step5_rank{r}").exists() for r in (0, 1)):
            time.sleep(0.2)
        Path(truth_dir, "second_node.json").write_text(json.dumps({"node": second.node_id, "killed_at": time.time()}))
        cluster.remove_node(second, allow_graceful=False)

    threading.Thread(target=kill_second_node, daemon=True).start()
    try:
        trainer.fit()
    except Exception as e:   # the run's own end, printed as the user sees it
        print(f"{type(e).__name__}: {e}", flush=True)
    cluster.shutdown()
    # the cluster's address stays in Ray's record of the machine's cluster: a later ray.init()
    # without an address would try to join the dead one
    current = Path(tempfile.gettempdir(), "ray", "ray_current_cluster")
    if current.exists() and current.read_text().strip() == cluster.address:
        current.unlink()


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--driver":
        driver(sys.argv[2])
        return
    out = ROOT / "samples" / NAME
    (out / "logs").mkdir(parents=True, exist_ok=True)
    truth_dir = tempfile.mkdtemp(prefix="raytruth-")
    started = time.time()
    with open(out / "logs" / "driver_console.log", "wb") as console:
        rc = subprocess.run([sys.executable, __file__, "--driver", truth_dir], stdout=console,
                            stderr=subprocess.STDOUT, timeout=600).returncode
    ranks = {json.loads(p.read_text())["rank"]: json.loads(p.read_text()) for p in Path(truth_dir).glob("rank*.json")}
    killed = json.loads(Path(truth_dir, "second_node.json").read_text())
    culprits = sorted(r for r, info in ranks.items() if info["node"] == killed["node"])
    (out / "expected.json").write_text(json.dumps({
        "scenario": "node_died",
        "kind": "scheduler_termination",
        "culprit_ranks": culprits,
        "world_size": len(ranks),
        "divergence": None,
        "launcher": "ray",
        "truth": "A two-node Ray cluster on one machine (ray.cluster_utils.Cluster), Ray Train's TorchTrainer "
                 "with one gloo worker per node (STRICT_SPREAD); once both had logged step 5, capture.py removed "
                 "the second node without a graceful stop (its raylet and workers killed); each worker recorded "
                 "its world rank and node id, so the culprit is the rank that ran on the removed node.",
        "description": "a Ray Train job one of whose nodes goes down while it trains",
        "worker_pids": {str(r): info["pid"] for r, info in ranks.items()},
        "driver_exit_code": rc,
        "run_seconds": round(time.time() - started, 1),
        "command": "/work/torchenv/bin/python samples/capture/ray/capture.py",
    }, indent=2) + "\n")
    print(out, culprits, rc)


if __name__ == "__main__":
    main()
