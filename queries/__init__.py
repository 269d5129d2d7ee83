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
    ("async_errors", {}),
    *(("apply_identity", {"table": t}) for t in ("events", "progress", "exits", "collectives", "pg_status", "desync", "mismatches", "processes")),
    ("relayed_errors", {}),
    *(("pg_rank_is_global", {"table": t}) for t in ("collectives", "pg_status")),
    ("timeout_pg", {}),
    ("mismatch_rows", {}),
    ("nccl_ras", {}),
    ("world", {}),
    ("traceback_ranks", {}),
    ("unnamed_comms", {}),
    ("shared_bootstrap_address", {}),
    ("error_lines", {}),
    ("horovod_stalls", {}),
    # Flight Recorder dumps matched across ranks; fr_canonical rewrites their `collectives` rows
    # so that the queries below read them with FR's semantics.
    ("fr_groups", {}),
    ("fr_ops", {}),
    ("fr_collectives", {}),
    ("fr_p2p", {}),
    ("fr_canonical", {}),
    ("last_seq", {}),
    ("first_stalled", {}),
    ("divergence", {}),
    ("fr_findings", {}),
    ("mismatch_votes", {}),
    ("rank_facts", {}),
    ("clock_offsets", {}),
    ("stragglers", {}),
    ("stacks", {}),
    ("blocked_calls", {}),
    ("shape_prints", {}),
    ("print_order", {}),
    ("uneven_totals", {}),
    ("memory", {}),
    ("collateral", {}),
)


# The stages that only Flight Recorder dumps feed; without a dump, `fr_none` creates the outputs
# the rest reads, empty.
FR_STAGES = frozenset({"fr_groups", "fr_ops", "fr_collectives", "fr_p2p", "fr_canonical", "fr_findings"})


# Stages that read only one runtime's report lines (by their kinds' prefix) and write what they
# find into the shared tables: without such a line they have nothing to do (most jobs have none).
ONLY_WITH_KINDS = {"fr_reports": "fr_report_", "nccl_ras": "nccl_ras_", "horovod_stalls": "horovod_", "shared_bootstrap_address": "nccl",
                   "traceback_ranks": "detail_mismatch"}


# Stages that only rows of one kind feed: without such a row (asked when the stage's turn comes)
# their outputs are empty, and `<stage>_none` creates them so without the planning the stage costs.
ONLY_WITH_ROWS = {
    # (a DETAIL report's barrier fingerprint places a divergence of its own: divergence.sql)
    "divergence": "select 1 from seq_rows union all select 1 from barrier_fingerprints where rank_b is not null",
    "blocked_calls": "select 1 from events where rank is not null and kind in ('traceback_frame', 'stack_frame')",
}


def run_all(con: duckdb.DuckDBPyConnection) -> None:
    has_fr = con.execute("select exists (select 1 from fr_dumps)").fetchone()[0]
    kinds = [k for (k,) in con.execute("select distinct kind from events").fetchall() if k]
    for name, params in STAGES:
        if name in FR_STAGES and not has_fr:
            if name == "fr_findings":
                run(con, "fr_none")
            continue
        if name in ONLY_WITH_ROWS and not con.execute(f"select exists ({ONLY_WITH_ROWS[name]})").fetchone()[0]:
            run(con, f"{name}_none")
            continue
        if name in ONLY_WITH_KINDS and not any(k.startswith(ONLY_WITH_KINDS[name]) for k in kinds):
            continue
        if "table" in params and _empty(con, params["table"]):
            continue
        run(con, name, **params)


def _empty(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether a per-table stage's table holds no row now (a paste has no collectives, no
    progress...): an update of it is a statement DuckDB would plan for nothing. Asked at each
    stage, as earlier stages insert rows (fr_reports, mismatch_rows, nccl_ras)."""
    return not con.execute(f"select exists (select 1 from {table})").fetchone()[0]
