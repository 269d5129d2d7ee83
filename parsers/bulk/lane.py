"""The bulk lane: the bulk spec's lines read by position over a whole batch, their prefixes
parsed by the engine once per distinct prefix (see the glossary in __init__.py)."""
from __future__ import annotations

from typing import NamedTuple

import polars as pl

from ..engine import FRAME_COLUMNS, node_tasks, parse_frame, share_decisions, typed_values, without_node_tasks
from ..multiline import stream_key
from ..records import touched
from ..spec import FormatSpec
from ..text import clean
from . import probes
from .probes import PREFIX, ascii_only
from .window import candidates_in_window

_CANDIDATE, _AT, _TOKENS = "_candidate", "_at", "_tokens"
PREFIX_COLUMNS = ("host", "pid", "rank", "local_rank", "ts", "ts_precision", "ts_inferred", "level", "header",
                  "source", "tee_local_rank", "task", "pod", "grank")


class Taken(NamedTuple):
    frame: pl.DataFrame                                 # the lines left for the engine
    accepted: list[tuple[FormatSpec, pl.DataFrame]]     # per bulk spec, its parsed lines
    skimmed: pl.DataFrame                               # per file, the bulk lines outside the window (counted only)


def take_bulk(frame: pl.DataFrame, window: int | None = None, left_out: pl.DataFrame | None = None
              ) -> Taken:
    """The bulk lines of a pass taken out of `frame` and read by position (see Taken).

    A launcher wrapper that applies per file (srun's label, min_share) is decided over all the
    file's lines: the lines left and the distinct prefixes, each prefix weighing as many lines as
    it stands for, also those of the lines left out by the window (`left_out`: probe lines of
    thin_batch's, in FRAME_COLUMNS); both engine passes (prefixes here, the rest in the caller) keep
    that decision."""
    taken, skimmed, outside_probes = [], [], [] if left_out is None else [left_out.select(FRAME_COLUMNS)]
    for spec in probes.bulk_specs():
        frame, rows, outside = _take(frame, spec, window)
        if outside is not None:
            skimmed.append(outside.group_by("file").agg(pl.len().alias("skimmed")))
            outside_probes.append(probes.probes(outside, spec).select(FRAME_COLUMNS))
        if rows is not None:
            taken.append((spec, rows))
    skimmed = pl.concat([pl.DataFrame(schema={"file": pl.String, "skimmed": pl.UInt32}), *skimmed])
    skimmed = skimmed.group_by("file").agg(pl.col("skimmed").sum())
    if not taken and not outside_probes:
        return Taken(frame, [], skimmed)
    lane_probes = pl.concat([probes.probes(rows, spec) for spec, rows in taken]) if taken else None
    decisions = share_decisions(pl.concat([frame.select(FRAME_COLUMNS), *outside_probes,
                                           *([] if lane_probes is None else [lane_probes.select(FRAME_COLUMNS)])]))
    accepted = []
    if lane_probes is not None:
        parsed, _ = parse_frame(lane_probes.join(decisions, on="file", how="left", maintain_order="left"))
        parsed = parsed.select("file", PREFIX, *PREFIX_COLUMNS)
        for spec, rows in taken:
            frame, good = _keep_ok(frame, _with_prefix(rows, parsed, spec))
            if good is not None:
                accepted.append((spec, good))
    return Taken(frame.join(decisions, on="file", how="left", maintain_order="left"), accepted, skimmed)


def _take(frame: pl.DataFrame, spec: FormatSpec, window: int | None
          ) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None]:
    """(the frame without the spec's candidate lines, those its regex takes, the candidates
    outside the window, with their prefix)."""
    text = pl.col("text")
    candidate = frame["text"].str.contains(spec.literal, literal=True)
    if candidate.any():  # a line that holds several records (parsers/records.py) is cut by the engine first
        where = candidate.arg_true()
        cut = touched(frame["text"].gather(where))
        if cut.any():
            candidate = candidate.scatter(where.filter(cut), False)
    frame = frame.with_columns(candidate.alias(_CANDIDATE))
    candidates = frame.filter(pl.col(_CANDIDATE))
    candidates, outside = candidates_in_window(candidates, spec, window)
    if candidates.is_empty():
        return frame.filter(~pl.col(_CANDIDATE)).drop(_CANDIDATE), None, outside
    # The engine reads a line with its escapes removed: so does the lane.
    candidates = candidates.with_columns(text=clean(text)).with_columns(
        text.str.find(spec.bulk["after"], literal=True).alias(_AT))
    return *_keep_ok(frame.filter(~pl.col(_CANDIDATE)).drop(_CANDIDATE), _fields(candidates, spec)), outside


def _keep_ok(frame: pl.DataFrame, rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """(the frame with the refused rows back, in file order, for the engine; the `_ok` rows)."""
    refused = rows.filter(~pl.col("_ok"))
    if not refused.is_empty():  # rare
        frame = pl.concat([frame, refused.select(frame.columns)]).sort("file", "line")
    good = rows.filter(pl.col("_ok")).drop("_ok")
    return frame, None if good.is_empty() else good


def _fields(candidates: pl.DataFrame, spec: FormatSpec) -> pl.DataFrame:
    """The spec's typed fields by position, where the tail after the split matches the spec's
    own regex (as the engine decides)."""
    after = len(spec.bulk["after"])
    tail = pl.col("text").str.slice(pl.col(_AT) + after)
    with_tokens = candidates.with_columns(
        pl.col("text").str.slice(0, pl.col(_AT)).alias(PREFIX),
        tail.str.split(spec.split).alias(_TOKENS),
        (tail.str.contains(spec.regex) & ascii_only(pl.col("text"))).fill_null(False).alias("_ok"),
    )
    return with_tokens.select(
        "file", "line", "text", _AT, PREFIX, "hint_host", "hint_rank", "hint_local_rank", "year", "ref_mmdd", "_lines",
        "_ok", **typed_values(spec, pl.col(_TOKENS)),
    )


def _with_prefix(rows: pl.DataFrame, parsed: pl.DataFrame, spec: FormatSpec) -> pl.DataFrame:
    """The bulk lines with what the engine made of their prefix; `_ok` where the prefix is the
    spec's header and untimed (a timed line stays with the engine: the untimed
    lines after it carry its time)."""
    rows = rows.join(parsed, on=["file", PREFIX], how="left", maintain_order="left")
    prefix_ok = pl.col("header").is_in(list(spec.headers)) & pl.col("ts").is_null()
    return rows.with_columns(_ok=prefix_ok.fill_null(False))


def finish_bulk(spec: FormatSpec, rows: pl.DataFrame, timed: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the spec's table rows, the events kept) once the engine has timed the other lines: a
    bulk line (untimed, see _with_prefix) takes the time of the last timed line before it in
    its stream."""
    rows = rows.with_columns(_stream=stream_key()).sort("line")
    stamps = (timed.filter(pl.col("ts").is_not_null())
              .select(stream_key().alias("_stream"), "line", pl.col("ts").alias("_carried"))
              .sort("line"))
    rows = without_node_tasks(rows, node_tasks(timed), pl.coalesce("grank", "hint_rank"))
    rows = rows.join_asof(stamps, on="line", by="_stream", strategy="backward", check_sortedness=False).with_columns(
        ts_inferred=pl.when(pl.col("_carried").is_not_null()).then(pl.lit("carried")),
        ts=pl.col("_carried"),
    )
    table = rows.select("file", "line", "host", "pid", "rank", "local_rank", "ts", *spec.fields,
                        **{k: pl.lit(v) for k, v in spec.const.items()})
    keep = spec.bulk["keep_last_by"]
    last = rows.group_by("_stream", keep).last()  # rows are in line order
    events = last.select(
        "file", "line", "host", "pid", "rank", "local_rank", "source", "level", "ts", "ts_precision", "ts_inferred",
        kind=pl.lit(spec.name), text=pl.col("text").str.slice(pl.col(_AT) + len(spec.bulk["after"])),
    )
    return table, events
