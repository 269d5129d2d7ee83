"""What the CLI modules share: the report formats, the one-line user error, and the command group
that turns every user error (a bad option, a path that cannot be written) into one line, exit 2."""
from __future__ import annotations

import errno
import os
import shutil
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from .report import RENDERERS, render as render_report

try:  # typer >= 0.16 vendors click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on click
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError


# The report outputs the commands offer: one per renderer (correlator/report RENDERERS).
ReportFormat = Enum("ReportFormat", {name: name for name in RENDERERS}, type=str)


def fail(message: str) -> typer.Exit:
    """Print one line on stderr; the caller raises the returned Exit (status 2, no traceback)."""
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(2)


def one_line(message: object) -> str:
    text = " ".join(str(message).split("\n")[0].split()) if str(message).strip() else ""
    return text or type(message).__name__


def os_error(error: OSError) -> str:
    """An OSError as a user reads it: `PATH: reason`."""
    reason = error.strerror or one_line(error)
    return f"{error.filename}: {reason}" if error.filename else reason


class _UsageLine(ClickException):
    """A usage error as one line: `error: MESSAGE (see 'correlator CMD --help')`."""
    exit_code = 2

    def __init__(self, error: UsageError):
        super().__init__(error.format_message())
        ctx = error.ctx
        self.hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""

    def show(self, file: Any = None) -> None:
        typer.echo(f"error: {one_line(self.format_message())}{self.hint}", err=True)


class OneLineErrors(TyperGroup):
    """The app's group: usage errors and I/O errors a user can fix print one line and exit 2;
    only a bug ends in a traceback (exit 1). `--help` and a bare command still print the help."""

    def make_context(self, *args: Any, **kwargs: Any):
        try:
            return super().make_context(*args, **kwargs)
        except NoArgsIsHelpError:
            raise
        except UsageError as error:
            raise _UsageLine(error) from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except NoArgsIsHelpError:
            raise
        except UsageError as error:
            raise _UsageLine(error) from None
        except OSError as error:
            if error.errno == errno.EPIPE:  # `correlator ... | head`: handled by typer
                raise
            raise fail(os_error(error)) from None


class ColorChoice(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


COLOR_HELP = ("Colour: auto (on a terminal, unless NO_COLOR is set or TERM=dumb), always, never.")


def dumb_terminal() -> bool:
    return os.environ.get("TERM", "") in ("dumb", "unknown")


def use_color(choice: "ColorChoice | None", stream: Any = None, to_file: bool = False) -> bool:
    """Whether to colour output to `stream` (stdout by default): --color wins over the environment;
    `auto` colours a terminal only, never a file, and honours NO_COLOR (https://no-color.org) and TERM=dumb."""
    choice = choice or ColorChoice.auto
    if choice is ColorChoice.always:
        return True
    if choice is ColorChoice.never or to_file:
        return False
    if os.environ.get("NO_COLOR", "") != "" or dumb_terminal():
        return False
    stream = stream if stream is not None else sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def console(color: bool, file: Any = None):
    """A rich Console for tables: styled only when `color` (no escape sequence at all otherwise)."""
    from rich.console import Console
    from .report.terminal import color_system
    return Console(file=file, color_system=color_system(color), force_terminal=color, no_color=not color,
                   highlight=False, emoji=False, markup=False)


# --out picks the format from its extension when --format is not given.
EXTENSIONS = {extension: r.name for r in RENDERERS.values() for extension in r.extensions}


def format_from_out(out: Path | None, choices: dict[str, str] | None = None) -> str | None:
    """The format that the name of `--out` asks for (`r.html` → html), None without --out or
    extension; a usage error for an extension that names no format of the command."""
    if out is None or not out.suffix:
        return None
    table = EXTENSIONS if choices is None else choices
    fmt = table.get(out.suffix.lower())
    if fmt is None:
        raise fail(f"cannot tell the format from {out.name!r} ({', '.join(sorted(table))} are known); give --format")
    return fmt


def write_output(out: Path | None, text: str) -> None:
    """The command's output on stdout, or into `out`; a path that cannot be written is one line, exit 2."""
    if not text.endswith("\n"):
        text += "\n"
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.write_text(text)
    except OSError as error:
        raise fail(f"cannot write {os_error(error)}") from None


def print_rich(renderable: Any, color: ColorChoice | None, out: Path | None = None) -> None:
    """A rich table on stdout (coloured per `color`) or into `out` (plain unless --color always)."""
    if out is None:
        console(use_color(color)).print(renderable)
        return
    import io
    buffer = io.StringIO()
    rich_console = console(use_color(color, to_file=True), file=buffer)
    rich_console.width = int(os.environ.get("COLUMNS", 0) or 160)
    rich_console.print(renderable)
    write_output(out, buffer.getvalue())


def report_format(format: "ReportFormat | None", out: Path | None) -> "ReportFormat":
    """--format, else what --out's extension names, else terminal on a TTY and JSON otherwise."""
    if format is not None:
        return format
    named = format_from_out(out)
    if named:
        return ReportFormat(named)
    return ReportFormat.terminal if sys.stdout.isatty() and out is None else ReportFormat.json


def render(report: dict, fmt: str, color: bool = False) -> str:
    """The report as `fmt` (a name of RENDERERS), as wide as the terminal."""
    return render_report(report, fmt, color=color, width=shutil.get_terminal_size((120, 40)).columns)
