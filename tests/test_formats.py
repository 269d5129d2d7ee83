"""Every format declares its own sample lines; each must parse to the declared fields."""
import re

import polars as pl
import pytest

from correlator.parsers.engine import FileContext, _candidates, _fields, parse_batch
from correlator.parsers.spec import registry

CTX = FileContext.for_mtime("sample.log", 1796000000.0)   # 2026-11-30 UTC
CASES = [(spec, i, sample) for spec in registry() for i, sample in enumerate(spec.samples)]


def _isolated(spec, line):
    """The spec alone on the line (wrappers and headers see the raw line)."""
    matched, values = _fields(spec, pl.col("text"), _candidates(spec, pl.col("text"), pl.lit(True)))
    out = pl.DataFrame({"text": [line]}).select(matched.alias("_m"), **values)
    return out.row(0, named=True)


def _in_pipeline(spec, line):
    """The line through every layer: the spec must win, and its emitted row carries the fields.
    A format gated on its report's own marker line gets that line first."""
    lines = [spec.in_files_with, line] if spec.in_files_with else [line]
    df, emitted = parse_batch(pl.Series(lines, dtype=pl.String), 1, CTX)
    assert df["kind"][-1] == spec.name, f"line went to {df['kind'][-1]!r}"
    rows = [r.filter(pl.col("idx") == len(lines) - 1) for s, r in emitted if s.name == spec.name]
    return rows[0].row(0, named=True) if rows and rows[0].height else {}


def test_report_only_formats_stay_in_their_report():
    """`Errors` alone in an application log is not a RAS report section."""
    df, _ = parse_batch(pl.Series(["Errors", "  12  3"], dtype=pl.String), 1, CTX)
    assert df["kind"].to_list() == ["other", "other"]


def test_a_bracketed_time_then_a_level_is_a_logging_line_not_sglang_s_prefix():
    """`[asctime] [INFO] name: ...` keeps its level (sglang's `[time TPn]` prefix would take the
    time alone and leave the level in the text)."""
    df, _ = parse_batch(pl.Series(["[2026-07-22 20:02:04] [ERROR] tsfm.train: eval failed"], dtype=pl.String), 1, CTX)
    assert (df["level"][0], df["text"][0]) == ("ERROR", "tsfm.train: eval failed")


@pytest.mark.parametrize("spec,i,sample", CASES, ids=[f"{s.name}-{i}" for s, i, _ in CASES])
def test_sample(spec, i, sample):
    if spec.layer == "message":
        got = _in_pipeline(spec, sample.line)
    else:
        got = _isolated(spec, sample.line)
        assert got["_m"], "the spec does not match its own sample"
    for name, want in sample.fields.items():
        assert got.get(name) == want, f"{name}: {got.get(name)!r} != {want!r}"


def test_every_format_has_samples_and_unique_names():
    names = [s.name for s in registry()]
    assert len(names) == len(set(names))
    assert all(s.samples for s in registry())


def test_fields_are_the_named_groups_re_compiles():
    """A spec's fields are read from its regex text without compiling it; they are the groups
    Python's re finds there, in order."""
    for spec in registry():
        if spec.split is None:
            assert spec.fields == tuple(re.compile(spec.regex).groupindex), spec.name


def test_cri_partial_records_make_one_line():
    """A line the container runtime split into P records is parsed whole, once; no byte is lost."""
    lines = ["2026-11-29T21:09:01.000000001Z stderr P [rank3]:[E1129 21:09:01.857000123 ProcessGroupNCCL.cpp:632] "
             "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLRE",
             "2026-11-29T21:09:01.000000002Z stdout F step 3/10",
             "2026-11-29T21:09:01.000000003Z stderr F DUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600060 "
             "milliseconds before timing out."]
    df, emitted = parse_batch(pl.Series(lines, dtype=pl.String), 1, CTX)
    assert df["kind"].to_list() == ["watchdog_timeout", "progress", "cri_continuation"]
    [timeout] = [rows for spec, rows in emitted if spec.name == "watchdog_timeout"]
    assert timeout.select("seq", "op", "timeout_ms").row(0) == (12, "ALLREDUCE", 600000)
    assert df["text"][2].startswith("DUCE")
