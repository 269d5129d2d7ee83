"""Rank lists as compact ranges: [0,1,2,3,5] -> "0-3,5"."""
from __future__ import annotations

from collections.abc import Iterable


def compress(ranks: Iterable[int]) -> str:
    """Sorted, de-duplicated ranks as comma-separated ranges ("0-6,8-511"); "" when empty."""
    ordered = sorted({int(rank) for rank in ranks})
    parts: list[str] = []
    start = previous = None
    for rank in ordered:
        if previous is not None and rank == previous + 1:
            previous = rank
            continue
        if start is not None:
            parts.append(_span(start, previous))
        start = previous = rank
    if start is not None:
        parts.append(_span(start, previous))
    return ",".join(parts)


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"

