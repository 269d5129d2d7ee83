"""Launcher and scheduler formats (torchelastic, SLURM, Kubernetes) on real captures.

The embedded lines were captured on this machine (samples/slurm-crash_exception,
samples/slurm-collective_mismatch, samples/tr-crash_sigkill-4); the sample walk covers whatever
samples/slurm-* and samples/tr-* exist now.
"""
import json
import re
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from correlator.discover import discover, path_hints
from correlator.tables import SCHEMAS, conform
from correlator.parsers import srun, torchelastic
from correlator.parsers.engine import FileContext, parse_batch
from correlator.parsers.files import parse_sources

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SLURM_FILES = re.compile(r"^(?:slurmctld|slurmd-|sacct|scontrol|jobcomp)")

SLURM_OUT = """\
0: [rank 0] host=node1 pid=28534 local_rank=0 world_size=4
3: [rank 3] host=node2 pid=28538 local_rank=1 world_size=4
1: [rank 1] host=node1 pid=28535 local_rank=1 world_size=4
2: [rank 2] host=node2 pid=28537 local_rank=0 world_size=4
2: [rank2]: RuntimeError: corrupt batch: label index 1187 out of range for 1000 classes
srun: error: node2: task 2: Exited with exit code 1
srun: launch/slurm: _step_signal: Terminating StepId=14.0
0: slurmstepd-node1: error: *** STEP 14.0 ON node1 CANCELLED AT 2026-11-29T22:12:34 ***
srun: error: node2: task 3: Terminated
srun: error: node1: tasks 0-1: Terminated
srun: Force Terminated StepId=14.0
"""
SLURMD_NODE1 = """\
[2026-11-29T22:12:22.155] Launching batch job 14 for UID 0
[2026-11-29T22:12:22.234] launch task StepId=14.0 request from UID:0 GID:0 HOST:127.0.0.1 PORT:55888
[2026-11-29T22:12:34.659] [14.0] error: *** STEP 14.0 ON node1 CANCELLED AT 2026-11-29T22:12:34 ***
[2026-11-29T22:12:34.996] [14.0] get_exit_code task 0 died by signal: 15
[2026-11-29T22:12:35.038] [14.batch] done with job
"""
SACCT = """\
JobID|JobName|State|ExitCode|DerivedExitCode|Start|End|NodeList|MaxRSS|MaxRSSTask|MaxRSSNode
11|collective_mismatch|FAILED|6:0|1:0|2026-11-29T22:09:44|2026-11-29T22:10:00|node[1-2]|||
11.batch|batch|FAILED|6:0||2026-11-29T22:09:44|2026-11-29T22:10:00|node1|12472K|0|node1
11.0|python|CANCELLED by 0|0:15||2026-11-29T22:09:44|2026-11-29T22:10:00|node[1-2]|236412K|2|node2
"""
SCONTROL = """\
JobId=14 JobName=crash_exception
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=143:0
   StartTime=2026-11-29T22:12:22 EndTime=2026-11-29T22:12:35 Deadline=N/A
   NodeList=node[1-2]

"""
JOBCOMP = ("JobId=14 UserId=root(0) GroupId=root(0) Name=crash_exception JobState=FAILED Partition=debug "
           "TimeLimit=UNLIMITED StartTime=2026-11-29T22:12:22 EndTime=2026-11-29T22:12:35 NodeList=node[1-2] "
           "NodeCnt=2 ProcCnt=4 DerivedExitCode=0:15 ExitCode=143:0 \n")
CONSOLE = """\
W1129 22:13:21.739000 29324 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 29376 closing signal SIGTERM
W1129 22:13:21.741000 29324 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 29377 closing signal SIGTERM
E1129 22:13:22.042000 29324 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 2 (pid: 29378) of binary: /work/torchenv/bin/python
Traceback (most recent call last):
  File "/work/torchenv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
=======================================================
/work/main/samples/capture/torchrun/train.py FAILED
-------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-29_22:13:22
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 29376)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 29376
[2]:
  time      : 2026-11-29_22:06:02
  host      : localhost
  rank      : 3 (local_rank: 3)
  exitcode  : 1 (pid: 29379) 
  error_file: /tmp/none_x/attempt_0/3/error.json
  traceback : Traceback (most recent call last):
    File "/work/main/samples/capture/torchrun/train.py", line 214, in run_steps
      loss.backward()
  RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete
  
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-29_22:13:21
  host      : localhost
  rank      : 2 (local_rank: 2)
  exitcode  : -9 (pid: 29378)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 29378
=======================================================
"""
ERROR_JSON = {"message": {"message": "RuntimeError: corrupt batch: label index 1187 out of range for 1000 classes",
                          "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  ...\n",
                                        "timestamp": "1795989962"}}}


def _parse(root: Path) -> tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame]]:
    """(exits, events) per file of a job directory."""
    sources, _ = discover(root)
    results = parse_sources(sources)
    tables = lambda name: {r.path: pl.from_arrow(pa.concat_tables(r.tables[name]))  # noqa: E731
                           for r in results if r.tables.get(name)}
    return tables("exits"), tables("events")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("job")
    files = {"slurm-14.out": SLURM_OUT, "slurmd-node1.log": SLURMD_NODE1, "sacct.txt": SACCT,
             "scontrol.txt": SCONTROL, "jobcomp.log": JOBCOMP, "console.log": CONSOLE,
             "torchrun/none_x/attempt_0/2/error.json": json.dumps(ERROR_JSON)}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return _parse(root)


def _rows(df: pl.DataFrame, *cols: str) -> list[tuple]:
    return [tuple(r) for r in df.select(cols).rows()]


def test_srun_task_exits_expand_to_one_row_per_global_task(job):
    exits, _ = job
    out = pl.from_arrow(srun.expand_task_ranges(exits["slurm-14.out"].to_arrow().cast(SCHEMAS["exits"])))
    tasks = out.filter(pl.col("source") == "srun").sort("line", "task")
    assert _rows(tasks, "line", "host", "task", "exit_code", "signal", "reason") == [
        (6, "node2", 2, 1, None, "task_exit"),
        (9, "node2", 3, None, 15, "task_signal"),
        (10, "node1", 0, None, 15, "task_signal"),
        (10, "node1", 1, None, 15, "task_signal"),
    ]
    banner = out.filter(pl.col("source") == "slurmstepd")
    # Printed through task 0's stream: the label must not make it an event of rank 0.
    assert _rows(banner, "line", "host", "rank", "reason") == [(8, "node1", None, "cancelled")]
    assert banner["text"][0] == "*** STEP 14.0 ON node1 CANCELLED AT 2026-11-29T22:12:34 ***"


def test_task_ranges_with_lists_and_brackets():
    table = pl.DataFrame({"file": ["o", "o"], "line": [1, 2], "source": ["srun", "srun"],
                          "text": ["node[1-2]: tasks 0,2-3,7: Killed", "node1: tasks [4-5]: Terminated"]})
    out = pl.from_arrow(srun.expand_task_ranges(conform("exits", table.to_arrow())))
    assert out["task"].to_list() == [0, 2, 3, 7, 4, 5]


def test_slurmstepd_daemon_lines(job):
    exits, events = job
    rows = exits["slurmd-node1.log"].sort("line")
    assert _rows(rows, "line", "host", "local_rank", "signal", "reason", "source") == [
        (3, "node1", None, None, "cancelled", "slurmstepd"),
        (4, "node1", 0, 15, "task_signal", "slurmstepd"),     # node-local task index
    ]
    assert str(rows["ts"][1]) == "2026-11-29 22:12:34.996000+00:00"
    kinds = events["slurmd-node1.log"]["kind"].to_list()
    assert kinds == ["slurm_job_lifecycle", "slurm_job_lifecycle", "slurm_cancelled", "slurm_task_signal",
                     "slurm_job_lifecycle"]


def test_sacct_rows_per_step(job):
    exits, events = job
    rows = exits["sacct.txt"].sort("line")
    assert _rows(rows, "line", "host", "exit_code", "signal", "reason", "source") == [
        (2, None, 6, 0, "failed", "sacct"),
        (3, "node1", 6, 0, "failed", "sacct"),
        (4, None, 0, 15, "cancelled", "sacct"),
    ]
    assert rows["text"][2].startswith("11.0|python|CANCELLED by 0|0:15|")
    assert str(rows["ts"][0]) == "2026-11-29 22:10:00+00:00"
    assert events["sacct.txt"]["kind"].to_list() == ["sacct"] * 4


def test_scontrol_and_jobcomp_records(job):
    exits, events = job
    assert _rows(exits["scontrol.txt"], "line", "exit_code", "signal", "reason", "source") == [
        (3, 143, 0, "failed", "scontrol")]
    assert _rows(exits["jobcomp.log"], "line", "exit_code", "signal", "reason", "source") == [
        (1, 143, 0, "failed", "jobcomp")]
    assert str(exits["jobcomp.log"]["ts"][0]) == "2026-11-29 22:12:35+00:00"
    assert events["scontrol.txt"].height == 7 and set(events["scontrol.txt"]["kind"]) == {"scontrol_job"}


@pytest.mark.parametrize("records", [SACCT, SCONTROL, JOBCOMP])
def test_records_pasted_with_a_log_are_read_as_a_log(tmp_path, records):
    """sacct / scontrol / jobcomp output followed by the job's log in one paste (or `cat` of the
    job's files): the log's lines are read by the line engine, not taken for more records."""
    (tmp_path / "paste.txt").write_text(records + CONSOLE)
    _, events = _parse(tmp_path)
    kinds = set(events["paste.txt"]["kind"])
    assert {"torchelastic_worker_signaled", "torchelastic_summary"} <= kinds, kinds


def test_torchelastic_agent_lines(job):
    exits, _ = job
    agent = exits["console.log"].filter(pl.col("source") == "torchelastic").sort("line")
    assert _rows(agent, "line", "pid", "local_rank", "exit_code", "signal", "reason") == [
        (1, 29376, None, None, 15, "agent_sigterm"),
        (2, 29377, None, None, 15, "agent_sigterm"),
        (3, 29378, 2, None, 9, "worker_failed"),
    ]
    assert str(agent["ts"][2]) == "2026-11-29 22:13:22.042000+00:00"


def test_child_failed_error_table(job):
    _, events = job
    console = torchelastic.mark_child_failed(events["console.log"])
    assert console.filter(pl.col("kind") == "other").is_empty()
    rows = pl.from_arrow(torchelastic.assemble_child_failed(console)).sort("line")
    assert _rows(rows, "line", "host", "pid", "rank", "local_rank", "exit_code", "signal", "reason", "source") == [
        (12, "localhost", 29376, 0, 0, None, 15, "failure", "torchelastic_summary"),
        (19, "localhost", 29379, 3, 3, 1, None, "failure", "torchelastic_summary"),
        (32, "localhost", 29378, 2, 2, None, 9, "root_cause", "torchelastic_summary"),
    ]
    assert rows["text"].to_list() == [
        "Signal 15 (SIGTERM) received by PID 29376",
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
        "Timed out waiting 20000ms for recv operation to complete",
        "Signal 9 (SIGKILL) received by PID 29378",
    ]
    assert str(rows["ts"][2]) == "2026-11-29 22:13:21+00:00"


def test_error_json(job):
    exits, events = job
    path = "torchrun/none_x/attempt_0/2/error.json"
    assert _rows(exits[path], "local_rank", "reason", "source", "text") == [
        (2, "python_exception", "torchelastic_error_file",
         "RuntimeError: corrupt batch: label index 1187 out of range for 1000 classes")]
    assert str(exits[path]["ts"][0]) == "2026-11-29 22:06:02+00:00"
    assert events[path]["kind"].to_list() == ["torchelastic_error_file"]


def test_kubernetes_pod_json(tmp_path):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-worker-1"},
           "status": {"containerStatuses": [{"name": "pytorch", "lastState": {"terminated": {
               "exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-29T22:13:21Z"}}, "state": {}}]}}
    (tmp_path / "pod.json").write_text(json.dumps(pod, indent=2))
    exits, events = _parse(tmp_path)
    assert _rows(exits["pod.json"], "host", "exit_code", "reason", "source") == [
        ("train-worker-1", 137, "oom_killed", "kubernetes")]
    assert str(exits["pod.json"]["ts"][0]) == "2026-11-29 22:13:21+00:00"
    assert set(events["pod.json"]["kind"]) == {"k8s_pod_json"}


def _launcher_leftovers(job_dir: Path) -> list[str]:
    """Lines of launcher/scheduler formats that no format recognised: every line of the SLURM
    daemon and accounting files, srun/slurmstepd lines anywhere, torchrun agent console lines."""
    _, events = _parse(job_dir)
    left = []
    for path, ev in events.items():
        ev = torchelastic.mark_child_failed(ev).filter(pl.col("kind") == "other")
        name = path.rsplit("/", 1)[-1]
        mine = pl.lit(bool(SLURM_FILES.match(name))) | pl.col("text").str.contains(r"^(?:srun|slurmstepd)[:-]")
        if name == "console.log":
            mine = mine | (pl.col("local_rank").is_null() & pl.col("rank").is_null()
                           & (pl.col("text").str.strip_chars() != ""))
        left += [f"{job_dir.parent.name}/{path}:{n}: {t}" for n, t in ev.filter(mine).select("line", "text").rows()]
    return left


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*") if re.match(r"(slurm|tr)-", p.name)))
def test_real_samples_leave_no_launcher_line_unparsed(sample):
    logs = SAMPLES / sample / "logs"
    if not logs.is_dir():
        pytest.skip("sample not captured yet")
    assert _launcher_leftovers(logs) == []


SPAWN_CONSOLE = """\
Epoch 3 | Batchsize: 32 | Steps: 16
Traceback (most recent call last):
  File "/work/multigpu.py", line 104, in <module>
    mp.spawn(main, args=(world_size,), nprocs=world_size)
  File "/x/torch/multiprocessing/spawn.py", line 215, in join
    raise ProcessRaisedException(msg, error_index, failed_process.pid)
torch.multiprocessing.spawn.ProcessRaisedException: 

-- Process 2 terminated with the following error:
Traceback (most recent call last):
  File "/x/torch/multiprocessing/spawn.py", line 90, in _wrap
    fn(i, *args)
  File "/work/multigpu.py", line 62, in _run_batch
    raise OSError("image file is truncated")
OSError: image file is truncated
Epoch 3 | Batchsize: 32 | Steps: 16
"""


def test_an_mp_spawn_childs_relayed_traceback_is_that_local_ranks(tmp_path):
    """mp.spawn relays a dead child's traceback under `-- Process N terminated`: those lines are
    process N's (its local rank), up to the first line that is not part of a traceback."""
    (tmp_path / "console.log").write_text(SPAWN_CONSOLE)
    events = _parse(tmp_path)[1]["console.log"].sort("line")
    ranks = dict(_rows(events, "line", "local_rank"))
    assert [ranks[n] for n in range(9, 16)] == [2] * 7, ranks
    assert ranks[2] is None and ranks[16] is None


@pytest.mark.parametrize("path, hints", [
    ("logs/worker-0a1b2c3d4e5f60718293a4b5c6d7e8f9-01000000-31412.err", {}),     # Ray: the last number is a pid
    ("logs/python-core-worker-0a1b2c3d4e5f6071_31412.log", {}),
    ("train-77-3.out", {"rank": 3}),                                            # srun --output=%x-%j-%t.out
    ("node07/rank_5.log", {"rank": 5, "host": "node07"}),
])
def test_path_hints(path, hints):
    assert path_hints(path) == hints


def test_an_srun_task_that_holds_a_nodes_ranks_names_none():
    """`srun --ntasks-per-node=1 torchrun ...`: task 1 is a node; its lines' own markers (and the
    processes NCCL names) say which rank, the label does not."""
    lines = ["1: [rank8]:[E1203 10:00:01.000000001 ProcessGroupNCCL.cpp:632] [Rank 8] Watchdog caught collective operation timeout",
             "1: [rank9]:[E1203 10:00:01.000000001 ProcessGroupNCCL.cpp:632] [Rank 9] Watchdog caught collective operation timeout",
             "1: Waiting up to 30 seconds for all training processes to terminate.",
             "0: [rank0]:[E1203 10:00:01.000000001 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout",
             "0: epoch 3 step 120 loss 0.52"]
    df, _ = parse_batch(pl.Series("text", lines, dtype=pl.String), 1, FileContext("slurm-9.out"))
    assert df["rank"].to_list() == [8, 9, None, 0, 0]


GLUED_TRACEBACK = """\
[2026-03-02 11:20:01 TP3] Scheduler hit an exception: Traceback (most recent call last):
  File "/srv/engine/scheduler.py", line 88, in run_scheduler
    worker = Worker(args)
  File "/srv/engine/comm.py", line 41, in init
    raise RuntimeError("NCCL error: unhandled system error")
RuntimeError: NCCL error: unhandled system error

[2026-03-02 11:20:02 TP0] Received sigquit from a child process. It usually means the child failed.
"""


def test_a_traceback_glued_to_a_log_message_is_that_messages_rank(tmp_path):
    """A logger's message that ends with the traceback's first line: the bare frames and the
    exception after it are one traceback, of the message's rank."""
    (tmp_path / "server.log").write_text(GLUED_TRACEBACK)
    events = _parse(tmp_path)[1]["server.log"].sort("line")
    kinds = dict(_rows(events, "line", "kind"))
    assert [kinds[n] for n in (2, 3, 4, 5)] == ["traceback_frame"] * 4
    assert kinds[6] == "traceback"
    assert dict(_rows(events, "line", "rank"))[6] == 3


SRUN_WAIT = """\
0: step 8/8 done
srun: First task exited 30s ago
srun: StepId=77.0 task 1: running
srun: StepId=77.0 tasks 0,2-3: exited
srun: error: n2: task 1: Killed
"""


def test_srun_task_states_after_its_wait_are_rows_per_task(tmp_path):
    """srun's report after --wait: the tasks still running and those that exited, one row each."""
    (tmp_path / "slurm-77.out").write_text(SRUN_WAIT)
    exits = _parse(tmp_path)[0]["slurm-77.out"]
    out = pl.from_arrow(srun.expand_task_ranges(exits.to_arrow().cast(SCHEMAS["exits"])))
    states = out.filter(pl.col("reason").is_in(["still_running", "task_exited"])).sort("line", "task")
    assert _rows(states, "line", "task", "reason") == [
        (3, 1, "still_running"), (4, 0, "task_exited"), (4, 2, "task_exited"), (4, 3, "task_exited")]
