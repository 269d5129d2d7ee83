"""Rank lists as compact ranges: [0,1,2,3,5] -> "0-3,5"."""
from __future__ import annotations

from collections.abc import Iterable


def compress(ranks: Iterable[int], limit: int | None = None) -> str:
    """Sorted, de-duplicated ranks as comma-separated ranges ("0-6,8-511"); "" when empty.
    With `limit`, ranges past that many characters become "… +N more" (N ranks)."""
    ordered = sorted({int(rank) for rank in ranks})
    parts = _spans(ordered)
    text = ",".join(parts)
    if limit is None or len(text) <= limit:
        return text
    kept, shown = [], 0
    for part in parts:
        if kept and len(",".join(kept + [part])) > limit:
            break
        kept.append(part)
        first, _, last = part.partition("-")
        shown += int(last or first) - int(first) + 1
    hidden = len(ordered) - shown
    return f"{','.join(kept)} … +{hidden} more" if hidden else ",".join(kept)


def _spans(ordered: list[int]) -> list[str]:
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
    return parts


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"

