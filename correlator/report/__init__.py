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

from . import html, markdown, terminal, view


@dataclass(frozen=True)
class Renderer:
    name: str                                   # the --format choice
    extensions: tuple[str, ...]                 # the --out extensions that ask for it
    write: Callable[[view.View, bool, int], str]  # (view, color, width) -> text; colour and width: the terminal's


def _json(shown: view.View, color: bool, width: int) -> str:
    return json.dumps(shown.report, indent=2, default=str)


RENDERERS: dict[str, Renderer] = {r.name: r for r in (
    Renderer("terminal", (".txt", ".text"), lambda shown, color, width: terminal.render(shown, color=color, width=width)),
    Renderer("json", (".json",), _json),
    Renderer("markdown", (".md", ".markdown"), lambda shown, color, width: markdown.render(shown)),
    Renderer("html", (".html", ".htm"), lambda shown, color, width: html.render(shown)),
)}

__all__ = ["RENDERERS", "Renderer", "render"]


def render(report: dict, fmt: str, *, color: bool = False, max_rows: int = 20, width: int = 120) -> str:
    """The report in `fmt` (a name of RENDERERS); `max_rows` caps every list, `width` applies to the terminal."""
    renderer = RENDERERS.get(fmt)
    if renderer is None:
        raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(RENDERERS)}")
    return renderer.write(view.build(report, max_rows), color, width)
