"""Several jobs in one input (correlator/jobs.py): `analyze` refuses them with one line naming the
jobs and how to pick one; `ingest` stores each; one job's layouts (nodes, restarts, a launcher
inside Slurm) are never taken for several."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from correlator.jobs import find_jobs, separable

ROOT = Path(__file__).parent.parent
SAMPLES = ROOT / "samples"
CLI = Path(sys.executable).parent / "correlator"


def cli(*args):
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CORRELATOR_DB_TIMEOUT": "5"})


def touch(root: Path, *names: str) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    return root


def test_analyze_refuses_the_samples_tree_naming_the_jobs():
    run = cli("analyze", SAMPLES, "-f", "json")
    assert run.returncode == 2 and run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    line = lines[0]
    n = sum(1 for p in SAMPLES.iterdir() if (p / "logs").is_dir())
    assert line.startswith(f"error: {SAMPLES} holds {n} jobs: ") and f"+{n - 4} more" in line
    # jobs that leave no name (mpirun's console) beside the named ones are jobs of their own
    assert "slurm job 3 in" in line and "logs in " in line and "correlator analyze " in line and "--one-job" in line
    assert f"correlator ingest {SAMPLES}" in line


def test_every_sample_alone_is_one_job():
    for sample in sorted(p for p in SAMPLES.iterdir() if (p / "logs").is_dir()):
        for given in (sample, sample / "logs"):
            assert len(find_jobs(given)) <= 1, (given, find_jobs(given))
    jobs = find_jobs(SAMPLES)
    assert len(jobs) == sum(1 for p in SAMPLES.iterdir() if (p / "logs").is_dir()) and separable(jobs)
    assert {j.where.name for j in jobs} == {p.name for p in SAMPLES.iterdir() if (p / "logs").is_dir()}


@pytest.mark.parametrize("layout", [
    # one multi-node torchrun job: the agents' run directories under host directories...
    ["logs/node1/torchrun/none_a1b2c3d4/attempt_0/0/stdout.log", "logs/node2/torchrun/none_e5f6g7h8/attempt_0/0/stdout.log"],
    # ...or side by side in one shared --log-dir, or with their own rdzv id wherever they lie
    ["logs/none_a1b2c3d4/attempt_0/0/stdout.log", "logs/none_e5f6g7h8/attempt_0/0/stdout.log"],
    ["logs/a/job42_a1b2c3d4/attempt_0/0/stdout.log", "logs/b/job42_e5f6g7h8/attempt_0/0/stdout.log"],
    # restarts of one run; a launcher inside a Slurm job; srun's per-task files of that job
    ["logs/none_a1b2c3d4/attempt_0/0/stdout.log", "logs/none_a1b2c3d4/attempt_1/0/stdout.log"],
    ["slurm-77.out", "run/none_a1b2c3d4/attempt_0/0/stdout.log", "train-77-0.out", "train-77-1.out"],
    # Kubernetes pods, no job names at all
    ["train-worker-0/pytorch.log", "train-worker-1/pytorch.log"],
])
def test_one_jobs_layouts_are_one_job(layout, tmp_path):
    assert len(find_jobs(touch(tmp_path, *layout))) <= 1, find_jobs(tmp_path)


def test_an_unnamed_job_beside_named_ones_is_its_own_and_alone_it_is_the_whole_input(tmp_path):
    touch(tmp_path, "a/logs/torchrun/none_a1b2c3d4/attempt_0/0/stdout.log", "b/logs/console.log", "notes/todo.txt")
    jobs = find_jobs(tmp_path)
    assert [(j.name, j.where) for j in jobs] == [("torchrun run", tmp_path / "a"), ("logs", tmp_path / "b")]
    assert len(find_jobs(tmp_path / "b")) == 0


def test_a_run_directory_given_itself_is_one_job_where_it_was_given():
    run = next((SAMPLES / "tr-stalled_rank-4" / "logs" / "torchrun").iterdir())
    assert [j.where for j in find_jobs(run)] == [run]


def test_two_slurm_jobs_in_one_directory_are_named_but_not_separable(tmp_path):
    touch(tmp_path, "slurm-41.out", "slurm-42.out", "sacct.txt")
    jobs = find_jobs(tmp_path)
    assert [j.name for j in jobs] == ["slurm job 41", "slurm job 42"] and not separable(jobs)
    run = cli("analyze", tmp_path)
    assert run.returncode == 2 and "holds 2 jobs" in run.stderr and "slurm-41.out" in run.stderr


def test_default_rdzv_runs_in_different_job_directories_are_different_jobs(tmp_path):
    touch(tmp_path, "job-a/logs/torchrun/none_a1b2c3d4/attempt_0/0/stdout.log",
          "job-b/logs/torchrun/none_e5f6g7h8/attempt_0/0/stdout.log")
    jobs = find_jobs(tmp_path)
    assert [j.where for j in jobs] == [tmp_path / "job-a", tmp_path / "job-b"] and separable(jobs)
    # given together on the command line, they are the user's one job
    assert len(find_jobs([tmp_path / "job-a" / "logs", tmp_path / "job-b" / "logs"])) == 1


@pytest.fixture
def two_jobs(tmp_path):
    for name in ("tr-stalled_rank-4", "slurm-oom"):
        shutil.copytree(SAMPLES / name, tmp_path / "tree" / name)
    return tmp_path / "tree"


def test_ingest_stores_each_job_of_a_tree_and_one_job_reads_it_whole(two_jobs, tmp_path):
    db = tmp_path / "h.duckdb"
    run = cli("ingest", two_jobs, "--db", db)
    assert run.returncode == 0, run.stderr
    rows = json.loads(cli("sql", "select job_id, kind from incidents order by job_id", "--db", db, "-f", "json").stdout)
    assert rows == [{"job_id": "39", "kind": "rank_crashed"}, {"job_id": "tr-stalled_rank-4", "kind": "rank_stalled"}]
    assert cli("analyze", two_jobs).returncode == 2
    assert cli("timeline", two_jobs).returncode == 2
    whole = cli("analyze", two_jobs, "--one-job", "-f", "json")
    assert whole.returncode == 0 and json.loads(whole.stdout)["job"]["files"] > 12
