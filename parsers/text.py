"""Log text made safe to show: what every parser does to a line's text before it is stored."""
from __future__ import annotations

import polars as pl

# ANSI CSI / OSC / two-byte escapes, then every other C0 control (tab kept) and DEL, C1 controls;
# and a colour code whose ESC a paste into a web form dropped (`[36m(RayWorker pid=2291)[0m`):
# the SGR codes of colours and weights only, so that a `[5m]` of a log's own text stays.
CONTROL = (
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?"
    r"|[\x00-\x08\x0a-\x1f\x7f\x{80}-\x{9f}]"
    r"|\[(?:0|1|2|22|3[0-9]|4[0-9]|9[0-7])(?:;[0-9]{1,3})*m"
)


def clean(text: pl.Expr) -> pl.Expr:
    """Drop terminal escapes and control characters: log text must not drive a terminal."""
    return text.str.replace_all(CONTROL, "")
