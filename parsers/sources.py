"""What a parser reads: a `Source` (a file or archive member, opened afresh as decompressed
bytes) and the first look at it (`read_head`, `sniff`: is it text at all?). Finding the sources of
a job is correlator.discover's; reading them is here, below every parser."""
from __future__ import annotations

import tarfile
from dataclasses import dataclass, field
from typing import BinaryIO, Callable

import zstandard

SNIFF_BYTES = 8192
# A log may contain a few NUL or control bytes; a file where they are common is not a log.
BINARY_SHARE = 0.30
# Random or compressed bytes have ~10% control bytes and ~45% invalid UTF-8; a log in a legacy
# encoding (Latin-1, GBK) has as much invalid UTF-8 but next to no control bytes, so it stays text.
NOISE_CONTROL_SHARE = 0.05
NOISE_INVALID_SHARE = 0.25
_TEXT_BYTES = bytes(range(32, 256)) + b"\t\n\r\f\x1b"


@dataclass
class Source:
    path: str                           # relative to the job directory, `!` into archives
    open: Callable[[], BinaryIO]        # a fresh decompressed byte stream
    size: int | None = None
    mtime: float | None = None
    hints: dict = field(default_factory=dict)   # host / rank / local_rank from the path


def sniff(head: bytes) -> str | None:
    """Why `head` is not a log ('binary'), or None when it looks like text."""
    if not head:
        return None
    if head[:1] == b"\x80" and len(head) > 1 and head[1] <= 5:
        return "pickle"
    controls = len(head.translate(None, _TEXT_BYTES)) / len(head)
    invalid = (len(head) - len(head.decode("utf-8", "ignore").encode())) / len(head)
    if controls > BINARY_SHARE or (controls > NOISE_CONTROL_SHARE and invalid > NOISE_INVALID_SHARE):
        return "binary"
    return None


def read_head(src: Source) -> tuple[bytes, str | None]:
    """The first bytes of a source and an error if it cannot be read."""
    try:
        with src.open() as f:
            return f.read(SNIFF_BYTES), None
    except (OSError, EOFError, zstandard.ZstdError, tarfile.TarError) as e:
        return b"", f"unreadable: {type(e).__name__}"
