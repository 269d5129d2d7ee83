"""Records: what a process wrote, where a file's physical lines say it differently.

Three things put several records on one physical line, or one record on several lines:

* A launcher that interleaves many processes' output into one file tags every chunk it forwards
  (mpirun `[1,3]<stderr>:`, torchrun's tee `[default3]:`). A process that wrote part of a line (a
  progress bar redrawn with `\\r`, a partial write) gets the next chunk's tag in the middle of its
  line: `Traceback (mos[1,1]<stderr>:t recent call last):` (the same process: its line goes on),
  `... 8.67it/s[1,3]<stderr>:2026-12-01 ... ERROR ...` (another process's line begins). A wrapper
  that declares `midline` (the tag as it recurs inside a line, in formats/00_wrappers.toml) has its
  lines cut at each such tag; the pieces of one process's stream are joined again, up to the piece
  that ended a line: the first piece of a record gets the whole record, every later piece keeps its
  own text as a `line_continuation` (no byte lost, nothing matched twice).
* A carriage return ends what a terminal shows (tqdm, rich): each `\\r`-separated part is a record.
* A progress bar (tqdm) is written without a newline, so the process's next line follows it on the
  same physical line: a record that starts with bars is cut after each bar.

Every record keeps its physical line's number (the citation stays file:line). Vectorised: only
the lines that hold a mid-line tag, a carriage return or a leading bar are touched.
"""
from __future__ import annotations

import re._constants as sre_constants
import re._parser as sre_parse
from functools import cache

import polars as pl

from .spec import by_layer
from .text import clean

CONTINUATION = "line_piece"   # the kind of a piece of a record cited whole at its last piece
_SEP = "\x00"                        # never in a line: control characters are removed later anyway
# A tqdm bar: `[desc: ] 38%|███▊      | 3/8 [00:01<00:02,  2.41it/s]` (the rate may be `?it/s`,
# `6.81s/it`, a postfix `, loss=1.2` before the `]`).
BAR = r"(?:[^\x00|\r]{0,80}?: ?)?\s*\d{1,3}%\|[^|\r\x00]{0,120}\|\s*[\d.]+[kMGT]?/(?:[\d.]+[kMGT]?|\?)\s*\[[^\]\r\x00]{0,120}\]"
_BAR_AT_START = r"^\s*" + BAR


@cache
def _midline() -> tuple[tuple[str, str, str | None, str], ...]:
    """(tag regex anchored at the line start, the tag as it recurs, exclude, a literal every tag
    holds) per wrapper with `midline`."""
    return tuple(("^" + s.midline, s.midline, s.exclude, _longest_literal(s.midline))
                 for s in by_layer("wrapper") if s.midline)


def _longest_literal(regex: str) -> str:
    """The longest run of plain characters at the top level of `regex` (a cheap pre-filter)."""
    best, run = "", ""
    for op, arg in sre_parse.parse(regex):
        if op == sre_constants.LITERAL:
            run += chr(arg)
            best = max(best, run, key=len)
        else:
            run = ""
    return best


def _literals() -> list[str]:
    """Strings one of which every line to cut holds: a cheap Aho-Corasick pre-filter."""
    return ["\r", "%|", *(literal for _, _, _, literal in _midline() if literal)]


def _touched(text: pl.Expr) -> pl.Expr:
    checks = [text.str.contains("\r", literal=True),
              text.str.contains("%|", literal=True) & text.str.contains(_BAR_AT_START)]
    for head, midline, exclude, literal in _midline():
        twice = text.str.count_matches(literal, literal=True) >= 2 if literal else pl.lit(True)
        tagged = twice & text.str.contains(head)
        if exclude:
            tagged = tagged & ~text.str.contains(exclude)
        checks.append(tagged & text.str.slice(1).str.contains(midline))
    return pl.any_horizontal(checks)


def maybe_touched(text: pl.Expr) -> pl.Expr:
    """A cheap superset of `touched`, for the lines a window leaves out unread: a carriage return,
    a bar's `%|`, or a launcher's tag literal twice."""
    checks = [text.str.contains_any(["\r", "%|"])]
    checks += [text.str.count_matches(literal, literal=True) >= 2 for _, _, _, literal in _midline() if literal]
    return pl.any_horizontal(checks)


def maybe_touched_bytes(data: bytes, start: int, end: int, lines: int, head: bytes) -> bool:
    """The same for a block of raw bytes of `lines` lines that all start with `head` (parsers/bulk/
    skim_blocks): a carriage return, a bar's `%|` (single-byte searches first: they are the fast
    ones), or, where the head is a launcher's tag, that tag's literal more than once a line (only
    a line that starts with a tag is cut at the next one)."""
    if data.find(b"\r", start, end) >= 0 or (data.find(b"|", start, end) >= 0 and data.find(b"%|", start, end) >= 0):
        return True
    for _, _, _, literal in _midline():
        tag = literal.encode()
        if tag and tag in head and data.count(tag, start, end) > lines:
            return True
    return False


def touched(text: pl.Series) -> pl.Series:
    """Whether each raw line holds more than one record: a carriage return, a leading progress
    bar, or a launcher's tag after its own. The regexes run only on the lines that hold one of the
    literals (most lines of a big log hold none)."""
    out = pl.Series("touched", [False] * len(text), dtype=pl.Boolean)
    pre = text.str.contains_any(_literals())
    if pre.any():
        where = pre.arg_true()
        out = out.scatter(where, pl.select(_touched(pl.lit(text.gather(where)))).to_series())
    return out


def _family(tag: pl.Expr, midline: str) -> pl.Expr:
    """What makes two tags of one wrapper alike: its `family` group (torchrun's role: `[default3]:`
    and `[rank3]:` have one shape, only the first is the tee's), else the wrapper itself."""
    if "(?P<family>" in midline:
        return tag.str.extract(midline, 1)
    return pl.lit("")


def split_records(df: pl.DataFrame) -> pl.DataFrame:
    """The frame's lines as records (see the module doc); other columns are repeated, `_lines`
    stays on the first record of a line (0 on the others), and `_cont` marks continuations."""
    df = df.with_row_index("_r").with_columns(_touch=touched(df["text"]), _cont=pl.lit(False))
    if not df["_touch"].any():
        return df.drop("_r", "_touch")
    keep, touch = df.filter(~pl.col("_touch")), df.filter(pl.col("_touch"))
    pieces = _cut_tags(touch.with_columns(_k=pl.lit(0, pl.Int64)))
    pieces, keep = _join_streams(pieces, keep)
    pieces = _cut(pieces, "\r")
    pieces = _cut_bars(pieces)
    cols = [c for c in df.columns if c not in ("_touch",)]
    out = pl.concat([keep.with_columns(_k=pl.lit(0, pl.Int64)).select(*cols, "_k"),
                     pieces.select(*cols, "_k")], how="vertical_relaxed")
    out = out.sort("_r", "_k")
    first = pl.col("_r") != pl.col("_r").shift(1)
    return out.with_columns(_lines=pl.when(first.fill_null(True)).then(pl.col("_lines")).otherwise(0)).drop("_r", "_k")


def _tag_of(text: pl.Expr) -> pl.Expr:
    """The leading midline tag of a record ('' if none)."""
    tags = [pl.when(text.str.contains(head)).then(text.str.extract("(" + head + ")", 1)) for head, _, _, _ in _midline()]
    return pl.coalesce(*tags, pl.lit("")) if tags else pl.lit("")


def _cut_tags(touch: pl.DataFrame) -> pl.DataFrame:
    """Each touched line cut before every later tag of its own wrapper and family: one row per
    piece, `_k` its order, `_partial` if another piece of the line follows it, `_tag` and `_body`."""
    text = pl.col("text")
    cut = text
    for head, midline, exclude, _ in _midline():
        mine = text.str.contains(head) & (~text.str.contains(exclude) if exclude else pl.lit(True))
        cut = pl.when(mine).then(text.str.replace_all(midline, _SEP + "$0").str.strip_prefix(_SEP)).otherwise(cut)
    rows = touch.with_columns(_piece=cut.str.split(_SEP)).explode("_piece").with_columns(
        _k=pl.int_range(pl.len()).over("_r"))
    rows = rows.with_columns(_tag=_tag_of(pl.col("_piece")))
    # a piece whose tag is of another family (c10's `[rank3]:` inside a tee line) is no cut: back to
    # the piece before it
    family = pl.lit("")
    for head, midline, _, _ in _midline():
        family = pl.when(pl.col("_tag").str.contains(head)).then(
            pl.lit(head) + _family(pl.col("_tag"), midline).fill_null("")).otherwise(family)
    rows = rows.with_columns(_fam=family).with_columns(
        _real=(pl.col("_k") == 0) | ((pl.col("_tag") != "") & (pl.col("_fam") == pl.col("_fam").first().over("_r"))))
    rows = rows.with_columns(_g=pl.col("_real").cast(pl.Int64).cum_sum().over("_r", order_by="_k"))
    merged = rows.group_by("_r", "_g", maintain_order=True).agg(
        pl.col("_piece").str.join(""), pl.col("_tag").first(), pl.exclude("_piece", "_tag", "_k", "_real", "_fam", "text").first())
    merged = merged.with_columns(_k=pl.col("_g") - 1, _n=pl.len().over("_r")).with_columns(
        _partial=pl.col("_k") < pl.col("_n") - 1,
        _body=pl.col("_piece").str.slice(pl.col("_tag").str.len_chars()),
        text=pl.col("_piece"))
    return merged.drop("_g", "_n", "_piece")


def _join_streams(pieces: pl.DataFrame, keep: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A piece cut short (`_partial`) and the pieces of its stream (file, tag) that follow it, up to
    one that ended a line, make one record: the first piece's. Those pieces may be whole lines of
    `keep` (mpirun forwards the rest of a partial line later, under its own tag): they move to the
    pieces, as continuations."""
    partial_streams = pieces.filter(pl.col("_partial") & (pl.col("_tag") != "")).select("file", "_tag").unique()
    if partial_streams.is_empty():
        return pieces.drop("_partial", "_tag", "_body"), keep
    files = partial_streams["file"].unique().implode()
    near = keep.filter(pl.col("file").is_in(files)).with_columns(_tag=_tag_of(pl.col("text")))
    near = near.join(partial_streams, on=["file", "_tag"], how="semi")
    if not near.is_empty():
        keep = keep.join(near.select("_r"), on="_r", how="anti")
        near = near.with_columns(_k=pl.lit(0, pl.Int64), _partial=pl.lit(False),
                                 _body=pl.col("text").str.slice(pl.col("_tag").str.len_chars()))
        pieces = pl.concat([pieces, near.select(pieces.columns)], how="vertical_relaxed")
    stream = ["file", "_tag"]
    tagged = (pl.col("_tag") != "")
    order = ["_r", "_k"]
    pieces = pieces.with_columns(
        _start=(~pl.col("_partial").shift(1).over(stream, order_by=order).fill_null(False)) | ~tagged,
        _i=pl.int_range(pl.len()).over(stream, order_by=order),
    ).with_columns(_run=pl.col("_start").cast(pl.Int64).cum_sum().over(stream, order_by=order))
    whole = pieces.filter(tagged).group_by(*stream, "_run").agg(
        pl.col("_body").sort_by("_i").str.join("").alias("_whole"), pl.col("_i").max().alias("_end"))
    pieces = pieces.join(whole, on=[*stream, "_run"], how="left")
    # the record is cited where it ended (its newline): the last piece; the others are its pieces
    last = tagged & (pl.col("_i") == pl.col("_end"))
    return pieces.with_columns(
        text=pl.when(last).then(pl.col("_tag") + pl.col("_whole")).otherwise(pl.col("text")),
        _cont=tagged & ~last,
    ).drop("_partial", "_body", "_start", "_run", "_whole", "_i", "_end"), keep


def _split_body(pieces: pl.DataFrame, cut: pl.Expr, where: pl.Expr) -> pl.DataFrame:
    """Records of `where` rows cut by `cut` (the body with _SEP at the cuts), the tag put back on
    each part; parts with nothing to show (blank once escapes are gone) dropped unless a line
    would be left with none."""
    pieces = pieces.with_columns(_tag=_tag_of(pl.col("text")))
    body = pl.col("text").str.slice(pl.col("_tag").str.len_chars())
    pieces = pieces.with_columns(_parts=pl.when(where & ~pl.col("_cont")).then(cut).otherwise(pl.concat_list(body)))
    rows = pieces.explode("_parts").with_columns(_sub=pl.int_range(pl.len()).over("_r", "_k"))
    blank = clean(pl.col("_parts")).str.strip_chars() == ""
    rows = rows.with_columns(_blank=blank).with_columns(
        _keep=~pl.col("_blank") | (pl.col("_blank").all().over("_r", "_k") & (pl.col("_sub") == 0)))
    rows = rows.filter(pl.col("_keep")).with_columns(text=pl.col("_tag") + pl.col("_parts"))
    rows = rows.with_columns(_k=pl.col("_k") * 1000 + pl.int_range(pl.len()).over("_r", "_k"))
    return rows.drop("_tag", "_parts", "_sub", "_blank", "_keep")


def _cut(pieces: pl.DataFrame, sep: str) -> pl.DataFrame:
    body = pl.col("text").str.slice(_tag_of(pl.col("text")).str.len_chars())
    return _split_body(pieces, body.str.split(sep), pl.col("text").str.contains(sep, literal=True))


def _cut_bars(pieces: pl.DataFrame) -> pl.DataFrame:
    body = pl.col("text").str.slice(_tag_of(pl.col("text")).str.len_chars())
    return _split_body(pieces, body.str.replace_all(BAR, "$0" + _SEP).str.split(_SEP), body.str.contains(_BAR_AT_START))
