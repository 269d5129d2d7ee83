"""SLURM's accounting files, which are records, not log lines (`sacct --parsable2`,
`scontrol show job`, jobcomp/filetxt); srun's task ranges are srun.py's.

Line formats are data in formats/slurm.toml. The whole-file parsers here turn each job or step
record into an `exits` row (job state, `ExitCode` = exit:signal, end time) and still put every
line of the file into `events`, so nothing is lost. The record's job/step id is in column `job`
(kept once `exits` has that column) and in `text`.
"""
from __future__ import annotations

import re

import polars as pl

from .results import FileResult, WholeFileParser, add_line_events, file_lines

SLURM_TIME = "%Y-%m-%dT%H:%M:%S"


def _slurm_time(col: pl.Expr) -> pl.Expr:
    """`2026-11-29T22:04:54` (local, no zone, taken as UTC like every zone-less time); null for
    `Unknown` / `None`."""
    return col.str.to_datetime(SLURM_TIME, strict=False, time_zone="UTC")


def _state_reason(state: pl.Expr) -> pl.Expr:
    """`CANCELLED by 0` -> `cancelled`, `OUT_OF_MEMORY` -> `out_of_memory`."""
    return state.str.split(" ").list.first().str.to_lowercase()


def _exit_pair(code: pl.Expr) -> dict[str, pl.Expr]:
    """ExitCode `exit:signal` -> exit_code, signal."""
    parts = code.str.split_exact(":", 1)
    return {"exit_code": parts.struct.field("field_0").str.to_integer(strict=False),
            "signal": parts.struct.field("field_1").str.to_integer(strict=False)}


def _single_host(nodes: pl.Expr) -> pl.Expr:
    """A node list names one host only without brackets or commas."""
    return pl.when(nodes.str.contains(r"[\[,]") | (nodes == "") | (nodes == "None assigned")).then(None).otherwise(nodes)


def _add_records(result: FileResult, records: pl.DataFrame, source: str) -> None:
    """Record columns job/state/exit/end/nodes/line/text -> `exits` rows."""
    result.add("exits", records.select(
        file=pl.lit(result.path), line="line", job="job", host=_single_host(pl.col("nodes")),
        reason=_state_reason(pl.col("state")), **_exit_pair(pl.col("exit")), source=pl.lit(source),
        ts=_slurm_time(pl.col("end")), text="text").to_arrow())


# sacct --parsable2: a header line, `|`-separated fields, one row per job and per step.

def _all_lines(head: bytes, pattern: bytes) -> bool:
    """Every whole line of the head (the last may be cut by the read) that is not blank matches:
    a file that holds more than the records (a paste of sacct's output and the job's log, `cat`
    of several files) is a log, read line by line, not these records."""
    lines = head.split(b"\n")
    lines = lines[:-1] if len(lines) > 1 else lines
    return all(re.match(pattern, line) for line in lines if line.strip())


def _claims_sacct(path: str, head: bytes) -> bool:
    first = head.split(b"\n", 1)[0]
    return first.startswith(b"JobID|") and b"|State" in first and _all_lines(head, rb"[^|]*\|")


def parse_sacct(data: bytes, result: FileResult) -> None:
    lines = file_lines(data, result)
    add_line_events(result, lines, "sacct", "slurm")
    header = lines["text"][0].split("|")
    rows = lines.slice(1).filter(pl.col("text").str.contains("|", literal=True))
    fields = rows.with_columns(pl.col("text").str.split("|").list.to_struct(fields=header).alias("_f")).unnest("_f")
    get = lambda name: pl.col(name) if name in fields.columns else pl.lit(None, pl.String)  # noqa: E731
    records = fields.select("line", "text", job=get("JobID"), state=get("State"), exit=get("ExitCode"),
                            end=get("End"), nodes=get("NodeList"))
    _add_records(result, records, "sacct")


# scontrol show job: `Key=Value` tokens over indented lines, records separated by blank lines.
# jobcomp/filetxt: one record per line, same `Key=Value` tokens.

def _claims_scontrol(path: str, head: bytes) -> bool:
    return re.match(rb"JobId=\d\S* JobName=", head) is not None and _all_lines(head, rb"\s*[A-Za-z][\w:/.]*=")


def _claims_jobcomp(path: str, head: bytes) -> bool:
    return re.match(rb"JobId=\d\S* UserId=\S+ GroupId=", head) is not None and _all_lines(head, rb"JobId=\d")


def _kv_records(lines: pl.DataFrame, starts: pl.Expr) -> pl.DataFrame:
    """Group lines into records (a record begins where `starts`) and read their key=value tokens;
    a record's line is the one holding JobState (what its row is about)."""
    holds_state = pl.col("text").str.contains("JobState=", literal=True)
    records = (lines.with_columns(_rec=starts.cast(pl.Int64).cum_sum()).filter(pl.col("_rec") > 0)
               .group_by("_rec", maintain_order=True)
               .agg(all_text=pl.col("text").str.join(" "),
                    line=pl.coalesce(pl.col("line").filter(holds_state).first(), pl.col("line").first()),
                    text=pl.coalesce(pl.col("text").filter(holds_state).first(), pl.col("text").first())))
    value = lambda key: pl.col("all_text").str.extract(rf"(?:^|\s){key}=(\S*)", 1)  # noqa: E731
    return records.select("line", pl.col("text").str.strip_chars(), job=value("JobId"), state=value("JobState"),
                          exit=value("ExitCode"), end=value("EndTime"), nodes=value("NodeList"))


def parse_scontrol(data: bytes, result: FileResult) -> None:
    lines = file_lines(data, result)
    add_line_events(result, lines, "scontrol_job", "slurm")
    _add_records(result, _kv_records(lines, pl.col("text").str.starts_with("JobId=")), "scontrol")


def parse_jobcomp(data: bytes, result: FileResult) -> None:
    lines = file_lines(data, result)
    add_line_events(result, lines, "jobcomp", "slurm")
    _add_records(result, _kv_records(lines, pl.col("text").str.starts_with("JobId=")), "jobcomp")


SACCT = WholeFileParser("sacct", _claims_sacct, parse_sacct)
SCONTROL = WholeFileParser("scontrol_job", _claims_scontrol, parse_scontrol)
JOBCOMP = WholeFileParser("jobcomp", _claims_jobcomp, parse_jobcomp)
