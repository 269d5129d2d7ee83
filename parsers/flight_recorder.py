"""PyTorch Flight Recorder dumps (`TORCH_FR_BUFFER_SIZE`): pickle (default) or JSON.

A dump holds, per rank, the last N collectives it issued: one `collectives` row per entry
(counter `fr_seq` = collective_seq_id, the 1-based per-PG SeqNum that the watchdog prints as
`SeqNum=`; p2p entries: counter `fr_p2p_seq`), one `events` row per entry (line = entry index + 1,
so findings cite `file:N`), and `pg_status` rows from the dump's last enqueued / completed SeqNum.

`pg` is the entry's `pg_id`: the process group's local id, the `i` of PyTorch's `[PG ID i PG GUID g …]`
log prefix (the FR `process_group` tuple holds the GUID `g` and the description).

The dump as it is also goes to `fr_dumps`, `fr_groups` (pg_config: each group's global ranks) and
`fr_entries` (every entry, with its op, peers, shapes and state), which queries/fr_*.sql match
across ranks with Flight Recorder's own semantics; a `processes` row carries the world size that
the default group's pg_config states, so a rank that left no dump is still a rank of the job.

Dumps are untrusted: the pickle is read by an unpickler that resolves no global at all, so only
dicts, lists, tuples, strings, numbers, booleans and None can come out of it, and nothing runs.
"""
from __future__ import annotations

import io
import json
import pickle
import re
from datetime import datetime, timezone

import pyarrow as pa

from correlator.tables import SCHEMAS

from .results import FileResult, WholeFileParser
from .sources import sniff

SOURCE = "flight_recorder"
_NAME = re.compile(r"(?:^|[_.-])(?:fr|nccl_trace)(?:[_.-]|$)|trace_rank_", re.I)
_JSON_KEYS = (b'"entries"', b'"pg_config"', b'"version"', b'"collective_seq_id"', b'"profiling_name"')
_RANK_AT_END = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle))?$")
# `host-a_3`, `node7-12.json`: a host, then the rank (names like nccl_trace_rank_3 or fr_dump_7 name no host)
_HOST_RANK = re.compile(r"^(?P<host>[A-Za-z][\w.-]*?)[_-]\d+(?:\.(?:json|pkl|pickle))?$")
_NOT_A_HOST = re.compile(r"(?:^|[_.-])(?:fr|nccl|trace|rank|dump|comm|lib|torchcomms)(?:[_.-]|$)", re.I)
_PEERS = re.compile(r"(\d{1,9})\s*(->|<-)\s*(\d{1,9})")
_MARKER = re.compile(r"^(?:coalesced|[A-Z_]+_coalesced)$")   # nccl:coalesced, nccl:ALLGATHER_coalesced
_STATES = ("scheduled", "started", "completed")
_COMPRESSION = re.compile(r"\.(?:gz|zst)$")
_MODULE_ALIASES = {"posix": "os", "nt": "os"}   # how os.system and friends are pickled
INT64 = (-(1 << 63), (1 << 63) - 1)
MAX_TENSORS, MAX_DIMS = 256, 16   # per entry; anything beyond is not a real shape list
MAX_GROUPS, MAX_MEMBERS = 65_536, 4_000_000   # pg_config groups, and their members over all groups
# Far above any ring buffer in use (TORCH_FR_BUFFER_SIZE is ~2000 by default); a pickle can repeat
# one shared entry millions of times for a couple of bytes each, so the count is bounded, not the bytes.
MAX_ENTRIES = 200_000

# PyTorch's OpType names (as in the watchdog's `OpType=`) for the names FR records.
_OP_TYPES = {
    "all_reduce": "ALLREDUCE", "allreduce": "ALLREDUCE", "all_reduce_barrier": "ALLREDUCE",
    "allreduce_coalesced": "ALLREDUCE_COALESCED", "_allreduce_sparse": "_ALLREDUCE_SPARSE",
    "broadcast": "BROADCAST", "_broadcast_oop": "BROADCAST",
    "reduce": "REDUCE", "_reduce_oop": "REDUCE",
    "all_gather": "ALLGATHER", "allgather": "ALLGATHER",
    "_all_gather_base": "_ALLGATHER_BASE", "_allgather_base": "_ALLGATHER_BASE",
    "all_gather_single": "_ALLGATHER_BASE", "all_gather_into_tensor": "_ALLGATHER_BASE",
    "all_gather_into_tensor_coalesced": "ALLGATHER_COALESCED", "allgather_coalesced": "ALLGATHER_COALESCED",
    "reduce_scatter": "REDUCE_SCATTER", "_reduce_scatter_base": "_REDUCE_SCATTER_BASE",
    "reduce_scatter_single": "_REDUCE_SCATTER_BASE", "reduce_scatter_tensor": "_REDUCE_SCATTER_BASE",
    "reduce_scatter_tensor_coalesced": "REDUCE_SCATTER_TENSOR_COALESCED",
    "gather": "GATHER", "scatter": "SCATTER",
    "all_to_all": "ALLTOALL", "alltoall": "ALLTOALL",
    "all_to_all_single": "ALLTOALL_BASE", "alltoall_base": "ALLTOALL_BASE",
    "barrier": "BARRIER", "send": "SEND", "recv": "RECV", "coalesced": "COALESCED",
}


class RefusedPickle(pickle.UnpicklingError):
    pass


class _PlainDataUnpickler(pickle.Unpickler):
    """Resolves no global: a pickle that names a class or function is refused before anything runs."""

    def find_class(self, module: str, name: str):
        shown = f"{_MODULE_ALIASES.get(module, module)}.{name}"
        shown = re.sub(r"[^\w.]", "?", shown)[:120]
        raise RefusedPickle(f"refused: pickle references {shown}; Flight Recorder dumps contain only plain data")

    def persistent_load(self, pid):
        raise RefusedPickle("refused: pickle uses persistent ids; Flight Recorder dumps contain only plain data")


def load_dump(data: bytes) -> dict:
    """The dump as plain data; raises ValueError (or RefusedPickle) for anything else."""
    if data[:4096].lstrip()[:1] == b"{":   # a slice: no copy of a large dump
        dump = json.loads(data)
    else:
        # buffers=None: protocol-5 out-of-band buffers are refused by the unpickler itself.
        dump = _PlainDataUnpickler(io.BytesIO(data)).load()
    if isinstance(dump, dict) and "entries" not in dump and "version" in dump and "pg_config" in dump:
        dump["entries"] = []   # a JSON dump of a rank that recorded nothing has no `entries` key
    if not isinstance(dump, dict) or not isinstance(dump.get("entries"), list):
        raise ValueError("not a Flight Recorder dump: no 'entries' list at the top level")
    for key in ("entries", "pg_status"):
        if isinstance(dump.get(key), (list, dict)) and len(dump[key]) > MAX_ENTRIES:
            raise ValueError(f"refused: {len(dump[key])} {key}, more than any Flight Recorder buffer ({MAX_ENTRIES})")
    return dump


def claims(path: str, head: bytes) -> bool:
    if sniff(head) == "pickle":
        return True   # never parsed as text anyway; this way a hostile one is named, not just skipped
    start = head.lstrip()[:1]
    if start == b"{":
        if b'"entries"' in head and any(key in head for key in _JSON_KEYS[1:]):
            return True
        return b'"pg_config"' in head and b'"version"' in head and (b'"pg_status"' in head or b'"comm_lib_version"' in head)
    name = path.replace("!", "/").rsplit("/", 1)[-1]
    return bool(_NAME.search(name)) and sniff(head) == "binary"   # e.g. a protocol-0/1 pickle


def _int(value) -> int | None:
    """An int64 from a dump value (JSON dumps write some numbers as strings), else None."""
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if INT64[0] <= value <= INT64[1] else None


def _str(value, limit: int = 200) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _numel(sizes) -> int | None:
    """Elements over all input tensors, from `input_sizes` ([[d0, d1, …], …])."""
    if not isinstance(sizes, (list, tuple)) or len(sizes) > MAX_TENSORS:
        return None
    total = 0
    for shape in sizes:
        if not isinstance(shape, (list, tuple)) or len(shape) > MAX_DIMS:
            return None
        numel = 1
        for dim in map(_int, shape):
            if dim is None or dim < 0:
                return None
            numel *= dim
        total += numel
    return total if total <= INT64[1] else None


def _shapes(sizes) -> str | None:
    """`input_sizes` as compact JSON ([[4],[4]]), when it is a real shape list."""
    if not isinstance(sizes, (list, tuple)) or len(sizes) > MAX_TENSORS:
        return None
    shapes = []
    for shape in sizes:
        if not isinstance(shape, (list, tuple)) or len(shape) > MAX_DIMS:
            return None
        dims = [_int(d) for d in shape]
        if any(d is None or d < 0 for d in dims):
            return None
        shapes.append(dims)
    return json.dumps(shapes, separators=(",", ":"))


def _count(values) -> int | None:
    return min(len(values), MAX_TENSORS + 1) if isinstance(values, (list, tuple)) else None


def _dtype(dtypes) -> str | None:
    if isinstance(dtypes, str):   # hand-made dumps write one dtype for all tensors
        dtypes = [dtypes]
    if not isinstance(dtypes, list) or not dtypes:
        return None
    names = {d for d in dtypes[:MAX_TENSORS] if isinstance(d, str)}
    return ",".join(sorted(names))[:100] or None


def fr_name(profiling_name) -> str | None:
    """The op as Flight Recorder names it, without the backend: `nccl:send 0->1` -> send."""
    if not isinstance(profiling_name, str):
        return None
    return profiling_name.split(":", 1)[-1].split(" ", 1)[0].strip()[:64] or None


def normalise_op(profiling_name) -> str | None:
    """`nccl:all_reduce`, `gloo:send 0->1` -> ALLREDUCE, SEND; names PyTorch has no OpType for are upper-cased."""
    if not isinstance(profiling_name, str):
        return None
    name = profiling_name.split(":", 1)[-1].split(" ", 1)[0].strip().lower()[:64]
    return _OP_TYPES.get(name) or (re.sub(r"[^A-Z0-9_]", "", name.upper()) or None)


def _utc(ns) -> datetime | None:
    ns = _int(ns)
    if not ns or ns <= 0:   # JSON dumps write 0 for "not recorded"
        return None
    return datetime.fromtimestamp(ns // 1000 / 1e6, tz=timezone.utc)


def dump_rank(dump: dict, result: FileResult) -> int | None:
    """The dump's global rank: its own `rank` key, the path's hints, or the `<prefix><rank>` file name."""
    rank = _int(dump.get("rank"))
    if rank is None:
        rank = result.hints.get("rank")
    if rank is None:
        name = _COMPRESSION.sub("", result.path.replace("!", "/").rsplit("/", 1)[-1])
        if m := _RANK_AT_END.search(name):
            rank = int(m[1])
    return rank


def dump_host(result: FileResult) -> str | None:
    """The host the path states, or the one a `<host>_<rank>` file name gives."""
    if host := result.hints.get("host"):
        return host
    name = _COMPRESSION.sub("", result.path.replace("!", "/").rsplit("/", 1)[-1])
    m = _HOST_RANK.match(name)
    return m["host"][:100] if m and not _NOT_A_HOST.search(m["host"]) else None


class _PgRanks:
    """A global rank's rank inside a PG, from pg_config (`ranks` is a string like "[0, 1]").

    Looked up only for the PGs entries name, each distinct `ranks` string parsed once: a hostile
    pickle can share one huge string among many PGs."""

    def __init__(self, pg_config):
        self.config = pg_config if isinstance(pg_config, dict) else {}
        self.parsed: dict[str, dict[int, int]] = {}

    def pg_rank(self, guid: str | None, rank: int | None) -> int | None:
        cfg = self.config.get(guid) if guid is not None and rank is not None else None
        ranks = cfg.get("ranks") if isinstance(cfg, dict) else None
        if not isinstance(ranks, str):
            return None
        return self._members(ranks).get(rank)

    def _members(self, ranks: str) -> dict[int, int]:
        if ranks not in self.parsed:
            members = [int(r) for r in re.findall(r"\d{1,19}", ranks[:1_000_000]) if int(r) <= INT64[1]]
            self.parsed[ranks] = {r: i for i, r in reversed(list(enumerate(members)))}
        return self.parsed[ranks]

    def groups(self, file: str, rank: int | None) -> list[dict]:
        """One fr_groups row per pg_config entry: its name, description and members in order (the
        group-local rank i is member i). Bounded: a hostile dump can list huge member strings."""
        rows, budget = [], MAX_MEMBERS
        for key, cfg in list(self.config.items())[:MAX_GROUPS]:
            if not isinstance(cfg, dict):
                continue
            name, ranks = cfg.get("name"), cfg.get("ranks")
            members = self._members(ranks) if isinstance(ranks, str) else {}
            listed = sorted(members, key=members.get)[:budget]
            budget -= len(listed)
            rows.append(dict(file=file, rank=rank, pg_name=_str(name if isinstance(name, str) else key),
                             pg_desc=_str(cfg.get("desc")), ranks=listed))
        return rows


def _guid(entry: dict) -> str | None:
    """The PG GUID (`PG GUID g` in PyTorch's log prefix) from the entry's (guid, desc) tuple."""
    group = entry.get("process_group")
    return _str(group[0]) if isinstance(group, (list, tuple)) and group else None


def _entry_row(index: int, entry: dict, who: dict, pg_ranks: _PgRanks) -> dict:
    guid = _guid(entry)
    is_p2p = entry.get("is_p2p") is True
    return dict(
        who, line=index + 1,
        pg=str(pg_id) if (pg_id := _int(entry.get("pg_id"))) is not None else guid,
        pg_rank=pg_ranks.pg_rank(guid, who["rank"]),
        counter="fr_p2p_seq" if is_p2p else "fr_seq",
        seq=_int(entry.get("p2p_seq_id" if is_p2p else "collective_seq_id")),
        op=normalise_op(entry.get("profiling_name")),
        numel_in=_numel(entry.get("input_sizes")), numel_out=_numel(entry.get("output_sizes")),
        dtype=_dtype(entry.get("input_dtypes")),
        state=_str(entry.get("state"), 20),
        timeout_ms=_int(entry.get("timeout_ms")),
        ts=_utc(entry.get("time_created_ns")),
    )


def _fr_entry(index: int, entry: dict, who: dict) -> dict:
    name = entry.get("profiling_name")
    op = fr_name(name)
    group = entry.get("process_group")
    seq = _int(entry.get("collective_seq_id"))
    if seq is None:
        seq = _int(entry.get("seq_id"))   # dumps before collective_seq_id
    is_p2p = entry.get("is_p2p")
    if not isinstance(is_p2p, bool) or (not is_p2p and op in ("send", "recv")):
        is_p2p = op in ("send", "recv")   # older dumps, and TorchComms (which records every op as a collective)
    src = dst = None
    if op in ("send", "recv") and isinstance(name, str) and (m := _PEERS.search(name)):
        a, arrow, b = int(m[1]), m[2], int(m[3])
        src, dst = (a, b) if arrow == "->" else (b, a)
    state = entry.get("state")
    retired = entry.get("retired")
    return dict(
        file=who["file"], line=index + 1, host=who["host"], rank=who["rank"],
        record_id=_int(entry.get("record_id")), pg_id=_int(entry.get("pg_id")),
        pg_name=_str(group[0]) if isinstance(group, (list, tuple)) and group else None,
        pg_desc=_str(group[1]) if isinstance(group, (list, tuple)) and len(group) > 1 else None,
        collective_seq_id=seq, p2p_seq_id=_int(entry.get("p2p_seq_id")), op_id=_int(entry.get("op_id")),
        is_p2p=is_p2p, profiling_name=_str(name, 120), fr_op=op, op=normalise_op(name),
        marker=bool(op and _MARKER.match(op)), local_src=src, local_dst=dst,
        in_sizes=_shapes(entry.get("input_sizes")), out_sizes=_shapes(entry.get("output_sizes")),
        in_numel=_numel(entry.get("input_sizes")), out_numel=_numel(entry.get("output_sizes")),
        in_count=_count(entry.get("input_sizes")), out_count=_count(entry.get("output_sizes")),
        in_dtypes=_dtype(entry.get("input_dtypes")), out_dtypes=_dtype(entry.get("output_dtypes")),
        state=state if state in _STATES else None, retired=retired if isinstance(retired, bool) else None,
        timeout_ms=_int(entry.get("timeout_ms")), ts=_utc(entry.get("time_created_ns")),
    )


def _p2p_markers(rows: list[dict]) -> None:
    """The `coalesced` marker that closes a batch of sends/recvs is a p2p entry, where the dump does
    not say so (is_p2p missing or false): it follows the group's p2p ops."""
    last: dict = {}
    for row in rows:
        if row["marker"] and not row["is_p2p"] and last.get(row["pg_name"], False):
            row["is_p2p"] = True
        if not row["marker"]:
            last[row["pg_name"]] = row["is_p2p"]


def _world_size(groups: list[dict], rank: int | None) -> int | None:
    """The default group's size: the group named default_pg (or "0"), else the largest one the rank is in."""
    mine = [g for g in groups if g["ranks"] and (rank is None or rank in g["ranks"])]
    default = [g for g in mine if g["pg_desc"] == "default_pg" or g["pg_name"] == "0"]
    return max((len(g["ranks"]) for g in default or mine), default=None)


# The dump's own names of the counters (its entries' keys), so that a seq the report quotes as
# `collective_seq_id=16` is found in the line it cites.
_SEQ_KEYS = {"fr_seq": "collective_seq_id", "fr_p2p_seq": "p2p_seq_id"}


def _entry_text(row: dict, entry: dict) -> str:
    retired = entry.get("retired")
    return (f"FR {_SEQ_KEYS.get(row['counter'], row['counter'])}={row['seq']} pg_id={row['pg']} op={row['op']} "
            f"profiling_name={_str(entry.get('profiling_name'), 80)} state={row['state']} "
            f"retired={retired if isinstance(retired, bool) else None} numel_in={row['numel_in']} "
            f"dtype={row['dtype']} timeout_ms={row['timeout_ms']}")


def _pg_status_rows(dump: dict, who: dict, first_line: int, guid_to_pg: dict) -> list[dict]:
    status = dump.get("pg_status")
    if not isinstance(status, dict):
        return []
    rows = []
    for key, fields in status.items():
        if not isinstance(fields, dict):
            continue
        key = _str(key)
        rows.append(dict(
            who, line=first_line + len(rows), pg=guid_to_pg.get(key, key),
            last_enqueued=_int(fields.get("last_enqueued_collective")),
            last_started=_int(fields.get("last_started_collective")),
            last_completed=_int(fields.get("last_completed_collective")),
        ))
    return rows


def _event(row: dict, kind: str, text: str) -> dict:
    return dict(file=row["file"], line=row["line"], host=row["host"], pid=None, rank=row["rank"],
                local_rank=row["local_rank"], source=SOURCE, kind=kind, level="INFO",
                ts=row.get("ts"), ts_precision="us" if row.get("ts") else None, ts_inferred=None, text=text)


def parse(data: bytes, result: FileResult) -> None:
    dump = load_dump(data)
    who = dict(file=result.path, host=dump_host(result), rank=dump_rank(dump, result),
               local_rank=result.hints.get("local_rank"))
    pg_ranks = _PgRanks(dump.get("pg_config"))
    entries = [(i, e) for i, e in enumerate(dump["entries"]) if isinstance(e, dict)]
    rows = [_entry_row(i, e, who, pg_ranks) for i, e in entries]
    events = [_event(row, "fr_entry", _entry_text(row, e)) for row, (_, e) in zip(rows, entries)]
    guid_to_pg = {}   # pg_status is keyed by PG GUID; rows use the PG ID like the entries
    for row, (_, e) in zip(rows, entries):
        guid_to_pg.setdefault(_guid(e), row["pg"])
    status = _pg_status_rows(dump, who, len(dump["entries"]) + 1, guid_to_pg)
    events += [_event(s, "fr_pg_status", f"FR pg_status pg={s['pg']} last_enqueued={s['last_enqueued']} "
                      f"last_started={s['last_started']} last_completed={s['last_completed']}")
               for s in status]
    fr_rows = [_fr_entry(i, e, who) for i, e in entries]
    _p2p_markers(fr_rows)
    groups = pg_ranks.groups(result.path, who["rank"])
    record_ids = [r["record_id"] for r in fr_rows if r["record_id"] is not None]
    version = dump.get("version")
    result.add("fr_dumps", pa.Table.from_pylist([dict(
        file=result.path, host=who["host"], rank=who["rank"],
        version=_str(version, 20) if isinstance(version, str) else (str(version)[:20] if _int(version) is not None else None),
        entries=len(fr_rows), first_record_id=min(record_ids, default=None),
        has_state=any(r["state"] in ("started", "completed") for r in fr_rows))]))
    result.add("fr_groups", pa.Table.from_pylist(groups, schema=SCHEMAS["fr_groups"]))
    result.add("fr_entries", pa.Table.from_pylist(fr_rows, schema=SCHEMAS["fr_entries"]))
    if who["rank"] is not None and (world := _world_size(groups, who["rank"])):
        result.add("processes", pa.Table.from_pylist([dict(
            file=result.path, line=1, host=who["host"], rank=who["rank"], world_size=world, source=SOURCE)]))
    result.add("collectives", pa.Table.from_pylist(rows))
    result.add("pg_status", pa.Table.from_pylist([{k: v for k, v in s.items() if k != "last_started"}
                                                  for s in status]))
    result.add("events", pa.Table.from_pylist(events))
    result.stats.lines = len(dump["entries"]) + len(status)


DUMP = WholeFileParser(SOURCE, claims, parse)
