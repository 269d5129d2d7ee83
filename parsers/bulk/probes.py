"""What the bulk lane, the window and the block skim share: the bulk spec, a line's prefix, and
probe lines (see the glossary in __init__.py)."""
from __future__ import annotations

from functools import cache

import polars as pl

from ..spec import FormatSpec, registry

PREFIX = "_prefix"    # column: a line's prefix, the text before the spec's `bulk.after`
PROBE_MESSAGE = "-"   # a probe line's message (the engine reads its prefix only; see probe_text)


@cache
def bulk_specs() -> tuple[FormatSpec, ...]:
    return tuple(s for s in registry() if s.bulk)


def ascii_only(text: pl.Expr) -> pl.Expr:
    """Lines the lane and the window read by position: polars finds substrings at byte offsets
    and slices at character offsets, which agree only there (other lines go the general way)."""
    return text.str.len_bytes() == text.str.len_chars()


def probes(rows: pl.DataFrame, spec: FormatSpec) -> pl.DataFrame:
    """One engine line per distinct (file, prefix), standing for the lines that have it."""
    return rows.group_by("file", PREFIX, maintain_order=True).agg(
        pl.col("hint_host", "hint_rank", "hint_local_rank", "year", "ref_mmdd").first(),
        _lines=pl.col("_lines").sum().cast(pl.Int64),
    ).with_columns(text=probe_text(spec), line=pl.lit(0, pl.Int64))


def probe_text(spec: FormatSpec) -> pl.Expr:
    """A probe line: the prefix and the split, and no message (the engine reads its prefix only)."""
    return pl.col(PREFIX) + spec.bulk["after"] + PROBE_MESSAGE
