"""The Arrow schemas of every table: the one place the tables are defined.

Parsers produce these tables, queries read them, the store keeps them. Columns shared by all
tables that come from a log line: `file` (path relative to the job directory) and `line`
(1-based line number in that file) — the citation of every finding.
"""
from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")

_WHERE = [("file", pa.string()), ("line", pa.int64())]
_WHO = [("host", pa.string()), ("pid", pa.int64()), ("rank", pa.int64()), ("local_rank", pa.int64())]

SCHEMAS: dict[str, pa.Schema] = {
    # One row per file seen (also the skipped ones, with skip_reason).
    "files": pa.schema([
        ("path", pa.string()), ("kinds", pa.list_(pa.string())), ("bytes", pa.int64()),
        ("lines", pa.int64()), ("lines_unparsed", pa.int64()), ("skip_reason", pa.string()),
        ("host", pa.string()), ("rank", pa.int64()), ("local_rank", pa.int64()),
        ("mtime", TS),
        ("lines_skimmed", pa.int64()),  # repeated lines counted, not typed (outside the window)
    ]),
    # Every line of every file: recognised lines carry a kind, the rest kind='other'.
    "events": pa.schema(_WHERE + _WHO + [
        ("source", pa.string()),        # nccl, c10, torchelastic, python, app, slurm, k8s, flight_recorder, ...
        ("kind", pa.string()),          # the format that recognised the line (see parsers/formats)
        ("level", pa.string()),         # DEBUG INFO WARN ERROR FATAL
        ("ts", TS),                     # UTC, null when the line carries no time
        ("ts_precision", pa.string()),  # s, ms, us, ns
        ("ts_inferred", pa.string()),   # comma list: year, zone
        ("text", pa.string()),          # the message, wrapper and header prefixes removed
    ]),
    # One row per observed collective issue or state, counters kept apart (see `counter`).
    "collectives": pa.schema(_WHERE + _WHO + [
        ("pg", pa.string()),            # PyTorch PG id, or NCCL commId for NCCL-only rows
        ("pg_rank", pa.int64()),        # rank inside that PG / communicator
        ("comm", pa.string()),          # NCCL comm pointer (process-local)
        ("comm_id", pa.string()),       # NCCL commId (shared by all ranks of a communicator)
        ("counter", pa.string()),       # pg_seq | nccl_opcount | detail_seq | desync_seq | fr_seq
        ("seq", pa.int64()),
        ("op", pa.string()),            # upper-case op name (ALLREDUCE, BROADCAST, ...)
        ("numel_in", pa.int64()), ("numel_out", pa.int64()),
        ("dtype", pa.string()),
        ("state", pa.string()),         # issued | timeout | last_enqueued | last_completed | lagging | mismatch | scheduled | started | completed
        ("timeout_ms", pa.int64()),
        ("ts", TS),
        # Columns added after schema 1 go last: the store adds them to older databases in place.
        ("shape", pa.string()),         # DETAIL's TensorShape, e.g. "2, 512" (numel_in is its product)
    ]),
    # PyTorch PG status at watchdog detection or dump: the last enqueued / completed SeqNum.
    "pg_status": pa.schema(_WHERE + _WHO + [
        ("pg", pa.string()), ("pg_rank", pa.int64()), ("seq", pa.int64()),
        ("last_enqueued", pa.int64()), ("last_completed", pa.int64()), ("ts", TS),
    ]),
    # Desync report (TORCH_NCCL_DESYNC_DEBUG): which PG ranks lagged, as the reporting rank saw it.
    "desync": pa.schema(_WHERE + _WHO + [
        ("ranks", pa.string()), ("verdict", pa.string()), ("seq", pa.int64()), ("next", pa.int64()), ("ts", TS),
        ("pg", pa.string()),            # the process group the report speaks of, where it says (else the default PG)
    ]),
    # Mismatches named by the runtime itself: DETAIL fingerprints (0-based SequenceNumber), DDP params.
    "mismatches": pa.schema(_WHERE + _WHO + [
        ("what", pa.string()), ("rank_a", pa.int64()), ("fp_a", pa.string()), ("n_a", pa.int64()),
        ("rank_b", pa.int64()), ("fp_b", pa.string()), ("n_b", pa.int64()), ("ts", TS),
    ]),
    # NCCL communicators: comm pointer <-> commId <-> rank/nranks <-> host:pid:dev.
    "comms": pa.schema(_WHERE + [
        ("host", pa.string()), ("pid", pa.int64()), ("dev", pa.int64()),
        ("comm", pa.string()), ("comm_id", pa.string()), ("rank", pa.int64()), ("nranks", pa.int64()),
        ("phase", pa.string()), ("parent", pa.string()), ("color", pa.int64()), ("ts", TS),
    ]),
    # Where a process shows its identity: host, pid, global rank, local rank, scheduler task.
    "processes": pa.schema(_WHERE + _WHO + [
        ("task", pa.int64()), ("world_size", pa.int64()), ("source", pa.string()),
    ]),
    # Training progress: step counters per rank.
    # data_s: seconds the rank waited for its input in that step, where the script logs it.
    # step_s: seconds the step took as the trainer measured it; rate: its throughput (it/s,
    # samples/s, tokens/s, TFLOP/s: higher is faster); source `bar` for a progress bar's redraw.
    "progress": pa.schema(_WHERE + _WHO + [("step", pa.int64()), ("total", pa.int64()), ("ts", TS),
                                           ("data_s", pa.float64()), ("step_s", pa.float64()),
                                           ("rate", pa.float64()), ("source", pa.string())]),
    # How processes, tasks, containers and jobs ended.
    "exits": pa.schema(_WHERE + _WHO + [
        ("task", pa.int64()), ("exit_code", pa.int64()), ("signal", pa.int64()),
        ("reason", pa.string()), ("source", pa.string()), ("ts", TS), ("text", pa.string()),
    ]),
    # Flight Recorder dumps, as they are (parsers/flight_recorder.py); queries/fr_*.sql match them
    # across ranks. One row per dump file:
    "fr_dumps": pa.schema([
        ("file", pa.string()), ("host", pa.string()), ("rank", pa.int64()), ("version", pa.string()),
        ("entries", pa.int64()),
        ("first_record_id", pa.int64()),   # > 0: the ring buffer dropped older entries
        ("has_state", pa.bool_()),         # some entry started or completed (gloo records neither)
    ]),
    # One row per process group of a dump's pg_config: the GLOBAL ranks of its members.
    "fr_groups": pa.schema([
        ("file", pa.string()), ("rank", pa.int64()), ("pg_name", pa.string()), ("pg_desc", pa.string()),
        ("ranks", pa.list_(pa.int64())),
    ]),
    # One row per dump entry (line = entry index + 1, as in events).
    "fr_entries": pa.schema(_WHERE + [
        ("host", pa.string()), ("rank", pa.int64()), ("record_id", pa.int64()),
        ("pg_id", pa.int64()), ("pg_name", pa.string()), ("pg_desc", pa.string()),
        ("collective_seq_id", pa.int64()), ("p2p_seq_id", pa.int64()), ("op_id", pa.int64()),
        ("is_p2p", pa.bool_()),
        ("profiling_name", pa.string()),
        ("fr_op", pa.string()),            # the name after the backend prefix, lower case: all_reduce, send, coalesced
        ("op", pa.string()),               # PyTorch's OpType name (ALLREDUCE, SEND, ...), as in `collectives`
        ("marker", pa.bool_()),            # the entry that closes a coalesced group (nccl:coalesced, nccl:ALLGATHER_coalesced)
        ("local_src", pa.int64()), ("local_dst", pa.int64()),   # p2p: group-local ranks from `send 1->2` / `recv 2<-1`
        ("in_sizes", pa.string()), ("out_sizes", pa.string()),  # the shapes, as compact JSON
        ("in_numel", pa.int64()), ("out_numel", pa.int64()),
        ("in_count", pa.int64()), ("out_count", pa.int64()),    # tensors in the input / output lists
        ("in_dtypes", pa.string()), ("out_dtypes", pa.string()),
        ("state", pa.string()), ("retired", pa.bool_()), ("timeout_ms", pa.int64()), ("ts", TS),
    ]),
}

TABLES = tuple(SCHEMAS)


def empty(name: str) -> pa.Table:
    return SCHEMAS[name].empty_table()


def conform(name: str, table: pa.Table) -> pa.Table:
    """Cast `table` to the schema of `name`, adding missing columns as nulls, dropping extras."""
    schema = SCHEMAS[name]
    cols = []
    for field in schema:
        if field.name in table.column_names:
            cols.append(table.column(field.name).cast(field.type))
        else:
            cols.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(cols, schema=schema)
