"""Read a byte stream as batches of lines in bounded memory.

Lines are split by pyarrow over a whole batch (no Python object per line); invalid UTF-8 is
replaced, over-long lines are cut, and a stream that ends early (truncated .gz) keeps every
line read so far and reports the error.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import zstandard

BATCH_BYTES = 16 << 20
MAX_LINE = 64 << 10        # characters kept of one line; the rest is counted, not kept


@dataclass
class ReadStats:
    bytes: int = 0
    lines: int = 0
    cut_lines: int = 0          # lines longer than MAX_LINE, kept in part
    error: str | None = None    # the stream ended early: truncated or corrupt


def split_lines(data: bytes, stats: ReadStats) -> pa.Array:
    """The lines of whole lines' bytes (the last may lack its newline), cut at MAX_LINE."""
    text = data.decode("utf-8", errors="replace")
    lines = pc.list_flatten(pc.split_pattern(pa.array([text], pa.large_string()), "\n"))
    if text.endswith("\n"):
        lines = lines.slice(0, len(lines) - 1)
    if len(data) <= MAX_LINE:   # no line can be longer than the batch
        return lines
    long = pc.greater(pc.utf8_length(lines), MAX_LINE)
    cut = pc.sum(long).as_py() or 0
    if cut:
        stats.cut_lines += cut
        lines = pc.utf8_slice_codeunits(lines, 0, MAX_LINE)
    return lines


def _read(stream: BinaryIO, size: int, stats: ReadStats) -> bytes:
    """The next chunk; b"" at the end or where the stream breaks (the error is kept in stats)."""
    try:
        chunk = stream.read(size)
    except (EOFError, OSError, zlib.error, zstandard.ZstdError) as e:
        stats.error = f"truncated or corrupt stream ({type(e).__name__}: {e})"[:200]
        return b""
    stats.bytes += len(chunk)
    return chunk


def iter_batches(stream: BinaryIO, stats: ReadStats, batch_bytes: int = BATCH_BYTES) -> Iterator[tuple[int, pa.Array]]:
    """Yield (number of the batch's first line, lines) until the stream ends or breaks."""
    first = 1
    for data in iter_chunks(stream, stats, batch_bytes):
        lines = split_lines(data, stats)
        stats.lines += len(lines)
        yield first, lines
        first += len(lines)


def iter_chunks(stream: BinaryIO, stats: ReadStats, batch_bytes: int = BATCH_BYTES) -> Iterator[bytes]:
    """Yield whole lines' bytes, about batch_bytes at a time (the last may lack its newline),
    until the stream ends or breaks; a line too long to buffer keeps its head (counted cut)."""
    carry = b""
    skipping = False            # inside a line too long to buffer: drop bytes up to its newline
    while True:
        chunk = _read(stream, batch_bytes, stats)
        at_end = not chunk
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0 and not at_end:
                continue
            chunk, skipping = chunk[nl + 1:] if nl >= 0 else b"", False
        data = carry + chunk
        if at_end:
            carry = b""
        else:
            cut = data.rfind(b"\n")
            if cut < 0:
                if len(data) < batch_bytes:
                    carry = data
                    continue
                # One line longer than a batch: keep its head, skip to its end.
                data, carry, skipping = data[:MAX_LINE] + b"\n", b"", True
                stats.cut_lines += 1
            else:
                data, carry = data[: cut + 1], data[cut + 1:]
        if data:
            yield data
        if at_end:
            return
