#!/usr/bin/env python3
"""Capture the ext-* samples: real multi-rank CPU/gloo runs of training scripts
written in other people's styles, one injected fault each, truth recorded by
the run itself (never read from the logs).

    python3 samples/capture/ext/capture.py                 # every run, one at a time
    python3 samples/capture/ext/capture.py ext-tv-healthy-4 ext-mpi-...   # some runs
    python3 samples/capture/ext/capture.py --list

Needs a python with torch (gloo) and tqdm: --python (default: /work/torchenv/bin/python
if present, else python3); its bin/ is put first on PATH so `torchrun` and
`python` resolve to it. mpirun (Debian's openmpi-bin) for the mpi-* runs.
Writes samples/<name>/logs/ (console.log = the launcher's stdout+stderr, plus a
torchrun --log-dir tree where used) and samples/<name>/expected.json.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
EXT = os.path.relpath(HERE, REPO)  # samples/capture/ext
RUN_TIMEOUT_S = 150

KIND = {
    "healthy": "healthy",
    "crash_exception": "rank_crashed",
    "crash_sigkill": "rank_crashed",
    "hang_dataload": "rank_stalled",
    "missing_collective": "missing_collective",
    "size_mismatch": "collective_mismatch",
    "early_exit": "rank_exited_early",
    "port_taken": "init_failure",
}

STYLE_DESC = {
    "spawn": "pytorch/examples ddp-tutorial-series style (mp.spawn, Trainer class, plain prints from every rank)",
    "tv": "torchvision references/classification style (init_distributed_mode, MetricLogger, prints from rank 0 only)",
    "log": "logging.basicConfig '%(asctime)s | %(levelname)s | %(name)s | %(message)s' with the rank in each message, @record main, DDP",
    "mpi": "'Writing Distributed Applications' tutorial style under mpirun (OMPI_COMM_WORLD_*), per-parameter gradient all_reduce, tqdm bar on every rank",
}

SCEN_DESC = {
    "healthy": "no fault injected",
    "crash_exception": "rank {r} raises a data error (OSError/ValueError from Dataset.__getitem__) while loading batch {s}",
    "crash_sigkill": "rank {r} SIGKILLs itself at the start of step {s} (as the OOM killer would)",
    "hang_dataload": "rank {r} sleeps forever in Dataset.__getitem__ while loading batch {s}; the others block in their next collective until the 20 s gloo timeout",
    "missing_collective": "rank {r} skips one all_reduce ({what}) that the other ranks issue, and carries on with its next collective",
    "size_mismatch": "rank {r} issues one all_reduce ({what}) with a tensor of another size than the other ranks",
    "early_exit": "rank {r} leaves the training loop at step {s} and exits cleanly (code 0) while the others go on",
    "port_taken": "another process (capture.py, as a stale run would) listens on MASTER_PORT before the launch, so "
                  "rank {r}, which hosts the c10d store there, cannot bind it",
}

# name -> spec. step: for data/step faults the 0-based batch index on that rank;
# for missing_collective/size_mismatch the index the script passes to truth.set_step
# (tv, log: the epoch whose evaluation does it; mpi: the training step).
RUNS = [
    dict(name="ext-spawn-healthy-2", style="spawn", launcher="mp.spawn", ws=2, scenario="healthy"),
    dict(name="ext-spawn-crash_exception-4", style="spawn", launcher="mp.spawn", ws=4, scenario="crash_exception", rank=2, step=3),
    dict(name="ext-spawn-crash_sigkill-3", style="spawn", launcher="mp.spawn", ws=3, scenario="crash_sigkill", rank=1, step=6),
    dict(name="ext-spawn-early_exit-2", style="spawn", launcher="mp.spawn", ws=2, scenario="early_exit", rank=1, step=5),
    dict(name="ext-tv-healthy-4", style="tv", launcher="torchrun", ws=4, scenario="healthy"),
    dict(name="ext-tv-missing_collective-4", style="tv", launcher="torchrun", ws=4, scenario="missing_collective", rank=3, step=0),
    dict(name="ext-tv-size_mismatch-2", style="tv", launcher="torchrun", ws=2, scenario="size_mismatch", rank=1, step=1),
    dict(name="ext-tv-hang_dataload-3", style="tv", launcher="torchrun", ws=3, scenario="hang_dataload", rank=1, step=5),
    dict(name="ext-tv-crash_sigkill-4-cpplog", style="tv", launcher="torchrun", ws=4, scenario="crash_sigkill", rank=0, step=10,
         env={"TORCH_CPP_LOG_LEVEL": "INFO"}),
    dict(name="ext-log-healthy-3", style="log", launcher="torch.distributed.launch", ws=3, scenario="healthy"),
    dict(name="ext-log-crash_exception-2", style="log", launcher="torchrun", ws=2, scenario="crash_exception", rank=1, step=7,
         tee=True, log_dir=True),
    dict(name="ext-log-hang_dataload-4-cpplog", style="log", launcher="torch.distributed.launch", ws=4, scenario="hang_dataload", rank=3, step=4,
         env={"TORCH_CPP_LOG_LEVEL": "INFO"}),
    dict(name="ext-log-early_exit-3", style="log", launcher="torchrun", ws=3, scenario="early_exit", rank=2, step=12, log_dir=True),
    dict(name="ext-log-missing_collective-2", style="log", launcher="torchrun", ws=2, scenario="missing_collective", rank=0, step=0,
         tee=True, log_dir=True),
    dict(name="ext-mpi-healthy-4", style="mpi", launcher="mpirun", ws=4, scenario="healthy", tag_output=True),
    dict(name="ext-mpi-missing_collective-2", style="mpi", launcher="mpirun", ws=2, scenario="missing_collective", rank=0, step=4),
    dict(name="ext-mpi-size_mismatch-3-detail", style="mpi", launcher="mpirun", ws=3, scenario="size_mismatch", rank=2, step=3,
         env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}),
    dict(name="ext-mpi-early_exit-4", style="mpi", launcher="mpirun", ws=4, scenario="early_exit", rank=3, step=2, tag_output=True),
    # added later (at the end: a run's port is fixed by its index)
    dict(name="ext-spawn-port_taken-4", style="spawn", launcher="mp.spawn", ws=4, scenario="port_taken", rank=0),
]

WHAT = {
    ("tv", "missing_collective"): "the all_reduce in reduce_across_processes, called from evaluate()",
    ("tv", "size_mismatch"): "the all_reduce in reduce_across_processes, called from evaluate()",
    ("log", "missing_collective"): "the all_reduce of the validation loss",
    ("log", "size_mismatch"): "the all_reduce of the validation loss",
    ("mpi", "missing_collective"): "the gradient all_reduce of fc1.weight in average_gradients",
    ("mpi", "size_mismatch"): "the gradient all_reduce of fc1.weight in average_gradients, one column short",
}


def script_cmd(spec):
    s = spec["style"]
    if s == "spawn":
        return ["python", f"{EXT}/ddp_spawn.py", "3", "1", "--batch_size", "32", "--world_size", str(spec["ws"])]
    if s == "tv":
        return [f"{EXT}/tv_train.py", "--epochs", "2", "-b", "16", "--print-freq", "4"]
    if s == "log":
        return [f"{EXT}/log_train.py", "--epochs", "2", "--log-every", "5"]
    if s == "mpi":
        return ["python", f"{EXT}/mpi_tqdm.py"]
    raise ValueError(s)


def build(spec, port, logs_rel):
    """Returns (argv, env_additions, exported_names_for_display)."""
    env = {"CAPTURE_TRUTH_DIR": None, "FAULT_SCENARIO": spec["scenario"],
           "FAULT_RANK": str(spec.get("rank", -1)), "FAULT_STEP": str(spec.get("step", -1))}
    env.update(spec.get("env", {}))
    ws = spec["ws"]
    launcher = spec["launcher"]
    if launcher == "mp.spawn":
        env.update(OMP_NUM_THREADS="1", MASTER_PORT=str(port))
        return script_cmd(spec), env
    if launcher in ("torchrun", "torch.distributed.launch"):
        env.update(PYTHONPATH=f"{EXT}/launcher_hook", CAPTURE_LAUNCHER_HOOK="1")
        head = ["torchrun"] if launcher == "torchrun" else ["python", "-m", "torch.distributed.launch", "--use-env"]
        argv = head + ["--nproc_per_node", str(ws), "--master_port", str(port)]
        if spec.get("log_dir"):
            argv += ["--log-dir", f"{logs_rel}/torchrun"]
        if spec.get("tee"):
            argv += ["--tee", "3"]
        return argv + script_cmd(spec), env
    if launcher == "mpirun":
        env.update(OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ws)]
        if spec.get("tag_output"):
            argv += ["--tag-output"]
        argv += ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
        for k in sorted(env):
            argv += ["-x", k]
        argv += ["python", f"{EXT}/rankexit.py", "--"] + script_cmd(spec)
        return argv, env
    raise ValueError(launcher)


def load_json(path):
    with open(path) as f:
        return json.load(f)


def versions(python):
    v = {}
    try:
        out = subprocess.run([python, "-c", "import torch, tqdm; print(torch.__version__); print(tqdm.__version__)"],
                             capture_output=True, text=True, timeout=60).stdout.split()
        v["torch"], v["tqdm"] = out[0], out[1]
    except Exception:
        pass
    try:
        out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=30).stdout
        v["openmpi"] = out.split("\n")[0].split()[-1]
    except Exception:
        pass
    return v


def hold_port(spec, port, truth_dir):
    """port_taken: a listening socket on the run's MASTER_PORT, held through the run (as a stale
    process from an earlier run would), and the injection record for the rank that hosts the c10d
    store there (rank 0 under env:// init); None for every other scenario."""
    if spec["scenario"] != "port_taken":
        return None
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen(16)
    with open(os.path.join(truth_dir, f"injected-rank{spec['rank']}.json"), "w") as f:
        json.dump({"rank": spec["rank"], "scenario": "port_taken", "step": None, "seq": None,
                   "action": f"port {port} held by capture.py before the launch; this rank hosts the c10d store there"}, f)
    return holder


def capture(spec, idx, python, vers):
    name = spec["name"]
    out_dir = os.path.join(REPO, "samples", name)
    logs_rel = f"samples/{name}/logs"
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(os.path.join(REPO, logs_rel))
    truth_dir = tempfile.mkdtemp(prefix=f"{name}-truth-")
    port = 29400 + 7 * idx
    argv, env_add = build(spec, port, logs_rel)
    env = dict(os.environ)
    env_add = dict(env_add)
    env_add["CAPTURE_TRUTH_DIR"] = truth_dir
    env.update(env_add)
    env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONUNBUFFERED", None)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR") if spec["launcher"] != "mpirun" else ():
        env.pop(k, None)
    console = os.path.join(REPO, logs_rel, "console.log")
    holder = hold_port(spec, port, truth_dir)
    t0 = time.time()
    timed_out = False
    with open(console, "wb") as f:
        p = subprocess.Popen(argv, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True,
                             preexec_fn=lambda: __import__("resource").setrlimit(
                                 __import__("resource").RLIMIT_CORE, (0, 0)))
        try:
            rc = p.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, signal.SIGTERM)
            try:
                rc = p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                rc = p.wait()
    run_s = round(time.time() - t0, 1)
    if holder:
        holder.close()
    # let stragglers (orphans of a killed launcher) finish writing
    time.sleep(1.0)
    try:
        os.killpg(p.pid, signal.SIGKILL)  # the run's own session only
    except ProcessLookupError:
        pass

    injected = [load_json(x) for x in sorted(glob.glob(os.path.join(truth_dir, "injected-rank*.json")))]
    exits = {}
    exit_times = {}
    for x in glob.glob(os.path.join(truth_dir, "exit-rank*.json")):
        d = load_json(x)
        exits[str(d["rank"])] = d["exit_code"]
        if d.get("time"):
            exit_times[str(d["rank"])] = d["time"]
    sp = os.path.join(truth_dir, "spawn-exits.json")
    if os.path.exists(sp):
        exits.update(load_json(sp)["exit_codes"])
    exits = {str(r): exits.get(str(r)) for r in range(spec["ws"])}
    shutil.rmtree(truth_dir, ignore_errors=True)

    scenario = spec["scenario"]
    kind = KIND[scenario]
    notes = []
    divergence = None
    culprits = []
    if scenario != "healthy":
        if not injected:
            notes.append("the fault never fired (no injection record): the run is recorded as what happened")
            kind = "healthy"
        else:
            inj = injected[0]
            culprits = sorted({d["rank"] for d in injected})
            divergence = {"pg": "0", "seq": inj["seq"]} if inj.get("seq") is not None else None
            if all(c == 0 for c in exits.values()) and rc == 0:
                notes.append("the fault fired but every rank and the launcher exited 0: nothing noticed it")
                kind = "healthy"
                divergence = None
                culprits = []
    if timed_out:
        notes.append(f"the launcher was still running after {RUN_TIMEOUT_S}s and was killed by capture.py")

    exit_order = []
    if exit_times:
        first = min(exit_times.values())
        exit_order = [{"rank": int(r), "after_s": round(t - first, 2), "exit_code": exits.get(r)}
                      for r, t in sorted(exit_times.items(), key=lambda kv: kv[1])]
    if injected:
        for d in injected:
            d.pop("pid", None)

    shown_env = {k: v for k, v in env_add.items() if k != "CAPTURE_TRUTH_DIR"}
    cmd = " ".join(argv)
    s = spec.get("step", -1)
    desc = SCEN_DESC[scenario].format(r=spec.get("rank"), s=s, what=WHAT.get((spec["style"], scenario), ""))
    if spec["launcher"] == "mp.spawn":
        exit_src = "each mp.spawn child's exitcode, read in the parent after mp.spawn joined it (truth.py, atexit)"
    elif spec["launcher"] == "mpirun":
        exit_src = "rankexit.py between orted and each rank (records the child's status, forwards signals, exits the same way)"
    else:
        exit_src = "a sitecustomize hook in the launcher process (launcher_hook/) that notes each worker Popen and its exit status (waitid WNOWAIT)"
    expected = {
        "scenario": scenario,
        "kind": kind,
        "culprit_ranks": culprits,
        "world_size": spec["ws"],
        "divergence": divergence,
        "launcher": spec["launcher"],
        "style": spec["style"],
        "truth": ((f"Fault injected by samples/capture/ext/capture.py: it listened on MASTER_PORT ({port}) before the "
                   "launch and wrote the injection record for the rank that hosts the c10d store under env:// init (rank 0) "
                   "outside logs/. Exit codes: " if scenario == "port_taken" else
                   "Fault injected by samples/capture/ext/truth.py on the named rank at the named step; that rank wrote "
                   "its step and the 1-based SeqNum of its next collective on the default PG "
                   "(_get_default_group()._get_sequence_number_for_group() + 1) to a json outside logs/. Exit codes: ")
                  + exit_src + ". The logs were not read."),
        "description": f"{STYLE_DESC[spec['style']]}; {spec['launcher']}, {spec['ws']} ranks, gloo (timeout 20 s): {desc}",
        "notes": " ".join(notes),
        "injected": injected[0] if len(injected) == 1 else (injected or None),
        "exit_codes": exits,
        "exit_order": exit_order,
        "launcher_exit_code": rc,
        "timed_out": timed_out,
        "debug_env": spec.get("env", {}),
        "env": shown_env,
        "versions": vers,
        "run_seconds": run_s,
        "command": cmd,
    }
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
        f.write("\n")
    return expected


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--python", default="/work/torchenv/bin/python" if os.path.exists("/work/torchenv/bin/python") else shutil.which("python3"))
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        for r in RUNS:
            print(r["name"])
        return
    python = os.path.abspath(a.python) if os.path.sep in a.python else shutil.which(a.python)
    vers = versions(python)
    todo = [(i, r) for i, r in enumerate(RUNS) if not a.names or r["name"] in a.names]
    for i, spec in todo:
        e = capture(spec, i, python, vers)
        print(f"{spec['name']:36s} kind={e['kind']:20s} culprits={e['culprit_ranks']} "
              f"seq={(e['divergence'] or {}).get('seq')} exits={e['exit_codes']} rc={e['launcher_exit_code']} "
              f"{e['run_seconds']}s {e['notes']}", flush=True)


if __name__ == "__main__":
    main()
