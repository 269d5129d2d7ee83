"""The report as GitHub-flavoured Markdown, to paste into an issue.

Log text is backslash-escaped (every Markdown punctuation character that could start emphasis, a
link, raw HTML or a table cell boundary), so nothing in a log line becomes markup or HTML.
"""
from __future__ import annotations

import re

from .view import Table, View

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")
_BACKTICK_RUN = re.compile(r"`+")
_LIST_OR_RULE_START = re.compile(r"^([-+=#]|\d+(?=[.)]))")


def render(view: View) -> str:
    verdict = view.verdict
    blocks = [
        f"# {text(view.title)}",
        f"## Verdict: {code(verdict.kind)} (confidence: {text(verdict.confidence)})",
    ]
    if verdict.summary:
        blocks.append(_paragraph(verdict.summary))
    if verdict.facts:
        blocks.append("\n".join(f"- **{text(label)}:** {text(value)}" for label, value in verdict.facts))
    if verdict.missing_facts:
        blocks.append("**Missing facts** (what would decide it):\n\n"
                      + "\n".join(f"- {text(fact)}" for fact in verdict.missing_facts))
    for section in view.sections:
        blocks.append(f"## {text(section.title)}")
        blocks += [_paragraph(paragraph) for paragraph in section.paragraphs]
        for caption, table in section.tables:
            blocks.append(_table(caption, table))
    if view.remedies:
        blocks.append("## Remediation")
        for number, remedy in enumerate(view.remedies, 1):
            blocks.append(f"{number}. {text(remedy.action)}")
            if remedy.verify:
                blocks.append(f"Verify with:\n\n{_fenced(remedy.verify)}")
            if remedy.expect:
                blocks.append(f"Expect: {text(remedy.expect)}")
        if view.remedies_omitted:
            blocks.append(f"_+{view.remedies_omitted} more remedies_")
    return "\n\n".join(blocks) + "\n"


def text(value: str) -> str:
    """Inline text with every character that Markdown could interpret escaped."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", value.replace("\n", " "))


def _paragraph(value: str) -> str:
    """Text that starts a block: a leading "-", "+", "=", "#" or "1." must not make it a list, rule or heading."""
    escaped = text(value)
    match = _LIST_OR_RULE_START.match(escaped)
    if not match:
        return escaped
    if match.group(1)[0].isdigit():
        return escaped[: match.end()] + "\\" + escaped[match.end():]
    return "\\" + escaped


def code(value: str) -> str:
    """A code span; text that a code span cannot hold safely inside a table cell stays escaped text."""
    if not value or "`" in value or "|" in value:
        return text(value)
    return f"`{value}`"


def _fenced(value: str) -> str:
    longest = max((len(run) for run in _BACKTICK_RUN.findall(value)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{value}\n{fence}"


def _table(caption: str, table: Table) -> str:
    def row(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    lines = [f"**{text(caption)}**", ""] if caption else []
    lines.append(row([text(column) for column in table.columns]))
    lines.append(row(["---"] * len(table.columns)))
    for cells in table.rows:
        lines.append(row([code(cell) if index in table.code_columns else text(cell)
                          for index, cell in enumerate(cells)]))
    if table.omitted:
        lines += ["", f"_{text(table.more_line)}_"]
    return "\n".join(lines)
