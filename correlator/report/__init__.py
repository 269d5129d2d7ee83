"""Render the JSON report (see report-contract.md) for people: terminal, Markdown, HTML.

`render(report, fmt)` is the one entry point; the JSON form is the report itself, the other forms
are built from one shared view (view.py) so they always say the same thing.
"""
from __future__ import annotations

import json

from . import html, markdown, terminal, view

FORMATS = ("json", "terminal", "markdown", "html")

__all__ = ["FORMATS", "render"]


def render(report: dict, fmt: str, *, color: bool = False, max_rows: int = 20, width: int = 120) -> str:
    """The report in `fmt` (one of FORMATS); `max_rows` caps every list, `width` applies to the terminal."""
    if fmt == "json":
        return json.dumps(report, indent=2)
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")
    shared_view = view.build(report, max_rows)
    if fmt == "terminal":
        return terminal.render(shared_view, color=color, width=width)
    if fmt == "markdown":
        return markdown.render(shared_view)
    return html.render(shared_view, report, max_rows)
