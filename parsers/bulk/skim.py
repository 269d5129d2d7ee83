"""The block skim: whole blocks of a batch's bytes that byte counts prove to hold one repeated
kind of line, each of whose keys already has `window` lines after it, are counted and never
decoded or split (see the glossary in __init__.py)."""
from __future__ import annotations

import re
from functools import cache
from typing import NamedTuple

from ..records import maybe_touched_bytes
from ..spec import FormatSpec, registry
from . import probes

SKIM_BLOCK = 64 << 10    # bytes a block of a batch is proven to hold one repeated kind over, at least
MIN_BLOCK = 4 << 10      # ...and at most, where a block is halved (see skim_blocks)
SAMPLE_LINES = 16        # lines a block's new keys are read from (its lines are then counted by key)


class ReadRange(NamedTuple):
    """Bytes of a batch to read: `lines` whole lines from `start` to `end`, the first of them
    line `first_line` of the batch (0-based, counting the lines left out before it)."""
    start: int
    end: int
    first_line: int
    lines: int


class Repeated(NamedTuple):
    """A block proven to hold one repeated kind: its group (lines whose keys count together),
    lines per key, and the probe line that stands for them."""
    group: bytes
    counts: dict[bytes, int]
    probe: str


class Block(NamedTuple):
    start: int
    end: int
    lines: int
    left_out: Repeated | None   # the block's lines, counted only; None: read


def skim_blocks(data: bytes, window: int) -> tuple[list[ReadRange], dict[str, int]]:
    """(the byte ranges to read; per probe line, the lines of the blocks left out). Blocks are
    walked from the batch's end; a block is left out when byte counts prove that all its lines
    are of one repeated kind (_bulk_counts: NCCL COLL lines; _repeat_counts: progress steps) and
    each of their keys already has `window` lines in the blocks kept after it. A run of blocks
    left out still has its last line read: the untimed lines after it may carry its time.
    Anything else is read, so a block of mixed lines costs a few byte counts, never a line. (A
    file where processes interleave, srun -l or a console, has no block of one prefix:
    thin_batch leaves its lines out one by one.)"""
    bounds = _block_bounds(data)
    if len(bounds) < 3:
        return [], {}
    after: dict[tuple[bytes, bytes], int] = {}
    keys_of: dict[bytes, set[bytes]] = {}
    blocks: list[Block] = []  # from the end
    pending = list(zip(bounds, bounds[1:]))
    ascii_batch = data.isascii()
    while pending:
        start, end = pending.pop()
        whole, lines = data.endswith(b"\n", 0, end), data.count(b"\n", start, end)
        counted = (whole and (ascii_batch or data[start:end].isascii())
                   and (_bulk_counts(data, start, end, lines, keys_of) or _repeat_counts(data, start, end, lines)))
        if not counted:
            # The lines that make a block mixed may be few: a start-up line before steps that are
            # left out, a traceback after the last ones (which then count toward the window). Its
            # halves are tried there: at the batch's end and where the block after was left out.
            at_edge = not blocks or blocks[-1].left_out is not None
            if not (at_edge and _halve(data, start, end, pending)):
                blocks.append(Block(start, end, lines + (not whole), None))
            continue
        group, counts = counted.group, counted.counts
        before = [after.get((group, key), 0) for key in counts]
        if blocks and min(before) >= window:
            blocks.append(Block(start, end, lines, counted))
            continue
        if min(before) + lines > window and _halve(data, start, end, pending):
            continue  # the window's edge is inside the block: its earlier half may be left out
        blocks.append(Block(start, end, lines, None))
        keys_of.setdefault(group, set()).update(counts)
        for key, count in counts.items():
            after[group, key] = after.get((group, key), 0) + count
    return _ranges(data, blocks[::-1])


def _halve(data: bytes, start: int, end: int, pending: list) -> bool:
    """Put the block's halves (whole lines) to be walked, the later first; False if too small."""
    if end - start < 2 * MIN_BLOCK:
        return False
    cut = data.find(b"\n", (start + end) // 2, end - 1)
    if cut < 0:
        return False
    pending += [(start, cut + 1), (cut + 1, end)]
    return True


def _ranges(data: bytes, blocks: list[Block]) -> tuple[list[ReadRange], dict[str, int]]:
    """skim_blocks' answer from its blocks in file order: contiguous ranges read as one. The last
    line of a run of left-out blocks of one group is read: the lines after it may carry its time
    (a COLL line takes the time of the progress line before it)."""
    kept: list[ReadRange] = []
    skipped: dict[str, int] = {}
    at = 0
    for (start, end, lines, left_out), following in zip(blocks, blocks[1:] + [None]):
        if left_out is not None:
            ends_run = following.left_out is None or following.left_out.group != left_out.group
            skipped[left_out.probe] = skipped.get(left_out.probe, 0) + lines - ends_run
            at += lines - ends_run
            start, lines = (max(start, data.rfind(b"\n", start, end - 1) + 1), 1) if ends_run else (end, 0)
        if not lines:
            continue
        if kept and kept[-1].end == start:
            kept[-1] = kept[-1]._replace(end=end, lines=kept[-1].lines + lines)
        else:
            kept.append(ReadRange(start, end, at, lines))
        at += lines
    return kept, skipped


def _block_bounds(data: bytes) -> list[int]:
    """Offsets that cut the batch into blocks of whole lines, SKIM_BLOCK bytes or more each."""
    bounds, at = [0], SKIM_BLOCK
    while at < len(data) - SKIM_BLOCK:
        cut = data.find(b"\n", at)
        if cut < 0 or cut + 1 >= len(data):
            break
        bounds.append(cut + 1)
        at = cut + 1 + SKIM_BLOCK
    return bounds + [len(data)]


def _bulk_counts(data: bytes, start: int, end: int, lines: int,
                 keys_of: dict[bytes, set[bytes]]) -> Repeated | None:
    """The block as one repeated kind (its group: the probe line of its prefix, as bytes) when
    every line of the (ASCII) block is a bulk line under the first line's prefix, else None. The
    whole prefix, not only the process characters the window keys by: lines under another prefix
    are never counted with them, which only keeps more."""
    spec = _skim_spec()
    after, literal = spec.bulk["after"].encode(), spec.literal.encode()
    at = data.find(after, start, data.find(b"\n", start, end))
    if at < 0:
        return None
    prefix = data[start:at]
    starts = data.count(b"\n" + prefix + after, max(start - 1, 0), end) + (start == 0)
    if starts != lines or data.count(literal, start, end) != lines:
        return None
    # the key once a line: the window reads a line's key at its first `window_after`, the counts
    # below find it anywhere (a corrupted line holding a second one is another key there)
    if data.count(spec.bulk["window_after"].encode(), start, end) != lines:
        return None
    # no line that may hold several records (parsers/records.py): a tag glued into a COLL line
    # would hide another process's record in the block
    if maybe_touched_bytes(data, start, end, lines, prefix):
        return None
    probe = prefix + after + probes.PROBE_MESSAGE.encode()
    counts = _key_counts(data, start, end, keys_of.get(probe, set()))
    if sum(counts.values()) != lines:  # a key not seen after this block: read the block's own
        counts = _key_counts(data, start, end, set(counts) | _sample_keys(data, start, end, spec))
    return Repeated(probe, counts, probe.decode()) if sum(counts.values()) == lines else None


def _key_counts(data: bytes, start: int, end: int, keys: set[bytes]) -> dict[bytes, int]:
    counts = {key: data.count(key, start, end) for key in keys}
    return {key: count for key, count in counts.items() if count}


@cache
def _skim_spec() -> FormatSpec:
    """The bulk spec blocks are proven to hold (spec.load allows one; a second would need its own counts)."""
    (spec,) = probes.bulk_specs()
    return spec


def _repeat_counts(data: bytes, start: int, end: int, lines: int) -> Repeated | None:
    """The block as one repeated kind (the key is its group and its only key, the first line its
    probe) when every line of the block holds the key and a digit after it: the key is the first
    line's text from its first letter (after the time of a logger's header) to a `skim` word of a
    repeating message (`step `), e.g. `INFO [rank 3] step ` (it names the rank; a line of another
    level or rank is another key)."""
    line = data[start:data.find(b"\n", start, end)]
    hits = [(at, word) for at, word in ((line.find(word), word) for word in _skim_words()) if at >= 0]
    letter = _LETTER.search(line)
    if not hits or letter is None:
        return None
    at, word = min(hits)
    key = line[letter.start():at + len(word)]
    if letter.start() > at:
        return None
    if sum(data.count(key + digit, start, end) for digit in _DIGITS) != lines:
        return None
    return Repeated(key, {key: lines}, line.decode("utf-8", "replace"))


_LETTER = re.compile(rb"[A-Za-z]")
_DIGITS = [bytes([d]) for d in b"0123456789"]


@cache
def _skim_words() -> tuple[bytes, ...]:
    return tuple(word.encode() for spec in registry() for word in spec.skim)


def _sample_keys(data: bytes, start: int, end: int, spec: FormatSpec) -> set[bytes]:
    """The window keys (`window_after` and the characters after it) of the block's first lines
    and its last line; a key that runs past its line is not one."""
    marker, size = spec.bulk["window_after"].encode(), spec.bulk["window_chars"]
    found, at = [], start
    for _ in range(SAMPLE_LINES):
        hit = data.find(marker, at, end)
        if hit < 0:
            break
        found.append(hit)
        at = data.find(b"\n", hit, end) + 1
        if at <= 0:
            break
    last = data.rfind(marker, start, end)
    found += [] if last < 0 else [last]
    keys = (data[hit:hit + len(marker) + size] for hit in found)
    return {key for key in keys if b"\n" not in key}
