"""mpirun beyond single lines: the first process that exited non-zero, which Open MPI names on one
line (`  Process name: [[16542,1],2]`) and whose code it gives on the next (`  Exit code:    1`),
both recognised by formats/mpirun.toml. One `exits` row per such pair (source `mpirun`, reason
`first_nonzero_exit`): evidence of how that rank ended, never by itself its own failure."""
from __future__ import annotations

import polars as pl
import pyarrow as pa

from correlator.tables import conform, empty

NAME, CODE = "mpirun_process_name", "mpirun_exit_code"


def assemble_mpirun_exits(df: pl.DataFrame) -> pa.Table:
    """The `exits` rows of the per-line frame's `Process name` / `Exit code` pairs."""
    if not df.select((pl.col("kind") == NAME).any()).item():
        return empty("exits")
    names = df.filter(pl.col("kind") == NAME).select(
        "file", "line", "host", "ts", "text",
        rank=pl.col("text").str.extract(r"\],(\d+)\]\s*$", 1).str.to_integer(strict=False))
    codes = df.filter(pl.col("kind") == CODE).select(
        "file", line=pl.col("line") - 1,
        exit_code=pl.col("text").str.extract(r"(-?\d+)\s*$", 1).str.to_integer(strict=False))
    rows = names.join(codes, on=["file", "line"], how="left").select(
        "file", "line", "host", "rank", "exit_code", "ts",
        text=pl.format("the first process to exit non-zero: {} (exit code {})",
                       pl.col("text").str.strip_chars(), pl.col("exit_code").cast(pl.String).fill_null("?")),
        reason=pl.lit("first_nonzero_exit"), source=pl.lit("mpirun"))
    return conform("exits", rows.to_arrow())
