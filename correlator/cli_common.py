"""What the CLI modules share: the report formats and the one-line user error."""
from __future__ import annotations

from enum import Enum

import typer


class ReportFormat(str, Enum):
    terminal = "terminal"
    json = "json"
    markdown = "markdown"
    html = "html"


def fail(message: str) -> typer.Exit:
    """Print one line on stderr; the caller raises the returned Exit (status 2, no traceback)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)
