"""DuckDB SQL, one question per file. `run` executes a file's statements on a connection."""
from __future__ import annotations

from functools import cache
from pathlib import Path

import duckdb

QUERIES_DIR = Path(__file__).parent


@cache
def text(name: str) -> str:
    return (QUERIES_DIR / f"{name}.sql").read_text()


def run(con: duckdb.DuckDBPyConnection, name: str, **params: str) -> None:
    """Run `name`.sql; `{param}` placeholders name tables (trusted identifiers, never log text)."""
    sql = text(name)
    for key, value in params.items():
        sql = sql.replace("{" + key + "}", value)
    con.execute(sql)


# The stages of the analysis, in order: (query, table parameters).
STAGES = (
    ("year_of_undated", {}),
    *(("apply_year_shift", {"table": t}) for t in ("collectives", "progress", "exits", "pg_status", "desync", "mismatches", "comms")),
    ("apply_year_shift_events", {}),
    ("fr_reports", {}),
    ("inline_ranks", {}),
    ("identity", {}),
    ("task_is_rank", {}),
    *(("apply_identity", {"table": t}) for t in ("events", "progress", "exits", "collectives", "pg_status", "desync", "mismatches")),
    *(("pg_rank_is_global", {"table": t}) for t in ("collectives", "pg_status")),
    ("mismatch_rows", {}),
    ("world", {}),
    ("error_lines", {}),
    ("last_seq", {}),
    ("first_stalled", {}),
    ("divergence", {}),
    ("mismatch_votes", {}),
    ("rank_facts", {}),
    ("clock_offsets", {}),
    ("stragglers", {}),
    ("stacks", {}),
    ("blocked_calls", {}),
    ("memory", {}),
    ("collateral", {}),
)


def run_all(con: duckdb.DuckDBPyConnection) -> None:
    for name, params in STAGES:
        run(con, name, **params)
