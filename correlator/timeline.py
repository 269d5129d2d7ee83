"""`correlator timeline`: the merged, clock-aligned events of a job, filtered by rank and time.

The CLI only prints and the pipeline parses the job and runs the queries (pipeline.timeline);
this module selects from their `timeline_events` view.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

Row = tuple  # (aligned_ts, rank, host, kind, file, line, text)


@dataclass
class TimelineQuery:
    ranks: list[int]
    around: str | None = None
    window_s: float = 30.0
    everything: bool = False
    limit: int = 500          # 0: every row


@dataclass
class Spans:
    """What the job's timeline holds, to say why a filter matched nothing."""
    first: datetime | None
    last: datetime | None
    ranks: list[int]
    rank_first: datetime | None = None   # of the asked ranks only
    rank_last: datetime | None = None


def _centre(around: str) -> str:
    return around if around.endswith("Z") or "+" in around[10:] else around + "Z"


def select(con: duckdb.DuckDBPyConnection, query: TimelineQuery) -> tuple[list[Row], int, Spans]:
    """The rows (at most `limit`), how many matched in all, and the spans of the whole timeline,
    of a job the queries ran over. Raises ValueError for a malformed --around."""
    from .assemble import QUIET_KINDS
    base = ["aligned_ts is not null"] + ([] if query.everything else [f"kind not in {QUIET_KINDS}"])
    where, params = list(base), []
    if query.ranks:
        where.append("rank in (select unnest(?::bigint[]))")
        params.append(query.ranks)
    if query.around:
        where.append("aligned_ts between ?::timestamptz - to_microseconds(?) and ?::timestamptz + to_microseconds(?)")
        micros = int(query.window_s * 1e6)
        params += [_centre(query.around), micros, _centre(query.around), micros]
    matched = f"from timeline_events where {' and '.join(where)}"
    limit = f" limit {int(query.limit)}" if query.limit else ""
    # A total order, as the report's timeline has: the queries run on every core, so rows that tie
    # on time, file and line (the pieces of one line) would otherwise come in any order.
    try:
        rows = con.execute(f"select aligned_ts, rank, host, kind, file, line, text {matched} "
                           f"order by aligned_ts, file, line, kind, text{limit}", params).fetchall()
        total = con.execute(f"select count(*) {matched}", params).fetchone()[0]
    except Exception as e:  # duckdb's conversion error for a malformed --around
        raise ValueError(f"bad --around value {query.around!r}: give an ISO time such as 2026-11-29T22:52:51") from e
    first, last, ranks = con.execute(
        f"select min(aligned_ts), max(aligned_ts), list(distinct rank order by rank) filter (where rank is not null) "
        f"from timeline_events where {' and '.join(base)}").fetchone()
    spans = Spans(first, last, ranks or [])
    if query.ranks:
        spans.rank_first, spans.rank_last = con.execute(
            f"select min(aligned_ts), max(aligned_ts) from timeline_events where {' and '.join(base)} "
            "and rank in (select unnest(?::bigint[]))", [query.ranks]).fetchone()
    return rows, total, spans


def no_match_note(query: TimelineQuery, spans: Spans) -> str:
    """One line for stderr: which filter matched nothing and what the timeline does hold."""
    from .assemble import iso
    from .ranges import compress
    held = (f"the timeline spans {iso(spans.first)} to {iso(spans.last)}" if spans.first
            else "the timeline has no timed events")
    asked = compress(query.ranks)
    if query.ranks and spans.rank_first is None:
        return (f"no events of rank{'s' if len(set(query.ranks)) > 1 else ''} {asked}: "
                f"ranks with events are {compress(spans.ranks) or 'none'}")
    if query.around:
        whose = f" of rank{'s' if len(set(query.ranks)) > 1 else ''} {asked}" if query.ranks else ""
        span = (f"rank {asked}'s events span {iso(spans.rank_first)} to {iso(spans.rank_last)}" if query.ranks
                else held)
        return f"no events{whose} within {query.window_s:g} s of {query.around}; {span}"
    return f"no events: {held}"
