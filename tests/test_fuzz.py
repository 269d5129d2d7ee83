"""Property tests: the line parsers take arbitrary bytes and text without raising, and the reader
neither invents nor loses a line. scripts/fuzz.py runs the same properties much longer."""
from __future__ import annotations

import io
import os
import tempfile

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from correlator.discover import discover
from parsers.engine import FileContext, parse_batch
from parsers.files import parse_sources
from parsers.reader import ReadStats, iter_batches

# scripts/fuzz.py raises the number of examples through FUZZ_EXAMPLES.
FAST = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 60)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

# Fragments of real formats, so that random input reaches the format specs' deeper branches.
FRAGMENTS = [
    "node1:123:456 [0] NCCL INFO ", "NCCL WARN ", "AllReduce: opCount ", " sendbuff 0x7f count 1024 datatype 7 op 0 root 0 comm 0x55 [nranks=4] stream 0x1",
    "[rank3]:[E1129 21:32:25.054533628 ProcessGroupNCCL.cpp:681] ", "WorkNCCL(SeqNum=13, OpType=ALLREDUCE, NumelIn=25, NumelOut=25, Timeout(ms)=600000)",
    "2026-11-29 21:22:13,484 INFO [rank 0] ", "[rank 1] step 3/20 loss 0.5", "0: ", "srun: error: node2: task 2: Aborted",
    "Traceback (most recent call last):", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "\x1b[31m", "\x1b]0;title\x07", "\r", "\t", "\x00", "\ufffd", "é", "日志", "\u202e",
]
log_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=40)), max_size=30).map("".join)
log_lines = st.lists(log_text, max_size=40)
log_bytes = st.one_of(
    st.binary(max_size=4000),
    log_lines.map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")),
    st.lists(st.one_of(st.binary(max_size=30), log_text.map(str.encode)), max_size=40).map(b"\n".join),
)


def expected_line_count(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


@FAST
@given(log_lines)
def test_parse_batch_takes_any_text(lines):
    df, emitted = parse_batch(pl.Series("text", lines, dtype=pl.String), 1, FileContext("f.log"))
    assert df.height == len(lines)
    assert df["text"].str.contains("\x1b", literal=True).sum() == 0


@FAST
@given(log_bytes, st.integers(1, 64))
def test_reader_keeps_every_line_of_any_bytes(data, batch_bytes):
    stats = ReadStats()
    batches = list(iter_batches(io.BytesIO(data), stats, batch_bytes))
    numbers = [n for first, lines in batches for n in range(first, first + len(lines))]
    assert numbers == list(range(1, expected_line_count(data) + 1))
    assert stats.bytes == len(data) and stats.error is None


@FAST
@given(log_bytes)
def test_parse_sources_takes_any_file(data):
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "rank0.log"), "wb") as f:
            f.write(data)
        sources, skipped = discover(tmp)
        [result] = parse_sources(sources)
    assert not skipped
    assert result.skip_reason in (None, "binary", "pickle") or result.skip_reason.startswith("not a valid")
    if result.skip_reason is None:
        assert result.stats.error is None
        assert result.stats.lines == expected_line_count(data)
