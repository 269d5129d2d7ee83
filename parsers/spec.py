"""What a format spec is, and the registry of all of them.

A format is data (like lnav's format files): one TOML file per source under `parsers/formats/`,
each with `[[format]]` entries that declare a pattern, typed fields, where the rows go and the
format's own sample lines with the values they must yield (checked by tests/test_formats.py).

Layers, applied in this order to every line:
  wrapper  launcher/collector prefixes that wrap any other line (`[default3]:`, `12: `, CRI time)
  header   the logger's prefix (NCCL `host:pid:tid [dev]`, c10 `[rank0]:[E1129 ...]`, SLURM `[ts]`)
  message  what the message says (a collective, a watchdog timeout, an exit); the first match wins

Every spec has a `regex` that decides whether a line is of the format. Its fields come from the
regex's named groups, or, for hot fixed layouts, by position (`split` + `positions`): tokenising
is several times faster than a regex with many groups.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

from . import toml_files

FORMATS_DIR = Path(__file__).parent / "formats"
LAYERS = ("wrapper", "header", "message")
TYPES = ("str", "int", "hex", "upper", "float")

# Columns a wrapper or header may set on a line (message fields go to their table instead).
LINE_COLUMNS = (
    "wrap_ts", "stream", "partial", "pod", "container", "tee_role", "tee_local_rank", "task", "mpi_rank", "pdsh_host",
    "ts_raw", "level", "host", "pid", "tid", "dev", "grank", "src", "jobstep", "msg",
)


@dataclass(frozen=True)
class Sample:
    line: str
    fields: dict
    kind: str | None = None


# A named group, `(?P<name>` or `(?<name>` not preceded by a backslash: the fields a spec's regex
# captures, read without compiling it (Python's re.compile of every spec was a tenth of a paste's
# time; the matching itself is polars'). tests/test_formats.py checks it against re's groupindex.
GROUP_NAME = re.compile(r"(?<!\\)\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>")


@dataclass(frozen=True)
class FormatSpec:
    name: str                       # also the event kind of lines it recognises
    layer: str
    source: str
    file: str                       # the TOML file that declares it
    regex: str
    literal: str | None = None      # cheap substring that every matching line contains
    # or cheap substrings one of which every matching line contains (a regex of alternatives):
    # a batch without any of them never compiles the regex (tens of regexes a paste: ~60 ms)
    literals: tuple = ()
    exclude: str | None = None      # lines matching this are not of the format (no look-around in polars regex)
    split: str | None = None        # tokenise the line on this separator and pick `positions`
    positions: dict = field(default_factory=dict)
    strip: dict = field(default_factory=dict)   # field -> characters stripped from both ends
    types: dict = field(default_factory=dict)
    const: dict = field(default_factory=dict)   # constant columns of the rows this spec emits
    table: str | None = None        # table that receives one row per matched line
    # captured fields no column of `table` receives (their value stays in the line's text): named,
    # so that a field that lands nowhere is a decision, not a typo (tests/test_formats.py)
    dropped: tuple = ()
    headers: tuple = ()             # message specs: only lines under these header specs
    ts_format: str | None = None    # header/wrapper specs: how to read `ts_raw` / `wrap_ts`
    maps: dict = field(default_factory=dict)    # field -> {raw value: value}, e.g. severity letters
    # field -> {field, factor[, thousands]}: a value read in another unit or spelling goes to
    # `field` (where that is not set already), times `factor` (`data_ms` -> `data_s`, 0.001)
    into: dict = field(default_factory=dict)
    min_share: float = 0.0          # wrappers: apply only if this share of a batch matches
    counts_lines: bool = False      # min_share wrappers: a line-number gutter (parsers/engine.py: _numbered_lines)
    midline: str | None = None      # wrappers: the tag as it recurs inside a line (parsers/records.py)
    in_files_with: str | None = None  # messages: only in files with a line containing this text
    priority: int = 100             # lower is tried first; ties keep file order
    bulk: dict = field(default_factory=dict)    # messages: the bulk lane (parsers/bulk/), see _check
    skim: tuple = ()                # messages: words a number follows in a repeated line (parsers/bulk/skim.py)
    samples: tuple = ()

    @property
    def prefilter(self) -> tuple[str, ...]:
        """The substrings one of which every line of the format holds (none: no prefilter)."""
        return (self.literal,) if self.literal else self.literals

    @cached_property
    def fields(self) -> tuple[str, ...]:
        if self.split is not None:
            return tuple(self.positions)
        return tuple(dict.fromkeys(GROUP_NAME.findall(self.regex)))


def _spec(entry: dict, source: str, file: str) -> FormatSpec:
    samples = tuple(Sample(s["line"], s.get("fields", {}), s.get("kind")) for s in entry.pop("sample", []))
    entry.setdefault("source", source)
    entry["headers"] = tuple(entry.get("headers", ()))
    entry["skim"] = tuple(entry.get("skim", ()))
    entry["dropped"] = tuple(entry.get("dropped", ()))
    entry["literals"] = tuple(entry.get("literals", ()))
    spec = FormatSpec(file=file, samples=samples, **entry)
    _check(spec)
    return spec


def _check(spec: FormatSpec) -> None:
    where = f"{spec.file}: format {spec.name!r}"
    if spec.layer not in LAYERS:
        raise ValueError(f"{where}: layer must be one of {LAYERS}")
    if (spec.split is None) != (not spec.positions):
        raise ValueError(f"{where}: `split` and `positions` go together")
    if spec.layer != "message" and not set(spec.fields) <= set(LINE_COLUMNS):
        raise ValueError(f"{where}: unknown line columns {set(spec.fields) - set(LINE_COLUMNS)}")
    if spec.layer != "message" and "msg" not in spec.fields:
        raise ValueError(f"{where}: a {spec.layer} must capture the rest of the line as `msg`")
    bad_types = {t for t in spec.types.values() if t not in TYPES}
    if bad_types:
        raise ValueError(f"{where}: unknown types {bad_types}")
    if spec.min_share and spec.layer != "wrapper":
        raise ValueError(f"{where}: only a wrapper has a min_share")
    if spec.counts_lines and not spec.min_share:
        raise ValueError(f"{where}: a line-number gutter is decided per file: it needs a min_share")
    if any(not isinstance(v, dict) or "field" not in v or "factor" not in v for v in spec.into.values()):
        raise ValueError(f"{where}: `into` maps a field to {{field = ..., factor = ...}}")
    if spec.midline and spec.layer != "wrapper":
        raise ValueError(f"{where}: only a wrapper has a midline tag")
    if spec.bulk and not (spec.split is not None and spec.literal and spec.headers
                          and {"after", "keep_last_by", "window_after", "window_chars", "process_chars"} <= set(spec.bulk)):
        raise ValueError(f"{where}: `bulk` needs split, literal, headers and "
                         "bulk.after/keep_last_by/window_after/window_chars/process_chars")
    if spec.skim and not (spec.layer == "message" and spec.table):
        raise ValueError(f"{where}: only a message with a table has `skim` words")
    if not set(spec.dropped) <= set(spec.fields):
        raise ValueError(f"{where}: `dropped` names fields it does not capture: {set(spec.dropped) - set(spec.fields)}")
    if not spec.samples:
        raise ValueError(f"{where}: a format declares at least one sample line")
    if spec.literal and spec.literals:
        raise ValueError(f"{where}: `literal` or `literals`, not both")
    if missing := [s.line for s in spec.samples if spec.literals and not any(x in s.line for x in spec.literals)]:
        raise ValueError(f"{where}: a sample holds none of its `literals`: {missing[0]!r}")


@cache
def registry() -> tuple[FormatSpec, ...]:
    """All specs of parsers/formats/, by layer, then priority, then file order."""
    return load(FORMATS_DIR)


def load(folder: Path) -> tuple[FormatSpec, ...]:
    """The specs of every TOML file of `folder` (read in name order), checked together."""
    specs = []
    for path in sorted(folder.glob("*.toml")):
        doc = toml_files.load(path)
        source = doc.get("source", path.stem)
        specs.extend(_spec(dict(e), source, path.name) for e in doc.get("format", []))
    names = [s.name for s in specs]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"duplicate format names: {sorted(dupes)}")
    # The bulk lane and the block skim read one format's layout (parsers/bulk/)
    bulk = [f"{s.file}: {s.name}" for s in specs if s.bulk]
    if len(bulk) > 1:
        raise ValueError(f"only one format may have `bulk`, not {', '.join(bulk)}")
    order = {s.name: i for i, s in enumerate(specs)}
    return tuple(sorted(specs, key=lambda s: (LAYERS.index(s.layer), s.priority, order[s.name])))


def by_layer(layer: str) -> tuple[FormatSpec, ...]:
    return tuple(s for s in registry() if s.layer == layer)


def by_name(name: str) -> FormatSpec:
    return next(s for s in registry() if s.name == name)
