"""The report for a terminal, laid out with rich.

Every string from the report is wrapped in a rich Text object (never a markup string), so log text
like "[bold red]x[/]" prints literally; escape sequences were already stripped by view.build.
"""
from __future__ import annotations

import io
import os

from rich import box
from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table as RichTable
from rich.cells import cell_len
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
            for part in _table(caption, table, width):
                console.print(part)
    if view.remedies:
        console.print()
        console.print(Text("Remediation", style="bold underline"))
        for number, remedy in enumerate(view.remedies, 1):
            console.print(Text(f"{number}. {remedy.action}"))
            if remedy.verify:
                console.print(Padding(Text.assemble(("verify: ", "dim"), (remedy.verify, "cyan")), (0, 0, 0, 3), expand=False))
        if view.remedies_omitted:
            console.print(Text(f"+{view.remedies_omitted} more remedies", style="dim"))
    text = buffer.getvalue()
    return text if color else "\n".join(line.rstrip() for line in text.split("\n"))


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


GAP = 3  # between columns: SIMPLE_HEAD's divider and one space of padding either side


def _tokens(text: str) -> list[str]:
    return text.split() or [""]


def _fit(columns: list[int], natural: list[int], minimum: list[int], room: int) -> list[int] | None:
    """Widths for `columns` within `room`: their natural widths, else each at least its longest word
    and the room left shared out by what each lacks; None when not even the longest words fit."""
    gaps = GAP * (len(columns) - 1)
    if sum(natural[c] for c in columns) + gaps <= room:
        return [natural[c] for c in columns]
    floor = [minimum[c] for c in columns]
    spare = room - gaps - sum(floor)
    if spare < 0:
        return None
    lacking = [natural[c] - minimum[c] for c in columns]
    total = sum(lacking) or 1
    widths = [f + spare * lack // total for f, lack in zip(floor, lacking)]
    return widths


def _table(caption: str, table: Table, width: int) -> list:
    """The table at `width` without breaking a word, a kind or a time: in columns when their longest
    words fit; else with its long text (`table.below`) on a line under each row; else one
    `column  value` block per row. Only a word longer than the whole width is folded."""
    cells = [table.columns, *table.rows]
    natural = [max(cell_len(row[c]) for row in cells) for c in range(len(table.columns))]
    minimum = [max(cell_len(word) for row in cells for word in _tokens(row[c])) for c in range(len(table.columns))]
    every = list(range(len(table.columns)))
    widths = _fit(every, natural, minimum, width)
    if widths is not None:
        return [_columns(caption, table, every, widths)]
    head = [c for c in every if c not in table.below]
    widths = _fit(head, natural, minimum, width) if table.below and head else None
    if widths is not None:
        return _rows_with_text_below(caption, table, head, widths, width)
    return _stacked(caption, table, width)


def _cell(table: Table, row: list[str], index: int) -> Text:
    return Text(row[index], style="cyan" if index in table.code_columns else "")


def _more(table: Table) -> Text | None:
    return Text(table.more_line, style="dim") if table.omitted else None


def _columns(caption: str, table: Table, columns: list[int], widths: list[int], header: bool = True,
             rows: list[list[str]] | None = None) -> Group:
    rich_table = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, show_header=header)
    for index, column_width in zip(columns, widths):
        rich_table.add_column(Text(table.columns[index]), overflow="fold", width=column_width)
    for row in table.rows if rows is None else rows:
        rich_table.add_row(*(_cell(table, row, index) for index in columns))
    parts = [Text(caption)] if caption else []
    parts.append(rich_table)
    if rows is None and table.omitted:
        parts.append(_more(table))
    return Group(*parts)


def _rows_with_text_below(caption: str, table: Table, head: list[int], widths: list[int], width: int) -> list:
    """Each row's short cells in columns, its long text (file:line, a log line) indented under it."""
    below = sorted(table.below)
    header = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, show_header=False)
    for column_width in widths:
        header.add_column(width=column_width, overflow="fold")
    header.add_row(*(Text(table.columns[index], style="bold") for index in head))
    parts: list = [Text(caption)] if caption else []
    parts += [header, Padding(Text("  ".join(table.columns[index] for index in below), style="bold"), (0, 0, 0, 4),
                              expand=False),
              Text("─" * (sum(widths) + GAP * (len(widths) - 1)))]
    for row in table.rows:
        parts.append(_columns("", table, head, widths, header=False, rows=[row]))
        text = Text()
        for number, index in enumerate(index for index in below if row[index]):
            text.append(("  " if number else "") + row[index], style="cyan" if index in table.code_columns else "")
        parts.append(Padding(text, (0, 0, 0, 4), expand=False))
    more = _more(table)
    return parts + ([more] if more else [])


def _stacked(caption: str, table: Table, width: int) -> list:
    """One block per row, `column  value` per line: nothing is squeezed into a column too narrow."""
    parts: list = [Text(caption)] if caption else []
    label_width = max(cell_len(column) for column in table.columns)
    for number, row in enumerate(table.rows):
        grid = RichTable.grid(padding=(0, 2))
        grid.add_column(no_wrap=True, style="bold", width=label_width, justify="right")
        grid.add_column(overflow="fold", max_width=max(1, width - label_width - 2))
        for index, column in enumerate(table.columns):
            if row[index]:
                grid.add_row(Text(column), _cell(table, row, index))
        if number:
            parts.append(Text(""))
        parts.append(grid)
    more = _more(table)
    return parts + ([more] if more else [])
