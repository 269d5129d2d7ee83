"""The per-key window: of the lines that repeat, only the last `window` of their key are typed;
the others are counted (see the glossary in __init__.py). thin_batch applies it to a batch as it
is read, `candidates_in_window` within a pass; window_batch reads a batch with the block skim first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import polars as pl
import pyarrow as pa

from ..records import maybe_touched
from ..reader import ReadStats, split_lines
from ..spec import FormatSpec
from . import probes, skim
from .probes import PREFIX, ascii_only, probe_text


class Thinned(NamedTuple):
    lines: pa.Array
    numbers: int | pl.Series        # the first line's number, or every line's
    left_out: int                   # lines left out, counted only
    probes: pl.DataFrame | None     # probe lines (`text`, `_lines`) standing for those left out


def candidates_in_window(candidates: pl.DataFrame, spec: FormatSpec, window: int | None
            ) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """(the candidates among the last `window` per file, process and key; the others, with
    their prefix as probes.probes reads it)."""
    if window is None or candidates.height <= window:
        return candidates, None
    candidates, outside = _with_outside(candidates, spec, window, "file")
    if not outside.any():
        return candidates, None
    return candidates.filter(~outside), candidates.filter(outside)


def _prefix_of(spec: FormatSpec) -> pl.Expr:
    """A raw line's head before the spec's split (uncleaned: a per-file decision's weight only)."""
    return pl.col("text").str.slice(0, pl.col("text").str.find(spec.bulk["after"], literal=True))


def _with_outside(frame: pl.DataFrame, spec: FormatSpec, window: int, *by: str) -> tuple[pl.DataFrame, pl.Series]:
    """(the frame with each raw line's prefix in PREFIX, which of its lines are outside the
    window): the prefix is read once, for the window's process and the weight of those left out."""
    frame = frame.with_columns(_prefix_of(spec).alias(PREFIX))
    return frame, frame.select(_outside_window(spec, window, *by)).to_series()


def _outside_window(spec: FormatSpec, window: int, *by: str) -> pl.Expr:
    """The spec's lines that are not among the last `window` of their process and key (and `by`),
    of a frame with each raw line's prefix in PREFIX (see _prefix_of).
    The process is told by the characters just before the split (NCCL's `host:pid:tid [dev]`,
    not a collector's per-line timestamp further left): it keeps processes apart that share a
    file (srun -l) and a comm pointer value. Both are read from the raw line by cheap kernels
    (find, slice): the lines outside the window are never cleaned, split or matched. A line
    without the key, or not ASCII (see ascii_only), is never outside."""
    text, after = pl.col("text"), spec.bulk["window_after"]
    # a line that may hold several records (parsers/records.py) is never left out unread
    key = pl.when(text.str.contains(spec.literal, literal=True) & ascii_only(text) & ~maybe_touched(text)).then(
        text.str.slice(text.str.find(after, literal=True) + len(after), spec.bulk["window_chars"]))
    process = pl.col(PREFIX).str.slice(-spec.bulk["process_chars"])
    from_end = pl.col("line").rank("ordinal", descending=True).over(*by, process, key)
    return key.is_not_null() & (from_end > window)


def thin_batch(lines: pa.Array, first: int | pl.Series, window: int
               ) -> Thinned:
    """A batch of one file as it is read, without the bulk lines that cannot be among the last
    `window` of their key (as many of the same key follow in this batch), with the probe lines of
    the distinct prefixes of those left out. The engine's passes are then sized by the
    lines kept, not read."""
    if len(lines) <= 2 * window:  # little to leave out (what skim_blocks kept, most files of a many-rank
        return Thinned(lines, first, 0, None)  # job): the pass's own window does it, without this fixed cost
    numbers = (first if isinstance(first, pl.Series)
               else pl.int_range(first, first + len(lines), dtype=pl.Int64, eager=True))
    frame = pl.DataFrame({"text": pl.Series("text", lines, dtype=pl.String), "line": numbers})
    outside = [(spec, *_with_outside(frame, spec, window)) for spec in probes.bulk_specs()]
    left_out = [headed.select(pl.col(PREFIX).filter(out)).group_by(PREFIX).len("_lines")
                .select(text=probe_text(spec), _lines=pl.col("_lines").cast(pl.Int64))
                for spec, headed, out in outside if out.any()]
    if not left_out:
        return Thinned(lines, first, 0, None)
    kept = frame.filter(~pl.any_horizontal(out for _, _, out in outside))
    return Thinned(kept["text"].to_arrow(), kept["line"], len(lines) - kept.height, pl.concat(left_out))


@dataclass
class WindowBatch:
    lines: pa.Array
    numbers: int | pl.Series        # the first line's number, or every line's
    read: int                       # lines read, kept or not
    skimmed: int                    # lines left out, counted only
    left_out: pl.DataFrame | None   # probe lines (`text`, `_lines`) standing for them, see take_bulk


def window_batch(data: bytes, first: int, window: int, stats: ReadStats) -> WindowBatch:
    """A batch of one file as it is read with a window: blocks of its bytes that byte counts
    prove to hold only repeated lines, each of whose key has `window` lines after it in the batch,
    are counted and never decoded or split (skim.skim_blocks); of the rest, thin_batch leaves out
    the bulk lines outside the window. Of COLL lines, those kept are those thin_batch alone keeps."""
    kept, skipped = skim.skim_blocks(data, window)
    if not skipped:
        lines, numbers = split_lines(data, stats), first
        read = len(lines)
    else:
        lines = split_lines(b"".join(data[r.start:r.end] for r in kept), stats)
        numbers = pl.concat([pl.int_range(first + r.first_line, first + r.first_line + r.lines, dtype=pl.Int64, eager=True)
                             for r in kept])
        read = kept[-1].first_line + kept[-1].lines
    lines, numbers, dropped, left_out = thin_batch(lines, numbers, window)
    if skipped:
        probes = pl.DataFrame({"text": list(skipped), "_lines": list(skipped.values())},
                              schema={"text": pl.String, "_lines": pl.Int64})
        left_out = probes if left_out is None else pl.concat([probes, left_out])
    return WindowBatch(lines, numbers, read, dropped + sum(skipped.values()), left_out)
