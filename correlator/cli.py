"""The command line: analyze, timeline, parse, formats, and the history commands (cli_store)."""
from __future__ import annotations

import json
import shutil
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from . import __version__
from .pipeline import InputError, analyze as analyze_job, dumps

app = typer.Typer(add_completion=True, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
                  help="Post-mortem log correlator for distributed training failures.")


class Format(str, Enum):
    terminal = "terminal"
    json = "json"
    markdown = "markdown"
    html = "html"


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _progress(quiet: bool):
    """A progress callback drawing on stderr, only when stderr is a terminal."""
    if quiet or not sys.stderr.isatty():
        return None, None
    from rich.progress import Progress
    bar = Progress(transient=True, console=__import__("rich.console").console.Console(stderr=True))
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
    job_dir: Path = typer.Argument(..., help="The job's log directory (files, .gz/.zst, tar archives)."),
    format: Format = typer.Option(None, "--format", "-f", help="terminal (default on a TTY), json, markdown, html."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the report to this file."),
    db: Optional[Path] = typer.Option(None, "--db", help="Also keep the job in this history database."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or notes on stderr."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Notes on stderr: files skipped, timings."),
) -> None:
    """Analyse a job: verdict, evidence, aligned timeline, fix.

    Example: correlator analyze samples/tr-stalled_rank-4 --format json
    """
    fmt = format or (Format.terminal if sys.stdout.isatty() and not out else Format.json)
    bar, on_file = _progress(quiet)
    try:
        analysis = analyze_job(job_dir, on_file=on_file)
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


def render(report: dict, fmt: str) -> str:
    if fmt == "json":
        return dumps(report)
    from .report import render as render_report
    kwargs = {"width": shutil.get_terminal_size((120, 40)).columns, "color": sys.stdout.isatty()} if fmt == "terminal" else {}
    return render_report(report, fmt, **kwargs)


def _register_store() -> None:
    from .cli_store import register
    register(app, analyze_job)


_register_store()
