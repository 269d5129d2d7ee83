"""srun's task ranges: one `exits` row per task of a line that names several (`tasks 0,2-3:`)."""
from __future__ import annotations

import polars as pl
import pyarrow as pa

_TASK_RANGE = r"tasks? ([\d,\-\[\]]+):"


def _task_ids(ranges: pl.Expr) -> pl.Expr:
    """`0,2-3` -> [0, 2, 3] (srun's task list; brackets appear when it is a hostlist-style set)."""
    parts = ranges.str.strip_chars("[]").str.split(",")
    return parts.list.eval(pl.int_ranges(
        pl.element().str.extract(r"^\[?(\d+)", 1).str.to_integer(strict=False),
        pl.coalesce(pl.element().str.extract(r"-(\d+)", 1), pl.element().str.extract(r"^\[?(\d+)", 1))
        .str.to_integer(strict=False) + 1,
    )).list.eval(pl.element().explode())


def expand_task_ranges(table: pa.Table) -> pa.Table:
    """One `exits` row per task for srun's `task(s) 0,2-3: ...` rows (`task` = the GLOBAL task id).

    Also clears `rank` on SLURM step events (slurmstepd, slurmctld rows): a banner reaches the job
    output through task 0's stream, so the label's rank there is not the rank the event is about.
    Call on the `exits` table of a job (any mix of sources); other rows pass through unchanged.
    """
    df = pl.from_arrow(table)
    if df.is_empty():
        return table
    srun = ((pl.col("source") == "srun") & pl.col("task").is_null()).fill_null(False)
    expanded = df.filter(srun).with_columns(
        task=_task_ids(pl.col("text").str.extract(_TASK_RANGE, 1))).explode("task")
    step_event = pl.col("source").is_in(["slurmstepd", "slurmctld"]).fill_null(False)
    rest = df.filter(~srun).with_columns(
        rank=pl.when(step_event).then(pl.lit(None, pl.Int64)).otherwise(pl.col("rank")))
    out = pl.concat([rest, expanded.select(df.columns)]).sort("file", "line", "task", nulls_last=True)
    return out.to_arrow().cast(table.schema)
