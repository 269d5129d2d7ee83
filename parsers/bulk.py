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

With a window (the default of `correlator analyze`), lines that repeat are typed only for the
last `window` of their key; the others are counted (`lines_skimmed`), never typed. A hang shows
where each rank stopped, and that is at the end of its stream.
  NCCL COLL lines, keyed by process and communicator: the last line per communicator is always
  typed, so every rank's last seq is exact, and a disagreement between ranks is looked for over
  the last `window` collectives of each. thin_batch leaves the others out as a batch is read,
  the pass's own window (_window) those of many batches of a file.
  Progress steps (a `skim` word and a number, e.g. `INFO [rank 3] step 12`), keyed by the line's
  text up to the number: at least the last `window` are typed.
Before that, skim_blocks proves by byte counts that whole blocks of a batch hold one repeated kind,
and leaves them out without decoding or splitting them (reading 1 GB of COLL lines then costs a
few byte scans, not 5M typed lines). A kept untimed line takes the time of the last timed line
kept before it in its stream (COLL lines are all timed or all untimed in a stream NCCL writes,
and the last line of a run of left-out blocks is read, so only a hostile mix sees an older time).
A per-file wrapper decision (srun's label on 30% of the lines) still weighs the lines left out:
their distinct prefixes go to it, each standing for its lines.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import polars as pl
import pyarrow as pa

from .engine import FRAME_COLUMNS, _values, parse_frame, share_decisions
from .multiline import stream_key
from .records import maybe_touched, maybe_touched_bytes, touched
from .reader import ReadStats, split_lines
from .spec import FormatSpec, registry
from .text import clean

_CANDIDATE, _AT, _PREFIX, _TOKENS = "_candidate", "_at", "_prefix", "_tokens"
_PROBE_MESSAGE = "-"  # a probe line's message (the engine reads its head only; see _probe_text)
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
    candidate = frame["text"].str.contains(spec.literal, literal=True)
    if candidate.any():  # a line that holds several records (parsers/records.py) is cut by the engine first
        where = candidate.arg_true()
        cut = touched(frame["text"].gather(where))
        if cut.any():
            candidate = candidate.scatter(where.filter(cut), False)
    frame = frame.with_columns(candidate.alias(_CANDIDATE))
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
    candidates, outside = _with_outside(candidates, spec, window, "file")
    if not outside.any():
        return candidates, None
    return candidates.filter(~outside), candidates.filter(outside)


def _prefix_of(spec: FormatSpec) -> pl.Expr:
    """A raw line's head before the spec's split (uncleaned: a per-file decision's weight only)."""
    return pl.col("text").str.slice(0, pl.col("text").str.find(spec.bulk["after"], literal=True))


def _with_outside(frame: pl.DataFrame, spec: FormatSpec, window: int, *by: str) -> tuple[pl.DataFrame, pl.Series]:
    """(the frame with each raw line's head in `_PREFIX`, which of its lines are outside the
    window): the head is read once, for the window's process and the weight of those left out."""
    frame = frame.with_columns(_prefix_of(spec).alias(_PREFIX))
    return frame, frame.select(_outside_window(spec, window, *by)).to_series()


def _outside_window(spec: FormatSpec, window: int, *by: str) -> pl.Expr:
    """The spec's lines that are not among the last `window` of their process and key (and `by`),
    of a frame with each raw line's head in `_PREFIX` (see _prefix_of).
    The process is told by the characters just before the split (NCCL's `host:pid:tid [dev]`,
    not a collector's per-line timestamp further left): it keeps processes apart that share a
    file (srun -l) and a comm pointer value. Both are read from the raw line by cheap kernels
    (find, slice): the lines outside the window are never cleaned, split or matched. A line
    without the key, or not ASCII (see _ascii), is never outside."""
    text, after = pl.col("text"), spec.bulk["window_after"]
    # a line that may hold several records (parsers/records.py) is never left out unread
    key = pl.when(text.str.contains(spec.literal, literal=True) & _ascii(text) & ~maybe_touched(text)).then(
        text.str.slice(text.str.find(after, literal=True) + len(after), spec.bulk["window_chars"]))
    process = pl.col(_PREFIX).str.slice(-spec.bulk["process_chars"])
    from_end = pl.col("line").rank("ordinal", descending=True).over(*by, process, key)
    return key.is_not_null() & (from_end > window)


def _ascii(text: pl.Expr) -> pl.Expr:
    """Lines the lane and the window read by position: polars finds substrings at byte offsets
    and slices at character offsets, which agree only there (other lines go the general way)."""
    return text.str.len_bytes() == text.str.len_chars()


def thin_batch(lines: pa.Array, first: int | pl.Series, window: int
               ) -> tuple[pa.Array, int | pl.Series, int, pl.DataFrame | None]:
    """A batch of one file as it is read, without the bulk lines that cannot be among the last
    `window` of their key (as many of the same key follow in this batch): (lines, their numbers,
    how many were left out, the distinct prefixes of those with how many lines each stands for,
    as `text` and `_lines` of probe lines, see _probes). The engine's passes are then sized by the
    lines kept, not read."""
    if len(lines) <= 2 * window:  # little to leave out (what skim_blocks kept, most files of a many-rank
        return lines, first, 0, None  # job): the pass's own window does it, without this fixed cost
    numbers = (first if isinstance(first, pl.Series)
               else pl.int_range(first, first + len(lines), dtype=pl.Int64, eager=True))
    frame = pl.DataFrame({"text": pl.Series("text", lines, dtype=pl.String), "line": numbers})
    outside = [(spec, *_with_outside(frame, spec, window)) for spec in bulk_specs()]
    left_out = [headed.select(pl.col(_PREFIX).filter(out)).group_by(_PREFIX).len("_lines")
                .select(text=_probe_text(spec), _lines=pl.col("_lines").cast(pl.Int64))
                for spec, headed, out in outside if out.any()]
    if not left_out:
        return lines, first, 0, None
    kept = frame.filter(~pl.any_horizontal(out for _, _, out in outside))
    return kept["text"].to_arrow(), kept["line"], len(lines) - kept.height, pl.concat(left_out)


SKIM_BLOCK = 64 << 10    # bytes a block of a batch is proven to hold one repeated kind over, at least
MIN_BLOCK = 4 << 10      # ...and at most, where a block is halved (see skim_blocks)
SAMPLE_LINES = 16        # lines a block's new keys are read from (its lines are then counted by key)


@dataclass
class WindowBatch:
    lines: pa.Array
    numbers: int | pl.Series        # the first line's number, or every line's
    read: int                       # lines read, kept or not
    skimmed: int                    # lines left out, counted only
    left_out: pl.DataFrame | None   # their prefixes as probe lines (`text`, `_lines`), see take_bulk


def window_batch(data: bytes, first: int, window: int, stats: ReadStats) -> WindowBatch:
    """A batch of one file as it is read with a window: blocks of its bytes that byte counts
    prove to hold only repeated lines, each of whose key has `window` lines after it in the batch,
    are counted and never decoded or split (skim_blocks); of the rest, thin_batch leaves out
    the bulk lines outside the window. Of COLL lines, those kept are those thin_batch alone keeps."""
    kept, skipped = skim_blocks(data, window)
    if not skipped:
        lines, numbers = split_lines(data, stats), first
        read = len(lines)
    else:
        lines = split_lines(b"".join(data[start:end] for start, end, _, _ in kept), stats)
        numbers = pl.concat([pl.int_range(first + at, first + at + count, dtype=pl.Int64, eager=True)
                             for _, _, at, count in kept])
        read = kept[-1][2] + kept[-1][3]
    lines, numbers, dropped, left_out = thin_batch(lines, numbers, window)
    if skipped:
        probes = pl.DataFrame({"text": list(skipped), "_lines": list(skipped.values())},
                              schema={"text": pl.String, "_lines": pl.Int64})
        left_out = probes if left_out is None else pl.concat([probes, left_out])
    return WindowBatch(lines, numbers, read, dropped + sum(skipped.values()), left_out)


def skim_blocks(data: bytes, window: int) -> tuple[list[tuple[int, int, int, int]], dict[str, int]]:
    """(the byte ranges to read: start, end, their first line's offset, their lines; per probe
    line, the lines of the blocks left out). Blocks are walked from the batch's end; a block is
    left out when byte counts prove that all its lines are of one repeated kind (_bulk_counts:
    NCCL COLL lines; _repeat_counts: progress steps) and each of their keys already has `window`
    lines in the blocks kept after it. A run of blocks left out still has its last line read: the
    untimed lines after it may carry its time. Anything else is read, so a block of mixed lines
    costs a few byte counts, never a line. (A file where processes interleave, srun -l or a
    console, has no block of one head: thin_batch leaves its lines out one by one.)"""
    bounds = _block_bounds(data)
    if len(bounds) < 3:
        return [], {}
    after: dict[tuple[bytes, bytes], int] = {}
    keys_of: dict[bytes, set[bytes]] = {}
    blocks = []  # (start, end, lines, (probe line, group) when left out), from the end
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
            at_edge = not blocks or blocks[-1][3] is not None
            if not (at_edge and _halve(data, start, end, pending)):
                blocks.append((start, end, lines + (not whole), None))
            continue
        group, counts, probe = counted
        before = [after.get((group, key), 0) for key in counts]
        if blocks and min(before) >= window:
            blocks.append((start, end, lines, (probe, group)))
            continue
        if min(before) + lines > window and _halve(data, start, end, pending):
            continue  # the window's edge is inside the block: its earlier half may be left out
        blocks.append((start, end, lines, None))
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


def _ranges(data: bytes, blocks: list[tuple]) -> tuple[list[tuple[int, int, int, int]], dict[str, int]]:
    """skim_blocks' answer from its blocks in file order: contiguous ranges read as one. The last
    line of a run of left-out blocks of one group is read: the lines after it may carry its time
    (a COLL line takes the time of the progress line before it)."""
    kept, skipped, at = [], {}, 0
    for (start, end, lines, left_out), following in zip(blocks, blocks[1:] + [None]):
        if left_out is not None:
            probe, group = left_out
            ends_run = following[3] is None or following[3][1] != group
            skipped[probe] = skipped.get(probe, 0) + lines - ends_run
            at += lines - ends_run
            start, lines = (max(start, data.rfind(b"\n", start, end - 1) + 1), 1) if ends_run else (end, 0)
        if not lines:
            continue
        if kept and kept[-1][1] == start:
            kept[-1] = (kept[-1][0], end, kept[-1][2], kept[-1][3] + lines)
        else:
            kept.append((start, end, at, lines))
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
                 keys_of: dict[bytes, set[bytes]]) -> tuple[bytes, dict[bytes, int], str] | None:
    """(the probe line of the head as bytes, lines per key, the probe line) when every line of the
    (ASCII) block is a bulk line under the first line's head, else None. The head is the whole
    prefix, not only the process characters the window keys by: lines under another head are
    never counted with them, which only keeps more."""
    spec = _skim_spec()
    after, literal = spec.bulk["after"].encode(), spec.literal.encode()
    at = data.find(after, start, data.find(b"\n", start, end))
    if at < 0:
        return None
    head = data[start:at]
    starts = data.count(b"\n" + head + after, max(start - 1, 0), end) + (start == 0)
    if starts != lines or data.count(literal, start, end) != lines:
        return None
    # the key once a line: the window reads a line's key at its first `window_after`, the counts
    # below find it anywhere (a corrupted line holding a second one is another key there)
    if data.count(spec.bulk["window_after"].encode(), start, end) != lines:
        return None
    # no line that may hold several records (parsers/records.py): a tag glued into a COLL line
    # would hide another process's record in the block
    if maybe_touched_bytes(data, start, end, lines, head):
        return None
    probe = head + after + _PROBE_MESSAGE.encode()
    counts = _key_counts(data, start, end, keys_of.get(probe, set()))
    if sum(counts.values()) != lines:  # a key not seen after this block: read the block's own
        counts = _key_counts(data, start, end, set(counts) | _sample_keys(data, start, end, spec))
    return (probe, counts, probe.decode()) if sum(counts.values()) == lines else None


def _key_counts(data: bytes, start: int, end: int, keys: set[bytes]) -> dict[bytes, int]:
    counts = {key: data.count(key, start, end) for key in keys}
    return {key: count for key, count in counts.items() if count}


@cache
def _skim_spec() -> FormatSpec:
    """The bulk spec blocks are proven to hold (there is one; a second would need its own counts)."""
    (spec,) = bulk_specs()
    return spec


def _repeat_counts(data: bytes, start: int, end: int, lines: int) -> tuple[bytes, dict[bytes, int], str] | None:
    """(the key, {key: lines}, the first line as probe) when every line of the block holds the
    key and a digit after it: the key is the first line's text from its first letter (after
    the time of a logger's header) to a `skim` word of a repeating message (`step `), e.g.
    `INFO [rank 3] step ` (it names the rank; a line of another level or rank is another key)."""
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
    return key, {key: lines}, line.decode("utf-8", "replace")


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


def _fields(candidates: pl.DataFrame, spec: FormatSpec) -> pl.DataFrame:
    """The spec's typed fields by position, where the tail after the split matches the spec's
    own regex (as the engine decides)."""
    after = len(spec.bulk["after"])
    tail = pl.col("text").str.slice(pl.col(_AT) + after)
    with_tokens = candidates.with_columns(
        pl.col("text").str.slice(0, pl.col(_AT)).alias(_PREFIX),
        tail.str.split(spec.split).alias(_TOKENS),
        (tail.str.contains(spec.regex) & _ascii(pl.col("text"))).fill_null(False).alias("_ok"),
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
    return pl.col(_PREFIX) + spec.bulk["after"] + _PROBE_MESSAGE


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
