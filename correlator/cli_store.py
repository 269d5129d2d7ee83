"""The history commands of the CLI: ingest, sql, history, report, export."""
# No `from __future__ import annotations` here: typer reads every command's type hints at each
# start, and a hint kept as a string costs a compile (30 ms of a paste's second, cli and cli_store).

import csv
import io
import json
import sys
from collections import Counter
from contextlib import contextmanager
from functools import partial
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import duckdb
import typer

from correlator import lake, store
from correlator.cli_common import (COLOR_HELP, ColorChoice, ReportFormat, fail as _fail, format_from_out, print_rich,
                                   render, report_format, use_color, write_output)
from correlator.engine_ray import ADDRESS_HELP, ENGINE_HELP, Engine, EngineError, parser_for
from correlator.pipeline import InputError

DbOption = typer.Option(None, "--db", help="History database (default: $CORRELATOR_DB, else $XDG_DATA_HOME/correlator/history.duckdb).")


class SqlFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


ROW_EXTENSIONS = {".csv": "csv", ".json": "json", ".txt": "table"}
FormatOption = typer.Option(None, "--format", "-f", help="table (the default), csv, json; with --out and no --format, "
                                                          "its extension decides (.csv, .json, .txt).")
OutOption = typer.Option(None, "--out", "-o", help="Write to this file instead of standard output.")
ColorOption = typer.Option(ColorChoice.auto, "--color", help=COLOR_HELP)
LakeOption = typer.Option(None, "--lake", help="A Parquet lake directory (Hive-partitioned by month and job) "
                                               "instead of the DuckDB history file.")




@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn the errors a user can fix into one line on stderr and exit status 2."""
    try:
        yield
    except (store.StoreError, EngineError, duckdb.Error) as error:
        raise _fail(store.first_line(error)) from None


def _one_history(db: Optional[Path], lake_dir: Optional[Path]) -> None:
    if db and lake_dir:
        raise _fail("give --db or --lake, not both")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return str(value)


def _row_format(fmt: SqlFormat | None, out: Path | None) -> SqlFormat:
    return fmt or SqlFormat(format_from_out(out, ROW_EXTENSIONS) or "table")


def _print_rows(columns: list[str], rows: list[tuple], fmt: SqlFormat, out: Path | None = None,
                color: ColorChoice | None = None) -> None:
    if fmt is SqlFormat.csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([_cell(value) for value in row] for row in rows)
        write_output(out, buffer.getvalue())
    elif fmt is SqlFormat.json:
        write_output(out, json.dumps([dict(zip(columns, row)) for row in rows], default=str, indent=2))
    else:
        from rich.table import Table  # imported where a table is drawn: 30 ms of every command at import
        table = Table(*columns)
        for row in rows:
            table.add_row(*(_display(value) for value in row))
        print_rich(table, color, out)


def _display(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_display(item) for item in value)
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return _cell(value)


def _print_history(jobs: list[dict], fmt: SqlFormat, out: Path | None, color: ColorChoice | None) -> None:
    if fmt is not SqlFormat.table:  # every stored column, for scripts
        columns = list(store.HISTORY_COLUMNS)
        _print_rows(columns, [tuple(job[c] for c in columns) for job in jobs], fmt, out)
        return
    ids = Counter(job["job_id"] for job in jobs)
    from rich.table import Table
    table = Table("job", "analysed (UTC)", "kind", "culprit ranks", "culprit hosts", "confidence", "summary")
    for column in table.columns[:3]:
        column.no_wrap = True
    for job in jobs:
        # A job id reused by several log dirs is ambiguous: show the key that `report` accepts.
        name = job["job_id"] if ids[job["job_id"]] == 1 else job["job_key"]
        table.add_row(name, job["analysed_at"].strftime("%Y-%m-%d %H:%M"), job["kind"] or "",
                      _display(job["culprit_ranks"]), _display(job["culprit_hosts"]), job["confidence"] or "",
                      job["summary"] or "")
    print_rich(table, color, out)


def _ingest_one(analyze_job: Callable[[Path], Any], job_dir: Path, db: Optional[Path], lake_dir: Optional[Path]) -> bool:
    try:
        analysis = analyze_job(job_dir)
        key = lake.write_job(lake_dir, analysis) if lake_dir else store.ingest(analysis, db)
    except (InputError, EngineError, store.StoreError, duckdb.Error, OSError, ValueError) as error:
        message = store.first_line(error)
        where = "" if message.startswith(str(job_dir)) else f"{job_dir}: "
        typer.echo(f"error: {where}{message}", err=True)
        return False
    verdict = analysis.report.get("verdict") or {}
    typer.echo(f"{key}: {verdict.get('kind')} — {verdict.get('summary') or ''}")
    return True


def _jobs_of(job_dir: Path, one_job: bool) -> list[Path] | None:
    """The jobs to ingest for one argument: itself, or each job of a tree that holds several
    (correlator/jobs.py); None (after one line on stderr) when its jobs cannot be told apart by directory."""
    if one_job:
        return [job_dir]
    from correlator.jobs import find_jobs, refusal, separable
    found = find_jobs(job_dir)
    if len(found) <= 1:
        return [job_dir]
    if separable(found):
        typer.echo(f"{job_dir}: {len(found)} jobs, each stored on its own", err=True)
        return [job.where for job in found]
    typer.echo(f"error: {refusal(job_dir, found)}", err=True)
    return None


def register(app: typer.Typer, analyze_job: Callable[[Path], Any]) -> None:
    """Add the history commands to `app`; `analyze_job(path)` returns the pipeline's Analysis
    (`analyze_job(path, parse_groups=...)` with --engine ray)."""

    @app.command()
    def ingest(
        job_dirs: list[Path] = typer.Argument(..., help="Jobs to analyse and store: each a log directory, an archive "
                                                        "or a log file; a tree of several jobs stores each of them."),
        db: Optional[Path] = DbOption,
        one_job: bool = typer.Option(False, "--one-job", help="Store each argument as one job even where its names "
                                     "say several."),
        lake_dir: Optional[Path] = LakeOption,
        engine: Engine = typer.Option(Engine.local, "--engine", help=ENGINE_HELP),
        address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP),
    ) -> None:
        """Analyse jobs and store them in the history; re-ingesting a directory replaces it.

        Examples: correlator ingest /shared/logs/job-8812 /shared/logs/job-8813 --db ~/history.duckdb;
        correlator ingest samples (each of the 46 jobs under it);
        correlator ingest /shared/failed/* --lake /shared/correlator-lake --engine ray --address auto
        """
        _one_history(db, lake_dir)
        with _user_errors():
            if lake_dir:
                lake.claim(lake_dir)  # an unwritable lake is one error, not one per job
            parse_groups = parser_for(engine, address)
        analyze_on = partial(analyze_job, parse_groups=parse_groups) if parse_groups else analyze_job
        # Keep going past a bad directory so one unreadable job does not block the others.
        failed = False
        for job_dir in job_dirs:
            jobs = _jobs_of(job_dir, one_job)
            if jobs is None:
                failed = True
                continue
            for job in jobs:
                failed |= not _ingest_one(analyze_on, job, db, lake_dir)
        if failed:
            raise typer.Exit(2)

    @app.command()
    def sql(
        query: str = typer.Argument(..., help="DuckDB SQL; tables: incidents, files, events, collectives, comms, "
                                              "processes, progress, exits; views: culprit_hosts_by_month, "
                                              "kinds_by_week, recurring_tracebacks, similar_jobs."),
        db: Optional[Path] = DbOption,
        format: Optional[SqlFormat] = FormatOption,
        out: Optional[Path] = OutOption,
        write: bool = typer.Option(False, "--write", help="Allow statements that modify the database."),
        color: ColorChoice = ColorOption,
        lake_dir: Optional[Path] = LakeOption,
    ) -> None:
        """Query the history with SQL (read-only unless --write), or a lake's (--lake) with the same views.

        Examples: correlator sql "select host, incidents from culprit_hosts_by_month where month = '2026-11'" -f csv;
        correlator sql --lake /shared/correlator-lake "select * from kinds_by_week"
        """
        fmt = _row_format(format, out)
        _one_history(db, lake_dir)
        if lake_dir and write:
            raise _fail("--write changes a --db file; a lake changes only by ingest")
        with _user_errors():
            columns, rows = lake.query(lake_dir, query) if lake_dir else store.query(db, query, write=write)
        _print_rows(columns, rows, fmt, out, color)

    @app.command()
    def history(
        db: Optional[Path] = DbOption,
        format: Optional[SqlFormat] = FormatOption,
        out: Optional[Path] = OutOption,
        color: ColorChoice = ColorOption,
        lake_dir: Optional[Path] = LakeOption,
    ) -> None:
        """List the stored jobs, most recently analysed first (csv and json: every stored column).

        Examples: correlator history --db ~/history.duckdb; correlator history -f json | jq '.[0]';
        correlator history --lake /shared/correlator-lake
        """
        fmt = _row_format(format, out)
        _one_history(db, lake_dir)
        with _user_errors():
            jobs = lake.history(lake_dir) if lake_dir else store.history(db)
        _print_history(jobs, fmt, out, color)

    @app.command()
    def report(
        job: str = typer.Argument(..., help="Job id, or job key when one id names several log dirs."),
        db: Optional[Path] = DbOption,
        format: Optional[ReportFormat] = typer.Option(None, "--format", "-f", help="terminal (default on a TTY), json, "
                                                      "markdown, html; with --out and no --format, its extension decides."),
        out: Optional[Path] = OutOption,
        color: ColorChoice = ColorOption,
    ) -> None:
        """Show the stored report of a job, as `analyze` printed it.

        Examples: correlator report 8812 -f markdown > incident-8812.md; correlator report 8812 -o incident-8812.html
        """
        fmt = report_format(format, out)
        with _user_errors():
            stored = store.load_report(db, job)
        write_output(out, render(stored, fmt.value, color=use_color(color, to_file=out is not None)))

    @app.command()
    def export(
        parquet: Path = typer.Option(..., "--parquet", "-o", help="Output directory (empty, or a previous export)."),
        db: Optional[Path] = DbOption,
    ) -> None:
        """Export every table as Hive-partitioned Parquet (partitioned by the incident's month) for Spark, Trino or DuckDB.

        Example: correlator export --parquet /shared/correlator-export && duckdb -c
        "select kind, count(*) from read_parquet('/shared/correlator-export/incidents/**/*.parquet', hive_partitioning=true) group by kind"
        """
        with _user_errors():
            counts = store.export_parquet(db, parquet)
        written = ", ".join(f"{name} {rows}" for name, rows in counts.items() if rows)
        typer.echo(f"exported rows: {written or 'none'} → {parquet}")
