"""One paste of several files: `tail -n +1 rank*.log`, `head -n 40 *.log` and the like print
`==> NAME <==` before each file's lines. The lines under such a header are that file's, so they
take the rank and local rank its name states (`==> logs/rank3.log <==`, `==> node-02 rank 11
(local 3) pid 51330 <==`), not those of the file they were pasted into; a header whose name
states none leaves its lines without one.

A section is followed within one batch of a file: a paste is one batch. A file so large that it
is parsed in several batches restarts at each batch with the file's own hints until a header."""
from __future__ import annotations

import polars as pl

from .multiline import EXCEPTION_LINE

HEADER = r"^==> (.{1,300}) <==$"
SECTION_KIND = "file_section"
_RANK = r"(?i)(?:^|[^a-z])rank[ _=:-]?(\d{1,7})(?:[^\d]|$)"
_LOCAL = r"(?i)(?:^|[^a-z])local(?:_rank|[ _-]rank)?[ _=:-]?(\d{1,5})(?:[^\d]|$)"
_ORDER = ["line", "idx"]


def apply_sections(df: pl.DataFrame) -> pl.DataFrame:
    """Mark the `==> NAME <==` lines and give the lines under each the rank its name states."""
    header = pl.col("text").str.contains(HEADER) & pl.col("kind").is_null()
    if not df.select(header.any()).item():
        return df
    name = pl.when(header).then(pl.col("text").str.extract(HEADER, 1))
    work = df.with_columns(_head=header, _name=name).with_columns(
        _name=pl.col("_name").forward_fill().over("file", order_by=_ORDER))
    inside = pl.col("_name").is_not_null()
    return work.with_columns(
        hint_rank=pl.when(inside).then(pl.col("_name").str.extract(_RANK, 1).cast(pl.Int64)).otherwise(pl.col("hint_rank")),
        hint_local_rank=pl.when(inside).then(pl.col("_name").str.extract(_LOCAL, 1).cast(pl.Int64))
        .otherwise(pl.col("hint_local_rank")),
        kind=pl.when(pl.col("_head")).then(pl.lit(SECTION_KIND)).otherwise(pl.col("kind")),
        source=pl.when(pl.col("_head")).then(pl.lit("text")).otherwise(pl.col("source")),
    ).drop("_head", "_name")


# torch.multiprocessing.spawn relays a child's exception in the parent's output: `-- Process 2
# terminated with the following error:`, then the child's traceback. Those lines are process 2's
# (spawn's index: the local rank on its host), up to the first line that is no part of a traceback.
SPAWN_HEADER = r"^-- Process (\d{1,5}) terminated with the following error:\s*$"
_TRACEBACK_PART = (r"^(?:\s|$|Traceback \(most recent call last\):|During handling of the above exception|"
                   r"The above exception was the direct cause)")


def apply_spawn_sections(df: pl.DataFrame) -> pl.DataFrame:
    """Give the lines of a spawned child's relayed traceback that child's local rank (after the
    wrappers: the header may sit behind a launcher's prefix)."""
    header = pl.col("text").str.contains(SPAWN_HEADER)
    if not df.select(header.any()).item():
        return df
    part = pl.col("text").str.contains(_TRACEBACK_PART) | pl.col("text").str.contains(EXCEPTION_LINE)
    work = df.with_columns(_head=header).with_columns(
        _sec=pl.col("_head").cast(pl.Int64).cum_sum().over("file", order_by=_ORDER),
        _proc=pl.when(pl.col("_head")).then(pl.col("text").str.extract(SPAWN_HEADER, 1).cast(pl.Int64))
        .forward_fill().over("file", order_by=_ORDER),
    ).with_columns(
        _gone=(~part & ~pl.col("_head")).cast(pl.Int64).cum_sum().over(["file", "_sec"], order_by=_ORDER))
    inside = (pl.col("_sec") > 0) & (pl.col("_gone") == 0)
    return work.with_columns(
        hint_local_rank=pl.when(inside).then(pl.col("_proc")).otherwise(pl.col("hint_local_rank")),
    ).drop("_head", "_sec", "_proc", "_gone")
