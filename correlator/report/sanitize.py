"""Log text is untrusted: make it inert before any renderer sees it.

Escape sequences (CSI, OSC, DCS, ...) are removed whole so that their payload (a window title, a
hyperlink target) does not leak as visible garbage; remaining C0/C1 controls, DEL and the Unicode
bidirectional overrides (which can reorder what a reader sees) are dropped. Each renderer then
applies its own escaping (rich Text without markup, HTML entities, Markdown backslashes).
"""
from __future__ import annotations

import re

_ESCAPE_SEQUENCE = re.compile(
    r"""
    (?:\x1b\[|\x9b) [0-?]* [ -/]* [@-~]                     # CSI ... final byte
  | (?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]) .*? (?:\x07|\x1b\\|\x9c|(?=\n)|$)  # OSC/DCS/SOS/PM/APC ... terminator
  | \x1b [ -/]* [0-~]                                       # other two-byte escapes (ESC c, ESC (B, ...)
    """,
    re.VERBOSE,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_WHITESPACE_RUN = re.compile(r"[\t\n]+")


def clean(value: object) -> str:
    """The value as text with escape sequences and control characters removed (newlines and tabs kept)."""
    if value is None:
        return ""
    text = str(value)
    text = _ESCAPE_SEQUENCE.sub("", text)
    return _CONTROL.sub("", text)


def clean_line(value: object, limit: int | None = None) -> str:
    """Like clean(), folded onto one line (for table cells) and cut to `limit` characters."""
    text = _WHITESPACE_RUN.sub(" ", clean(value)).strip()
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
