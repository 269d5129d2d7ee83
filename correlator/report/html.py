"""The report as one self-contained HTML file: inline CSS and SVG, no script, nothing fetched.

A Content-Security-Policy meta tag forbids every external load and all scripts, so even a
rendering bug cannot make the file reach the network; every report string is HTML-escaped.
"""
from __future__ import annotations

from html import escape

from . import timeline_svg
from .sanitize import clean_line
from .view import CELL_LIMIT, Table, View, location

KIND_COLORS = {"healthy": "#15803d", "straggler": "#b45309", "unknown": "#7c3aed"}
FAILURE_COLOR = "#b91c1c"

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1140px;color:#111827;padding:0 16px}
h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
.verdict{border-left:6px solid var(--kind);background:#f9fafb;padding:12px 16px;border-radius:6px}
.kind{color:var(--kind);font-weight:700;font-size:18px}.confidence{margin-left:12px;color:#374151}
.summary{font-size:15px;margin:6px 0}.facts{margin:6px 0;padding-left:18px}.facts b{color:#374151}
table{border-collapse:collapse;margin:6px 0 4px;font-size:13px}caption{text-align:left;font-weight:600;padding:4px 0}
th,td{border-bottom:1px solid #e5e7eb;padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{color:#374151}td{word-break:break-word;max-width:640px}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
pre{background:#f3f4f6;padding:8px;border-radius:4px;white-space:pre-wrap}
.more,.note{color:#6b7280;font-style:italic;margin:2px 0 10px}.culprit-tag{color:#b91c1c;font-weight:600;white-space:nowrap}
.chart{overflow-x:auto}.t-caption,.t-tick{font-size:11px;fill:#4b5563}.t-label{font-size:11px;fill:#1f2937}
.t-culprit{fill:#b91c1c;font-weight:700}.t-grid{stroke:#e5e7eb}.t-collective{fill:#1e3a8a}
.t-collective-span{stroke:#1e3a8a;stroke-width:2;stroke-opacity:.5}.t-dot{fill:#2563eb;fill-opacity:.8}
.t-dot-severe{fill:#dc2626;stroke:#7f1d1d;stroke-width:.5}.t-stop{stroke:#dc2626;stroke-width:1.5;stroke-dasharray:5 3}
.t-stop-label{font-size:11px;fill:#b91c1c;font-weight:700}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def render(view: View, report: dict, max_rows: int) -> str:
    verdict = view.verdict
    kind_color = KIND_COLORS.get(verdict.kind, FAILURE_COLOR)
    body = [f"<h1>{escape(view.title)}</h1>", _verdict(view, kind_color)]
    sections = list(view.sections)
    if sections and sections[0].title == "What happened":
        body.append(_section(sections.pop(0)))
    body.append(f"<h2>Timeline</h2>\n<div class='chart'>{timeline_svg.render(report)}</div>")
    body += [_section(section) for section in sections]
    body.append(_remedies(view))
    body.append(_timeline_table(report, max_rows))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        f"<meta name='viewport' content='width=device-width,initial-scale=1'><title>{escape(view.title)}</title>"
        f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(part for part in body if part) + "\n</body></html>\n"
    )


def _verdict(view: View, kind_color: str) -> str:
    verdict = view.verdict
    parts = [f"<div class='verdict' style='--kind:{kind_color}'>",
             f"<span class='kind'>{escape(verdict.kind)}</span>"
             f"<span class='confidence'>confidence: <b>{escape(verdict.confidence)}</b></span>"]
    if verdict.summary:
        parts.append(f"<p class='summary'>{escape(verdict.summary)}</p>")
    if verdict.facts:
        parts.append("<ul class='facts'>" + "".join(f"<li><b>{escape(label)}:</b> {escape(value)}</li>"
                                                    for label, value in verdict.facts) + "</ul>")
    if verdict.missing_facts:
        parts.append("<p><b>Missing facts</b> (what would decide it):</p><ul>"
                     + "".join(f"<li>{escape(fact)}</li>" for fact in verdict.missing_facts) + "</ul>")
    parts.append("</div>")
    return "\n".join(parts)


def _section(section) -> str:
    parts = [f"<h2>{escape(section.title)}</h2>"]
    parts += [f"<p>{escape(paragraph)}</p>" for paragraph in section.paragraphs]
    parts += [_table(caption, table) for caption, table in section.tables]
    return "\n".join(parts)


def _table(caption: str, table: Table) -> str:
    head = "".join(f"<th>{escape(column)}</th>" for column in table.columns)
    rows = []
    for cells in table.rows:
        rendered = []
        for index, cell in enumerate(cells):
            content = f"<code>{escape(cell)}</code>" if index in table.code_columns else escape(cell)
            rendered.append(f"<td class='culprit-tag'>{content}</td>" if cell == "culprit" else f"<td>{content}</td>")
        rows.append("<tr>" + "".join(rendered) + "</tr>")
    caption_html = f"<caption>{escape(caption)}</caption>" if caption else ""
    more = f"\n<p class='more'>{escape(table.more_line)}</p>" if table.omitted else ""
    return f"<table>{caption_html}<thead><tr>{head}</tr></thead><tbody>\n" + "\n".join(rows) + f"\n</tbody></table>{more}"


def _remedies(view: View) -> str:
    if not view.remedies:
        return ""
    items = []
    for remedy in view.remedies:
        verify = f"<div>verify with:</div><pre><code>{escape(remedy.verify)}</code></pre>" if remedy.verify else ""
        items.append(f"<li><p>{escape(remedy.action)}</p>{verify}</li>")
    more = f"<p class='more'>+{view.remedies_omitted} more remedies</p>" if view.remedies_omitted else ""
    return "<h2>Remediation</h2>\n<ol>" + "\n".join(items) + f"</ol>{more}"


def _timeline_table(report: dict, max_rows: int) -> str:
    """The first events of the merged timeline, folded away: the chart's dots carry the rest."""
    events = report.get("timeline") or []
    if not events:
        return ""
    rows = [[clean_line(e.get("time")) or "—", "—" if e.get("rank") is None else clean_line(e.get("rank")),
             clean_line(e.get("kind")), location(e), clean_line(e.get("text"), CELL_LIMIT)] for e in events[:max_rows]]
    table = Table(["time", "rank", "kind", "file:line", "text"], rows, max(0, len(events) - max_rows),
                  "events", frozenset({3}))
    return (f"<details><summary>Timeline events (first {len(rows)} of {len(events)})</summary>\n"
            f"{_table('', table)}\n</details>")
