"""Parse one file: a pure function from a source to Arrow tables (so it can be mapped over files
in parallel here, or over a cluster by another engine).

Text logs go through the line engine batch by batch; a few formats are whole files (error.json,
sacct, Flight Recorder dumps) and have their own parser, listed in whole_files.py.
"""
from __future__ import annotations

import os
from typing import Callable, Iterable, Iterator

import polars as pl
import pyarrow as pa

from .bulk import finish_bulk, take_bulk, window_batch
from .engine import FileContext, group_frame, parse_frame
from .mpirun import assemble_mpirun_exits
from .multiline import carry_time, mark_tracebacks
from .reader import iter_batches, iter_chunks
from .results import FileResult, table_rows
from .sources import Source, read_head, sniff
from .torchelastic import assemble_child_failed, mark_child_failed
from .whole_files import WHOLE_FILE_PARSERS

EVENT_COLUMNS = ("file", "line", "host", "pid", "rank", "local_rank", "source", "kind", "level",
                 "ts", "ts_precision", "ts_inferred", "text")
LINE_KEYS = ("file", "line", "host", "pid", "rank", "local_rank", "ts")
UNPARSED = "other"           # the kind of a line no format recognised
WHOLE_FILE_MAX = 256 << 20   # bytes a whole-file parser may read
GROUP_LINES = 200_000        # lines parsed in one engine pass
HAND_OVER_ROWS = 500_000     # rows a group holds before it hands them over (parse_sources)


class Sink:
    """Where line-derived rows go: per file (result.tables, for callers that look at one file), or
    per group of files (the pipeline inserts a group at once; rows carry their file anyway, and
    splitting them per file costs more than parsing small files)."""

    def __init__(self, results: dict[str, "FileResult"], per_file: bool):
        self.results, self.per_file = results, per_file
        self.tables: dict[str, list[pa.Table]] = {}
        self.rows = 0

    def take(self) -> dict[str, list[pa.Table]]:
        """The rows so far, handed over (the sink starts empty again)."""
        tables, self.tables, self.rows = self.tables, {}, 0
        return tables

    def add(self, name: str, rows: pl.DataFrame) -> None:
        if rows.is_empty():
            return
        if not self.per_file:
            self.tables.setdefault(name, []).append(table_rows(name, rows.to_arrow()))
            self.rows += rows.height
            return
        for (path,), part in rows.partition_by("file", as_dict=True).items():
            self.results[path].add(name, part.to_arrow())


def _rows_for_tables(df: pl.DataFrame, emitted: list, sink: Sink) -> None:
    """Join each spec's rows with the resolved line columns and add them to their table."""
    keys = df.select("idx", *LINE_KEYS)
    for spec, rows in emitted:
        if not spec.table:
            continue
        joined = rows.join(keys, on="idx", how="left", suffix="_line")
        both = [c for c in LINE_KEYS if f"{c}_line" in joined.columns]
        joined = joined.with_columns(pl.coalesce(c, f"{c}_line").alias(c) for c in both)
        sink.add(spec.table, joined.drop("idx", *(f"{c}_line" for c in both)))


def _parse_lines(parts: list, sink: Sink, window: int | None) -> None:
    """One engine pass over the lines of one or many files (the bulk lane's lines aside)."""
    frame, bulk, skimmed = take_bulk(group_frame([part[:3] for part in parts]), window, _left_out(parts))
    for path, count in skimmed.iter_rows():
        sink.results[path].skimmed += count
    df, emitted = parse_frame(frame)
    df = carry_time(mark_child_failed(mark_tracebacks(df)))
    _rows_for_tables(df, emitted, sink)
    sink.add("exits", pl.from_arrow(assemble_child_failed(df)))
    sink.add("exits", pl.from_arrow(assemble_mpirun_exits(df)))
    sink.add("events", df.select(EVENT_COLUMNS))
    # One group-by for all files: per file it would cost more than parsing a small file.
    for path, kind, count in df.group_by("file", "kind").len().iter_rows():
        if kind == UNPARSED:
            sink.results[path].unparsed += count
        else:
            sink.results[path].kinds.add(kind)
    for spec, rows in bulk:
        table, events = finish_bulk(spec, rows, df)
        sink.add(spec.table, table)
        sink.add("events", events.select(EVENT_COLUMNS))
        for path in table["file"].unique():
            sink.results[path].kinds.add(spec.name)


def _read_batches(src: Source, result: FileResult, window: int | None) -> Iterator[tuple]:
    """(lines, first line number or the line numbers, file context, prefixes of the lines left
    out) per batch; with a window, without the repeated lines it leaves out (counted in
    `skimmed`; their prefixes still weigh in the file's wrapper decisions, see take_bulk)."""
    ctx = FileContext.for_mtime(src.path, src.mtime, **src.hints)
    with src.open() as stream:
        if window is None:
            for first, lines in iter_batches(stream, result.stats):
                yield lines, first, ctx, None
            return
        first = 1
        for data in iter_chunks(stream, result.stats):
            batch = window_batch(data, first, window, result.stats)
            first += batch.read
            result.stats.lines += batch.read
            result.skimmed += batch.skimmed
            yield batch.lines, batch.numbers, ctx, batch.left_out


def _left_out(parts: list[tuple]) -> pl.DataFrame | None:
    """The prefixes of the lines thin_batch left out, as probe lines of their files (FRAME_COLUMNS),
    each weighing the lines it stands for."""
    left = [(left_out, ctx) for _, _, ctx, left_out in parts if left_out is not None]
    if not left:
        return None
    frame = group_frame([(probes["text"].to_arrow(), 0, ctx) for probes, ctx in left])
    return frame.with_columns(_lines=pl.concat([probes["_lines"] for probes, _ in left]))


def _triage(src: Source, result: FileResult) -> bool:
    """Handle what is not a text log (unreadable, whole-file formats, binary); True if done."""
    head, error = read_head(src)
    if error:
        result.skip_reason = error
        return True
    for parser in WHOLE_FILE_PARSERS:
        if parser.claims(src.path, head):
            try:
                with src.open() as f:
                    parser.parse(f.read(WHOLE_FILE_MAX), result)
            except Exception as e:  # untrusted input: a parser's failure is a finding, not a crash
                result.tables.clear()
                result.skip_reason = f"not a valid {parser.name}: {type(e).__name__}: {e}"[:300]
                return True
            result.kinds.add(parser.name)
            return True
    result.skip_reason = sniff(head)
    return result.skip_reason is not None


class GroupResults(list):
    """The FileResults of a group, plus the group's line-derived rows when not split per file."""
    group_tables: dict[str, list[pa.Table]]


def _parse_pending(pending: list[tuple], sink: Sink, window: int | None) -> None:
    """One engine pass; if it fails, the files it held say so (their rows of this pass are lost,
    their lines still counted), and the other passes go on."""
    try:
        _parse_lines(pending, sink, window)
    except Exception as e:
        paths = dict.fromkeys(ctx.path for _, _, ctx, _ in pending)
        _failed([sink.results[p] for p in paths], "parse error in a pass over its lines", e)


def _failed(results: list[FileResult], what: str, error: Exception) -> None:
    if os.environ.get("CORRELATOR_STRICT"):  # the tests: a failure here is our bug, not the input's
        raise error
    for result in results:
        result.stats.error = result.stats.error or f"{what}: {type(error).__name__}: {error}"[:300]


def parse_sources(sources: Iterable[Source], per_file: bool = True, window: int | None = None,
                  max_lines: int | None = None,
                  hand_over: Callable[[dict[str, list[pa.Table]]], None] | None = None) -> list[FileResult]:
    """Parse a group of files; small text files share one engine pass (the per-pass cost is
    paid once per group, not once per file), a large one is streamed in batches.
    With per_file=False the line-derived rows of the whole group are on `.group_tables` of the
    returned list instead of on each result. With a `window`, lines that repeat (NCCL COLL lines,
    progress steps) are typed only for the last `window` of their key (parsers/bulk/).
    With `max_lines`, no more files are taken from `sources` once that many lines were typed.
    With `hand_over` (per_file=False), the group's rows go to it whenever HAND_OVER_ROWS are held:
    a group of one huge file does not hold all its rows until its end.
    Never raises for bad input: what cannot be read is a skip reason or a read error."""
    results: dict[str, FileResult] = {}
    sink = Sink(results, per_file)
    pending: list[tuple] = []
    pending_lines = typed = 0
    for src in sources:
        result = results[src.path] = FileResult(src.path, hints=src.hints, mtime=src.mtime)
        if _triage(src, result):
            continue
        try:
            for part in _read_batches(src, result, window):
                pending.append(part)
                pending_lines += len(part[0])
                typed += len(part[0])
                if pending_lines >= GROUP_LINES:
                    _parse_pending(pending, sink, window)
                    pending, pending_lines = [], 0
                    if hand_over and sink.rows >= HAND_OVER_ROWS:
                        hand_over(sink.take())
        except Exception as e:  # keep what was read; the rest of the file is reported, not lost
            _failed([result], f"read error after line {result.stats.lines}", e)
        if max_lines is not None and typed >= max_lines:
            break
    if pending:
        _parse_pending(pending, sink, window)
    out = GroupResults(results.values())
    out.group_tables = sink.tables
    return out

