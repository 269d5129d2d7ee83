"""The progress plot of the HTML report: each rank's training step (y) against aligned time (x),
on the timeline chart's time axis, as inline SVG.

A straggler is a line that lags to the right of the others; a stall is a line that stops while the
others' lines go on, or (when every rank stopped at one step) the dashed waits after the last
step: how long each rank lived on after its last step, and how it ended. The steps come from the
report's timeline (its `progress` lines, read with the `progress` format's own pattern), so a
stored report draws the same plot.
"""
from __future__ import annotations

import re
from functools import lru_cache
from html import escape

from ..counters import printed_label
from ..ranges import compress
from .sanitize import clean_line
from .timeline_svg import END_COLORS, LEFT, RIGHT, WIDTH, _seconds, _tick_label, _ticks, text_label, time_range
from .view import culprit_ranks

TOP = 30
PLOT_HEIGHT = 190
MAX_LINES = 64  # ranks drawn one by one; beyond, the others as one envelope of their min and max step


@lru_cache(maxsize=1)
def _step_pattern() -> re.Pattern:
    try:
        from correlator.parsers.spec import registry
        return re.compile(next(spec.regex for spec in registry() if spec.name == "progress"))
    except Exception:  # the parsers' registry unavailable: the same words
        return re.compile(r"(?i)\b(?:global[_ ])?(?:step|iteration|iter)[ =:#]*(?P<step>\d+)")


def steps(report: dict) -> dict[int, list[tuple[float, int]]]:
    """(time, step) per rank, earliest first, from the report's progress events."""
    return {rank: [(t, step) for t, step, _ in points] for rank, points in _progress(report).items()}


def data_times(report: dict) -> dict[int, list[tuple[float, float]]]:
    """(time, seconds in data loading) per rank, from the progress lines that print it (`data_time 0.300s`)."""
    series = {rank: [(t, d) for t, _, d in points if d is not None] for rank, points in _progress(report).items()}
    series = {rank: points for rank, points in series.items() if points}
    return series if any(d for points in series.values() for _, d in points) else {}  # all zero: nothing to see


def _progress(report: dict) -> dict[int, list[tuple[float, int, float | None]]]:
    series: dict[int, list[tuple[float, int, float | None]]] = {}
    for event in report.get("timeline") or []:
        if event.get("kind") != "progress" or event.get("rank") is None:
            continue
        when = _seconds(event.get("time"))
        match = _step_pattern().search(clean_line(event.get("text")))
        if when is None or not match or match.group("step") is None:
            continue
        data = match.groupdict().get("data_s")
        series.setdefault(int(event["rank"]), []).append((when, int(match.group("step")), float(data) if data else None))
    # one step printed twice at one time (a tee'd copy with its data_time cut off): the one that
    # says the data time last, never comparing None with a number
    return {rank: sorted(points, key=lambda p: (p[0], p[1], p[2] is not None, p[2] or 0.0))
            for rank, points in sorted(series.items())}


def _step_said(report: dict, rank: int, step: int) -> str:
    """A rank's step as its progress line prints it (`step=8`, `global step 8/8`)."""
    for event in reversed(report.get("timeline") or []):
        if event.get("kind") == "progress" and event.get("rank") == rank:
            match = _step_pattern().search(clean_line(event.get("text")))
            if match and match.group("step") is not None and int(match.group("step")) == step:
                return clean_line(printed_label("progress_step", step, event.get("text")))
    return f"step {step}"


def render(report: dict) -> str:
    """The plot as an <svg> element, or a note saying why there is none."""
    series = steps(report)
    if sum(len(points) for points in series.values()) < 2:
        return "<p class='note'>No progress lines (training steps) in the report's timeline: no progress plot.</p>"
    span = time_range(report)
    first, last = span
    pad = (last - first) * 0.02 if last > first else 1.0
    x0, x1 = first - pad, last + pad
    all_steps = [step for points in series.values() for _, step in points]
    low, high = min(all_steps), max(all_steps)
    if high == low:
        low, high = low - 1, high + 1

    def x(seconds: float) -> float:
        return LEFT + (seconds - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT)

    def y(step: float) -> float:
        return TOP + PLOT_HEIGHT - (step - low) / (high - low) * PLOT_HEIGHT

    culprits = culprit_ranks(report)
    ends = {int(e["rank"]): e for e in report.get("ranks") or [] if e.get("rank") is not None}
    waits = data_times(report)
    panel_top = TOP + PLOT_HEIGHT + 46  # the data-loading panel, under the steps
    height = TOP + PLOT_HEIGHT + 58 + (DATA_HEIGHT + 46 if waits else 0)
    parts = [f"<svg width='{WIDTH}' height='{height}' viewBox='0 0 {WIDTH} {height}' role='img' "
             "aria-label='training step of each rank against aligned time'>",
             f"<text x='{LEFT}' y='14' class='t-caption'>step of each rank against aligned time (same axis as the "
             f"timeline above), from the report's {len(all_steps)} progress lines; dashed: alive after its last step, "
             "until it ended</text>"]
    for tick in _ticks(first, x1):  # the timeline chart's ticks: the two plots line up
        parts.append(f"<line x1='{x(tick):.1f}' y1='{TOP}' x2='{x(tick):.1f}' y2='{TOP + PLOT_HEIGHT}' class='t-grid'/>"
                     f"<text x='{x(tick):.1f}' y='{TOP + PLOT_HEIGHT + 14}' text-anchor='middle' class='t-tick'>"
                     f"+{_tick_label(tick - first, x1 - first)}</text>")
    for step in _step_ticks(low, high):
        parts.append(f"<line x1='{LEFT}' y1='{y(step):.1f}' x2='{WIDTH - RIGHT}' y2='{y(step):.1f}' class='t-grid'/>"
                     f"<text x='{LEFT - 8}' y='{y(step) + 4:.1f}' text-anchor='end' class='t-tick'>{step}</text>")
    drawn_one_by_one = [r for r in series if r in culprits] + [r for r in series if r not in culprits][:MAX_LINES]
    others_hidden = [r for r in series if r not in drawn_one_by_one]
    labels = []
    for rank in sorted(drawn_one_by_one, key=lambda r: r in culprits):  # culprits drawn last, on top
        points = series[rank]
        culprit = rank in culprits
        style = "p-culprit" if culprit else "p-rank"
        path = " ".join(f"{'M' if i == 0 else 'L'}{x(t):.1f} {y(s):.1f}" for i, (t, s) in enumerate(points))
        parts.append(f"<path d='{path}' class='{style}'/>")
        parts += [f"<circle cx='{x(t):.1f}' cy='{y(s):.1f}' r='{3 if culprit else 2}' class='{style}-dot'/>" for t, s in points]
        last_time, last_step = points[-1]
        end = ends.get(rank) or {}
        seen = _seconds(end.get("last_seen"))
        if seen is not None and x(seen) - x(last_time) > 2:  # lived on visibly after its last step
            parts.append(f"<line x1='{x(last_time):.1f}' y1='{y(last_step):.1f}' x2='{x(seen):.1f}' y2='{y(last_step):.1f}' "
                         f"class='p-wait{' p-culprit-wait' if culprit else ''}'/>")
        if seen is not None:
            color = END_COLORS.get(clean_line(end.get("end")) or "unknown", END_COLORS["unknown"])
            parts.append(f"<rect x='{x(max(seen, last_time)) - 3:.1f}' y='{y(last_step) - 3:.1f}' width='6' height='6' "
                         f"fill='{color}'/>")
        if culprit:
            labels.append((x(points[-1][0]), y(last_step), f"★ rank {rank}: last {_step_said(report, rank, last_step)}", True))
    if others_hidden:
        parts.append(_envelope([series[r] for r in others_hidden], x, y))
    others = [r for r in series if r not in culprits]
    if others:
        lead = max(others, key=lambda r: (series[r][-1][1], series[r][-1][0]))
        t, s = series[lead][-1]
        labels.append((x(t), y(s), f"rank{'s' if len(others) > 1 else ''} {compress(others, 40)}: last "
                       f"{_step_said(report, lead, s)}", False))
    parts += _labels(labels)
    if waits:
        parts += _data_panel(waits, culprits, x, panel_top, first, x1)
    parts.append(_legend(height - 18, bool(culprits), {clean_line(e.get("end")) for e in ends.values()} - {""}))
    parts.append("</svg>")
    return "\n".join(parts)


DATA_HEIGHT = 80


def _data_panel(waits: dict[int, list[tuple[float, float]]], culprits: set[int], x, top: float, first: float,
                last: float) -> list[str]:
    """Seconds each rank spent loading data per step, on the same time axis: in a synchronous job
    every rank ends a step together, so a straggler shows here, not in the steps above."""
    peak = max(d for points in waits.values() for _, d in points) or 1.0

    def y(seconds: float) -> float:
        return top + DATA_HEIGHT - seconds / peak * DATA_HEIGHT

    parts = [f"<text x='{LEFT}' y='{top - 10}' class='t-caption'>seconds in data loading per step (data_time): "
             "in a synchronous job the rank the others wait for shows here</text>"]
    for tick in _ticks(first, last):
        parts.append(f"<line x1='{x(tick):.1f}' y1='{top}' x2='{x(tick):.1f}' y2='{top + DATA_HEIGHT}' class='t-grid'/>")
    for value in (0.0, peak):
        parts.append(f"<line x1='{LEFT}' y1='{y(value):.1f}' x2='{WIDTH - RIGHT}' y2='{y(value):.1f}' class='t-grid'/>"
                     f"<text x='{LEFT - 8}' y='{y(value) + 4:.1f}' text-anchor='end' class='t-tick'>{value:.3f} s</text>")
    labels = []
    for rank in sorted(waits, key=lambda r: r in culprits):
        points, culprit = waits[rank], rank in culprits
        style = "p-culprit" if culprit else "p-rank"
        path = " ".join(f"{'M' if i == 0 else 'L'}{x(t):.1f} {y(d):.1f}" for i, (t, d) in enumerate(points))
        parts.append(f"<path d='{path}' class='{style}'/>")
        parts += [f"<circle cx='{x(t):.1f}' cy='{y(d):.1f}' r='{3 if culprit else 2}' class='{style}-dot'/>" for t, d in points]
    for group, culprit in ((sorted(r for r in waits if r in culprits), True), (sorted(r for r in waits if r not in culprits), False)):
        if not group:
            continue
        mean = sum(d for r in group for _, d in waits[r]) / sum(len(waits[r]) for r in group)
        t, d = max((waits[r][-1] for r in group), key=lambda p: p[1])
        who = f"{'★ ' if culprit else ''}rank{'s' if len(group) > 1 else ''} {compress(group, 40)}"
        labels.append((x(t), y(d), f"{who}: {mean:.3f} s per step", culprit))
    return parts + _labels(labels, above=True)


def _step_ticks(low: int, high: int) -> list[int]:
    step = max(1, -(-(high - low) // 6))
    return list(range(low + (-low) % step, high + 1, step))


def _envelope(series: list[list[tuple[float, int]]], x, y) -> str:
    points = sorted(p for s in series for p in s)
    top = " ".join(f"L{x(t):.1f} {y(s):.1f}" for t, s in points)
    return f"<path d='M{top[1:]}' class='p-rank' stroke-dasharray='2 2'/>"


def _labels(labels: list[tuple[float, float, str, bool]], above: bool = False) -> list[str]:
    """Line labels at their ends (or just above them), moved apart vertically when they would overlap."""
    parts, taken = [], []
    for px, py, text, culprit in sorted(labels, key=lambda item: item[1]):
        py -= 10 if above else 0
        while any(abs(py - other) < 13 for other in taken):
            py += 13
        taken.append(py)
        parts.append(text_label(px, py, text, "p-label" + (" t-culprit" if culprit else ""), 11, gap=10))
    return parts


def _legend(y: float, culprits: bool, ends: set[str]) -> str:
    items = []
    if culprits:
        items.append(("<line x1='0' y1='-4' x2='16' y2='-4' class='p-culprit'/>", "culprit rank"))
    items.append(("<line x1='0' y1='-4' x2='16' y2='-4' class='p-rank'/>", "other ranks"))
    items.append(("<line x1='0' y1='-4' x2='16' y2='-4' class='p-wait'/>", "alive after its last step"))
    items += [(f"<rect x='5' y='-7' width='6' height='6' fill='{END_COLORS.get(end, END_COLORS['unknown'])}'/>",
               f"ended: {end}") for end in sorted(ends)]
    parts, x = [], 12
    for shape, label in items:
        parts.append(f"<g transform='translate({x},{y})'>{shape}<text x='22' y='0' class='t-tick'>{escape(label)}</text></g>")
        x += 34 + 6.2 * len(label)
    return "".join(parts)
