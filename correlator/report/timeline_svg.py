"""The timeline chart of the HTML report: ranks (y) against clock-aligned time (x), as inline SVG.

Small jobs get one row per rank. Large jobs get bands: consecutive ranks with the same behaviour
(how they ended, where they stopped, culprit or not) share a row, so 1,024 ranks that did the same
thing cost one row, and the culprit always keeps a row of its own. Events are dots, merged when
they would land on the same few pixels, so the file size follows the picture, not the log volume.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape

from ..counters import seq_label
from ..ranges import compress
from .sanitize import clean_line
from .view import culprit_ranks

WIDTH = 1100
LEFT = 180
RIGHT = 24
TOP = 46            # the plot's top with one label row (the stop point) above it
LABEL_ROW = 15      # each further label row (the divergence) adds this
DOT_BUCKET_PX = 3
END_COLORS = {
    "timeout": "#f59e0b", "crashed": "#dc2626", "exited": "#6b7280", "killed": "#7c3aed",
    "stalled": "#b91c1c", "running": "#16a34a", "unknown": "#94a3b8", "mixed": "#64748b",
}
SEVERE_WORDS = ("error", "traceback", "exception", "fail", "timeout", "abort", "kill", "signal", "crash", "oom", "fatal")


@dataclass
class Band:
    ranks: list[int]
    end: str
    last_collective: str
    is_culprit: bool
    start: float | None = None
    stop: float | None = None
    collective_times: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        ranges = compress(self.ranks)
        prefix = "rank" if len(self.ranks) == 1 else "ranks"
        count = f" ({len(self.ranks)})" if len(self.ranks) > 1 else ""
        return f"{'★ ' if self.is_culprit else ''}{prefix} {ranges}{count}"


def time_range(report: dict) -> tuple[float, float] | None:
    """The span of every time the report places (ranks, collectives, events, the stop), epoch seconds."""
    events = [e for e in report.get("timeline") or [] if _seconds(e.get("time")) is not None]
    stalled = report.get("first_stalled") or {}
    times = [t for row in _rank_rows(report) for t in (row["start"], row["stop"], row["collective_time"]) if t is not None]
    times += [_seconds(e.get("time")) for e in events]
    if stalled.get("last_seen") and _seconds(stalled["last_seen"]) is not None:
        times.append(_seconds(stalled["last_seen"]))
    return (min(times), max(times)) if times else None


def render(report: dict, max_bands: int = 48) -> str:
    """The chart as an <svg> element, or a short note when the report has no times to place."""
    rank_rows = _rank_rows(report)
    events = [e for e in report.get("timeline") or [] if _seconds(e.get("time")) is not None]
    stalled = report.get("first_stalled") or {}
    span = time_range(report)
    if span is None:
        return '<p class="note">No timestamps in the report: nothing to place on a timeline.</p>'
    culprits = culprit_ranks(report)
    bands, hidden_bands = _bands(rank_rows, culprits, max_bands)
    divergence = divergence_label(report)
    chart = _Chart(span[0], span[1], bands, has_job_row=any(e.get("rank") is None for e in events),
                   label_rows=1 + bool(divergence))
    parts = [chart.frame(hidden_bands)]
    parts += [chart.band(index, band) for index, band in enumerate(bands)]
    parts += chart.dots(events)
    if stalled.get("last_seen") and _seconds(stalled["last_seen"]) is not None:
        parts.append(chart.stop_line(stalled))
    if divergence:
        parts.append(chart.divergence_line(divergence, _divergence_time(report, rank_rows)))
    parts += chart.collective_labels(culprit_difference(report))
    parts.append(chart.legend())
    return "\n".join(["<svg " + chart.size_attributes() + " role='img' "
                      "aria-label='timeline of ranks against aligned time'>", *parts, "</svg>"])


def divergence_label(report: dict) -> str:
    """The divergence in words, naming the field that differs and each side's value as the log
    prints them: `diverged at ALLREDUCE SequenceNumber=11 on PG 0: rank 3 has TensorShape=[3]
    where the others have TensorShape=[2]`."""
    divergence = report.get("divergence") or {}
    groups = [g for g in divergence.get("groups") or [] if g.get("ranks")]
    if not groups:
        return ""
    op = next((clean_line(g.get("op")) for g in groups if g.get("op")), "")
    where = _collective_label({"op": op or None, "seq": divergence.get("seq"), "pg": divergence.get("pg"),
                               "label": divergence.get("seq_label"), "counter": divergence.get("counter")})
    if divergence.get("difference"):
        return clean_line(f"diverged at {where}: {clean_line(divergence.get('difference'))}", 160)
    issued = [g for g in groups if g.get("op")]
    sides = []
    differing = [f for f in ("op", "numel", "dtype") if len({clean_line(g.get(f)) for g in issued}) > 1]
    for group in groups:
        who = f"rank{'s' if len(group['ranks']) > 1 else ''} {compress(group['ranks'], 40)}"
        if not group.get("op"):
            sides.append(f"{who} never issued it")
        elif differing:
            sides.append(" ".join(_field(group, field) for field in differing if group.get(field) is not None) + f" on {who}")
        else:
            sides.append(f"{clean_line(group.get('op'))} on {who}")
    return clean_line(f"diverged at {where}: " + "; ".join(sides[:4]) + (f"; +{len(sides) - 4} more" if len(sides) > 4 else ""), 160)


def _field(group: dict, field: str) -> str:
    """A group's field as its log prints it (`TensorShape=[3]`, `count 4`), else `numel 3`."""
    printed = (group.get("printed") or {}).get(field)
    return clean_line(printed) if printed else f"{field} {clean_line(group.get(field)) or '?'}"


def culprit_difference(report: dict) -> str:
    """What the culprit's side of the divergence did differently, for the label on its row, as the
    log prints it: `TensorShape=[3] (others TensorShape=[2])`, `others ALLREDUCE`, `never issued it`."""
    culprits = culprit_ranks(report)
    groups = [g for g in (report.get("divergence") or {}).get("groups") or [] if g.get("ranks")]
    mine = next((g for g in groups if culprits & {int(r) for r in g["ranks"]}), None)
    if mine is None or len(groups) < 2:
        return ""
    if not mine.get("op"):
        return "never issued it"
    others = [g for g in groups if g is not mine and g.get("op")]
    # a field the culprit's op does not have (a barrier's size) says nothing its op does not
    fields = [f for f in ("op", "numel", "dtype") if any(clean_line(g.get(f)) != clean_line(mine.get(f)) for g in others)
              and (f == "op" or mine.get(f) is not None)]
    said = []
    for field in fields:
        theirs = ", ".join(dict.fromkeys(_field(g, field) if field != "op" else clean_line(g.get("op")) or "?" for g in others))
        if field == "op":  # the label already starts with the culprit's op
            said.append(f"others {theirs}")
        else:
            said.append(f"{_field(mine, field)} (others {theirs})")
    return "; ".join(said)


def _divergence_time(report: dict, rank_rows: list[dict]) -> float | None:
    """When the ranks reached the diverging collective: the earliest last-collective time at its seq."""
    seq = (report.get("divergence") or {}).get("seq")
    times = []
    for entry in report.get("ranks") or []:
        last = entry.get("last_collective") or {}
        if seq is not None and last.get("seq") == seq and _seconds(last.get("time")) is not None:
            times.append(_seconds(last.get("time")))
    return min(times) if times else None


def _rank_rows(report: dict) -> list[dict]:
    """One dict per rank with times as epoch seconds; falls back to the timeline when `ranks` is absent."""
    rows = []
    for entry in report.get("ranks") or []:
        if entry.get("rank") is None:
            continue
        last = entry.get("last_collective") or {}
        rows.append({
            "rank": int(entry["rank"]), "start": _seconds(entry.get("first_seen")), "stop": _seconds(entry.get("last_seen")),
            "end": clean_line(entry.get("end")) or "unknown",
            "collective": _collective_label(last) if last else "none",
            "collective_time": _seconds(last.get("time")) if last else None,
        })
    if rows:
        return sorted(rows, key=lambda r: r["rank"])
    seen: dict[int, list[float]] = {}
    for event in report.get("timeline") or []:
        time = _seconds(event.get("time"))
        if event.get("rank") is not None and time is not None:
            seen.setdefault(int(event["rank"]), []).append(time)
    return [{"rank": rank, "start": min(t), "stop": max(t), "end": "unknown", "collective": "unknown",
             "collective_time": None} for rank, t in sorted(seen.items())]


def _bands(rows: list[dict], culprits: set[int], max_bands: int) -> tuple[list[Band], int]:
    """Rows grouped into bands, coarsening the notion of 'same behaviour' until they fit."""
    signatures = [
        lambda r: (r["rank"],),
        lambda r: (r["rank"] in culprits, r["end"], r["collective"]),
        lambda r: (r["rank"] in culprits, r["end"]),
        lambda r: (r["rank"] in culprits,),
    ]
    for signature in signatures:
        bands = _group_consecutive(rows, culprits, signature)
        if len(bands) <= max_bands:
            return bands, 0
    return bands[:max_bands], len(bands) - max_bands


def _group_consecutive(rows: list[dict], culprits: set[int], signature) -> list[Band]:
    bands: list[Band] = []
    previous_key = previous_rank = None
    for row in rows:
        key = signature(row)
        if bands and key == previous_key and row["rank"] == previous_rank + 1:
            band = bands[-1]
            band.ranks.append(row["rank"])
            band.end = band.end if band.end == row["end"] else "mixed"
            band.last_collective = band.last_collective if band.last_collective == row["collective"] else "mixed"
        else:
            band = Band([row["rank"]], row["end"], row["collective"], row["rank"] in culprits)
            bands.append(band)
        band.start = _min(band.start, row["start"])
        band.stop = _max(band.stop, row["stop"])
        if row["collective_time"] is not None:
            band.collective_times.append(row["collective_time"])
        previous_key, previous_rank = key, row["rank"]
    return bands


class _Chart:
    def __init__(self, first: float, last: float, bands: list[Band], has_job_row: bool, label_rows: int = 1):
        span = last - first
        pad = span * 0.02 if span > 0 else 1.0
        self.origin = first
        self.first, self.last = first - pad, last + pad
        self.bands = bands
        self.top = TOP + LABEL_ROW * max(0, label_rows - 1)
        self.job_row = 1 if has_job_row else 0
        self.row_height = 20 if len(bands) + self.job_row <= 32 else 13
        self.plot_height = (len(bands) + self.job_row) * self.row_height
        self.height = self.top + self.plot_height + 64
        self.labels: list[tuple[float, float, str, bool]] = []  # (x, y, text, culprit): drawn last, on top
        self.band_starts = [band.ranks[0] for band in bands]
        self.drawn: set[str] = set()  # the markers the legend must explain

    def size_attributes(self) -> str:
        return f"width='{WIDTH}' height='{self.height}' viewBox='0 0 {WIDTH} {self.height}'"

    def x(self, seconds: float) -> float:
        return LEFT + (seconds - self.first) / (self.last - self.first) * (WIDTH - LEFT - RIGHT)

    def y(self, row: int) -> float:
        return self.top + row * self.row_height

    def frame(self, hidden_bands: int) -> str:
        start = datetime.fromtimestamp(self.origin, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        parts = [f"<text x='{LEFT}' y='16' class='t-caption'>aligned time, seconds after {start} UTC</text>"]
        if hidden_bands:
            parts.append(f"<text x='{WIDTH - RIGHT}' y='16' text-anchor='end' class='t-caption'>"
                         f"+{hidden_bands} more bands not drawn</text>")
        if self.job_row:
            parts.append(self._row_background(0, "job / launcher", False))
        bottom = self.top + self.plot_height
        for tick in _ticks(self.origin, self.last):
            x = self.x(tick)
            parts.append(f"<line x1='{x:.1f}' y1='{self.top - 4}' x2='{x:.1f}' y2='{bottom}' class='t-grid'/>")
            parts.append(f"<text x='{x:.1f}' y='{bottom + 14}' text-anchor='middle' class='t-tick'>"
                         f"+{_tick_label(tick - self.origin, self.last - self.origin)}</text>")
        return "\n".join(parts)

    def _row_background(self, row: int, label: str, is_culprit: bool) -> str:
        y = self.y(row)
        fill = "#fde2e1" if is_culprit else ("#f8fafc" if row % 2 else "#ffffff")
        label_class = "t-label t-culprit" if is_culprit else "t-label"
        return (f"<rect x='0' y='{y}' width='{WIDTH}' height='{self.row_height}' fill='{fill}'/>"
                f"<text x='{LEFT - 8}' y='{y + self.row_height * 0.72:.1f}' text-anchor='end' class='{label_class}'>"
                f"{escape(label)}</text>")

    def band(self, index: int, band: Band) -> str:
        row = index + self.job_row
        parts = [self._row_background(row, band.label, band.is_culprit)]
        middle = self.y(row) + self.row_height / 2
        if band.start is not None and band.stop is not None:
            x1, x2 = self.x(band.start), self.x(band.stop)
            outline = " stroke='#b91c1c' stroke-width='1.5'" if band.is_culprit else ""
            parts.append(
                f"<rect x='{x1:.1f}' y='{middle - self.row_height * 0.25:.1f}' width='{max(x2 - x1, 1.5):.1f}' "
                f"height='{self.row_height * 0.5:.1f}' rx='2' fill='{END_COLORS.get(band.end, END_COLORS['unknown'])}' "
                f"fill-opacity='0.55'{outline}><title>{escape(band.label)}: end {escape(band.end)}, "
                f"last collective {escape(band.last_collective)}</title></rect>")
        if band.collective_times:
            self.drawn.add("last collective")
            x1, x2 = self.x(min(band.collective_times)), self.x(max(band.collective_times))
            size = self.row_height * 0.32
            if x2 - x1 > 1:
                parts.append(f"<line x1='{x1:.1f}' y1='{middle:.1f}' x2='{x2:.1f}' y2='{middle:.1f}' class='t-collective-span'/>")
            parts.append(
                f"<path d='M{x2:.1f} {middle - size:.1f} L{x2 + size:.1f} {middle:.1f} L{x2:.1f} {middle + size:.1f} "
                f"L{x2 - size:.1f} {middle:.1f} Z' class='t-collective'><title>{escape(band.label)}: last collective "
                f"{escape(band.last_collective)}</title></path>")
            if band.last_collective not in ("none", "unknown", "mixed"):
                self.labels.append((x2, middle, band.last_collective, band.is_culprit))
        return "".join(parts)

    def dots(self, events: list[dict]) -> list[str]:
        """One dot per (row, few-pixel bucket); the tooltip tells how many events it stands for."""
        buckets: dict[tuple[int, int], list[dict]] = {}
        for event in events:
            row = self._row_of(event.get("rank"))
            if row is None:
                continue
            x = self.x(_seconds(event["time"]))
            buckets.setdefault((row, int(x // DOT_BUCKET_PX)), []).append(event)
        parts = []
        for (row, _), grouped in buckets.items():
            event = grouped[0]
            x = self.x(_seconds(event["time"]))
            y = self.y(row) + self.row_height / 2
            severe = any(word in (clean_line(e.get("kind")) + " " + clean_line(e.get("text"), 200)).lower()
                         for e in grouped for word in SEVERE_WORDS)
            self.drawn.add("error event" if severe else "event")
            more = f" (+{len(grouped) - 1} more events here)" if len(grouped) > 1 else ""
            tooltip = (f"{clean_line(event.get('time'))} rank {clean_line(event.get('rank')) or '-'} "
                       f"{clean_line(event.get('kind'))}: {clean_line(event.get('text'), 160)}{more}")
            parts.append(f"<circle cx='{x:.1f}' cy='{y:.1f}' r='{2.2 if self.row_height < 20 else 3}' "
                         f"class='{'t-dot-severe' if severe else 't-dot'}'><title>{escape(tooltip)}</title></circle>")
        return parts

    def _row_of(self, rank: object) -> int | None:
        if rank is None:
            return 0 if self.job_row else None
        index = bisect.bisect_right(self.band_starts, int(rank)) - 1
        if index < 0 or int(rank) > self.bands[index].ranks[-1]:  # a rank without a drawn band
            return None
        return index + self.job_row

    def stop_line(self, stalled: dict) -> str:
        x = self.x(_seconds(stalled["last_seen"]))
        if stalled.get("counter") == "progress_step":  # no sequence numbers: how far its steps got
            after = clean_line(stalled.get("last_seq_label") or f"step {stalled.get('last_seq')}")
        elif stalled.get("last_seq") is None and not stalled.get("last_op"):
            after = "its last line (no collective of its own in the logs)"
        else:
            after = _collective_label({"pg": stalled.get("pg"), "seq": stalled.get("last_seq"), "op": stalled.get("last_op"),
                                       "label": stalled.get("last_seq_label"), "counter": stalled.get("counter")})
        label = f"stop point: rank {clean_line(stalled.get('rank'))} after {after}"
        self.drawn.add("stop point")
        label = clean_line(label, 110)
        anchor = "end" if x + 6.5 * len(label) > WIDTH - RIGHT else "start"
        offset = -4 if anchor == "end" else 4
        return (f"<line x1='{x:.1f}' y1='{self.top - 12}' x2='{x:.1f}' y2='{self.top + self.plot_height}' class='t-stop'/>"
                f"<text x='{x + offset:.1f}' y='{self.top - 16}' text-anchor='{anchor}' class='t-stop-label'>{escape(label)}</text>")

    def divergence_line(self, label: str, when: float | None) -> str:
        """The diverging collective: a line where the ranks reached it (when known), its label in
        the row above the stop point's."""
        y = self.top - 16 - LABEL_ROW
        self.drawn.add("divergence")
        if when is None:
            return f"<text x='{LEFT}' y='{y}' class='t-divergence-label'>{escape(label)}</text>"
        x = self.x(when)
        anchor = "end" if x + 6.2 * len(label) > WIDTH - RIGHT else "start"
        if anchor == "end" and x - 6.2 * len(label) < 0:
            x_text, anchor = float(LEFT), "start"
        else:
            x_text = x + (-4 if anchor == "end" else 4)
        return (f"<line x1='{x:.1f}' y1='{y + 4}' x2='{x:.1f}' y2='{self.top + self.plot_height}' class='t-divergence'/>"
                f"<text x='{x_text:.1f}' y='{y}' text-anchor='{anchor}' class='t-divergence-label'>{escape(label)}</text>")

    def collective_labels(self, culprit_note: str = "") -> list[str]:
        """Each band's last collective in words beside its marker (the culprit's in red, with what it
        did differently), so that nothing is told by a hover tooltip alone; on rows too thin for
        text, the culprit's only."""
        labels = [(x, y, f"{text}: {culprit_note}" if culprit and culprit_note else text, culprit)
                  for x, y, text, culprit in self.labels]
        if self.row_height < 20:
            labels = [label for label in labels if label[3]]
        parts = []
        for x, y, text, culprit in labels:
            parts.append(text_label(x, y, text, "t-op" + (" t-culprit" if culprit else ""), 10))
        return parts

    def legend(self) -> str:
        """Keys for what the chart actually shows: only the end states present, then the markers."""
        ends = list(dict.fromkeys(band.end for band in self.bands))
        items = [(lambda x, y, color=END_COLORS.get(end, END_COLORS["unknown"]):
                  f"<rect x='{x}' y='{y - 8}' width='14' height='8' fill='{color}' fill-opacity='0.55'/>", f"ended: {end}")
                 for end in ends]
        items += [
            (lambda x, y: f"<path d='M{x + 7} {y - 9} l5 5 l-5 5 l-5 -5 Z' class='t-collective'/>", "last collective"),
            (lambda x, y: f"<circle cx='{x + 7}' cy='{y - 4}' r='3' class='t-dot'/>", "event"),
            (lambda x, y: f"<circle cx='{x + 7}' cy='{y - 4}' r='3' class='t-dot-severe'/>", "error event"),
            (lambda x, y: f"<line x1='{x + 7}' y1='{y - 10}' x2='{x + 7}' y2='{y + 2}' class='t-stop'/>", "stop point"),
            (lambda x, y: f"<line x1='{x + 7}' y1='{y - 10}' x2='{x + 7}' y2='{y + 2}' class='t-divergence'/>", "divergence"),
        ]
        items = [(shape, label) for shape, label in items if label.startswith("ended: ") or label in self.drawn]
        parts, x, y = [], 12, self.top + self.plot_height + 36
        for shape, label in items:
            width = 26 + 6.2 * len(label)
            if x + width > WIDTH - RIGHT:
                x, y = 12, y + 18
            parts.append(shape(x, y) + f"<text x='{x + 18}' y='{y}' class='t-tick'>{escape(label)}</text>")
            x += width
        return "".join(parts)


def text_label(x: float, y: float, text: str, css: str, size: float, gap: float = 8) -> str:
    """A label beside the point (x, y) on a pale box, so that it reads over bars and lines: right of
    it where it fits, else left of it. Widths are estimated (no script measures text here)."""
    width = (0.68 if "t-culprit" in css else 0.6) * size * len(text) + 6  # the culprit's is bold
    right = x + gap + width <= WIDTH - 2
    left_edge = x + gap if right else max(2.0, x - gap - width)
    return (f"<rect x='{left_edge:.1f}' y='{y - size * 0.75:.1f}' width='{width:.1f}' height='{size * 1.5:.1f}' rx='3' "
            f"class='t-label-box'/><text x='{left_edge + 3:.1f}' y='{y + size * 0.36:.1f}' class='{css}'>{escape(text)}</text>")


def _ticks(origin: float, last: float) -> list[float]:
    """Round steps (1, 2, 5 x 10^n seconds) from the origin, about eight of them."""
    if last <= origin:
        return [origin]
    raw = (last - origin) / 8
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    count = int((last - origin) / step) + 1
    return [origin + k * step for k in range(count)]


def _tick_label(seconds: float, span: float) -> str:
    """One unit for the whole axis, picked from its span, so labels read as a sequence."""
    if span >= 3 * 3600:
        return f"{seconds / 3600:g}h"
    if span >= 300:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def _collective_label(last: dict) -> str:
    """`ALLREDUCE SeqNum=15 on PG 0`: the seq as the log prints it, naming its counter."""
    op = clean_line(last.get("op"))
    label = last.get("label")
    if not label and last.get("seq") is not None:
        label = seq_label(last.get("counter"), last["seq"]) if last.get("counter") and isinstance(last["seq"], int) \
            else f"#{last['seq']}"
    seq = f" {clean_line(label)}" if label else ""
    pg = f" on PG {clean_line(last.get('pg'))}" if last.get("pg") is not None else ""
    text = f"{op}{seq}".strip() or ("no collective of its own" if last.get("seq") is None else "collective")
    return f"{text}{pg}"


def _seconds(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _min(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)
