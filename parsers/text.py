"""Log text made safe to show: what every parser does to a line's text before it is stored."""
from __future__ import annotations

import polars as pl

# ANSI CSI / OSC / two-byte escapes, then every other C0 control (tab kept) and DEL, C1 controls.
CONTROL = (
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?"
    r"|[\x00-\x08\x0a-\x1f\x7f\x{80}-\x{9f}]"
)


def clean(text: pl.Expr) -> pl.Expr:
    """Drop terminal escapes and control characters: log text must not drive a terminal."""
    return text.str.replace_all(CONTROL, "")
