"""What parsing a file gives (`FileResult`: its rows per table, read stats, kinds, why it was
skipped), the shape of a whole-file parser, and what every table's rows pass through on the way
in (`table_rows`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import polars as pl
import pyarrow as pa

from correlator.tables import conform

from .text import clean
from .reader import ReadStats
from .srun import expand_task_ranges


def table_rows(name: str, table: pa.Table) -> pa.Table:
    """Rows for table `name`, in its schema; srun's `exits` rows one per task they name."""
    table = conform(name, table)
    return expand_task_ranges(table) if name == "exits" else table


@dataclass
class FileResult:
    path: str
    tables: dict[str, list[pa.Table]] = field(default_factory=dict)
    stats: ReadStats = field(default_factory=ReadStats)
    unparsed: int = 0
    skimmed: int = 0             # bulk lines counted, not typed (outside the window, see parsers/bulk/)
    kinds: set = field(default_factory=set)
    skip_reason: str | None = None
    hints: dict = field(default_factory=dict)
    mtime: float | None = None

    def add(self, name: str, table: pa.Table) -> None:
        if table.num_rows:
            self.tables.setdefault(name, []).append(table_rows(name, table))


@dataclass(frozen=True)
class WholeFileParser:
    name: str
    claims: Callable[[str, bytes], bool]                 # (path, first bytes) -> is it mine?
    parse: Callable[[bytes, "FileResult"], None]         # fills result.tables / stats


def file_lines(data: bytes, result: FileResult) -> pl.DataFrame:
    """The file's lines (line, text) with control characters removed; fills the read stats."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    result.stats.bytes, result.stats.lines = len(data), len(lines)
    return pl.DataFrame({"text": pl.Series(lines, dtype=pl.String)}).with_columns(
        line=pl.int_range(1, pl.len() + 1, dtype=pl.Int64), text=clean(pl.col("text")))


def add_line_events(result: FileResult, lines: pl.DataFrame, kind: str, source: str) -> None:
    """Every line of a whole-file format into `events`, so what the parser skips is still there."""
    hints = result.hints
    result.add("events", lines.select(
        file=pl.lit(result.path), line="line", host=pl.lit(hints.get("host"), pl.String),
        rank=pl.lit(hints.get("rank"), pl.Int64), local_rank=pl.lit(hints.get("local_rank"), pl.Int64),
        source=pl.lit(source), kind=pl.lit(kind), text="text").to_arrow())
