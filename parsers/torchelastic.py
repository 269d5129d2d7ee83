"""torchelastic beyond single lines: the ChildFailedError table the agent prints when a worker
fails, and the per-worker `error.json` written by `@record`.

The table's lines are recognised one by one by formats/torchelastic.toml (kind
`torchelastic_summary`); here they are
assembled into one `exits` row per entry (source `torchelastic_summary`, reason `root_cause` or
`failure`). torchrun's "Root Cause" is the entry with the smallest error-file timestamp (or the
lowest rank when there is none): it is a claim to weigh, not the cause (formats.md §2.7, §8).
"""
from __future__ import annotations

import json

import polars as pl
import pyarrow as pa

from correlator.tables import conform, empty

from .text import clean
from .results import FileResult, WholeFileParser, add_line_events, file_lines
from .spec import by_name

CFE_KIND = "torchelastic_summary"                 # a line of the table's own layout
CFE_BODY = "torchelastic_summary_traceback"       # a traceback line inside an entry (mark_child_failed)
CFE_TIME = "%Y-%m-%d_%H:%M:%S"      # datetime.isoformat(sep="_"), local, no zone
_STREAM = ("file", "host", "rank")  # one agent's output: tables of different agents interleave


def _stream_key(df: pl.DataFrame) -> list[pl.Expr]:
    return [pl.col(c) for c in _STREAM if c in df.columns]


def _layout(pattern: str) -> pl.Expr:
    """A table layout line of this shape (title, `[i]:`, border)."""
    return (pl.col("kind") == CFE_KIND) & pl.col("text").str.contains(pattern)


def _has_table(df: pl.DataFrame) -> bool:
    return not df.is_empty() and df.select(_layout(r"^\S+ FAILED$").any()).item()


def _table_frame(df: pl.DataFrame) -> pl.DataFrame:
    """Per line of the table: `_block` (one per `... FAILED` title, per stream), `_entry` (`[i]:`
    count in the block), `_section`, and `_in_table` (from the title up to the closing `====`)."""
    stream = _stream_key(df)
    title = _layout(r"^\S+ FAILED$")
    section_of = (pl.when(_layout(r"^Root Cause")).then(pl.lit("root_cause"))
                  .when(_layout(r"^Failures:$")).then(pl.lit("failure"))
                  .when(title).then(pl.lit("")))
    closing = _layout(r"^={20,}$")
    work = df.with_columns(_block=title.cast(pl.Int64).cum_sum().over(stream, order_by="line"))
    block = [*stream, pl.col("_block")]
    return work.with_columns(
        _entry=_layout(r"^\[\d+\]:$").cast(pl.Int64).cum_sum().over(block, order_by="line"),
        _section=section_of.forward_fill().over(block, order_by="line"),
        _in_table=(pl.col("_block") > 0) & (closing.cast(pl.Int64).cum_sum().over(block, order_by="line") == 0),
    )


def mark_child_failed(df: pl.DataFrame) -> pl.DataFrame:
    """Give the traceback lines inside the table's entries (indented, no format of their own) the
    kind `torchelastic_summary_traceback`, so they are not `other`. On the per-line frame or `events`."""
    if not _has_table(df):
        return df
    work = _table_frame(df)
    body = pl.col("_in_table") & (pl.col("_entry") > 0) & (pl.col("kind") == "other")
    return work.with_columns(
        kind=pl.when(body).then(pl.lit(CFE_BODY)).otherwise(pl.col("kind")),
        source=pl.when(body).then(pl.lit("torchelastic")).otherwise(pl.col("source")),
    ).drop("_block", "_entry", "_section", "_in_table")


def assemble_child_failed(events: pl.DataFrame) -> pa.Table:
    """One `exits` row per ChildFailedError entry of the per-line frame (or `events`) of a file.

    Needs columns line, text, kind (file, host, rank when present separate interleaved agents).
    Row: file/line of the `[i]:` line, host, pid, rank (global), local_rank, exit_code or signal
    (negative exitcode), reason root_cause|failure, ts from `time` (local time taken as UTC),
    text = the entry's exception line (or its `traceback :` value: a signal, a docs link)."""
    if not _has_table(events):
        return empty("exits")
    work = _table_frame(events).filter(pl.col("_in_table") & (pl.col("_entry") > 0))
    layout = pl.when(pl.col("kind") == CFE_KIND).then(pl.col("text"))
    field = work.select(layout.str.extract_groups(by_name(CFE_KIND).regex)).to_series().struct.unnest()
    work = work.with_columns(_field=field["field"], _value=field["value"], _entry_line=field["entry"].is_not_null())
    has_traceback = (pl.col("_field") == "traceback").fill_null(False).cast(pl.Int64).cum_sum()
    entry = [*_stream_key(events), pl.col("_block"), pl.col("_entry")]
    body = (pl.col("kind") != CFE_KIND) & (pl.col("text").str.strip_chars() != "")
    work = work.with_columns(_after_tb=has_traceback.over(entry, order_by="line") > 0)
    value = lambda name: pl.col("_value").filter(pl.col("_field") == name).first()  # noqa: E731
    entries = work.sort("line").group_by(entry, maintain_order=True).agg(
        line=pl.col("line").filter("_entry_line").first(),
        reason=pl.col("_section").first(),
        time=value("time"), entry_host=value("host"), rank_text=value("rank"), exit_text=value("exitcode"),
        traceback=value("traceback"),
        last_body=pl.col("text").filter(body & pl.col("_after_tb")).last().str.strip_chars(),
    )
    code = pl.col("exit_text").str.extract(r"^(-?\d+)", 1).str.to_integer(strict=False)
    if "file" not in entries.columns:
        entries = entries.with_columns(file=pl.lit(None, pl.String))
    rows = entries.select(
        "file", "line", host="entry_host",
        pid=pl.col("exit_text").str.extract(r"\(pid: (\d+)\)", 1).str.to_integer(strict=False),
        rank=pl.col("rank_text").str.extract(r"^(-?\d+)", 1).str.to_integer(strict=False),
        local_rank=pl.col("rank_text").str.extract(r"local_rank: (-?\d+)", 1).str.to_integer(strict=False),
        exit_code=pl.when(code >= 0).then(code),
        signal=pl.when(code < 0).then(-code),
        reason=pl.col("reason").replace("", None),
        source=pl.lit("torchelastic_summary"),
        ts=pl.col("time").str.to_datetime(CFE_TIME, strict=False, time_zone="UTC"),
        text=pl.coalesce("last_body", "traceback"),
    )
    return conform("exits", rows.to_arrow())


# ---- error.json ------------------------------------------------------------------------------

def _claims_error_json(path: str, head: bytes) -> bool:
    return path.rsplit("/", 1)[-1].endswith("error.json") and head.lstrip().startswith(b"{")


def parse_error_json(data: bytes, result: FileResult) -> None:
    """`{"message": {"message": "RuntimeError: ...", "extraInfo": {"py_callstack": ...,
    "timestamp": "<epoch s>"}, "errorCode": N}}` -> one `exits` row (rank from the path: the
    directory is the LOCAL rank, attempt_N/<local_rank>/error.json)."""
    doc = json.loads(data.decode("utf-8", errors="replace"))
    message = doc.get("message", doc) if isinstance(doc, dict) else {}
    if isinstance(message, str):
        message = {"message": message}
    extra = message.get("extraInfo") or {}
    stamp = str(extra.get("timestamp") or "")
    code = message.get("errorCode")
    lines = file_lines(data, result)
    add_line_events(result, lines, "torchelastic_error_file", "torchelastic")
    hints = result.hints
    row = pl.DataFrame({
        "file": [result.path], "line": [1], "host": [hints.get("host")], "rank": [hints.get("rank")],
        "local_rank": [hints.get("local_rank")], "exit_code": [code if isinstance(code, int) else None],
        "reason": ["python_exception"], "source": ["torchelastic_error_file"],
        "ts": [int(stamp) if stamp.isdigit() else None], "text": [str(message.get("message") or "")],
    }, schema_overrides={"host": pl.String, "rank": pl.Int64, "local_rank": pl.Int64, "exit_code": pl.Int64, "ts": pl.Int64})
    row = row.with_columns(ts=pl.from_epoch("ts", time_unit="s").dt.replace_time_zone("UTC"), text=clean(pl.col("text")))
    result.add("exits", row.to_arrow())


ERROR_JSON = WholeFileParser("torchelastic_error_file", _claims_error_json, parse_error_json)
