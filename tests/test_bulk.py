"""The bulk lane (parsers/bulk/) changes speed, never results: every collectives row, time and
identity equals what the general engine gives for the same lines, and what it refuses goes the
general way."""
from __future__ import annotations

from functools import partial
from pathlib import Path

import polars as pl
import pytest

import correlator.parsers.bulk.probes

import correlator.parsers.bulk.skim
import correlator.parsers.files
from correlator.discover import discover
from correlator.synth import JobSpec, generate_job
from correlator.parsers.files import parse_sources
from correlator.parsers.reader import iter_chunks

COLL = "AllReduce: opCount {seq:x} sendbuff 0x7f00 recvbuff 0x7f00 count 1024 datatype 7 op 0 root 0 comm 0x55d6aacc52a0 [nranks=4] stream 0x55d9"
HOSTILE_LINES = [
    "[I1129 10:00:00.000000000 ProcessGroupNCCL.cpp:1000] [PG ID 0 PG GUID 0 Rank 1] timed line",
    "node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=1),
    "node1:30162:30163 [0] NCCL INFO " + COLL.format(seq=2) + "\r",                        # CRLF
    "node1:30162:30162 NCCL INFO " + COLL.format(seq=3),                                   # no [dev]
    "3: node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=4),                            # srun label
    "[default1]:node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=5),                    # torchrun tee
    "node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=6).replace("count", "co\x1b[31munt"),  # ANSI
    "node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=7).replace("datatype 7", "datatype x"),  # garbage
    "node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=8).replace("opCount 8", "opCount zz"),
    "node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=9)[:60],                          # cut
    "[2025-03-12 10:11:12] node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=10),        # timed prefix
    "node1:30162:30162 [0] NCCL WARN " + COLL.format(seq=11),                              # not INFO
    "\x1b]0;title\x07node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=12),              # OSC in prefix
    "node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=13).replace("comm 0x55d6aacc52a0", "comm 0xZZ"),
    "node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=14),
]


def _parse(root: Path, bulk: bool, monkeypatch) -> dict[str, pl.DataFrame]:
    if not bulk:
        monkeypatch.setattr(correlator.parsers.bulk.probes, "bulk_specs", lambda: ())
    sources, _ = discover(root)
    results = parse_sources(sources, per_file=False)
    monkeypatch.undo()
    tables = {name: pl.concat([pl.from_arrow(t) for t in parts]) for name, parts in results.group_tables.items()}
    tables["_files"] = pl.DataFrame([{"path": r.path, "unparsed": r.unparsed, "kinds": sorted(r.kinds),
                                      "lines": r.stats.lines} for r in results])
    return tables


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(df.columns, nulls_last=True)


def _assert_same(root: Path, monkeypatch) -> dict[str, pl.DataFrame]:
    general = _parse(root, False, monkeypatch)
    bulk = _parse(root, True, monkeypatch)
    assert set(general) == set(bulk)
    for name in general:
        if name == "events":  # the lane keeps only the last line per stream and comm
            continue
        assert _sorted(bulk[name]).equals(_sorted(general[name])), name
    kept = bulk["events"].join(general["events"], on=["file", "line"], how="anti")
    assert kept.is_empty(), "every event the lane keeps is one the engine gives"
    return bulk


def test_hostile_coll_lines_parse_as_the_engine_parses_them(tmp_path, monkeypatch):
    (tmp_path / "rank1.log").write_text("\n".join(HOSTILE_LINES) + "\n")
    tables = _assert_same(tmp_path, monkeypatch)
    seqs = sorted(tables["collectives"]["seq"].to_list())
    # 4: one srun-labelled line is not a labelled file; 7, 8, 9, 13: malformed; 11: WARN, not INFO
    # (the engine takes it, the lane leaves it); 6 and 12: their escapes cleaned, then parsed.
    assert seqs == [1, 2, 3, 5, 6, 10, 11, 12, 14]


@pytest.mark.parametrize("launcher", ["torchrun", "srun", "kubernetes"])
def test_generated_jobs_give_the_same_tables_either_way(tmp_path, monkeypatch, launcher):
    spec = JobSpec(nranks=8, ranks_per_host=4, n_pgs=2, steps=6, collectives_per_step=4, fault="stall",
                   fault_ranks=[5], seed=3, launcher=launcher, coll_lines=True)
    generate_job(tmp_path / "job", spec)
    tables = _assert_same(tmp_path / "job" / "logs", monkeypatch)
    coll = tables["collectives"].filter(pl.col("counter") == "nccl_opcount")
    assert coll.height > 100
    assert tables["collectives"]["ts"].null_count() < tables["collectives"].height
    # of the events, each file keeps its last COLL line (where that rank stopped)
    kept = tables["events"].filter(pl.col("kind") == "nccl_coll").group_by("file").agg(pl.col("line").max())
    last = coll.group_by("file").agg(pl.col("line").max())
    assert _sorted(kept).equals(_sorted(last))


def test_a_window_types_the_last_lines_per_communicator_and_counts_the_rest(tmp_path):
    """Two communicators, one busy and one used once early: the window keeps the last lines of
    each (so the quiet one's last seq stays exact), counts the others, and keeps a line it cannot
    key; every line stays counted in the file."""
    busy = [COLL.format(seq=s) for s in range(20)]
    quiet = COLL.format(seq=0).replace("comm 0x55d6aacc52a0", "comm 0x55d6aacc52a1")
    keyless = COLL.format(seq=99).replace(" comm 0x55d6aacc52a0", "")
    lines = ["node1:30162:30162 [0] NCCL INFO " + t for t in [quiet, *busy, keyless]]
    (tmp_path / "rank0.log").write_text("\n".join(lines) + "\n")
    sources, _ = discover(tmp_path)
    results = parse_sources(sources, per_file=False, window=3)
    [result] = results
    rows = pl.concat([pl.from_arrow(t) for t in results.group_tables["collectives"]])
    by_comm = rows.group_by("comm").agg(pl.col("seq").sort()).sort("comm")
    assert by_comm.rows() == [("0x55d6aacc52a0", [17, 18, 19]), ("0x55d6aacc52a1", [0])]
    assert result.skimmed == 17 and result.stats.lines == 22
    events = pl.concat([pl.from_arrow(t) for t in results.group_tables["events"]])
    assert events.filter(pl.col("line") == 22)["kind"].to_list() == ["nccl"], "the keyless line is not skimmed"


def test_no_window_types_every_line(tmp_path):
    lines = ["node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=s) for s in range(20)]
    (tmp_path / "rank0.log").write_text("\n".join(lines) + "\n")
    sources, _ = discover(tmp_path)
    results = parse_sources(sources, per_file=False)
    assert results[0].skimmed == 0 and sum(t.num_rows for t in results.group_tables["collectives"]) == 20


def test_a_window_over_many_batches_keeps_what_one_batch_keeps(tmp_path, monkeypatch):
    """Lines outside the window are left out as each batch is read (parsers/bulk/window.py window_batch):
    a file read in many small batches gives the rows and counts of one read in one batch."""
    comms = ["0x55d6aacc52a0", "0x55d6aacc52a1"]
    lines = ["node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=s).replace(comms[0], comms[s % 7 == 0])
             for s in range(200)]
    (tmp_path / "rank0.log").write_text("\n".join(lines) + "\n")

    def parse(batch_bytes):
        monkeypatch.setattr(correlator.parsers.files, "iter_chunks", partial(iter_chunks, batch_bytes=batch_bytes))
        results = parse_sources(discover(tmp_path)[0], per_file=False, window=5)
        rows = pl.concat([pl.from_arrow(t) for t in results.group_tables["collectives"]])
        return _sorted(rows.select("comm", "seq", "line")), results[0].skimmed

    one, many = parse(1 << 20), parse(2000)
    assert one[0].equals(many[0]) and one[1] == many[1] == 190
    assert one[0].group_by("comm").agg(pl.col("seq").max()).sort("comm").rows() == [(comms[0], 199), (comms[1], 196)]


def test_a_window_keeps_apart_processes_that_share_a_file_and_a_comm_pointer(tmp_path):
    """srun -l puts every task in one file, and two processes may hold the same comm pointer
    value: task 1 stops early, task 0 goes on; task 1's last collective is still typed."""
    lines = ["0: node1:100:100 [0] NCCL INFO " + COLL.format(seq=s) for s in range(30)]
    lines.insert(3, "1: node2:200:200 [0] NCCL INFO " + COLL.format(seq=2))
    (tmp_path / "job.out").write_text("\n".join(lines) + "\n")
    results = parse_sources(discover(tmp_path)[0], per_file=False, window=4)
    rows = pl.concat([pl.from_arrow(t) for t in results.group_tables["collectives"]])
    assert rows.group_by("host").agg(pl.col("seq").max()).sort("host").rows() == [("node1", 29), ("node2", 2)]


def test_lines_left_out_still_weigh_in_the_files_srun_label_decision(tmp_path):
    """srun's label applies to a file where 30% of its lines carry it. Here 3 of 10 do, all COLL
    lines of one comm: a window of 1 types one of them, and the two left out still count, so the
    label (task 3) still applies to the one typed."""
    other = ["2026-11-29 21:22:13,484 INFO unlabelled line"] * 7
    coll = ["3: node1:12:12 [0] NCCL INFO " + COLL.format(seq=s) for s in range(3)]
    (tmp_path / "job.out").write_text("\n".join(other + coll) + "\n")
    results = parse_sources(discover(tmp_path)[0], per_file=False, window=1)
    rows = pl.concat([pl.from_arrow(t) for t in results.group_tables["collectives"]])
    assert rows.select("rank", "seq").rows() == [(3, 2)] and results[0].skimmed == 2


STEP = "2026-11-29 21:22:{:02},484 INFO [rank 1] step {}/900 loss 0.5"


def _skim(data: bytes, window: int, monkeypatch) -> tuple[list, dict]:
    monkeypatch.setattr(correlator.parsers.bulk.skim, "SKIM_BLOCK", 400)
    monkeypatch.setattr(correlator.parsers.bulk.skim, "MIN_BLOCK", 100)
    return correlator.parsers.bulk.skim.skim_blocks(data, window)


def test_blocks_of_coll_lines_are_counted_without_being_read(monkeypatch):
    """Byte counts prove whole blocks hold COLL lines of one process and communicator: those with
    `window` such lines after them are counted, not split into lines. What is read starts with
    the window's lines (and the last line of the run left out) and ends at the batch's end."""
    lines = ["node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=s) for s in range(200)]
    data = ("\n".join(lines) + "\n").encode()
    kept, skipped = _skim(data, 10, monkeypatch)
    read = sum(count for *_, count in kept)
    assert skipped == {"node1:30162:30162 [0] NCCL INFO -": 200 - read} and 10 <= read < 30
    assert kept[-1][1] == len(data) and kept[-1][2] + kept[-1][3] == 200


def test_a_block_with_any_other_line_is_read(monkeypatch):
    """A warning among COLL lines, a step that names no number, a line that is not ASCII: the
    block that holds it is read (byte counts prove nothing about it), so the line is typed."""
    coll = ["node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=s) for s in range(200)]
    steps = [STEP.format(s % 60, s) for s in range(300)]
    for odd in ("node1:30162:30162 [0] NCCL WARN Call to ibv_create_qp failed",
                "node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=5).replace("stream", "strëam")):
        lines = coll[:50] + [odd] + coll[50:]
        data = ("\n".join(lines) + "\n").encode()
        kept, _ = _skim(data, 10, monkeypatch)
        at = data.index(odd.encode())
        assert any(start <= at < end for start, end, *_ in kept), odd
    lines = steps[:100] + ["2026-11-29 21:22:13,484 INFO [rank 1] step failed: CUDA error"] + steps[100:]
    data = ("\n".join(lines) + "\n").encode()
    kept, skipped = _skim(data, 10, monkeypatch)
    at = data.index(b"step failed")
    assert skipped and any(start <= at < end for start, end, *_ in kept)


def test_progress_steps_left_out_keep_the_last_ones_and_the_time_the_lines_after_them_carry(tmp_path, monkeypatch):
    """Of a rank's steps, blocks with `window` steps after them are counted, not typed; the last
    step before a run of COLL lines is read, so the COLL lines still carry its time."""
    lines = [STEP.format(s % 60, s) for s in range(300)]
    lines += ["node1:30162:30162 [0] NCCL INFO " + COLL.format(seq=s) for s in range(3)]
    (tmp_path / "rank1.log").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(correlator.parsers.bulk.skim, "SKIM_BLOCK", 400)
    monkeypatch.setattr(correlator.parsers.bulk.skim, "MIN_BLOCK", 100)
    results = parse_sources(discover(tmp_path)[0], per_file=False, window=5)
    steps = pl.concat([pl.from_arrow(t) for t in results.group_tables["progress"]])
    coll = pl.concat([pl.from_arrow(t) for t in results.group_tables["collectives"]])
    assert set(range(295, 300)) <= set(steps["step"]) and steps.height < 60
    assert results[0].skimmed == 300 - steps.height and results[0].stats.lines == 303
    assert coll["ts"].dt.second().to_list() == [299 % 60] * 3


def test_steps_before_a_traceback_at_the_end_count_toward_the_window(monkeypatch):
    """A rank's file ends with its traceback: the block that holds it is mixed, so its halves are
    tried and the steps before the traceback count toward the window; no more than about the
    window's steps are read."""
    frames = [f'  File "train.py", line {n}, in step' for n in range(30)]
    lines = [STEP.format(s % 60, s) for s in range(400)] + ["Traceback (most recent call last):"] + frames
    data = ("\n".join(lines) + "\n").encode()
    monkeypatch.setattr(correlator.parsers.bulk.skim, "SKIM_BLOCK", 4000)
    monkeypatch.setattr(correlator.parsers.bulk.skim, "MIN_BLOCK", 200)
    kept, skipped = correlator.parsers.bulk.skim.skim_blocks(data, 10)
    steps_read = sum(count for *_, count in kept) - len(frames) - 1
    assert sum(skipped.values()) + steps_read == 400 and steps_read <= 20
