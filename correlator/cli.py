"""The command line: analyze, timeline, parse, formats, and the history commands (cli_store)."""
# No `from __future__ import annotations` here: typer reads every command's type hints at each
# start, and a hint kept as a string costs a compile (30 ms of a paste's second, cli and cli_store).

import json
import re
from functools import partial
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from . import __version__
from .cli_common import (COLOR_HELP, ColorChoice, OneLineErrors, ReportFormat as Format, dumb_terminal,
                         fail as _fail, format_from_out, print_rich, render, report_format, use_color,
                         write_output)
from .engine_ray import ADDRESS_HELP, ENGINE_HELP, Engine, EngineError, parser_for
from .pipeline import WINDOW, InputError, analyze as analyze_job

INPUTS_HELP = ("The job's logs: its directory, one or more log files or archives (.gz, .zst, .tar*), "
               "or - for standard input (a paste); several together are one job.")

app = typer.Typer(cls=OneLineErrors, add_completion=True, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
                  help="Post-mortem log correlator for distributed training failures.")




def _progress(quiet: bool):
    """A progress callback drawing on stderr, only when stderr is a terminal."""
    if quiet or not sys.stderr.isatty() or dumb_terminal():  # a dumb terminal cannot redraw a bar
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
    format: Format = typer.Option(None, "--format", "-f", help="terminal (default on a TTY), json, markdown, html; "
                                  "with --out and no --format, the file's extension decides (.json, .md, .html, .txt)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the report to this file."),
    color: ColorChoice = typer.Option(ColorChoice.auto, "--color", help=COLOR_HELP),
    db: Optional[Path] = typer.Option(None, "--db", help="Also keep the job in this history database (every line typed, as --full)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or notes on stderr."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Notes on stderr: files skipped, timings."),
    full: bool = typer.Option(False, "--full", help="Type every line, not only the last "
                              f"{WINDOW} of lines that repeat: NCCL COLL lines per process and communicator, "
                              "progress steps per rank (slower on big logs)."),
    one_job: bool = typer.Option(False, "--one-job", help="Read the inputs as one job even where their names "
                                 "say several (Slurm job ids, torchrun runs in different directories)."),
    engine: Engine = typer.Option(Engine.local, "--engine", help=ENGINE_HELP),
    address: Optional[str] = typer.Option(None, "--address", help=ADDRESS_HELP),
) -> None:
    """Analyse a job: verdict, evidence, aligned timeline, fix.

    Examples: correlator analyze samples/tr-stalled_rank-4 --format json;
    correlator analyze samples/tr-stalled_rank-4 -o report.html;
    correlator analyze rank3.log console.txt; pbpaste | correlator analyze -;
    correlator analyze /shared/logs/job-8812 --engine ray --address auto
    """
    fmt = report_format(format, out)
    _refuse_several_jobs(inputs, one_job)
    bar, on_file = _progress(quiet)
    try:
        parse_groups = parser_for(engine, address)
        # The store keeps every line typed, as `ingest` does.
        analysis = analyze_job(inputs, on_file=on_file, keep_tables=db is not None,
                               window=None if full or db is not None else WINDOW, parse_groups=parse_groups)
    except (InputError, EngineError) as e:
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
    text = render(analysis.report, fmt.value, color=use_color(color, to_file=out is not None))
    if verbose and not quiet:
        for s in analysis.report["job"]["files_skipped"]:
            typer.echo(f"skipped {s['path']}: {s['reason']}", err=True)
    write_output(out, text)


class TableFormat(str, Enum):
    table = "table"
    json = "json"
    parquet = "parquet"


PARSE_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".json": "json", ".jsonl": "json", ".ndjson": "json",
                    ".txt": "table"}


@app.command()
def parse(
    inputs: list[str] = typer.Argument(..., metavar="JOB_DIR|FILE...|-", help=INPUTS_HELP),
    table: str = typer.Option("events", "--table", "-t", help="files, events, collectives, comms, processes, progress, exits, pg_status, desync, mismatches."),
    format: TableFormat = typer.Option(None, "--format", "-f", help="table (rich, the default), json (one object per row), "
                                       "parquet (needs --out); with --out and no --format, its extension decides."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the rows to this file."),
    limit: int = typer.Option(50, "--limit", "-n", help="Rows shown by --format table (0: all)."),
    color: ColorChoice = typer.Option(ColorChoice.auto, "--color", help=COLOR_HELP),
) -> None:
    """Show the parsed rows of a file or directory.

    Example: correlator parse samples/tr-stalled_rank-4/logs --table progress
    """
    from .pipeline import parse_job
    from .tables import SCHEMAS
    if table not in SCHEMAS:
        raise _fail(f"unknown table {table!r}; one of: {', '.join(SCHEMAS)}")
    format = format or TableFormat(format_from_out(out, PARSE_EXTENSIONS) or "table")
    try:
        parsed = parse_job(inputs)
    except InputError as e:
        raise _fail(str(e))
    rel = parsed.con.sql(f"select * from {table}")
    if format is TableFormat.parquet:
        if not out:
            raise _fail("--format parquet needs --out FILE")
        import pyarrow.parquet as pq
        try:
            pq.write_table(rel.to_arrow_table(), out)
        except OSError as e:
            detail = re.search(r"\[errno \d+\] (.*)", str(e))
            raise _fail(f"cannot write {out}: {e.strerror or (detail[1] if detail else str(e))}")
    elif format is TableFormat.json:
        write_output(out, "".join(json.dumps(row, default=str) + "\n" for row in rel.to_arrow_table().to_pylist()))
    else:
        from rich.table import Table
        from .report.sanitize import clean
        view = Table(*rel.columns)
        for row in (rel.limit(limit) if limit else rel).fetchall():
            view.add_row(*(clean("" if v is None else str(v)) for v in row))
        total = parsed.con.execute(f"select count(*) from {table}").fetchone()[0]
        if limit and total > limit:
            view.caption = f"+{total - limit} more rows (--limit 0 shows all)"
        print_rich(view, color, out)


@app.command()
def formats() -> None:
    """List the supported log formats, each with a sample line.

    Example: correlator formats
    """
    from correlator.parsers.spec import registry
    from .report.sanitize import clean
    for spec in registry():
        typer.echo(f"{spec.layer:8} {spec.source:14} {spec.name:32} {clean(spec.samples[0].line)[:110]}")


@app.command()
def timeline(
    inputs: list[str] = typer.Argument(..., metavar="JOB_DIR|FILE...|-", help=INPUTS_HELP),
    rank: Optional[list[int]] = typer.Option(None, "--rank", "-r", help="Only these global ranks (repeatable)."),
    around: Optional[str] = typer.Option(None, "--around", help="Centre time (ISO, aligned, UTC), e.g. 2026-11-29T22:52:51."),
    window: float = typer.Option(30.0, "--window", "-w", help="Seconds either side of --around."),
    everything: bool = typer.Option(False, "--all", "-a", help="Every event, also unrecognised lines and frames; of NCCL COLL lines the last per stream and communicator (all are in the collectives table)."),
    limit: int = typer.Option(500, "--limit", "-n", help="At most this many lines (0: all); the rest is counted on stderr."),
    one_job: bool = typer.Option(False, "--one-job", help="Read the inputs as one job even where they look like several."),
) -> None:
    """The merged, clock-aligned timeline of every source, rank-aware.

    Example: correlator timeline samples/tr-stalled_rank-4/logs --rank 2 --around 2026-11-29T22:52:51 --window 30
    """
    from .assemble import iso
    from .report.sanitize import clean
    from .pipeline import timeline as job_timeline
    from .timeline import TimelineQuery, no_match_note
    _refuse_several_jobs(inputs, one_job)
    query = TimelineQuery(rank or [], around, window, everything, limit)
    try:
        rows, total, spans = job_timeline(inputs, query)
    except InputError as e:
        raise _fail(str(e))
    except ValueError as e:  # a malformed --around
        raise _fail(str(e))
    for ts, r, host, kind, file, line, text in rows:
        who = f"rank {r}" if r is not None else "-"
        typer.echo(f"{iso(ts)}  {who:>9}  {clean(host or '-'):12}  {kind:24}  {clean(file)}:{line}  {clean(text)[:200]}")
    if not rows:
        typer.echo(no_match_note(query, spans), err=True)
    elif total > len(rows):
        typer.echo(f"+{total - len(rows)} more events (--limit 0 shows all)", err=True)


def _refuse_several_jobs(inputs: list[str], one_job: bool) -> None:
    """Several jobs in one input are refused with one line naming them (see correlator/jobs.py)."""
    if one_job:
        return
    from .jobs import find_jobs, refusal
    found = find_jobs(inputs)
    if len(found) > 1:
        raise _fail(refusal(inputs, found))


def _register_store() -> None:
    from .cli_store import register
    register(app, partial(analyze_job, keep_tables=True, window=None))  # the store keeps every line typed


_register_store()

