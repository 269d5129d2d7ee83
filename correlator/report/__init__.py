"""Render the JSON report (see report-contract.md) for people: terminal, Markdown, HTML.

`render(report, fmt)` is the one entry point and `RENDERERS` the one list of outputs (the CLI's
`--format` choices and `--out` extensions come from it). Every output is written from one shared
view (view.py), so they always say the same thing; the JSON form is the report the view shows.
A new output is a module with `render(view) -> str` plus one line in RENDERERS.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from . import view


@dataclass(frozen=True)
class Renderer:
    name: str                                   # the --format choice
    extensions: tuple[str, ...]                 # the --out extensions that ask for it
    write: Callable[[view.View, bool, int], str]  # (view, color, width) -> text; colour and width: the terminal's


# Each output's module is imported when it is asked for: a paste's JSON need not load rich or the SVGs.
def _terminal(shown: view.View, color: bool, width: int) -> str:
    from . import terminal
    return terminal.render(shown, color=color, width=width)


def _json(shown: view.View, color: bool, width: int) -> str:
    return json.dumps(shown.report, indent=2, default=str)


def _markdown(shown: view.View, color: bool, width: int) -> str:
    from . import markdown
    return markdown.render(shown)


def _html(shown: view.View, color: bool, width: int) -> str:
    from . import html
    return html.render(shown)


RENDERERS: dict[str, Renderer] = {r.name: r for r in (
    Renderer("terminal", (".txt", ".text"), _terminal),
    Renderer("json", (".json",), _json),
    Renderer("markdown", (".md", ".markdown"), _markdown),
    Renderer("html", (".html", ".htm"), _html),
)}

__all__ = ["RENDERERS", "Renderer", "render"]


def render(report: dict, fmt: str, *, color: bool = False, max_rows: int = 20, width: int = 120) -> str:
    """The report in `fmt` (a name of RENDERERS); `max_rows` caps every list, `width` applies to the terminal."""
    renderer = RENDERERS.get(fmt)
    if renderer is None:
        raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(RENDERERS)}")
    return renderer.write(view.build(report, max_rows), color, width)
