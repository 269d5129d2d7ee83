"""A paste copied from a terminal (or a console that hard-wraps) breaks every line longer than the
terminal at its width: `[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation
` / `timeout: WorkNCCL(SeqNum=614219, OpType=ALLREDUCE, ... T` / `imeout(ms)=1800000) ran for ...`.
No format matches the pieces. Where a file's rows show such a width, the rows of one line are
joined again: the first row gets the whole line, every later row keeps its own text as a piece
(records.CONTINUATION), so no byte is lost and nothing is matched twice.

A file is wrapped when its longest rows, at least three of one width W (60..400 characters), stand
out from the lengths just below W (a cut: W is more common than W-3..W-1 together;
unwrapped lines of similar content, such as NCCL's COLL lines, vary by a character or two around
their longest); when some of them end a line at the next row (shorter, or padded with spaces to
W: a tty that pads), one in MAX_ROWS at least, which aligned records of one fixed width never do;
and when the
unpadded ones are pieces of more than one text and are followed by rows that open in more than one
way, digits aside (a long message every rank prints, the same each time, is neither), and two of
them at least continue into the next row as below (a batch the bulk lane thinned holds fewer of a
template's lines of other widths: one line followed once by a line that opens as none other does
is no wrap, whatever the rest).

A row continues into the next when it is W characters long and not padded (does not end in two
spaces), neither it nor the next is a table row or rule (`| ... |`, `+----+`, `=====`), and the
next physical line is not blank and does not open as it does, or as a row that surely begins a
line (after a shorter one) opens, digits aside: the lines of one template, a logger's prefix,
open alike; a cut in the middle of a line does not. At most MAX_ROWS rows are one line.

A row that holds the fixed-layout head of a line the bulk lane reads (NCCL's COLL lines up to
`[nranks=N]`, parsers/bulk/) is a line of its own and is set aside before any of this: the bulk
lane takes such rows out of the batch before the engine sees it, and both lanes must read a file
alike."""
from __future__ import annotations

import re
from functools import cache

import polars as pl

from .spec import registry

MIN_WIDTH, MAX_WIDTH, MAX_ROWS = 60, 400, 40
_TABLE_ROW = r"^\s*[|+*=#~─━│┃┌┏└┗├╭╰-].*[|+*=#~─━│┃┐┓┘┛┤╮╯-]\s*$"
_ORDER = ["line"]


def _opening(text: pl.Expr) -> pl.Expr:
    """A line's first four characters, digits aside (`0: g` and `1: g` open alike)."""
    return text.str.slice(0, 4).str.replace_all(r"\d", "#")


@cache
def _fixed_layout_line() -> str | None:
    """A regex for the fixed-layout head of a bulk lane line (the spec's split, then its regex)."""
    specs = [s for s in registry() if s.bulk]
    return "|".join(f"(?:{re.escape(s.bulk['after'])}{s.regex.removeprefix('^')})" for s in specs) or None


def join_wrapped_rows(df: pl.DataFrame) -> pl.DataFrame:
    """The rows of each hard-wrapped line joined into its first row; the rest flagged `_wrapped`."""
    fixed = _fixed_layout_line()
    whole = df["text"].str.contains(fixed).fill_null(False) if fixed else None
    if whole is None or not whole.any():
        return _join(df)
    indexed = df.with_row_index("_at")
    rest = _join(indexed.filter(~whole))
    kept = indexed.filter(whole).with_columns(_wrapped=pl.lit(False))
    return pl.concat([rest, kept.select(rest.columns)]).sort("_at").drop("_at")


def _join(df: pl.DataFrame) -> pl.DataFrame:
    row = pl.col("text").str.strip_chars_end("\r\n")
    width = row.str.len_chars()
    w, top = pl.col("_w"), pl.col("_w").max()
    padded = pl.col("text").str.contains(r"\S  +\r?$")
    # the cheap test first, on every batch (the hot path): a width in range, reached three times;
    # only the files that pass are read further
    maybe = df.lazy().select("file", _w=width).group_by("file").agg(W=top, at_w=(w == top).sum()).filter(
        pl.col("W").is_between(MIN_WIDTH, MAX_WIDTH) & (pl.col("at_w") >= 3)).select("file", "W").collect()
    if maybe.is_empty():
        return df.with_columns(_wrapped=pl.lit(False))
    work = _continues(df.with_row_index("_i").join(maybe, on="file", how="left"), row, width)
    per_file = work.lazy().filter(pl.col("W").is_not_null()).with_columns(_w=width).with_columns(
        _next=pl.col("_w").shift(-1).over("file", order_by=_ORDER),
        _next_padded=padded.shift(-1).over("file", order_by=_ORDER),
        _padded=padded,
        _shape=row.str.replace_all(r"\d+", "#"),
        _opening=_opening(row.shift(-1).over("file", order_by=_ORDER)),
    ).group_by("file").agg(
        at_w=(w == top).sum(),
        below=((w < top) & (w >= top - 3)).sum(),
        ended=((w == top) & ((pl.col("_next") < top) | pl.col("_next_padded"))).sum(),
        # how the rows after the unpadded W rows open: one template's lines open alike
        openings=pl.col("_opening").filter((w == top) & ~pl.col("_padded")).n_unique(),
        # and what they say: one long message repeated (a warning, an error every rank raised)
        # is one text, digits aside; the rows of wrapped lines are pieces of many
        texts=pl.col("_shape").filter((w == top) & ~pl.col("_padded")).n_unique(),
        # the rows that would continue into the next: a cut is never the only one (a file of
        # whole lines whose longest is followed once by a line no other opens as is not wrapped,
        # however its other rows of width W are counted: a batch the bulk lane thinned has fewer)
        cuts=pl.col("_c").sum(),
    ).filter((pl.col("at_w") > pl.col("below")) & (pl.col("ended") >= 1) & (MAX_ROWS * pl.col("ended") >= pl.col("at_w"))
             & (pl.col("cuts") >= 2) & (pl.col("openings") >= 2) & (pl.col("texts") >= 2)
    ).select("file").collect()
    if per_file.is_empty():
        return df.with_columns(_wrapped=pl.lit(False))
    work = work.with_columns(_c=pl.col("_c") & pl.col("file").is_in(per_file["file"].implode()))
    # a line starts at the file's first row and after every row that does not continue
    work = work.with_columns(
        _start=~pl.col("_c").shift(1).over("file", order_by=_ORDER).fill_null(False)
    ).with_columns(_run=pl.col("_start").cast(pl.Int64).cum_sum().over("file", order_by=_ORDER))
    runs = work.group_by("file", "_run").agg(
        _whole=pl.col("text").sort_by("line").str.strip_chars_end("\r\n").str.join(""), _rows=pl.len())
    work = work.join(runs, on=["file", "_run"], how="left")
    joined = (pl.col("_rows") > 1) & (pl.col("_rows") <= MAX_ROWS)
    return work.with_columns(
        text=pl.when(joined & pl.col("_start")).then(pl.col("_whole").str.strip_chars_end()).otherwise(pl.col("text")),
        _wrapped=joined & ~pl.col("_start"),
    ).sort("_i").drop("_i", "W", "_c", "_start", "_run", "_whole", "_rows")


def _continues(work: pl.DataFrame, row: pl.Expr, width: pl.Expr) -> pl.DataFrame:
    """`_c`: whether a row of a file that may be wrapped at `W` continues into the next row."""
    nxt = pl.col("text").shift(-1).over("file", order_by=_ORDER)
    # how the rows that surely begin a line open (the first row, a row after a shorter one): a
    # row that opens so begins one too (a logger's prefix, a template's first word)
    before = width.shift(1).over("file", order_by=_ORDER)
    work = work.with_columns(_open=_opening(row), _next_open=_opening(nxt),
                             _sure_start=(before < pl.col("W")).fill_null(True))
    starts = work.filter(pl.col("_sure_start")).select("file", _next_open="_open").unique().with_columns(_starts=pl.lit(True))
    work = work.join(starts, on=["file", "_next_open"], how="left")
    continues = ((width == pl.col("W")) & ~row.str.ends_with("  ") & ~row.str.contains(_TABLE_ROW)
                 & ~nxt.str.contains(_TABLE_ROW) & pl.col("W").is_not_null()
                 # the next physical line (a batch the bulk lane thinned skips some) ...
                 & (pl.col("line").shift(-1).over("file", order_by=_ORDER) == pl.col("line") + 1)
                 # ... that does not open as this row does (lines of one template share their
                 # first characters and their length; a row's cut does not) or as lines begin
                 & (pl.col("_next_open") != pl.col("_open")) & pl.col("_starts").is_null()
                 & (nxt.str.strip_chars() != ""))
    return work.with_columns(_c=continues.fill_null(False)).drop("_open", "_next_open", "_sure_start", "_starts")
