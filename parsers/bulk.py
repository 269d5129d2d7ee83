"""The bulk lane: the line kind that makes a log big is parsed without the general engine.

NCCL's per-collective COLL line is 90% and more of a COLL-heavy log, and its layout is fixed:
`<prefix> NCCL INFO <op>: opCount <hex> sendbuff ... comm 0x... [nranks=N] ...`. A spec that
declares `bulk` is read here by position over the whole batch; its prefix (the same
`host:pid:tid [dev]`, under whatever launcher wrapper, on every line of a process) is parsed by
the engine once per distinct prefix instead of once per line. The lane reads a line as the
engine does (escapes removed, then the spec's regex decides); one whose prefix is not the
spec's header, or is timed, goes the general way, so the lane changes speed, never results.

Bulk lines become rows of the spec's table; of their events only the last line per stream and
communicator is kept (evidence and timeline need the line where a rank stopped, not millions of
identical ones before it). Every line is still counted in its file's `lines`.

With a window (the default of `correlator analyze`), only the last `window` lines per file,
process and communicator of each engine pass are typed (thin_batch leaves the others out as a
batch is read); the others are counted (`lines_skimmed`), never typed. A hang shows where each rank stopped issuing collectives, and that is at the end of its
stream: the last line per communicator is always typed, so every rank's last seq is exact, and
a disagreement between ranks is looked for over the last `window` collectives of each. A kept
untimed line takes the time of the last timed line kept before it in its stream (COLL lines are
all timed or all untimed in a stream NCCL writes, so only a hostile mix can see an older time).
A per-file wrapper decision (srun's label on 30% of the lines) still weighs the lines left
out: their distinct prefixes go to it, each standing for its lines.
"""
from __future__ import annotations

from functools import cache

import polars as pl
import pyarrow as pa

from .engine import FRAME_COLUMNS, _values, clean, parse_frame, share_decisions
from .multiline import stream_key
from .spec import FormatSpec, registry

_CANDIDATE, _AT, _PREFIX, _TOKENS = "_candidate", "_at", "_prefix", "_tokens"
PREFIX_COLUMNS = ("host", "pid", "rank", "local_rank", "ts", "ts_precision", "ts_inferred", "level", "header",
                  "source", "tee_local_rank", "task", "pod")


@cache
def bulk_specs() -> tuple[FormatSpec, ...]:
    return tuple(s for s in registry() if s.bulk)


def take_bulk(frame: pl.DataFrame, window: int | None = None, left_out: pl.DataFrame | None = None
              ) -> tuple[pl.DataFrame, list[tuple[FormatSpec, pl.DataFrame]], pl.DataFrame]:
    """(the lines left for the engine, [(spec, its parsed bulk lines)], per file the bulk lines
    counted only, outside the window).

    A launcher wrapper that applies per file (srun's label, min_share) is decided over all the
    file's lines: the lines left and the distinct prefixes, each prefix weighing as many lines as
    it stands for, also those of the lines left out by the window (`left_out`: thin_batch's
    prefixes, in FRAME_COLUMNS); both engine passes (prefixes here, the rest in the caller) keep
    that decision."""
    taken, skimmed, weights = [], [], [] if left_out is None else [left_out.select(FRAME_COLUMNS)]
    for spec in bulk_specs():
        frame, rows, outside = _take(frame, spec, window)
        if outside is not None:
            skimmed.append(outside.group_by("file").agg(pl.len().alias("skimmed")))
            weights.append(_probes(outside, spec).select(FRAME_COLUMNS))
        if rows is not None:
            taken.append((spec, rows))
    skimmed = pl.concat([pl.DataFrame(schema={"file": pl.String, "skimmed": pl.UInt32}), *skimmed])
    skimmed = skimmed.group_by("file").agg(pl.col("skimmed").sum())
    if not taken and not weights:
        return frame, [], skimmed
    probes = pl.concat([_probes(rows, spec) for spec, rows in taken]) if taken else None
    decisions = share_decisions(pl.concat([frame.select(FRAME_COLUMNS), *weights,
                                           *([] if probes is None else [probes.select(FRAME_COLUMNS)])]))
    accepted = []
    if probes is not None:
        parsed, _ = parse_frame(probes.join(decisions, on="file", how="left", maintain_order="left"))
        parsed = parsed.select("file", _PREFIX, *PREFIX_COLUMNS)
        for spec, rows in taken:
            frame, good = _keep_ok(frame, _with_prefix(rows, parsed, spec))
            if good is not None:
                accepted.append((spec, good))
    return frame.join(decisions, on="file", how="left", maintain_order="left"), accepted, skimmed


def _take(frame: pl.DataFrame, spec: FormatSpec, window: int | None
          ) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None]:
    """(the frame without the spec's candidate lines, those its regex takes, the candidates
    outside the window, with their prefix)."""
    text = pl.col("text")
    frame = frame.with_columns(text.str.contains(spec.literal, literal=True).alias(_CANDIDATE))
    candidates = frame.filter(pl.col(_CANDIDATE))
    candidates, outside = _window(candidates, spec, window)
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


def _window(candidates: pl.DataFrame, spec: FormatSpec, window: int | None
            ) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """(the candidates among the last `window` per file, process and key; the others, with
    their prefix as _probes reads it)."""
    if window is None or candidates.height <= window:
        return candidates, None
    outside = candidates.select(_outside_window(spec, window, "file")).to_series()
    if not outside.any():
        return candidates, None
    left_out = candidates.filter(outside).with_columns(_prefix_of(spec).alias(_PREFIX))
    return candidates.filter(~outside), left_out


def _prefix_of(spec: FormatSpec) -> pl.Expr:
    """A raw line's head before the spec's split (uncleaned: a per-file decision's weight only)."""
    return pl.col("text").str.slice(0, pl.col("text").str.find(spec.bulk["after"], literal=True))


def _outside_window(spec: FormatSpec, window: int, *by: str) -> pl.Expr:
    """The spec's lines that are not among the last `window` of their process and key (and `by`).
    The process is told by the characters just before the split (NCCL's `host:pid:tid [dev]`,
    not a collector's per-line timestamp further left): it keeps processes apart that share a
    file (srun -l) and a comm pointer value. Both are read from the raw line by cheap kernels
    (find, slice): the lines outside the window are never cleaned, split or matched. A line
    without the key is never outside."""
    text, after = pl.col("text"), spec.bulk["window_after"]
    key = pl.when(text.str.contains(spec.literal, literal=True)).then(
        text.str.slice(text.str.find(after, literal=True) + len(after), spec.bulk["window_chars"]))
    process = _prefix_of(spec).str.slice(-spec.bulk["process_chars"])
    from_end = pl.col("line").rank("ordinal", descending=True).over(*by, process, key)
    return key.is_not_null() & (from_end > window)


def thin_batch(lines: pa.Array, first: int, window: int
               ) -> tuple[pa.Array, int | pl.Series, int, pl.DataFrame | None]:
    """A batch of one file as it is read, without the bulk lines that cannot be among the last
    `window` of their key (as many of the same key follow in this batch): (lines, their numbers,
    how many were left out, the distinct prefixes of those with how many lines each stands for,
    as `text` and `_lines` of probe lines, see _probes). The engine's passes are then sized by the
    lines kept, not read."""
    if len(lines) <= window:  # nothing to leave out (most files of a many-rank job): no fixed cost
        return lines, first, 0, None
    frame = pl.DataFrame({"text": pl.Series("text", lines, dtype=pl.String),
                          "line": pl.int_range(first, first + len(lines), dtype=pl.Int64, eager=True)})
    outside = [(spec, frame.select(_outside_window(spec, window)).to_series()) for spec in bulk_specs()]
    left_out = [frame.select(_prefix_of(spec).filter(out).alias(_PREFIX)).group_by(_PREFIX).len("_lines")
                .select(text=_probe_text(spec), _lines=pl.col("_lines").cast(pl.Int64))
                for spec, out in outside if out.any()]
    if not left_out:
        return lines, first, 0, None
    kept = frame.filter(~pl.any_horizontal(out for _, out in outside))
    return kept["text"].to_arrow(), kept["line"], len(lines) - kept.height, pl.concat(left_out)


def _fields(candidates: pl.DataFrame, spec: FormatSpec) -> pl.DataFrame:
    """The spec's typed fields by position, where the tail after the split matches the spec's
    own regex (as the engine decides)."""
    after = len(spec.bulk["after"])
    tail = pl.col("text").str.slice(pl.col(_AT) + after)
    with_tokens = candidates.with_columns(
        pl.col("text").str.slice(0, pl.col(_AT)).alias(_PREFIX),
        tail.str.split(spec.split).alias(_TOKENS),
        tail.str.contains(spec.regex).fill_null(False).alias("_ok"),
    )
    return with_tokens.select(
        "file", "line", "text", _AT, _PREFIX, "hint_host", "hint_rank", "hint_local_rank", "year", "ref_mmdd", "_lines",
        "_ok", **_values(spec, pl.col(_TOKENS)),
    )


def _probes(rows: pl.DataFrame, spec: FormatSpec) -> pl.DataFrame:
    """One engine line per distinct (file, prefix), standing for the lines that have it."""
    return rows.group_by("file", _PREFIX, maintain_order=True).agg(
        pl.col("hint_host", "hint_rank", "hint_local_rank", "year", "ref_mmdd").first(),
        _lines=pl.col("_lines").sum().cast(pl.Int64),
    ).with_columns(text=_probe_text(spec), line=pl.lit(0, pl.Int64))


def _probe_text(spec: FormatSpec) -> pl.Expr:
    """A probe line: the prefix and the split, and no message (the engine reads its head only)."""
    return pl.col(_PREFIX) + spec.bulk["after"] + "-"


def _with_prefix(rows: pl.DataFrame, parsed: pl.DataFrame, spec: FormatSpec) -> pl.DataFrame:
    """The bulk lines with what the engine made of their prefix; `_ok` where the prefix is the
    spec's header and untimed (a timed line stays with the engine: the untimed
    lines after it carry its time)."""
    rows = rows.join(parsed, on=["file", _PREFIX], how="left", maintain_order="left")
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
