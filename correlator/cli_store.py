"""The history commands of the CLI: ingest, sql, history, report, export."""
from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from contextlib import contextmanager
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import duckdb
import typer
from rich.console import Console
from rich.table import Table

from correlator import store
from correlator.cli_common import ReportFormat, fail as _fail
from correlator.pipeline import InputError

DbOption = typer.Option(None, "--db", help="History database (default: $CORRELATOR_DB, else $XDG_DATA_HOME/correlator/history.duckdb).")


class SqlFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"




@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn the errors a user can fix into one line on stderr and exit status 2."""
    try:
        yield
    except (store.StoreError, duckdb.Error) as error:
        raise _fail(store.first_line(error)) from None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return str(value)


def _print_rows(columns: list[str], rows: list[tuple], fmt: SqlFormat) -> None:
    if fmt is SqlFormat.csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([_cell(value) for value in row] for row in rows)
    elif fmt is SqlFormat.json:
        typer.echo(json.dumps([dict(zip(columns, row)) for row in rows], default=str, indent=2))
    else:
        table = Table(*columns)
        for row in rows:
            table.add_row(*(_display(value) for value in row))
        Console().print(table)


def _display(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_display(item) for item in value)
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return _cell(value)


def _print_history(jobs: list[dict]) -> None:
    ids = Counter(job["job_id"] for job in jobs)
    table = Table("job", "analysed (UTC)", "kind", "culprit ranks", "culprit hosts", "confidence", "summary")
    for column in table.columns[:3]:
        column.no_wrap = True
    for job in jobs:
        # A job id reused by several log dirs is ambiguous: show the key that `report` accepts.
        name = job["job_id"] if ids[job["job_id"]] == 1 else job["job_key"]
        table.add_row(name, job["analysed_at"].strftime("%Y-%m-%d %H:%M"), job["kind"] or "",
                      _display(job["culprit_ranks"]), _display(job["culprit_hosts"]), job["confidence"] or "",
                      job["summary"] or "")
    Console().print(table)


def _ingest_one(analyze_job: Callable[[Path], Any], job_dir: Path, db: Optional[Path]) -> bool:
    try:
        analysis = analyze_job(job_dir)
        key = store.ingest(analysis, db)
    except (InputError, store.StoreError, duckdb.Error, OSError, ValueError) as error:
        typer.echo(f"error: {job_dir}: {store.first_line(error)}", err=True)
        return False
    verdict = analysis.report.get("verdict") or {}
    typer.echo(f"{key}: {verdict.get('kind')} — {verdict.get('summary') or ''}")
    return True


def register(app: typer.Typer, analyze_job: Callable[[Path], Any]) -> None:
    """Add the history commands to `app`; `analyze_job(path)` returns the pipeline's Analysis."""

    @app.command()
    def ingest(
        job_dirs: list[Path] = typer.Argument(..., help="Jobs to analyse and store: each a log directory, an archive or a log file."),
        db: Optional[Path] = DbOption,
    ) -> None:
        """Analyse jobs and store them in the history; re-ingesting a directory replaces it.

        Example: correlator ingest /shared/logs/job-8812 /shared/logs/job-8813 --db ~/history.duckdb
        """
        # Keep going past a bad directory so one unreadable job does not block the others.
        failures = [job_dir for job_dir in job_dirs if not _ingest_one(analyze_job, job_dir, db)]
        if failures:
            raise typer.Exit(2)

    @app.command()
    def sql(
        query: str = typer.Argument(..., help="DuckDB SQL; tables: incidents, files, events, collectives, comms, "
                                              "processes, progress, exits; views: culprit_hosts_by_month, "
                                              "kinds_by_week, recurring_tracebacks, similar_jobs."),
        db: Optional[Path] = DbOption,
        format: SqlFormat = typer.Option(SqlFormat.table, "--format", help="Output format."),
        write: bool = typer.Option(False, "--write", help="Allow statements that modify the database."),
    ) -> None:
        """Query the history with SQL (read-only unless --write).

        Example: correlator sql "select host, incidents from culprit_hosts_by_month where month = '2026-11'" --format csv
        """
        with _user_errors():
            columns, rows = store.query(db, query, write=write)
        _print_rows(columns, rows, format)

    @app.command()
    def history(db: Optional[Path] = DbOption) -> None:
        """List the stored jobs, most recently analysed first.

        Example: correlator history --db ~/history.duckdb
        """
        with _user_errors():
            jobs = store.history(db)
        _print_history(jobs)

    @app.command()
    def report(
        job: str = typer.Argument(..., help="Job id, or job key when one id names several log dirs."),
        db: Optional[Path] = DbOption,
        format: ReportFormat = typer.Option(ReportFormat.terminal, "--format", help="Output format."),
    ) -> None:
        """Show the stored report of a job.

        Example: correlator report 8812 --format markdown > incident-8812.md
        """
        with _user_errors():
            stored = store.load_report(db, job)
        if format is ReportFormat.json:
            typer.echo(json.dumps(stored, indent=2))
            return
        from correlator.report import render  # the renderers are heavy and not needed by the other commands

        rendered = render(stored, format.value)
        if rendered is not None:
            typer.echo(rendered)

    @app.command()
    def export(
        parquet: Path = typer.Option(..., "--parquet", help="Output directory (empty, or a previous export)."),
        db: Optional[Path] = DbOption,
    ) -> None:
        """Export every table as Hive-partitioned Parquet (partitioned by analysed_month) for Spark, Trino or DuckDB.

        Example: correlator export --parquet /shared/correlator-export && duckdb -c
        "select kind, count(*) from read_parquet('/shared/correlator-export/incidents/**/*.parquet', hive_partitioning=true) group by kind"
        """
        with _user_errors():
            counts = store.export_parquet(db, parquet)
        written = ", ".join(f"{name} {rows}" for name, rows in counts.items() if rows)
        typer.echo(f"exported rows: {written or 'none'} → {parquet}")
