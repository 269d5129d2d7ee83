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


COLL_TOKENS = "AllReduce: opCount 1f sendbuff 0x7f00 recvbuff 0x7f00 count 1024 datatype 7 op 0 root 0 comm 0x55d6 [nranks=4] stream 0x1".split()
PREFIXES = ["node1:12:12 [0] NCCL INFO ", "3: node1:12:12 [0] NCCL INFO ", "[default1]:node1:12:12 [0] NCCL INFO ",
            "node1:12:13 NCCL INFO ", "[2025-03-12 10:11:12] node1:12:12 [0] NCCL INFO ", "node1:12:12 [0] NCCL WARN "]
OTHER_LINES = ["[rank1]:[E1129 21:32:25.054533628 ProcessGroupNCCL.cpp:681] [Rank 1] timed", "2026-11-29 21:22:13,484 INFO [rank 1] step 3/20 loss 0.5"]


@st.composite
def coll_like_line(draw) -> str:
    """A COLL line, sometimes with one token replaced by fuzz (a word, a number, an escape)."""
    tokens = list(COLL_TOKENS)
    tokens[2] = format(draw(st.integers(0, 1 << 40)), "x")
    if draw(st.booleans()):
        tokens[draw(st.integers(0, len(tokens) - 1))] = draw(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)))
    return draw(st.sampled_from(PREFIXES)) + " ".join(tokens)


@FAST
@given(st.lists(st.one_of(coll_like_line(), st.sampled_from(OTHER_LINES)), min_size=1, max_size=30))
def test_bulk_lane_and_engine_agree_on_any_coll_lines(lines):
    from unittest import mock

    import parsers.bulk

    def collectives(bulk: bool) -> pl.DataFrame:
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "rank1.log"), "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write("\n".join(lines) + "\n")
            sources, _ = discover(tmp)
            with mock.patch.object(parsers.bulk, "bulk_specs", parsers.bulk.bulk_specs if bulk else lambda: ()):
                parts = parse_sources(sources, per_file=False).group_tables.get("collectives", [])
        df = pl.concat([pl.from_arrow(t) for t in parts]) if parts else pl.DataFrame()
        return df.sort(df.columns, nulls_last=True) if df.height else df

    assert collectives(True).equals(collectives(False))


COMMS = ["0x55d6", "0x55d7", "0x7f0012345678"]


@FAST
@given(st.lists(st.one_of(coll_like_line(), st.sampled_from(OTHER_LINES)), min_size=1, max_size=40),
       st.lists(st.sampled_from(COMMS), min_size=40, max_size=40), st.integers(1, 3))
def test_a_window_only_leaves_out_rows_it_counts(lines, comms, window):
    """Whatever the lines, the rows typed with a window are rows typed without one, and every
    row left out is counted in `skimmed`: nothing is lost silently. Time aside: an untimed line
    takes the time of the last timed line kept before it in its stream, and a timed COLL line of
    the same stream may have been left out (a stream whose COLL lines are only sometimes timed is
    not one NCCL writes: its timestamp levels apply to every INFO line or to none)."""
    lines = [line.replace("comm 0x55d6 ", f"comm {comm} ") for line, comm in zip(lines, comms)]

    def parse(window: int | None) -> tuple[pl.DataFrame, int, int]:
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "rank1.log"), "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write("\n".join(lines) + "\n")
            results = parse_sources(discover(tmp)[0], per_file=False, window=window)
        parts = results.group_tables.get("collectives", [])
        rows = pl.concat([pl.from_arrow(t) for t in parts]) if parts else pl.DataFrame()
        return rows, results[0].skimmed, results[0].stats.lines

    full, full_skimmed, full_lines = parse(None)
    kept, skimmed, kept_lines = parse(window)
    assert full_skimmed == 0 and kept_lines == full_lines
    if kept.height:
        columns = [c for c in kept.columns if c != "ts"]
        assert kept.join(full, on=columns, how="anti", nulls_equal=True).is_empty()
    assert full.height - kept.height <= skimmed
