"""What "identical" means between two runs of one job: the same rows in every table (in any order)
and the same report, byte for byte; the lake's incident row but for the time of the analysis."""
from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from correlator.tables import TABLES

PER_RUN = {"analysed_at"}  # when the ingest ran: the only field that differs between two runs


def rows(table) -> list[str]:
    """A table's rows in a canonical order (repr sorts every type the tables hold)."""
    return sorted(repr(sorted(row.items())) for row in table.to_pylist())


def lake_rows(lake: Path, name: str) -> list[str]:
    """A lake table's rows, each job's files read as they lie (no correlator code in between)."""
    parts = sorted((lake / name).glob("month=*/job=*/*.parquet"))
    table_rows = []
    for part in parts:
        table = pq.read_table(part, partitioning=None)
        table = table.drop_columns([c for c in PER_RUN if c in table.column_names])
        table_rows += rows(table)
    return sorted(table_rows)


def lake_contents(lake: Path) -> dict[str, list[str]]:
    return {name: lake_rows(lake, name) for name in ("incidents", *TABLES)}
