"""The command line: analyze, timeline, parse, formats, and the history commands (cli_store)."""
from __future__ import annotations

import json
import shutil
from functools import partial
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from . import __version__
from .cli_common import ReportFormat as Format, fail as _fail
from .pipeline import WINDOW, InputError, analyze as analyze_job, dumps

INPUTS_HELP = ("The job's logs: its directory, one or more log files or archives (.gz, .zst, .tar*), "
               "or - for standard input (a paste); several together are one job.")

app = typer.Typer(add_completion=True, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
                  help="Post-mortem log correlator for distributed training failures.")




def _progress(quiet: bool):
    """A progress callback drawing on stderr, only when stderr is a terminal."""
    if quiet or not sys.stderr.isatty():
        return None, None
    from rich.console import Console
    from rich.progress import Progress
    bar = Progress(transient=True, console=Console(stderr=True))
    task = bar.add_task("parsing", total=None)
    bar.start()
    return bar, (lambda done, total: bar.update(task, completed=done, total=total))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"correlator {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """Post-mortem log correlator for distributed training failures."""


@app.command()
def analyze(
    inputs: list[str] = typer.Argument(..., metavar="JOB_DIR|FILE...|-", help=INPUTS_HELP),
    format: Format = typer.Option(None, "--format", "-f", help="terminal (default on a TTY), json, markdown, html."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the report to this file."),
    db: Optional[Path] = typer.Option(None, "--db", help="Also keep the job in this history database (every line typed, as --full)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or notes on stderr."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Notes on stderr: files skipped, timings."),
    full: bool = typer.Option(False, "--full", help="Type every line, not only the last "
                              f"{WINDOW} of lines that repeat: NCCL COLL lines per process and communicator, "
                              "progress steps per rank (slower on big logs)."),
) -> None:
    """Analyse a job: verdict, evidence, aligned timeline, fix.

    Examples: correlator analyze samples/tr-stalled_rank-4 --format json;
    correlator analyze rank3.log console.txt; pbpaste | correlator analyze -
    """
    fmt = format or (Format.terminal if sys.stdout.isatty() and not out else Format.json)
    bar, on_file = _progress(quiet)
    try:
        # The store keeps every line typed, as `ingest` does.
        analysis = analyze_job(inputs, on_file=on_file, keep_tables=db is not None,
                               window=None if full or db is not None else WINDOW)
    except InputError as e:
        raise _fail(str(e))
    finally:
        if bar:
            bar.stop()
    if db is not None:
        from . import store
        try:
            store.ingest(analysis, db)
        except store.StoreError as e:
            raise _fail(str(e))
    text = render(analysis.report, fmt.value)
    if verbose and not quiet:
        for s in analysis.report["job"]["files_skipped"]:
            typer.echo(f"skipped {s['path']}: {s['reason']}", err=True)
    if out:
        out.write_text(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


class TableFormat(str, Enum):
    table = "table"
    json = "json"
    parquet = "parquet"


@app.command()
def parse(
    inputs: list[str] = typer.Argument(..., metavar="JOB_DIR|FILE...|-", help=INPUTS_HELP),
    table: str = typer.Option("events", "--table", "-t", help="files, events, collectives, comms, processes, progress, exits, pg_status, desync, mismatches."),
    format: TableFormat = typer.Option(TableFormat.table, "--format", "-f", help="table (rich), json (one object per row), parquet (needs --out)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output file (parquet)."),
    limit: int = typer.Option(50, "--limit", "-n", help="Rows shown by --format table (0: all)."),
) -> None:
    """Show the parsed rows of a file or directory.

    Example: correlator parse samples/tr-stalled_rank-4/logs --table progress
    """
    from .pipeline import parse_job
    from .tables import SCHEMAS
    if table not in SCHEMAS:
        raise _fail(f"unknown table {table!r}; one of: {', '.join(SCHEMAS)}")
    try:
        parsed = parse_job(inputs)
    except InputError as e:
        raise _fail(str(e))
    rel = parsed.con.sql(f"select * from {table}")
    if format is TableFormat.parquet:
        if not out:
            raise _fail("--format parquet needs --out FILE")
        import pyarrow.parquet as pq
        pq.write_table(rel.to_arrow_table(), out)
    elif format is TableFormat.json:
        for row in rel.to_arrow_table().to_pylist():
            sys.stdout.write(json.dumps(row, default=str) + "\n")
    else:
        from rich.console import Console
        from rich.table import Table
        from .report.sanitize import clean
        view = Table(*rel.columns)
        for row in (rel.limit(limit) if limit else rel).fetchall():
            view.add_row(*(clean("" if v is None else str(v)) for v in row))
        Console().print(view)


@app.command()
def formats() -> None:
    """List the supported log formats, each with a sample line.

    Example: correlator formats
    """
    from parsers.spec import registry
    from .report.sanitize import clean
    for spec in registry():
        typer.echo(f"{spec.layer:8} {spec.source:14} {spec.name:32} {clean(spec.samples[0].line)[:110]}")


@app.command()
def timeline(
    inputs: list[str] = typer.Argument(..., metavar="JOB_DIR|FILE...|-", help=INPUTS_HELP),
    rank: Optional[list[int]] = typer.Option(None, "--rank", "-r", help="Only these global ranks (repeatable)."),
    around: Optional[str] = typer.Option(None, "--around", help="Centre time (ISO, aligned, UTC), e.g. 2026-11-29T22:05:42."),
    window: float = typer.Option(30.0, "--window", "-w", help="Seconds either side of --around."),
    everything: bool = typer.Option(False, "--all", "-a", help="Every event, also unrecognised lines and frames; of NCCL COLL lines the last per stream and communicator (all are in the collectives table)."),
    limit: int = typer.Option(500, "--limit", "-n", help="At most this many lines (0: all)."),
) -> None:
    """The merged, clock-aligned timeline of every source, rank-aware.

    Example: correlator timeline samples/tr-stalled_rank-4/logs --rank 2 --around 2026-11-29T22:05:42 --window 30
    """
    import queries
    from .assemble import QUIET_KINDS, iso
    from .pipeline import parse_job
    from .report.sanitize import clean
    try:
        parsed = parse_job(inputs)  # every line: a window would leave out earlier progress steps
    except InputError as e:
        raise _fail(str(e))
    queries.run_all(parsed.con)
    where, params = ["aligned_ts is not null"], []
    if not everything:
        where.append(f"kind not in {QUIET_KINDS}")
    if rank:
        where.append("rank in (select unnest(?::bigint[]))")
        params.append(rank)
    if around:
        where.append("aligned_ts between ?::timestamptz - to_microseconds(?) and ?::timestamptz + to_microseconds(?)")
        micros = int(window * 1e6)
        params += [around + ("" if around.endswith("Z") else "Z"), micros, around + ("" if around.endswith("Z") else "Z"), micros]
    sql = (f"select aligned_ts, rank, host, kind, file, line, text from timeline_events where {' and '.join(where)} "
           f"order by aligned_ts, file, line" + (f" limit {int(limit)}" if limit else ""))
    try:
        rows = parsed.con.execute(sql, params).fetchall()
    except Exception as e:  # a malformed --around
        raise _fail(f"bad --around value: {e}".splitlines()[0])
    for ts, r, host, kind, file, line, text in rows:
        who = f"rank {r}" if r is not None else "-"
        typer.echo(f"{iso(ts)}  {who:>9}  {clean(host or '-'):12}  {kind:24}  {clean(file)}:{line}  {clean(text)[:200]}")


def render(report: dict, fmt: str) -> str:
    if fmt == "json":
        return dumps(report)
    from .report import render as render_report
    kwargs = {"width": shutil.get_terminal_size((120, 40)).columns, "color": sys.stdout.isatty()} if fmt == "terminal" else {}
    return render_report(report, fmt, **kwargs)


def _register_store() -> None:
    from .cli_store import register
    register(app, partial(analyze_job, keep_tables=True, window=None))  # the store keeps every line typed


_register_store()
