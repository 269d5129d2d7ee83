"""The report as one self-contained HTML file: inline CSS and SVG, no script, nothing fetched.

A Content-Security-Policy meta tag forbids every external load and all scripts, so even a
rendering bug cannot make the file reach the network; every report string is HTML-escaped.
"""
from __future__ import annotations

from html import escape

from . import progress_svg, timeline_svg
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
th{color:#374151}td{overflow-wrap:break-word;max-width:640px}td.nw{white-space:nowrap}
a.loc{color:inherit;text-decoration:none;border-bottom:1px dotted #6b7280}a.loc:hover{border-bottom-style:solid}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
pre{background:#f3f4f6;padding:8px;border-radius:4px;white-space:pre-wrap}
.more,.note{color:#6b7280;font-style:italic;margin:2px 0 10px}.culprit-tag{color:#b91c1c;font-weight:600;white-space:nowrap}
.chart{overflow-x:auto}.t-caption,.t-tick{font-size:11px;fill:#4b5563}.t-label{font-size:11px;fill:#1f2937}
.t-culprit{fill:#b91c1c;font-weight:700}.t-grid{stroke:#e5e7eb}.t-collective{fill:#1e3a8a}
.t-collective-span{stroke:#1e3a8a;stroke-width:2;stroke-opacity:.5}.t-dot{fill:#2563eb;fill-opacity:.8}
.t-dot-severe{fill:#dc2626;stroke:#7f1d1d;stroke-width:.5}.t-stop{stroke:#dc2626;stroke-width:1.5;stroke-dasharray:5 3}
.t-stop-label{font-size:11px;fill:#b91c1c;font-weight:700}
.t-op{font-size:10px;fill:#1e3a8a}.t-label-box{fill:#fff;fill-opacity:.88;stroke:#cbd5e1;stroke-width:.5}.t-op.t-culprit{fill:#b91c1c;font-weight:700}
.t-divergence{stroke:#7c3aed;stroke-width:1.5;stroke-dasharray:2 2}.t-divergence-label{font-size:11px;fill:#6d28d9;font-weight:700}
.p-rank{fill:none;stroke:#64748b;stroke-width:1.2;stroke-opacity:.8}.p-rank-dot{fill:#64748b}
.p-culprit{fill:none;stroke:#b91c1c;stroke-width:2.2}.p-culprit-dot{fill:#b91c1c}
.p-wait{stroke:#64748b;stroke-width:1.2;stroke-dasharray:4 3}.p-culprit-wait{stroke:#b91c1c}
.p-label{font-size:11px;fill:#334155}.p-label.t-culprit{fill:#b91c1c;font-weight:700}
.excerpt{background:#f8fafc;border:1px solid #e5e7eb;border-radius:4px;padding:6px 0;margin:4px 0 12px;overflow-x:auto}
.excerpt div{font:12px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap;padding:0 8px 0 4.5em;text-indent:-4em}
.excerpt .ln{display:inline-block;width:3.5em;text-align:right;margin-right:.5em;color:#6b7280;text-indent:0}
.excerpt .cited{background:#fef3c7}.excerpt div:target{background:#fde68a;outline:2px solid #d97706}
.excerpt .gap{color:#9ca3af}h3{font-size:13px;margin:14px 0 2px;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


TIMELINE_ROWS = 200  # the folded table of every event of the report (it keeps its last 200)


def render(view: View) -> str:
    report, verdict = view.report, view.verdict
    kind_color = KIND_COLORS.get(verdict.kind, FAILURE_COLOR)
    events = table_events(report)
    excerpt = Excerpts(report, view, events)
    body = [f"<h1>{escape(view.title)}</h1>", _verdict(view, kind_color)]
    sections = list(view.sections)
    if sections and sections[0].title == "What happened":
        body.append(_section(sections.pop(0), excerpt))
    body.append(f"<h2>Timeline chart</h2>\n<div class='chart'>{timeline_svg.render(report)}</div>\n"
                "<p class='note'>Rows are ranks (★ the culprit), bars how long each was seen, ◆ its last collective; "
                "dots are the events listed under <i>Timeline</i> and <i>Timeline events</i> below.</p>")
    body.append(f"<h2>Progress</h2>\n<div class='chart'>{progress_svg.render(report)}</div>")
    body += [_section(section, excerpt) for section in sections]
    body.append(_remedies(view))
    body.append(_timeline_table(events, len(report.get("timeline") or []), excerpt))
    body.append(excerpt.render())
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


def _section(section, excerpt: "Excerpts | None" = None) -> str:
    parts = [f"<h2>{escape(section.title)}</h2>"]
    parts += [f"<p>{escape(paragraph)}</p>" for paragraph in section.paragraphs]
    parts += [_table(caption, table, excerpt) for caption, table in section.tables]
    return "\n".join(parts)


NOWRAP_LIMIT = 48  # a short cell (a kind, a time, ranks, a count) never wraps; a long one wraps between words


def _table(caption: str, table: Table, excerpt: "Excerpts | None" = None) -> str:
    head = "".join(f"<th>{escape(column)}</th>" for column in table.columns)
    rows = []
    for cells in table.rows:
        rendered = []
        for index, cell in enumerate(cells):
            content = f"<code>{escape(cell)}</code>" if index in table.code_columns else escape(cell)
            anchor = excerpt.anchor(cell) if excerpt is not None and index in table.code_columns else None
            if anchor:
                content = f"<a class='loc' href='#{anchor}'>{content}</a>"
            classes = [name for name, wanted in (("culprit-tag", cell == "culprit"),
                                                 ("nw", index not in table.below and len(cell) <= NOWRAP_LIMIT)) if wanted]
            rendered.append(f"<td class='{' '.join(classes)}'>{content}</td>" if classes else f"<td>{content}</td>")
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
        expect = f"<p>expect: {escape(remedy.expect)}</p>" if remedy.expect else ""
        items.append(f"<li><p>{escape(remedy.action)}</p>{verify}{expect}</li>")
    more = f"<p class='more'>+{view.remedies_omitted} more remedies</p>" if view.remedies_omitted else ""
    return "<h2>Remediation</h2>\n<ol>" + "\n".join(items) + f"</ol>{more}"


def table_events(report: dict) -> list[dict]:
    """The events of the folded timeline table: the report's, at most TIMELINE_ROWS of them."""
    return [e for e in report.get("timeline") or [] if e is not None][-TIMELINE_ROWS:]


def _timeline_table(events: list[dict], total: int, excerpt: "Excerpts") -> str:
    """Every event of the report's timeline, folded away: the chart's dots, in words."""
    if not events:
        return ""
    rows = [[clean_line(e.get("time")) or "—", "—" if e.get("rank") is None else clean_line(e.get("rank")),
             clean_line(e.get("kind")), location(e), clean_line(e.get("text"), CELL_LIMIT)] for e in events]
    table = Table(["time", "rank", "kind", "file:line", "text"], rows, max(0, total - len(rows)),
                  "earlier events (correlator timeline JOB_DIR shows every one)", frozenset({3}), frozenset({4}))
    return (f"<details><summary>Timeline events (all {len(rows)} of the report)</summary>\n"
            f"{_table('', table, excerpt)}\n</details>")


class Excerpts:
    """The log lines the page cites, file by file in line order, each with an anchor that its
    `file:line` links to; gaps between them are counted. Built from the report's own lines (evidence
    and timeline), so a stored report still has them when the logs are gone."""

    def __init__(self, report: dict, view: View, events: list[dict]):
        shown = {cell for section in view.sections for _, table in section.tables
                 for row in table.rows for index, cell in enumerate(row) if index in table.code_columns}
        shown |= {location(e) for e in events}
        cited = {location(e) for e in report.get("evidence") or [] if e}
        lines: dict[str, dict[int, str]] = {}
        for item in [*(report.get("evidence") or []), *(report.get("timeline") or [])]:
            if not item or item.get("line") is None or location(item) not in shown:
                continue
            path = clean_line(item.get("file"), CELL_LIMIT) or "?"
            text = clean_line(item.get("text"), 2 * CELL_LIMIT)
            known = lines.setdefault(path, {})
            if len(text) > len(known.get(int(item["line"]), "")):
                known[int(item["line"])] = text
        self.files = sorted(lines.items())
        self.cited = cited
        self.ids = {path: number for number, (path, _) in enumerate(self.files)}

    def anchor(self, loc: str) -> str | None:
        path, _, line = loc.rpartition(":")
        if path in self.ids and line.isdigit() and int(line) in dict(self.files[self.ids[path]][1]):
            return f"L{self.ids[path]}-{line}"
        return None

    def render(self) -> str:
        if not self.files:
            return ""
        parts = ["<h2>Log lines cited</h2>",
                 "<p class='note'>The lines this page cites, as the report holds them (highlighted: evidence); "
                 "each <code>file:line</code> above links here.</p>"]
        for path, known in self.files:
            number = self.ids[path]
            rows, previous = [], None
            for line in sorted(known):
                if previous is not None and line > previous + 1:
                    skipped = line - previous - 1
                    rows.append(f"<div class='gap'><span class='ln'>⋮</span>{skipped} line{'s' if skipped > 1 else ''}"
                                " not in the report</div>")
                cited = " class='cited'" if f"{path}:{line}" in self.cited else ""
                rows.append(f"<div id='L{number}-{line}'{cited}><span class='ln'>{line}</span>{escape(known[line])}</div>")
                previous = line
            parts.append(f"<h3 id='F{number}'>{escape(path)}</h3>\n<div class='excerpt'>" + "\n".join(rows) + "</div>")
        return "\n".join(parts)
