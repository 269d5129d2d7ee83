"""The `correlator` console script. It hides the modules the command never uses before it imports
the CLI, whose imports (pyarrow's among them) would otherwise load them (see unused_modules), and
it skips the interpreter's teardown where nothing is left open."""
from __future__ import annotations

import os
import sys

# Commands that close everything they open before they print (the job's DuckDB connection and
# working directory: pipeline.analyze's `finally`): once their output is flushed, freeing the
# modules of polars, pyarrow and DuckDB (40 ms of the second a paste's verdict may take) does
# nothing for anybody. Not with a history store (--db) or Ray, whose own exit handlers must run.
WITHOUT_TEARDOWN = {"analyze", "timeline", "parse", "formats"}


def run(argv: list[str] | None = None) -> int:
    """The command's exit status: 0, 2 for a user error, 1 for a bug."""
    from .unused_modules import hide
    hide()
    from .cli import app
    try:
        app(args=argv)
    except SystemExit as done:
        return _status(done.code)
    return 0


def main() -> None:
    status = run()
    args = sys.argv[1:]
    if args and args[0] in WITHOUT_TEARDOWN and "--db" not in args and "ray" not in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


def _status(code: object) -> int:
    """As the interpreter reads SystemExit's code: None is 0, a message is printed and is 1."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1
