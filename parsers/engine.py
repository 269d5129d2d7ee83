"""Apply the format specs to a batch of lines, vectorised: polars string kernels over the whole
batch, one pass per spec, no Python per line.

`parse_frame` takes the raw lines of one or many files (`group_frame`) and returns the per-line
frame that becomes the `events` table plus the typed rows each message spec emits.
"""
from __future__ import annotations

import re
import re._constants as sre_constants
import re._parser as sre_parse
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache

import polars as pl
import pyarrow as pa

from .multiline import join_partial_records
from .records import CONTINUATION, split_records
from .sections import apply_sections, apply_spawn_sections
from .wrapped import join_wrapped_rows
from .spec import LINE_COLUMNS, FormatSpec, by_layer
from .text import clean

# How each timestamp format is read; see parse_ts.
TS_PRECISION = {"c10": "s", "torchlog": "ms", "iso": "ms", "iso_s": "s", "rfc3339": "us", "epoch": "s", "ctime": "s",
                "mdy": "s", "mdy_short": "s", "md_dash": "s"}
TS_INFERRED = {"c10": "year,zone", "torchlog": "year,zone", "iso": "zone", "iso_s": "zone", "rfc3339": None, "epoch": None,
               "ctime": "zone", "mdy": "zone", "mdy_short": "zone", "md_dash": "year,zone"}


@dataclass(frozen=True)
class FileContext:
    """What is known about a file before reading its lines."""
    path: str
    host: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    year: int = 1970              # year of the file's mtime: the year of year-less timestamps
    ref_mmdd: int = 1231          # month*100+day of the mtime: later MMDD belong to the year before

    @staticmethod
    def for_mtime(path: str, mtime: float | None, **hints) -> "FileContext":
        if mtime is None:
            return FileContext(path, **hints)
        t = datetime.fromtimestamp(mtime, tz=timezone.utc)
        return FileContext(path, year=t.year, ref_mmdd=t.month * 100 + t.day, **hints)


def parse_ts(raw: pl.Expr, fmt: str) -> pl.Expr:
    """A UTC timestamp from `raw` in format `fmt`; local times without zone are taken as UTC.
    Year-less formats take the year from the line's `year` / `ref_mmdd` columns (its file's mtime)."""
    utc = pl.Datetime("us", "UTC")
    if fmt == "md_dash":  # `09-12 14:21:07` (vLLM's logger): c10's month and day with a dash between
        raw, fmt = raw.str.replace("-", "", literal=True, n=1), "c10"
    if fmt in ("c10", "torchlog"):
        # MMDD with the month not zero-padded (c10 streams it before setfill('0')).
        mmdd = raw.str.split_exact(" ", 1).struct.field("field_0").str.to_integer(strict=False)
        rest = raw.str.split_exact(" ", 1).struct.field("field_1")
        year = pl.when(mmdd > pl.col("ref_mmdd") + 1).then(pl.col("year") - 1).otherwise(pl.col("year"))
        stamp = pl.format("{}-{}-{} {}", year, (mmdd // 100).cast(pl.String).str.zfill(2),
                          (mmdd % 100).cast(pl.String).str.zfill(2), rest)
        if fmt == "c10":  # the 9 "fraction" digits are CLOCK_MONOTONIC, not wall-clock: whole seconds only
            stamp = stamp.str.slice(0, 19)
        return stamp.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_zone="UTC").cast(utc)
    if fmt in ("iso", "iso_s"):
        norm = raw.str.replace("T", " ", literal=True).str.replace(",", ".", literal=True).str.slice(0, 26)
        return norm.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_zone="UTC").cast(utc)
    if fmt == "rfc3339":
        return raw.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%#z", strict=False, time_zone="UTC").cast(utc)
    if fmt == "ctime":   # `Tue Oct 16 08:53:15 2018` (day of month space-padded)
        return raw.str.replace("  ", " ", literal=True).str.to_datetime(
            "%a %b %d %H:%M:%S %Y", strict=False, time_zone="UTC").cast(utc)
    if fmt == "mdy":  # `12/01/2026 09:12:01`: month/day/year (the HF examples' datefmt)
        return raw.str.to_datetime("%m/%d/%Y %H:%M:%S", strict=False, time_zone="UTC").cast(utc)
    if fmt == "mdy_short":  # `03/27/23 18:10:51`: rich's log handler (two-digit year)
        return raw.str.to_datetime("%m/%d/%y %H:%M:%S", strict=False, time_zone="UTC").cast(utc)
    if fmt == "epoch":
        return pl.from_epoch(raw.str.to_integer(strict=False), time_unit="s").dt.replace_time_zone("UTC").cast(utc)
    raise ValueError(f"unknown ts_format {fmt!r}")


def _typed(value: pl.Expr, kind: str) -> pl.Expr:
    if kind == "int":
        return value.str.strip_chars().str.to_integer(strict=False)
    if kind == "hex":
        return value.str.strip_chars().str.strip_prefix("0x").str.to_integer(base=16, strict=False)
    if kind == "upper":
        return value.str.to_uppercase()
    if kind == "float":
        return value.str.strip_chars().cast(pl.Float64, strict=False)
    return value


def _parts(spec: FormatSpec, subject: pl.Expr) -> pl.Expr:
    """The raw pieces of matching lines: tokens (`split` specs) or the regex's groups."""
    if spec.split is not None:
        return subject.str.split(spec.split)
    return subject.str.extract_groups(spec.regex)


def typed_values(spec: FormatSpec, parts: pl.Expr, msg: pl.Expr | None = None) -> dict[str, pl.Expr]:
    """{field: typed value} read from the pieces `_parts` made (`msg`: read apart, see _head)."""
    if spec.split is not None:
        raw = {f: parts.list.get(i, null_on_oob=True) for f, i in spec.positions.items()}
    else:
        raw = {f: msg if f == "msg" and msg is not None else parts.struct.field(f) for f in spec.fields}
    out = {}
    for f, v in raw.items():
        if f in spec.strip:
            v = v.str.strip_chars(spec.strip[f])
        if f in spec.maps:
            v = v.replace(spec.maps[f])
        default = "int" if spec.layer != "message" and _LINE_DTYPES.get(f) == pl.Int64 else "str"
        out[f] = _typed(v, spec.types.get(f, default))
    for f, how in spec.into.items():   # a value in another unit or spelling, into its column
        if f not in out:
            continue
        v = out.pop(f)
        if how.get("thousands"):
            v = v.cast(pl.String).str.replace_all(how["thousands"], "", literal=True)
        if how["factor"] != 1 or how.get("thousands"):
            v = v.cast(pl.Float64, strict=False)   # by the inverse: 239 / 1000 is 0.239, 239 * 0.001 is not
            v = v / (1 / how["factor"]) if 0 < how["factor"] < 1 else v * how["factor"]
        out[how["field"]] = v if how["field"] not in out else pl.coalesce(out[how["field"]], v)
    return out


def _fields(spec: FormatSpec, text: pl.Expr, candidate: pl.Expr) -> tuple[pl.Expr, dict[str, pl.Expr]]:
    """(matched, {field: typed value}) for `spec` on the candidate rows of `text`, as expressions."""
    matched = candidate & text.str.contains(spec.regex)
    return matched, typed_values(spec, _parts(spec, pl.when(matched).then(text)))


def _candidates(spec: FormatSpec, text: pl.Expr, free: pl.Expr) -> pl.Expr:
    if spec.literal:
        free = free & text.str.contains(spec.literal, literal=True)
    elif spec.literals:
        free = free & text.str.contains_any(list(spec.literals))
    if spec.exclude:
        free = free & ~text.str.contains(spec.exclude)
    return free


_MSG_TAIL = "(?P<msg>.*)$"


def _head(spec: FormatSpec) -> str | None:
    """A wrapper's or header's regex without its `(?P<msg>.*)$` tail, when it ends so at top level.

    A line has no newline, so the tail always matches the rest: the head alone decides the match
    and its groups, and msg is the line with the head's match removed. Capturing the whole line
    costs the regex engine ~10x more than capturing the head (NCCL: 1 s vs 0.1 s per 150k lines)."""
    return None if spec.split is not None else _regex_head(spec.regex)


@cache
def _regex_head(regex: str) -> str | None:
    if not regex.endswith(_MSG_TAIL):
        return None
    try:
        items = list(sre_parse.parse(regex))
    except re.error:
        return None
    tail_at_top = items[-1] == (sre_constants.AT, sre_constants.AT_END) and items[-2][0] == sre_constants.SUBPATTERN
    return regex[: -len(_MSG_TAIL)] if tail_at_top else None


def _match(spec: FormatSpec, text: pl.Expr, free: pl.Expr) -> pl.Expr:
    """Whether a line is of the format; the regex runs only where the cheap tests passed."""
    regex = _head(spec) or spec.regex
    return pl.when(_candidates(spec, text, free)).then(text).str.contains(regex).fill_null(False)


# Eager polars evaluates a shared sub-expression once per use: the match and the pieces are
# materialised as these columns once, and every field is read from them.
_MATCHED, _PARTS, _MSG, _SPEC = "_matched", "_parts", "_msg", "_spec"


def _read_fields(df: pl.DataFrame, spec: FormatSpec, subject: pl.Expr) -> tuple[pl.DataFrame, dict[str, pl.Expr]]:
    """`df` with the pieces of `subject` as columns, and the typed field values read from them."""
    head = _head(spec)
    if head:
        df = df.with_columns(subject.str.extract_groups(head).alias(_PARTS), subject.str.replace(head, "").alias(_MSG))
        return df, typed_values(spec, pl.col(_PARTS), msg=pl.col(_MSG))
    return df.with_columns(_parts(spec, subject).alias(_PARTS)), typed_values(spec, pl.col(_PARTS))


def _line_updates(spec: FormatSpec, layer: str, values: dict[str, pl.Expr], matched: pl.Expr | None) -> dict[str, pl.Expr]:
    """New line columns where `matched` (every row when None): fields, time, the rest as `text`."""
    def where(value: pl.Expr, column: str) -> pl.Expr:
        return value if matched is None else pl.when(matched).then(value).otherwise(pl.col(column))
    updates = {c: where(v, c) for c, v in values.items() if c != "msg"}
    if spec.ts_format:
        col = "wrap_ts" if layer == "wrapper" else "ts_raw"
        # A collector's UTC time (wrapper) beats a logger's local, zone-less one (header).
        untimed = pl.col("ts").is_null() if matched is None else matched & pl.col("ts").is_null()
        parsed = pl.when(untimed).then(parse_ts(values[col], spec.ts_format))
        updates["ts"] = pl.coalesce(pl.col("ts"), parsed)
        updates["ts_fmt"] = pl.coalesce(pl.col("ts_fmt"), pl.when(parsed.is_not_null()).then(pl.lit(spec.ts_format)))
    updates["text"] = where(values["msg"], "text")
    if layer == "header":
        updates["header"] = where(pl.lit(spec.name), "header")
        updates["source"] = where(pl.lit(spec.source), "source")
    return updates


SHARE_OK = "_share_ok:"   # + wrapper name: per file, whether a min_share wrapper applies


def _with_share(df: pl.DataFrame, spec: FormatSpec, matched: pl.Expr) -> pl.DataFrame:
    """`_matched` for a wrapper; one with min_share applies per file, only where that share of
    the file's lines match (a launcher prefixes (nearly) every line). Each row stands for
    `_lines` lines (the bulk lane's distinct prefixes stand for many), and a decision already
    taken over a larger frame (a `SHARE_OK` column, see share_decisions) is kept."""
    df = df.with_columns(matched.alias(_MATCHED))
    if not spec.min_share:
        return df
    decided = SHARE_OK + spec.name
    if decided not in df.columns:
        weight = pl.col("_lines")
        share = (pl.col(_MATCHED).cast(pl.Int64) * weight).sum().over("file") / weight.sum().over("file")
        df = df.with_columns((share >= spec.min_share).alias(decided))
        if df[decided].any():   # the line-number test only where the share is there (most batches: nowhere)
            numbered = _numbered_lines(pl.col(_MATCHED))
            df = df.with_columns((pl.col(decided) & (numbered if spec.counts_lines else ~numbered)).alias(decided))
    return df.with_columns(pl.col(_MATCHED) & pl.col(decided))


def _numbered_lines(matched: pl.Expr) -> pl.Expr:
    """Per file, whether the number a wrapper would read (srun's `12: `) counts the lines: a paste
    copied with its line numbers (an editor's or `cat -n`'s gutter, `12: ...`) numbers nearly every
    line one more than the last, where a launcher's label names a few tasks over and over."""
    number = pl.col("text").str.extract(r"^\D{0,8}?(\d{1,9})\b", 1).cast(pl.Int64, strict=False)
    offset = pl.when(matched).then(number - pl.col("line"))
    usual = offset.drop_nulls().mode().first().over("file")
    counted = (offset == usual).fill_null(False).cast(pl.Int64).sum().over("file")
    return (pl.len().over("file") >= 20) & (counted >= 0.9 * pl.len().over("file"))


def share_decisions(df: pl.DataFrame) -> pl.DataFrame:
    """(file, SHARE_OK columns): the min_share wrappers' per-file decisions over `df`, for
    parse_frame calls that each see only part of a file's lines. A file whose every line is
    indented is decided on its lines without the indent: a launcher's prefix after it opens no
    line as it is (anchored), and parse_frame may read it so (see there)."""
    indented = _indented_files(df)
    if indented is not None:
        df = _dedented(df, indented)
    wrapped = _apply_wrappers(_prepare(df))
    return wrapped.group_by("file").agg(pl.col(f"^{SHARE_OK}.*$").first())


def _apply_wrappers(df: pl.DataFrame) -> pl.DataFrame:
    """Wrappers stack (a collector's prefix around a launcher's): each updates the whole frame."""
    for spec in by_layer("wrapper"):
        df = _with_share(df, spec, _match(spec, pl.col("text"), pl.lit(True)))
        if not df[_MATCHED].any():
            df = df.drop(_MATCHED)
            continue
        matched = pl.col(_MATCHED)
        df, values = _read_fields(df, spec, pl.when(matched).then(pl.col("text")))
        df = df.with_columns(**_line_updates(spec, "wrapper", values, matched)).drop(_MATCHED, _PARTS, _MSG, strict=False)
    return df


def _apply_headers(df: pl.DataFrame) -> pl.DataFrame:
    """Headers exclude each other (the first that matches wins): each line is assigned its header
    spec, then every spec parses only its own rows and the frame is put back together once."""
    specs = by_layer("header")
    df = df.with_columns(pl.lit(None, pl.Int32).alias(_SPEC))
    for i, spec in enumerate(specs):
        matched = _match(spec, pl.col("text"), pl.col(_SPEC).is_null())
        df = df.with_columns(pl.when(matched).then(pl.lit(i, pl.Int32)).otherwise(pl.col(_SPEC)).alias(_SPEC))
    if df[_SPEC].null_count() == df.height:
        return df.drop(_SPEC)
    parts = []
    for (i,), rows in df.partition_by(_SPEC, as_dict=True).items():
        if i is not None:
            rows, values = _read_fields(rows, specs[i], pl.col("text"))
            rows = rows.with_columns(**_line_updates(specs[i], "header", values, None)).drop(_PARTS, _MSG, strict=False)
        parts.append(rows)
    return pl.concat(parts, how="vertical_relaxed").sort("idx").drop(_SPEC)


_LINE_DTYPES = {c: pl.String for c in LINE_COLUMNS} | {
    c: pl.Int64 for c in ("tee_local_rank", "task", "mpi_rank", "pid", "tid", "dev", "grank")
}


def _rows_by_literal(text: pl.Series, specs: tuple[FormatSpec, ...]) -> dict[str, pl.Series]:
    """{literal: positions of the lines that contain it}, for the specs' literal(s), from one
    Aho-Corasick pass: a spec with a literal then looks only at its own candidate lines, and one
    whose literal is nowhere in the batch is skipped without looking at a line."""
    literals = sorted({x for s in specs for x in s.prefilter})
    if not literals or text.is_empty():
        return {}
    found = pl.DataFrame({"found": text.str.extract_many(literals, overlapping=True)}).with_row_index("pos")
    hits = found.explode("found").drop_nulls("found").unique(["found", "pos"])
    parts = hits.partition_by("found", as_dict=True, include_key=False)
    return {lit: part.to_series().cast(pl.Int64).sort() for (lit,), part in parts.items()}


def _apply_messages(df: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple[FormatSpec, pl.DataFrame]]]:
    """Message specs, first match wins; each emits its rows (idx + fields + const).

    A spec with a literal (or literals) reads only the not-yet-taken lines that contain it; one without reads
    every line no earlier spec took, so the common kinds, tried first, shrink the rare ones' work."""
    specs = by_layer("message")
    kind, source = df["kind"].clone(), df["source"].clone()
    gates = {spec.in_files_with for spec in specs if spec.in_files_with}
    base = df.filter(pl.col("kind").is_null()).select(
        "idx", "text", "header",
        # a format that only makes sense inside its own report (generic lines like `Errors`)
        *(pl.col("text").str.contains(g, literal=True).any().over("file").alias(f"_in:{g}") for g in gates),
    ).with_row_index("_pos")
    candidates = _rows_by_literal(base["text"], specs)
    taken = pl.Series("taken", [False] * base.height)
    pending: pl.DataFrame | None = base   # base minus taken lines, rebuilt after a spec takes some
    emitted = []
    for spec in specs:
        if spec.prefilter:
            found = [candidates[x] for x in spec.prefilter if x in candidates]
            if not found:
                continue
            rows = found[0] if len(found) == 1 else pl.concat(found).unique().sort()
            subject = base[rows].filter(~taken.gather(rows))
        else:
            pending = base.filter(~taken) if pending is None else pending
            subject = pending
        free = pl.col("header").is_in(list(spec.headers)) if spec.headers else pl.lit(True)
        if spec.in_files_with:
            free = free & pl.col(f"_in:{spec.in_files_with}")
        matched = subject.select(_match(spec, pl.col("text"), free)).to_series()
        if not matched.any():
            continue
        hits = subject.filter(matched)
        taken.scatter(hits["_pos"], True)
        pending = None
        if spec.fields:
            hits = hits.with_columns(_parts(spec, pl.col("text")).alias(_PARTS))
        rows = hits.select("idx", **typed_values(spec, pl.col(_PARTS)))
        idx = rows["idx"]  # idx is the row's position in df
        kind.scatter(idx, spec.name)
        source.scatter(idx.filter(source.gather(idx).is_null()), spec.source)
        emitted.append((spec, rows.with_columns(**{k: pl.lit(v) for k, v in spec.const.items()})))
    return df.with_columns(kind=kind, source=source), emitted


# What parse_frame reads: a raw line, where it is, its file's context, how many lines it stands for.
FRAME_COLUMNS = ("text", "line", "file", "hint_host", "hint_rank", "hint_local_rank", "year", "ref_mmdd", "_lines")


def group_frame(parts: list[tuple[pa.Array, int | pl.Series, FileContext]]) -> pl.DataFrame:
    """One parse_frame input for the batches of many files, built in one go: a frame per small
    file costs more than parsing it. A part's lines are numbered from its first line on, or by
    an array of line numbers (a batch the bulk lane has thinned, parsers/bulk/)."""
    sizes = [len(lines) for lines, _, _ in parts]
    contexts = pl.DataFrame({
        "file": [c.path for _, _, c in parts], "hint_host": [c.host for _, _, c in parts],
        "hint_rank": [c.rank for _, _, c in parts], "hint_local_rank": [c.local_rank for _, _, c in parts],
        "year": [c.year for _, _, c in parts], "ref_mmdd": [c.ref_mmdd for _, _, c in parts], "_n": sizes,
    }, schema={"file": pl.String, "hint_host": pl.String, "hint_rank": pl.Int64, "hint_local_rank": pl.Int64,
               "year": pl.Int32, "ref_mmdd": pl.Int32, "_n": pl.Int64})
    expanded = contexts.select(pl.all().repeat_by(pl.col("_n")).explode()).filter(pl.col("_n").is_not_null())
    text = pl.Series("text", pa.chunked_array([lines for lines, _, _ in parts], pa.large_string()), dtype=pl.String)
    numbers = [pl.int_range(at, at + n, dtype=pl.Int64, eager=True) if isinstance(at, int) else at.cast(pl.Int64)
               for (_, at, _), n in zip(parts, sizes)]
    line = pl.concat(numbers).alias("line") if numbers else pl.Series("line", [], pl.Int64)
    return expanded.with_columns(text=text, line=line, _lines=pl.lit(1, pl.Int64)).select(*FRAME_COLUMNS)


def _prepare(df: pl.DataFrame) -> pl.DataFrame:
    """Raw lines as records (parsers/records.py) with their position, cleaned text and the empty
    line columns the layers fill; a record continued from an earlier one is already recognised."""
    df = split_records(join_wrapped_rows(df))
    piece = pl.col("_wrapped") | pl.col("_cont") if "_cont" in df.columns else pl.col("_wrapped")
    kind = pl.when(piece).then(pl.lit(CONTINUATION))
    return df.with_columns(
        idx=pl.int_range(0, pl.len(), dtype=pl.Int64),
        text=clean(pl.col("text")),
        header=pl.lit(None, pl.String), kind=kind, source=pl.lit(None, pl.String),
        ts=pl.lit(None, pl.Datetime("us", "UTC")), ts_fmt=pl.lit(None, pl.String),
        **{c: pl.lit(None, _LINE_DTYPES[c]) for c in LINE_COLUMNS if c != "msg"},
    ).drop("_cont", "_wrapped", strict=False)


def parse_frame(df: pl.DataFrame) -> tuple[pl.DataFrame, list]:
    """Parse a frame of raw lines (text, line, file and the file context columns).

    Returns the per-line frame (idx, file, line, resolved host/pid/rank/local_rank/ts, header,
    kind, source, level, text, and the wrapper columns) and the emitted (spec, rows) pairs.

    A paste indented as a Markdown code block (four spaces, a tab, a list item's indent) has every
    line indented, and no format opens so. But some logs indent every line of their own (a py-spy
    dump's frames, a traceback's), so a file whose every non-blank line is indented is read both
    ways, and keeps the indent unless more is recognised without it (kinds, headers, times and
    ranks, line by line). Decided per frame: a file larger than a batch is decided batch by batch.
    Only such files pay for it (a log's lines mostly open at column one), and a frame of several
    files pays one group_by to find them.
    """
    indented = _indented_files(df)
    if indented is None:
        return _parse(df)
    trial = df.join(indented, on="file", how="inner", maintain_order="left")
    as_is, dedented = _parse(trial.drop("_indent")), _parse(trial.with_columns(text=_DEDENT).drop("_indent"))
    better = _recognised(as_is[0]).join(_recognised(dedented[0]), on="file", suffix="_dedented").filter(
        pl.col("recognised_dedented") > pl.col("recognised"))["file"]
    if trial.height == df.height and better.len() in (0, indented.height):  # a paste: one reading for all
        return dedented if better.len() else as_is
    return _parse(_dedented(df, indented.filter(pl.col("file").is_in(better.implode()))))


_BLANK = pl.col("text").str.strip_chars() == ""
_DEDENT = pl.when(_BLANK).then(pl.col("text")).otherwise(pl.col("text").str.slice(pl.col("_indent")))


def _dedented(df: pl.DataFrame, files: pl.DataFrame) -> pl.DataFrame:
    """`df` with the common indent of `files` (file, _indent) taken off their lines."""
    return df.join(files, on="file", how="left", maintain_order="left").with_columns(
        text=pl.when(pl.col("_indent").is_not_null()).then(_DEDENT).otherwise("text")).drop("_indent")


def _indented_files(df: pl.DataFrame) -> pl.DataFrame | None:
    """(file, _indent): the files whose every non-blank line is indented, and by how much at least."""
    text = pl.col("text")
    flush = ~_BLANK & ~text.str.starts_with(" ") & ~text.str.starts_with("\t")
    # the cheap test first (the hot path): a frame of one file (group_frame keeps a file's lines
    # together within a frame) with a line at the first column
    if df.is_empty() or df.select((pl.col("file").first() == pl.col("file").last()) & flush.any()).item():
        return None
    indent = pl.when(~_BLANK).then(text.str.len_chars() - text.str.strip_chars_start(" \t").str.len_chars())
    files = df.group_by("file").agg(_indent=indent.min(), _flush=flush.any()).filter(
        ~pl.col("_flush") & (pl.col("_indent") > 0)).select("file", "_indent")
    return None if files.is_empty() else files


def _recognised(parsed: pl.DataFrame) -> pl.DataFrame:
    """(file, recognised): per file, what the parse made of its lines: kinds, headers, times, ranks."""
    read = [pl.col("kind") != "other", *(pl.col(c).is_not_null() for c in ("header", "ts", "rank"))]
    return parsed.group_by("file").agg(recognised=pl.sum_horizontal(read).sum())


def _parse(df: pl.DataFrame) -> tuple[pl.DataFrame, list]:
    df = _apply_headers(join_partial_records(apply_spawn_sections(_apply_wrappers(apply_sections(_prepare(df))))))
    df, emitted = _apply_messages(df)
    df = df.with_columns(
        host=pl.coalesce("host", "pdsh_host", "pod", "hint_host"),
        rank=pl.coalesce("grank", "task", "mpi_rank", "hint_rank"),
        local_rank=pl.coalesce("tee_local_rank", "hint_local_rank"),
        kind=pl.coalesce("kind", "header", pl.lit("other")),
        source=pl.coalesce("source", pl.lit("text")),
        ts_precision=pl.col("ts_fmt").replace_strict(TS_PRECISION, default=None),
        ts_inferred=pl.col("ts_fmt").replace_strict(TS_INFERRED, default=None),
    )
    return _tasks_of_many_ranks(df), emitted


def node_tasks(df: pl.DataFrame) -> pl.DataFrame:
    """(file, task): srun's label is a rank where each task is one (rank = SLURM_PROCID), but one
    task per node that runs a launcher (`srun --ntasks-per-node=1 torchrun ...`) labels all that
    node's ranks with the node's task id. Where the lines of one task carry several global ranks
    of their own (`1: [rank8]:`, `1: [rank9]:`) or several torchrun local ranks, the label names
    no rank: its other lines (NCCL's, prints) keep the rank their own process gives them, or none."""
    if df["task"].null_count() == df.height:
        return df.select("file", "task").clear()
    return (df.filter(pl.col("task").is_not_null()).group_by("file", "task")
            .agg(ranks=pl.col("grank").drop_nulls().n_unique(), tees=pl.col("tee_local_rank").drop_nulls().n_unique())
            .filter((pl.col("ranks") > 1) | (pl.col("tees") > 1)).select("file", "task"))


def without_node_tasks(df: pl.DataFrame, nodes: pl.DataFrame, rank: pl.Expr) -> pl.DataFrame:
    """`df` where the rank of a line of a node's task (node_tasks) is `rank`, not the label."""
    if nodes.is_empty():
        return df
    flagged = df.join(nodes.with_columns(_node=pl.lit(True)), on=["file", "task"], how="left", maintain_order="left")
    return flagged.with_columns(rank=pl.when(pl.col("_node")).then(rank).otherwise(pl.col("rank"))).drop("_node")


def _tasks_of_many_ranks(df: pl.DataFrame) -> pl.DataFrame:
    return without_node_tasks(df, node_tasks(df), pl.coalesce("grank", "mpi_rank", "hint_rank"))


def parse_batch(lines: pl.Series, first_line: int, ctx: FileContext) -> tuple[pl.DataFrame, list]:
    """parse_frame for the lines of one file."""
    return parse_frame(group_frame([(lines.to_arrow(), first_line, ctx)]))
