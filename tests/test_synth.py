"""The synthetic job generator writes well-formed logs in the formats of formats.md, with a coherent truth."""
from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from correlator.synth import JobSpec, generate_job, host_names
from correlator.synth.__main__ import main as cli_main

# Regexes quoted from /work/shared/formats.md.
NCCL_LINE = re.compile(r"^(?:\[(?P<ts>[^\]]+)\] )?(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) (?:\[(?P<dev>\d+)\] (?:(?P<file>[\w./-]+):(?P<line>\d+)(?: \((?P<func>\w+)\))? NCCL (?P<lvl>WARN)|NCCL (?P<lvl2>INFO)|(?P<ms>[\d.]+) (?P<tfunc>\w+):(?P<tline>\d+) NCCL (?P<lvl3>TRACE))|NCCL (?P<lvl4>CALL)) (?P<msg>.*)$")
NCCL_INIT = re.compile(r"NCCL INFO (?:\[Rank (?P<r0>\d+)\] )?(?:(?P<fn>ncclCommInitRank\w*|ncclCommSplit|ncclCommShrink|ncclCommGrow|ncclCommInitAll) )?comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+) nvmlDev (?P<nvml>\d+) busId (?P<bus>[0-9a-f]+) (?:parent (?P<parent>0x[0-9a-f]+) (?:splitCount|childCount) ?(?P<cnt>\d+)? ?color (?P<color>-?\d+) key (?P<key>-?\d+)|commId 0x(?P<commid>[0-9a-f]+)) ?- Init (?P<phase>START|COMPLETE)")
NCCL_COLL = re.compile(r"NCCL INFO (?P<op>\w+): opCount (?P<opcount>[0-9a-f]+) sendbuff (?P<send>0x[0-9a-f]+|\(nil\)) recvbuff (?P<recv>0x[0-9a-f]+|\(nil\)) count (?P<count>\d+) datatype (?P<dtype>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-f]+) \[nranks=(?P<nranks>\d+)\] stream (?P<stream>0x[0-9a-f]+|\(nil\))")
NCCL_VERSION = re.compile(r"NCCL version (?P<ver>\d+\.\d+\.\d+)(?P<suffix>[^+\s]*)\+cuda(?P<cuda>\d+\.\d+)")
C10_NEW = re.compile(r"^(?:\[rank(?P<grank>\d+)\]:)?\[(?P<sev>[IWEF])(?P<mmdd>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d)\.(?P<frac>\d{9}) (?P<file>[^:\]]+):(?P<line>\d+)\] (?P<msg>.*)$")
C10_OLD = re.compile(r"^\[(?P<sev>[IWEF]) (?P<file>[^:\]]+):(?P<line>\d+)\] (?P<msg>.*)$")
WATCHDOG = re.compile(r"\[Rank (?P<rank>\d+)\] (?:Watchdog caught|Caught) collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:, NumelIn=(?P<nin>-?\d+), NumelOut=(?P<nout>-?\d+))?, Timeout\(ms\)=(?P<to>\d+)\) ran for (?P<ran>\d+) milliseconds before timing out\.")
PG_STATUS = re.compile(r"(?:Exception \(either an error or timeout\) detected by watchdog at work: (?P<seq1>\d+), last enqueued NCCL work: (?P<enq1>-?\d+), last completed NCCL work: (?P<done1>-?\d+)\.|failure detected by watchdog at work sequence id: (?P<seq2>\d+) PG status: last enqueued work: (?P<enq2>-?\d+), last completed work: (?P<done2>-?\d+))")
PG_PREFIX = re.compile(r"\[PG (?:ID )?(?P<pgid>\d+) (?:PG GUID (?P<guid>[^\s(]+)(?:\((?P<desc>[^)]*)\))? )?Rank (?P<rank>\d+)\]")
DESYNC_FINISHED = re.compile(r"\[(?P<ranks>[\d, ]+)\] finished collective #(?P<seq>\d+), but didn't join collective #(?P<next>\d+)")
ELASTIC_NEW = re.compile(r"^(?:\[rank(?P<rank>\d+)\]:)?(?P<lvl>[VIWEC])(?P<mmdd>\d{4}) (?P<hms>\d\d:\d\d:\d\d)\.(?P<us>\d{6}) (?P<pid>\d+) (?P<path>\S+):(?P<line>\d+)\](?P<trace> \[!?\d+(?:/\d+)+(?:_\d+)?\])? (?P<msg>.*)$")
ELASTIC_OLD = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (?P<logger>torch\.distributed\.[\w.]+): \[(?P<lvl>[A-Z]+)\] (?P<msg>.*)$")
ELASTIC_FAILED = re.compile(r"failed \(exitcode: (?P<rc>-?\d+)\) local_rank: (?P<lr>\d+) \(pid: (?P<pid>\d+)\) of binary: (?P<bin>.*)$")
CHILD_FAILED = re.compile(r"^\[(?P<idx>\d+)\]:\n  time      : (?P<time>\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d)\n  host      : (?P<host>\S+)\n  rank      : (?P<rank>-?\d+) \(local_rank: (?P<lr>-?\d+)\)\n  exitcode  : (?P<rc>-?\d+) \(pid: (?P<pid>\d+)\)\n  error_file: (?P<ef>.*)\n  traceback : (?P<tb>.*)", re.M)
SRUN_ERROR = re.compile(r"^srun: error: (?P<hosts>\S+): (?:task|tasks) (?P<tasks>[\d,\-\[\]]+): (?P<what>Exited with exit code (?P<rc>\d+)|Out Of Memory|(?P<sig>[A-Z][A-Za-z /-]+?)(?P<core> \(core dumped\))?)$")
LABEL = re.compile(r"^(?:P(?P<het>\d+) )?\s*(?P<task>\d+): (?P<rest>.*)$")
BANNER = re.compile(r"\*\*\* (?P<kind>JOB|STEP) (?P<id>\d+(?:\.\d+|\.batch|\.extern)?) ON (?P<node>\S+) (?:CANCELLED AT (?P<at>\S+)(?: DUE TO (?P<why>TIME LIMIT|PREEMPTION|NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS|JOB REQUEUE))?|FAILED \(non-zero exit code or other failure mode\)|UNCORRECTABLE MEMORY ERROR AT (?P<at2>\S+)) \*\*\*")
KUBECTL_TS = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) (?P<msg>.*)$")
TEE = re.compile(r"^\[(?P<role>[A-Za-z_][\w-]*?)(?P<lr>\d+)\]:(?P<rest>.*)$")
PROGRESS = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO \[rank (?P<rank>\d+)\] step (?P<step>\d+)/(?P<n>\d+) loss [\d.]+$")


def small(**overrides) -> JobSpec:
    base = dict(nranks=8, ranks_per_host=4, n_pgs=2, steps=6, collectives_per_step=4, fault="stall",
                fault_ranks=[5], seed=1)
    base.update(overrides)
    return JobSpec(**base)


def all_lines(job: Path) -> list[str]:
    return [line for f in sorted((job / "logs").rglob("*")) if f.is_file() for line in f.read_text().splitlines()]


def check_nccl_and_c10(lines: list[str], era: str) -> dict[str, int]:
    """Every NCCL / c10 line parses; returns counts per kind of line."""
    counts = {"nccl": 0, "coll": 0, "init": 0, "c10": 0, "watchdog": 0, "status": 0}
    c10 = C10_NEW if era == "new" else C10_OLD
    for line in lines:
        if " NCCL INFO " in line or " NCCL WARN " in line:
            assert NCCL_LINE.match(line), line
            counts["nccl"] += 1
            counts["coll"] += bool(NCCL_COLL.search(line))
            counts["init"] += bool(NCCL_INIT.search(line))
        if "ProcessGroupNCCL.cpp:" in line and not line.startswith(("Exception raised", "  what()")):
            assert c10.match(line), line
            counts["c10"] += 1
            counts["watchdog"] += bool(WATCHDOG.search(line))
            counts["status"] += bool(PG_STATUS.search(line))
    return counts


def test_torchrun_stall_layout_formats_and_truth(tmp_path):
    truth = generate_job(tmp_path, small(desync_debug=True))
    assert truth["kind"] == "rank_stalled" and truth["culprit_ranks"] == [5] and truth["truth"] == "generated"
    assert json.loads((tmp_path / "expected.json").read_text()) == truth
    for host in host_names(small()):
        assert (tmp_path / "logs" / host / "torchrun.log").is_file()
        for local_rank in range(4):
            (rank_dir,) = (tmp_path / "logs" / host).glob(f"*_*/attempt_0/{local_rank}")
            assert (rank_dir / "stdout.log").is_file() and (rank_dir / "stderr.log").is_file()
    lines = all_lines(tmp_path)
    counts = check_nccl_and_c10(lines, "new")
    assert counts["init"] == 8 * 3 * 2 and counts["coll"] > 8 * 4 * 3
    seq = truth["divergence"]["seq"]
    watchdogs = [WATCHDOG.search(line) for line in lines if WATCHDOG.search(line)]
    assert watchdogs and all(int(m["seq"]) == seq and m["nin"] for m in watchdogs)
    statuses = [PG_STATUS.search(line) for line in lines if PG_STATUS.search(line)]
    assert statuses and all(int(m["seq2"]) == seq and int(m["done2"]) == seq - 1 for m in statuses)
    assert all(PG_PREFIX.search(line) for line in lines if "failure detected by watchdog" in line)
    desync = {DESYNC_FINISHED.search(line)["ranks"] for line in lines if DESYNC_FINISHED.search(line)}
    assert desync == {"5"}
    console = "\n".join((tmp_path / "logs" / host / "torchrun.log").read_text() for host in host_names(small()))
    agent_lines = [line for line in console.splitlines() if line[:1] in "WEI" and line[1:2].isdigit()]
    assert agent_lines and all(ELASTIC_NEW.match(line) for line in agent_lines)
    assert any(ELASTIC_FAILED.search(line) for line in agent_lines)
    assert [m["rank"] for m in CHILD_FAILED.finditer(console)]


def test_opcount_is_hex_per_communicator_and_matches_seqnum(tmp_path):
    generate_job(tmp_path, small(fault="none", steps=20, n_pgs=1))
    for stdout in (tmp_path / "logs").rglob("stdout.log"):
        per_comm: dict[str, list[int]] = {}
        for line in stdout.read_text().splitlines():
            m = NCCL_COLL.search(line)
            if m:
                per_comm.setdefault(m["comm"], []).append(int(m["opcount"], 16))
        assert len(per_comm) == 2
        for counts in per_comm.values():
            assert counts == list(range(len(counts))) and len(counts) >= 20


@pytest.mark.parametrize("version,start_marker", [("2.18.3", " comm 0x"), ("2.21.5", "ncclCommInitRank comm"),
                                                  ("2.26.2", "ncclCommInitRankConfig comm"),
                                                  ("2.29.1", "[Rank 0] ncclCommInitRankConfig comm")])
def test_nccl_version_variants(tmp_path, version, start_marker):
    generate_job(tmp_path, small(nccl_version=version, fault="transport", fault_ranks=[1], launcher="srun"))
    lines = [LABEL.match(line)["rest"] if LABEL.match(line) else line for line in all_lines(tmp_path)]
    check_nccl_and_c10(lines, "new")
    starts = [line for line in lines if "Init START" in line]
    assert any(start_marker in line for line in starts)
    assert all(NCCL_INIT.search(line)["phase"] == "START" for line in starts)
    assert [NCCL_VERSION.search(line)["ver"] for line in lines if NCCL_VERSION.search(line)][0] == version
    warns = [line for line in lines if " NCCL WARN " in line]
    assert warns and all(NCCL_LINE.match(line)["ts"] is None for line in warns) == (version < "2.26")


def test_old_torch_era(tmp_path):
    truth = generate_job(tmp_path, small(torch_era="old", nccl_version="2.18.3", fault="crash"))
    lines = all_lines(tmp_path)
    counts = check_nccl_and_c10(lines, "old")
    assert counts["watchdog"] and counts["status"]
    assert not any(line.startswith("[rank") and "]:[" in line for line in lines)
    assert all(WATCHDOG.search(line)["nin"] is None for line in lines if WATCHDOG.search(line))
    assert any("Exception (either an error or timeout) detected by watchdog at work" in line for line in lines)
    console = [line for h in host_names(small()) for line in (tmp_path / "logs" / h / "torchrun.log").read_text().splitlines()]
    assert any(ELASTIC_OLD.match(line) for line in console)
    assert truth["kind"] == "rank_crashed" and any("ValueError: corrupt sample" in line for line in lines)


def test_srun_combined_file(tmp_path):
    truth = generate_job(tmp_path, small(launcher="srun", fault="oom", fault_ranks=[6]))
    (out,) = (tmp_path / "logs").glob("slurm-*.out")
    lines = out.read_text().splitlines()
    for line in lines:
        assert line.startswith(("srun: ", "slurmstepd: ")) or LABEL.match(line), line
    errors = [SRUN_ERROR.match(line) for line in lines if line.startswith("srun: error:")]
    assert errors and all(errors)
    assert errors[0]["what"] == "Out Of Memory" and errors[0]["tasks"] == "6"
    banners = [BANNER.search(line) for line in lines if BANNER.search(line)]
    assert [b["kind"] for b in banners] == ["STEP"]
    assert any("oom-kill event(s)" in line and line.startswith("4: ") for line in lines)
    assert truth["exit_codes"]["6"] == -9


def test_srun_time_limit_and_label_padding(tmp_path):
    truth = generate_job(tmp_path, small(launcher="srun", fault="scheduler_timeout", nranks=12, n_pgs=0))
    (out,) = (tmp_path / "logs").glob("slurm-*.out")
    lines = out.read_text().splitlines()
    assert any(line.startswith(" 7: ") for line in lines)
    whys = {BANNER.search(line)["kind"]: BANNER.search(line)["why"] for line in lines if BANNER.search(line)}
    assert whys == {"JOB": "TIME LIMIT", "STEP": "TIME LIMIT"}
    assert truth["kind"] == "scheduler_termination" and truth["culprit_ranks"] == [] and truth["divergence"] is None


def test_kubernetes_pods_have_utc_timestamps_on_every_line(tmp_path):
    truth = generate_job(tmp_path, small(launcher="kubernetes", fault="exit_early"))
    pods = sorted(p.stem for p in (tmp_path / "logs").glob("*.log"))
    assert pods == sorted(host_names(small(launcher="kubernetes")))
    lines = all_lines(tmp_path)
    stamped = [KUBECTL_TS.match(line) for line in lines]
    assert all(stamped)
    rest = [m["msg"] for m in stamped]
    assert any(TEE.match(msg) and TEE.match(msg)["role"] == "default" for msg in rest)
    check_nccl_and_c10([TEE.match(m)["rest"] if TEE.match(m) else m for m in rest], "new")
    assert truth["kind"] == "rank_exited_early" and truth["exit_codes"]["5"] == 0


def _progress_times(job: Path, rank: int) -> list[datetime]:
    times = []
    for line in all_lines(job):
        m = PROGRESS.match(line)
        if m and int(m["rank"]) == rank:
            times.append(datetime.strptime(m["ts"], "%Y-%m-%d %H:%M:%S,%f"))
    return times


def test_clock_skew_shifts_only_the_skewed_host(tmp_path):
    generate_job(tmp_path / "a", small(fault="none"))
    generate_job(tmp_path / "b", small(fault="none", clock_skew_s={"gpu-002": 30.0}))
    shift_skewed = {(b - a).total_seconds() for a, b in zip(_progress_times(tmp_path / "a", 5), _progress_times(tmp_path / "b", 5))}
    shift_plain = {(b - a).total_seconds() for a, b in zip(_progress_times(tmp_path / "a", 1), _progress_times(tmp_path / "b", 1))}
    assert shift_skewed == {30.0} and shift_plain == {0.0}


def test_truncated_and_dropped_culprit_logs(tmp_path):
    generate_job(tmp_path / "cut", small(fault="crash", truncate_culprit_log=True))
    stderr = next((tmp_path / "cut" / "logs" / "gpu-002").glob("*/attempt_0/1/stderr.log")).read_text()
    assert not stderr.endswith("\n") and "ValueError" not in stderr.splitlines()[-1][-10:]
    generate_job(tmp_path / "gone", small(fault="crash", drop_culprit_log=True))
    rank_dir = next((tmp_path / "gone" / "logs" / "gpu-002").glob("*/attempt_0/1"))
    assert not any(rank_dir.iterdir())


@pytest.mark.parametrize("fault,kind", [("missing_collective", "missing_collective"), ("mismatch", "collective_mismatch")])
def test_divergent_collective_is_visible_on_the_culprit(tmp_path, fault, kind):
    truth = generate_job(tmp_path, small(fault=fault, fault_ranks=[2], launcher="srun"))
    assert truth["kind"] == kind
    numels: dict[int, set[str]] = {}
    for line in all_lines(tmp_path):
        label, w = LABEL.match(line), WATCHDOG.search(line)
        if label and w and int(w["seq"]) == truth["divergence"]["seq"]:
            numels.setdefault(int(label["task"]), set()).add(w["nin"])
    majority = {n for r, ns in numels.items() if r != 2 for n in ns}
    assert len(majority) == 1 and numels.get(2, set()).isdisjoint(majority)


def test_cli_and_size_knob(tmp_path, capsys):
    assert cli_main([str(tmp_path), "--nranks", "8", "--fault", "none", "--target-mb", "2", "--skew", "gpu-001=1.5"]) == 0
    size = sum(f.stat().st_size for f in (tmp_path / "logs").rglob("*") if f.is_file())
    assert 1.5e6 < size < 4e6
    assert json.loads((tmp_path / "expected.json").read_text())["clock_skew_s"] == {"gpu-001": 1.5}
    assert cli_main([str(tmp_path / "x"), "--skew", "oops"]) == 2
