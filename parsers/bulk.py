"""The bulk lane: the line kind that makes a log big is parsed without the general engine.

NCCL's per-collective COLL line is 90% and more of a COLL-heavy log, and its layout is fixed:
`<prefix> NCCL INFO <op>: opCount <hex> sendbuff ... comm 0x... [nranks=N] ...`. A spec that
declares `bulk` is read here by position over the whole batch; its prefix (the same
`host:pid:tid [dev]`, under whatever launcher wrapper, on every line of a process) is parsed by
the engine once per distinct prefix instead of once per line. A line the lane cannot vouch for
(a word out of place, a number that does not parse, a control character, a prefix that is not
the spec's header) goes the general way, so the lane changes speed, never results.

Bulk lines become rows of the spec's table; of their events only the last line per stream and
communicator is kept (evidence and timeline need the line where a rank stopped, not millions of
identical ones before it). Every line is still counted in its file's `lines`.
"""
from __future__ import annotations

from functools import cache

import polars as pl

from .engine import _CONTROL, _values, clean, parse_frame
from .multiline import stream_key
from .spec import FormatSpec, registry

_AT, _PREFIX, _TOKENS = "_at", "_prefix", "_tokens"
PREFIX_COLUMNS = ("host", "pid", "rank", "local_rank", "ts", "ts_precision", "ts_inferred", "level", "header",
                  "source", "tee_local_rank", "task", "pod")


@cache
def bulk_specs() -> tuple[FormatSpec, ...]:
    return tuple(s for s in registry() if s.bulk)


def take_bulk(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple[FormatSpec, pl.DataFrame]]]:
    """(the lines left for the engine, [(spec, its parsed bulk lines)])."""
    taken = []
    for spec in bulk_specs():
        frame, rows = _take(frame, spec)
        if rows is not None:
            taken.append((spec, rows))
    return frame, taken


def _take(frame: pl.DataFrame, spec: FormatSpec) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    after = spec.bulk["after"]
    text = pl.col("text")
    at = pl.when(text.str.contains(spec.literal, literal=True)).then(text.str.find(after, literal=True))
    frame = frame.with_columns(at.alias(_AT))
    candidates = frame.filter(pl.col(_AT).is_not_null())
    if candidates.is_empty():
        return frame.drop(_AT), None
    rows = _with_prefixes(_fields(candidates, spec), spec)
    rest = frame.filter(pl.col(_AT).is_null()).drop(_AT)
    refused = rows.filter(~pl.col("_ok"))
    if not refused.is_empty():  # rare: back to the engine, in file order
        rest = pl.concat([rest, refused.select(rest.columns)]).sort("file", "line")
    good = rows.filter(pl.col("_ok")).drop("_ok")
    return rest, None if good.is_empty() else good


def _fields(candidates: pl.DataFrame, spec: FormatSpec) -> pl.DataFrame:
    """The spec's typed fields by position, and whether the line has the spec's words in place."""
    after = len(spec.bulk["after"])
    with_tokens = candidates.with_columns(
        pl.col("text").str.slice(0, pl.col(_AT)).alias(_PREFIX),
        pl.col("text").str.slice(pl.col(_AT) + after).str.split(spec.split).alias(_TOKENS),
    )
    tokens = pl.col(_TOKENS)
    words = [_token_ok(tokens.list.get(int(i), null_on_oob=True), want) for i, want in spec.bulk["tokens"].items()]
    values = _values(spec, tokens)
    typed = [v.is_not_null() for v in values.values()]
    # The engine would have cleaned escapes out of a string field first: such a line goes its way.
    clean_strings = [~values[f].str.contains(_CONTROL) for f in values if spec.types.get(f, "str") in ("str", "upper")]
    return with_tokens.select(
        "file", "line", "text", _AT, _PREFIX, "hint_host", "hint_rank", "hint_local_rank", "year", "ref_mmdd",
        **values, _ok=pl.all_horizontal(*words, *typed, *clean_strings).fill_null(False),
    )


def _token_ok(token: pl.Expr, want: str) -> pl.Expr:
    if want == "<int>":
        return token.str.to_integer(strict=False).is_not_null()
    if want == "<hex>":
        return token.str.starts_with("0x") & token.str.strip_prefix("0x").str.to_integer(base=16, strict=False).is_not_null()
    return token == want


def _with_prefixes(rows: pl.DataFrame, spec: FormatSpec) -> pl.DataFrame:
    """Each distinct (file, prefix) parsed once by the engine and joined back; `_ok` also asks
    that the prefix is the spec's header, untimed and free of control characters."""
    prefixes = rows.select("file", _PREFIX, "hint_host", "hint_rank", "hint_local_rank", "year", "ref_mmdd").unique(
        ["file", _PREFIX])
    probe = prefixes.with_columns(
        text=pl.col(_PREFIX) + spec.bulk["after"] + "-", line=pl.lit(0, pl.Int64))
    parsed, _ = parse_frame(probe.select("text", "line", "file", "hint_host", "hint_rank", "hint_local_rank",
                                         "year", "ref_mmdd"))
    parsed = pl.concat([prefixes.select("file", _PREFIX), parsed.select(*PREFIX_COLUMNS)], how="horizontal")
    rows = rows.join(parsed, on=["file", _PREFIX], how="left")
    # A timed prefix stays with the engine: the untimed lines after it carry its time.
    prefix_ok = (pl.col("header").is_in(list(spec.headers)) & pl.col("ts").is_null()
                 & ~pl.col(_PREFIX).str.contains(_CONTROL))
    return rows.with_columns(_ok=pl.col("_ok") & prefix_ok.fill_null(False))


def finish_bulk(spec: FormatSpec, rows: pl.DataFrame, timed: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the spec's table rows, the events kept) once the engine has timed the other lines: a
    bulk line (untimed, see _with_prefixes) takes the time of the last timed line before it in
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
        kind=pl.lit(spec.name), text=clean(pl.col("text").str.slice(pl.col(_AT) + len(spec.bulk["after"]))),
    )
    return table, events
