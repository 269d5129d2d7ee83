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
from correlator.parsers.engine import FileContext, parse_batch
from correlator.parsers.files import parse_sources
from correlator.parsers.reader import ReadStats, iter_batches

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
    # every line is there, once or as several records (a carriage return, a bar, a launcher's tag
    # inside it: parsers/records.py), each record citing its line
    assert df["line"].unique().sort().to_list() == list(range(1, len(lines) + 1))
    assert df["line"].is_sorted()
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

    import correlator.parsers.bulk.probes

    import correlator.parsers.bulk.skim

    def collectives(bulk: bool) -> pl.DataFrame:
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "rank1.log"), "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write("\n".join(lines) + "\n")
            sources, _ = discover(tmp)
            with mock.patch.object(correlator.parsers.bulk.probes, "bulk_specs", correlator.parsers.bulk.probes.bulk_specs if bulk else lambda: ()):
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


@st.composite
def runs_of_lines(draw) -> list[str]:
    """Runs of repeated lines, as big logs are: one process's COLL lines on a communicator, one
    rank's progress steps, and now and then another line (a fuzzed COLL line, a step that failed)."""
    lines = []
    for kind, size in draw(st.lists(st.tuples(st.sampled_from(["coll", "step", "other"]), st.integers(1, 30)),
                                     min_size=1, max_size=12)):
        if kind == "coll":
            prefix, comm = draw(st.sampled_from(PREFIXES[:5])), draw(st.sampled_from(COMMS))
            lines += [f"{prefix}AllReduce: opCount {len(lines) + i:x} sendbuff 0x7f00 recvbuff 0x7f00 count 1024 "
                      f"datatype 7 op 0 root 0 comm {comm} [nranks=4] stream 0x1" for i in range(size)]
        elif kind == "step":
            rank, level = draw(st.integers(0, 1)), draw(st.sampled_from(["INFO", "WARNING"]))
            lines += [f"2026-11-29 21:22:{(len(lines) + i) % 60:02},484 {level} [rank {rank}] step {len(lines) + i}/900 "
                      "loss 0.5" for i in range(size)]
        else:
            lines += draw(st.lists(st.one_of(coll_like_line(), st.sampled_from(OTHER_LINES + [
                "2026-11-29 21:22:13,484 INFO [rank 1] step failed: CUDA error", "Traceback (most recent call last):"])),
                min_size=1, max_size=3))
    return lines


@FAST
@given(runs_of_lines(), st.integers(1, 6))
def test_skimmed_blocks_leave_out_only_lines_the_window_leaves_out(lines, window):
    """Blocks that byte counts prove to be repeated lines are never split into lines
    (parsers/bulk/skim.py skim_blocks): the COLL rows and every other line's event are those of reading
    every block; of progress steps, only earlier ones are left out, the last `window` of each rank
    are typed, and every line left out is counted."""
    from unittest import mock

    import correlator.parsers.bulk.probes

    import correlator.parsers.bulk.skim

    def parse(skim: bool) -> tuple[dict[str, pl.DataFrame], int, int]:
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "rank1.log"), "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write("\n".join(lines) + "\n")
            with mock.patch.multiple(correlator.parsers.bulk.skim, SKIM_BLOCK=300, MIN_BLOCK=100), \
                    mock.patch.object(correlator.parsers.bulk.skim, "skim_blocks", correlator.parsers.bulk.skim.skim_blocks if skim else lambda *_: ([], {})):
                results = parse_sources(discover(tmp)[0], per_file=False, window=window)
        tables = {name: pl.concat([pl.from_arrow(t) for t in parts]) for name, parts in results.group_tables.items()}
        return tables, results[0].skimmed, results[0].stats.lines

    every, every_skimmed, every_lines = parse(False)
    some, skimmed, some_lines = parse(True)
    assert some_lines == every_lines

    def rows(tables: dict, name: str, keep=None) -> pl.DataFrame:
        df = tables.get(name, pl.DataFrame())
        df = df.filter(keep) if keep is not None and df.height else df
        return df.sort(df.columns, nulls_last=True) if df.height else df

    assert rows(some, "collectives").equals(rows(every, "collectives"))
    assert rows(some, "events", pl.col("kind") != "progress").equals(rows(every, "events", pl.col("kind") != "progress"))
    typed, all_steps = rows(some, "progress"), rows(every, "progress")
    assert skimmed - every_skimmed == all_steps.height - typed.height
    if all_steps.height:
        assert (typed.height and typed.join(all_steps, on=typed.columns, how="anti", nulls_equal=True).is_empty())
        last = all_steps.sort("line").group_by("rank").tail(window)
        assert last.join(typed, on=typed.columns, how="anti", nulls_equal=True).is_empty()
