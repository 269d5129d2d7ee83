"""Wall-clock renderings. Times are float epoch seconds of the host's own (possibly skewed) clock;
hosts keep local time = UTC, so every source below writes the same instant the same way."""
from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache


@lru_cache(maxsize=65536)
def _utc(second: int) -> datetime:
    return datetime.fromtimestamp(second, timezone.utc)


@lru_cache(maxsize=65536)
def _second_text(second: int, fmt: str) -> str:
    return _utc(second).strftime(fmt)


def _split(t: float) -> tuple[datetime, float]:
    second = int(t // 1)
    return _utc(second), t - second


def pylog(t: float) -> str:
    """Python logging asctime: `2026-11-29 21:09:01,857`."""
    second = int(t // 1)
    return f"{_second_text(second, '%Y-%m-%d %H:%M:%S')},{min(int((t - second) * 1000), 999):03d}"


def c10(t: float, severity: str, mono_ns: int) -> str:
    """c10 MessageLogger stamp: month not zero-padded, 9 digits of CLOCK_MONOTONIC ns, not wall time."""
    d, _ = _split(t)
    return f"{severity}{d.month * 100 + d.day} {d:%H:%M:%S}.{mono_ns % 1_000_000_000:09d}"


def elastic(t: float, severity: str) -> str:
    """torch._logging prefix time (torchelastic >= 2.3): `W1129 21:09:01.366000`."""
    d, frac = _split(t)
    return f"{severity}{d:%m%d %H:%M:%S}.{min(int(frac * 1000), 999) * 1000:06d}"


def seconds(t: float, sep: str = " ") -> str:
    """`%F %T` at 1 s (NCCL WARN timestamps, ChildFailedError `time` with sep='_', slurm with 'T')."""
    return _utc(int(t // 1)).strftime(f"%Y-%m-%d{sep}%H:%M:%S")


def rfc3339_nano(t: float) -> str:
    """kubelet RFC3339NanoFixed in UTC: `2026-11-29T21:09:01.123456789Z`."""
    second = int(t // 1)
    return f"{_second_text(second, '%Y-%m-%dT%H:%M:%S')}.{min(int((t - second) * 1e9), 999_999_999):09d}Z"


def parse_start(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()
