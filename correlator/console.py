"""The `correlator` console script. It hides the modules the command never uses before it imports
the CLI, whose imports (pyarrow's among them) would otherwise load them (see unused_modules)."""
from __future__ import annotations


def main() -> None:
    from .unused_modules import hide
    hide()
    from .cli import app
    app()
