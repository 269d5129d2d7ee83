"""The report for a terminal, laid out with rich.

Every string from the report is wrapped in a rich Text object (never a markup string), so log text
like "[bold red]x[/]" prints literally; escape sequences were already stripped by view.build.
"""
from __future__ import annotations

import io
import os

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table as RichTable
from rich.text import Text

from .view import Table, View

KIND_STYLE = {"healthy": "bold green", "straggler": "bold yellow", "unknown": "bold magenta"}
CONFIDENCE_STYLE = {"high": "green", "medium": "yellow", "low": "red"}


def color_system(color: bool) -> str | None:
    """rich's colour system for `color`: as many colours as the terminal says it has (COLORTERM,
    TERM), `standard` where it says nothing or is dumb but colour was asked for all the same."""
    if not color:
        return None
    if os.environ.get("COLORTERM", "") in ("truecolor", "24bit"):
        return "truecolor"
    return "256" if "256" in os.environ.get("TERM", "") else "standard"


def render(view: View, *, color: bool, width: int) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=width, color_system=color_system(color), force_terminal=color,
        no_color=not color, highlight=False, emoji=False, markup=False, legacy_windows=False,
    )
    console.print(_verdict_panel(view))
    for section in view.sections:
        console.print()
        console.print(Text(section.title, style="bold underline"))
        for paragraph in section.paragraphs:
            console.print(Text(paragraph))
        for caption, table in section.tables:
            console.print(_table(caption, table))
    if view.remedies:
        console.print()
        console.print(Text("Remediation", style="bold underline"))
        for number, remedy in enumerate(view.remedies, 1):
            console.print(Text(f"{number}. {remedy.action}"))
            if remedy.verify:
                console.print(Text.assemble(("   verify: ", "dim"), (remedy.verify, "cyan")))
        if view.remedies_omitted:
            console.print(Text(f"+{view.remedies_omitted} more remedies", style="dim"))
    return buffer.getvalue()


def _verdict_panel(view: View) -> Panel:
    verdict = view.verdict
    kind_style = KIND_STYLE.get(verdict.kind, "bold red")
    lines = [
        Text.assemble(("verdict: ", "bold"), (verdict.kind, kind_style), ("   confidence: ", "bold"),
                      (verdict.confidence, CONFIDENCE_STYLE.get(verdict.confidence, ""))),
    ]
    if verdict.summary:
        lines.append(Text(verdict.summary))
    lines += [Text.assemble((f"{label}: ", "bold"), value) for label, value in verdict.facts]
    if verdict.missing_facts:
        lines.append(Text("missing facts (what would decide it):", style="bold"))
        lines += [Text(f"  - {fact}") for fact in verdict.missing_facts]
    return Panel(Group(*lines), title=Text(view.title), title_align="left", border_style=kind_style, box=box.ROUNDED)


def _table(caption: str, table: Table) -> RichTable:
    rich_table = RichTable(title=Text(caption) if caption else None, title_justify="left", box=box.SIMPLE_HEAD,
                           show_edge=False, pad_edge=False)
    for column in table.columns:
        rich_table.add_column(Text(column), overflow="fold")
    for row in table.rows:
        rich_table.add_row(*(Text(cell, style="cyan" if index in table.code_columns else "")
                             for index, cell in enumerate(row)))
    if table.omitted:
        rich_table.caption = Text(table.more_line)
        rich_table.caption_justify = "left"
    return rich_table
