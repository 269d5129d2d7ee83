"""The shapes a paste takes on its way to a bug report: cut at a terminal's width (parsers/wrapped.py),
quoted in a reply (the `quoted_paste` wrapper) or indented as a code block (engine.parse_frame).
Each reads as the paste it was, and no log that is not in such a shape is changed."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from correlator.parsers.engine import FileContext, parse_batch
from correlator.parsers.wrapped import join_wrapped_rows
from correlator.pipeline import analyze
from realworld_check import cut_at_width, indented, quoted

ROOT = Path(__file__).parent.parent
REALWORLD = ROOT / "tests" / "realworld"
# one-file real-world cases whose verdicts hang on long lines: a watchdog timeout, DETAIL's
# fingerprints, NCCL COLL lines, a desync report
CASES = ["a-watchdog_2x--truncated-broadcast-rank0-silent", "a-detail_mismatch--sae-save-early-return-rank0-barrier",
         "b-nccl_info_coll--allgather-vs-allreduce", "a-desync_report--node3-never-joined"]


def _verdict(path: Path) -> tuple:
    v = analyze(path).report["verdict"]
    return v["kind"], v["culprit_ranks"], v["rule"]


@pytest.mark.parametrize("width", [80, 132])
@pytest.mark.parametrize("case", CASES)
def test_a_paste_cut_at_a_terminals_width_keeps_its_verdict(tmp_path, case, width):
    source = next(p for p in (REALWORLD / case / "logs").iterdir() if p.is_file())
    (tmp_path / source.name).write_text(cut_at_width(source.read_text(), width))
    assert _verdict(tmp_path) == _verdict(REALWORLD / case / "logs")


@pytest.mark.parametrize("case", CASES)
def test_a_quoted_paste_keeps_its_verdict(tmp_path, case):
    source = next(p for p in (REALWORLD / case / "logs").iterdir() if p.is_file())
    (tmp_path / source.name).write_text(quoted(source.read_text()))
    assert _verdict(tmp_path) == _verdict(REALWORLD / case / "logs")


@pytest.mark.parametrize("indent", ["    ", "\t", "  "])
@pytest.mark.parametrize("case", CASES)
def test_a_paste_indented_as_a_code_block_keeps_its_verdict(tmp_path, case, indent):
    source = next(p for p in (REALWORLD / case / "logs").iterdir() if p.is_file())
    (tmp_path / source.name).write_text(indented(source.read_text(), indent))
    assert _verdict(tmp_path) == _verdict(REALWORLD / case / "logs")


def test_a_log_that_indents_its_own_lines_keeps_them():
    """py-spy's frames and a traceback's open with spaces of their own: read as they are."""
    frames = ["    all_reduce (torch/distributed/distributed_c10d.py:2501)",
              "    train_step (train.py:88)",
              '  File "/srv/train.py", line 88, in train_step',
              "    loss = model(batch)"]
    df, _ = parse_batch(pl.Series("text", frames, dtype=pl.String), 1, FileContext("f.log"))
    assert df["text"].to_list() == frames
    assert df["kind"].to_list()[:2] == ["stack_frame", "stack_frame"]


def _joined(path: Path) -> int:
    lines = path.read_text(errors="replace").split("\n")
    frame = pl.DataFrame({"file": [str(path)] * len(lines), "line": list(range(1, len(lines) + 1)), "text": lines})
    return join_wrapped_rows(frame)["_wrapped"].sum()


def test_no_bundled_log_that_is_not_wrapped_is_joined():
    """Lines of one template and length (NCCL's, a warning every rank prints), aligned tables and
    repeated long messages are not a terminal's cuts."""
    wrapped = {"d-wrapped_paste--lightning-75col-rank1-epoch-end",
               "c-ray--openrlhf-2node-vllm-engines-other-node-docker-bridge-ip-model-update-group-s29",  # 120 columns
               "a-watchdog_2x--nemo-asr-4gpu-wrapped-padded-rank0-allgather-two-ahead-ranks1-2-broadcast-s30b",  # 183
               "d-megatron--bert-ci-pp4-vp2-rank6-dataloader-queue-get-rank4-batched-p2p-coalesced-timeout-wrapped-100col-s31f"}  # 100
    logs = [p for root in (ROOT / "samples", REALWORLD) for p in root.glob("*/logs/**/*")
            if p.is_file() and p.stat().st_size < 2_000_000 and b"\0" not in p.read_bytes()[:512]]
    joined = sorted(str(p.relative_to(ROOT)) for p in logs if _joined(p))
    assert [p for p in joined if not any(w in p for w in wrapped)] == []
    assert any("75col" in p for p in joined)


def test_the_first_row_gets_the_whole_line_and_the_rest_stay_pieces():
    lines = ["[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=614219, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800297 ms.",
             "short line",
             "[E ProcessGroupNCCL.cpp:828] [Rank 2] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=614219, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800301 ms.",
             "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 (most recent call first):"]
    rows = cut_at_width("\n".join(lines), 64).split("\n")
    frame = pl.DataFrame({"file": ["paste"] * len(rows), "line": list(range(1, len(rows) + 1)), "text": rows})
    out = join_wrapped_rows(frame)
    firsts = out.filter(~pl.col("_wrapped"))["text"].to_list()
    assert firsts == lines
    # each later row keeps its own text
    assert out.filter(pl.col("_wrapped"))["text"].to_list() == [r for r in rows if not any(line.startswith(r) for line in lines)]


@pytest.mark.parametrize("steps", [range(17, 45), range(42, 45)])
def test_one_long_line_before_a_traceback_is_no_wrap_however_many_template_lines_share_its_width(steps):
    """A template's lines of the same width (progress steps) and one line that a `Traceback` header
    follows are whole lines: joined they would hide the traceback. The bulk lane thins a batch to
    a few of the steps (range(42, 45)), and the reading must not change with it (test_fuzz)."""
    lines = ([f"2026-11-29 21:22:{i:02},484 INFO [rank 0] step {i}/900 loss 0.5" for i in range(9, 13)]
             + ["2026-11-29 21:22:13,484 INFO [rank 1] step failed: CUDA error", "Traceback (most recent call last):"]
             + [f"2026-11-29 21:22:{i:02},484 WARNING [rank 0] step {i}/900 loss 0.5" for i in steps])
    frame = pl.DataFrame({"file": ["paste"] * len(lines), "line": list(range(1, len(lines) + 1)), "text": lines})
    out = join_wrapped_rows(frame)
    assert not out["_wrapped"].any()
    assert out["text"].to_list() == lines


def test_an_indented_paste_of_prefixed_nccl_coll_lines_keeps_them(tmp_path):
    """The bulk lane's per-file launcher decisions (pdsh's `host: `) are taken without the indent too."""
    from correlator.pipeline import parse_job, run_queries
    lines = [f"{host}: {host}:{pid}:{pid} [0] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f00 recvbuff 0x7f00 "
             f"count 1024 datatype 7 op 0 root 0 comm 0x55d6 [nranks=2] stream 0x1"
             for op in range(3) for host, pid in (("node1", 101), ("node2", 202))]
    (tmp_path / "paste.log").write_text(indented("\n".join(lines) + "\n"))
    job = parse_job(tmp_path)
    run_queries(job.con)
    assert job.con.execute("select count(*), count(distinct host) from collectives").fetchall() == [(6, 2)]
