"""--engine ray on a local Ray (2 CPUs): every sample and a generated 1,024-rank job give the
in-process tables and report; a worker killed mid-task is retried with nothing lost or doubled;
a file a worker cannot read is that file's read error, as in-process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from typer.testing import CliRunner  # noqa: E402

from correlator import engine_ray, lake, pipeline  # noqa: E402
from correlator.cli import app  # noqa: E402
from correlator.discover import discover  # noqa: E402
from correlator.synth import JobSpec, generate_job  # noqa: E402
from lake_compare import lake_contents, rows  # noqa: E402
from correlator.parsers.files import parse_sources  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(p.parent / "logs" for p in (ROOT / "samples").glob("*/expected.json") if (p.parent / "logs").is_dir())
SMALL_GROUPS = 16 << 10  # bytes: even a sample is then several tasks


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    # address="local": a fresh instance, never a cluster that happens to run on the machine (or a
    # stale /tmp/ray/ray_current_cluster that one left behind)
    ray.init(address="local", num_cpus=2, object_store_memory=200 * 1024**2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def parsed_tables(logs: Path, parse_groups=None) -> dict:
    """The tables as the parsers made them, before the queries (which pick one of a tee'd line's
    copies by row order: their rows may differ where the report does not)."""
    parsed = pipeline.parse_job(logs, window=None, parse_groups=parse_groups)
    try:
        return {name: rows(table) for name, table in pipeline.tables_of(parsed.con).items()}
    finally:
        pipeline._close(parsed)


def test_every_sample_is_the_same_on_ray():
    assert len(SAMPLES) >= 40
    on_ray = engine_ray.group_parser(group_bytes=SMALL_GROUPS)
    for sample in SAMPLES:
        assert parsed_tables(sample, on_ray) == parsed_tables(sample), sample
        assert pipeline.analyze(sample, parse_groups=on_ray).report == pipeline.analyze(sample).report, sample
        full = {"window": None, "keep_tables": True}
        assert (pipeline.analyze(sample, parse_groups=on_ray, **full).report
                == pipeline.analyze(sample, **full).report), sample


@pytest.fixture(scope="module")
def job_1024(tmp_path_factory):
    where = tmp_path_factory.mktemp("j1024")
    truth = generate_job(where, JobSpec(nranks=1024, ranks_per_host=8, steps=6, seed=3))
    return where / "logs", truth


def test_a_1024_rank_job_is_the_same_on_ray(job_1024):
    logs, truth = job_1024
    on_ray = engine_ray.group_parser(group_bytes=1 << 20)
    assert parsed_tables(logs, on_ray) == parsed_tables(logs)
    report = pipeline.analyze(logs, parse_groups=on_ray).report
    assert report == pipeline.analyze(logs).report
    assert report["verdict"]["culprit_ranks"] == truth["culprit_ranks"]


def _killed_once(marker: Path):
    """parse_group, but the first task to run kills its worker (no cleanup, as SIGKILL does)."""
    def parse(sources, window):
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return engine_ray.parse_group(sources, window)
        os.close(fd)
        os.kill(os.getpid(), 9)
    return parse


def test_a_worker_killed_mid_ingest_loses_and_doubles_nothing(tmp_path, job_1024):
    logs, _ = job_1024
    marker = tmp_path / "killed"
    parse = engine_ray.group_parser(group_bytes=1 << 20, parse=_killed_once(marker))
    lake.write_job(tmp_path / "ray", pipeline.analyze(logs, keep_tables=True, window=None, parse_groups=parse))
    lake.write_job(tmp_path / "local", pipeline.analyze(logs, keep_tables=True, window=None))
    assert marker.exists()  # a worker did die
    assert lake_contents(tmp_path / "ray") == lake_contents(tmp_path / "local")


def test_a_file_a_worker_cannot_read_is_its_read_error(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for rank in range(3):
        (job / f"rank{rank}.log").write_text(f"[rank {rank}] step 1/8 loss 1.0\n")
    sources, _ = discover(job)
    (job / "rank1.log").unlink()  # gone between the driver's listing and the worker's read
    on_ray = list(engine_ray.group_parser(group_bytes=1)(sources, None))
    found = {r.path: r.skip_reason for group in on_ray for r in group}
    assert found == {r.path: r.skip_reason for r in parse_sources(sources)}
    assert found["rank1.log"] == "unreadable: FileNotFoundError"


def test_groups_are_consecutive_and_capped():
    sources, _ = discover(SAMPLES[0])
    groups = engine_ray.split_groups(sources, 1)
    assert [s for g in groups for s in g] == sources and all(len(g) == 1 for g in groups)
    assert engine_ray.split_groups(sources, 1 << 30, max_files=5)[0] == sources[:5]


def test_cli_analyze_and_ingest_with_engine_ray(tmp_path):
    runner = CliRunner()
    sample = str(SAMPLES[0])
    on_ray = runner.invoke(app, ["analyze", sample, "--engine", "ray", "-f", "json"])
    local = runner.invoke(app, ["analyze", sample, "-f", "json"])
    assert on_ray.exit_code == 0, on_ray.output
    assert json.loads(on_ray.stdout) == json.loads(local.stdout)
    for engine, where in (("ray", tmp_path / "ray"), ("local", tmp_path / "local")):
        result = runner.invoke(app, ["ingest", sample, str(SAMPLES[1]), "--lake", str(where), "--engine", engine])
        assert result.exit_code == 0, result.output
    assert lake_contents(tmp_path / "ray") == lake_contents(tmp_path / "local")


def test_an_unreachable_cluster_is_one_line():
    """In a process of its own: this one is already connected to the tests' Ray."""
    code = f"from correlator.cli import app; app(['analyze', {str(SAMPLES[0])!r}, '--engine', 'ray', '--address', '127.0.0.1:1'])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: cannot reach the Ray cluster at 127.0.0.1:1: Connection refused"
