"""The pipeline, one function per stage: discover -> parse (files in parallel) -> DuckDB ->
queries -> verdict -> report. Nothing else lives here."""
from __future__ import annotations

import itertools
import os
import queue
import shutil
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import duckdb
import pyarrow as pa

from correlator.parsers.files import GROUP_LINES, GroupResults, parse_sources
from correlator.parsers.results import FileResult
from correlator.parsers.reader import MAX_LINE

from .discover import Skipped, Source, discover_paths
from .tables import SCHEMAS

if TYPE_CHECKING:
    from .timeline import Spans, TimelineQuery

# Above this many input bytes the job's tables live in a temporary DuckDB file, not in memory.
SPILL_BYTES = 512 << 20
MEMORY_LIMIT = os.environ.get("CORRELATOR_MEMORY_LIMIT", "1GB")
# While parsing, the parser threads' groups share the memory with DuckDB: it gets less of it.
INGEST_MEMORY_LIMIT = os.environ.get("CORRELATOR_INGEST_MEMORY_LIMIT", "512MB")
# A worker takes files for one group (its rows are inserted at once) until the lines it typed
# fill an engine pass (parsers.files.GROUP_LINES), or up to these many bytes and files: a group
# shares the passes' fixed cost (~50 ms), and the cap keeps both workers busy to the end.
GROUP_BYTES = 32 << 20           # typing every line
WINDOW_GROUP_BYTES = 128 << 20   # with a window, most lines are only counted
GROUP_FILES = 2048
# Of the lines that repeat (NCCL COLL lines per process and communicator, progress steps per
# rank), `analyze` types the last ones: a rank's stream ends where it stopped, so the verdict
# reads the end; the lines before are counted (`--full`: typed). See parsers/bulk/.
WINDOW = 2048


class InputError(Exception):
    """The job's logs cannot be analysed (a path missing, nothing to read): exit 2, one line."""


# What a job is given as: a directory, an archive, one file, or several of them (one job).
Inputs = Path | str | list[Path]


STDIN = "-"


def _paths(inputs: Inputs, workdir: str) -> list[Path]:
    """The inputs as paths; `-` (standard input) is copied into `workdir` first, in chunks."""
    given = [str(p) for p in inputs] if isinstance(inputs, list) else [str(inputs)]
    if not given:
        raise InputError("no input: give a job directory, log files, or - for standard input")
    paths = []
    for name in given:
        path = Path(name)
        if name == STDIN:
            path = Path(workdir, "stdin")
            with open(path, "wb") as out:
                shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
        elif not path.exists():
            raise InputError(f"{name}: no such file or directory")
        paths.append(path)
    return paths


def shown(inputs: Inputs) -> str:
    """The inputs as the report names them (`job.log_dir`)."""
    return " ".join(str(p) for p in inputs) if isinstance(inputs, list) else str(inputs)


@dataclass
class Analysis:
    job_dir: Path
    job_id: str
    tables: dict[str, pa.Table]
    report: dict


@dataclass
class Parsed:
    con: duckdb.DuckDBPyConnection
    paths: list[Path]
    skipped: list[Skipped] = field(default_factory=list)
    workdir: tempfile.TemporaryDirectory | None = None


def _connect(total_bytes: int, workdir: tempfile.TemporaryDirectory) -> duckdb.DuckDBPyConnection:
    """In memory for small jobs; a temporary file for big ones. Either way DuckDB may use at most
    INGEST_MEMORY_LIMIT while parsing (MEMORY_LIMIT after) and spills the rest to a temporary
    directory (its default is 80% of the RAM). While parsing it inserts on one thread: the parser
    threads have the cores (a thread per core for the inserts cost 10% more CPU at 1 GB)."""
    path = ":memory:" if total_bytes < SPILL_BYTES else str(Path(workdir.name, "job.duckdb"))
    return duckdb.connect(path, config={"memory_limit": INGEST_MEMORY_LIMIT, "temp_directory": workdir.name,
                                        "threads": 1})


def create_tables(con: duckdb.DuckDBPyConnection) -> None:
    for name, schema in SCHEMAS.items():
        empty = schema.empty_table()
        con.register("_empty", empty)
        con.execute(f"create or replace table {name} as select * from _empty")
        con.unregister("_empty")


def _file_row(result: FileResult) -> dict:
    return {
        "path": result.path, "kinds": sorted(result.kinds), "bytes": result.stats.bytes,
        "lines": result.stats.lines, "lines_unparsed": result.unparsed,
        "skip_reason": result.skip_reason or result.stats.error or _cut_note(result.stats),
        "host": result.hints.get("host"), "rank": result.hints.get("rank"),
        "local_rank": result.hints.get("local_rank"),
        "mtime": None if result.mtime is None else int(result.mtime * 1_000_000),
        "lines_skimmed": result.skimmed,
    }


def _cut_note(stats) -> str | None:
    """A line kept only in part is reported, not silently shortened."""
    if not stats.cut_lines:
        return None
    return f"{stats.cut_lines} line(s) longer than {MAX_LINE} characters cut to their first {MAX_LINE}"


class _Feed:
    """The job's files, handed to the workers' groups in order (thread-safe)."""

    def __init__(self, sources: list[Source], window: int | None):
        self._sources, self._lock = iter(sources), threading.Lock()
        self.max_bytes = GROUP_BYTES if window is None else WINDOW_GROUP_BYTES
        self.exhausted = False

    def group(self) -> Iterator[Source]:
        """Files for one group, up to the byte and file caps (parse_sources stops taking them
        once its lines fill a pass)."""
        size = files = 0
        while size < self.max_bytes and files < GROUP_FILES:
            with self._lock:
                src = next(self._sources, None)
                self.exhausted = src is None
            if src is None:
                return
            size, files = size + (src.size or 0), files + 1
            yield src


def _insert(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    con.register("_rows", table)
    con.execute(f"insert into {name} select * from _rows")
    con.unregister("_rows")


def _insert_results(con: duckdb.DuckDBPyConnection, results: GroupResults) -> None:
    """One insert per table for a whole group: a DuckDB insert costs milliseconds however small
    it is, so 10,000 tiny files inserted one by one would take minutes."""
    parts: dict[str, list[pa.Table]] = {name: list(tables) for name, tables in results.group_tables.items()}
    for result in results:
        for name, tables in result.tables.items():
            parts.setdefault(name, []).extend(tables)
    parts["files"] = [pa.Table.from_pylist([_file_row(r) for r in results], schema=SCHEMAS["files"])]
    _insert_tables(con, parts)


def _insert_tables(con: duckdb.DuckDBPyConnection, parts: dict[str, list[pa.Table]]) -> None:
    for name, tables in parts.items():
        _insert(con, name, pa.concat_tables(tables))


# Parses a job's files, group by group: (sources, window) -> the groups' results (and rows handed
# over while a group goes on), in any order. In-process by default; engine_ray maps the same
# parse_sources over a Ray cluster.
GroupParser = Callable[[list[Source], int | None], Iterator[GroupResults | dict]]


def parse_job(inputs: Inputs, workers: int = 2, on_file: Callable[[int, int], None] | None = None,
              window: int | None = None, parse_groups: GroupParser | None = None) -> Parsed:
    """Parse every file of the job into a DuckDB connection, one group of files' tables at a time;
    every line typed, or with a `window` only the last of the lines that repeat (see WINDOW)."""
    workdir = tempfile.TemporaryDirectory(prefix="correlator-")
    try:
        paths = _paths(inputs, workdir.name)
        sources, skipped = discover_paths(paths)
    except BaseException:
        workdir.cleanup()
        raise
    connecting = _connect_meanwhile(sum(s.size or 0 for s in sources), workdir)
    try:
        parsed = _parse_into(connecting, paths, sources, skipped, workdir, workers, on_file, window, parse_groups)
    except BaseException:
        _abandon(connecting, workdir)
        raise
    if not _has_rows(parsed.con):
        _close(parsed)
        raise InputError(_nothing_to_read(shown(inputs), len(sources), parsed.skipped))
    return parsed


def _connect_meanwhile(total_bytes: int, workdir: tempfile.TemporaryDirectory) -> Future:
    """The job's connection with its empty tables, made on a thread of its own: DuckDB takes
    ~50 ms for them, a paste's parse about as long, and the parse does not need them until its
    first rows are handed over, so a paste's verdict waits for one of the two, not both."""
    def connect() -> duckdb.DuckDBPyConnection:
        con = _connect(total_bytes, workdir)
        create_tables(con)
        return con
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(connect)
    finally:
        pool.shutdown(wait=False)


def _abandon(connecting: Future, workdir: tempfile.TemporaryDirectory) -> None:
    """A parse that failed: its connection (once made) closed, its working directory removed."""
    try:
        connecting.result().close()
    except Exception:   # the failure already being raised is the one to report
        pass
    workdir.cleanup()


def _parse_into(connecting: Future, paths: list[Path], sources: list[Source], skipped: list[Skipped],
                workdir: tempfile.TemporaryDirectory, workers: int, on_file, window, parse_groups) -> Parsed:
    groups = (parse_groups(sources, window) if parse_groups
              else _parse_groups(_Feed(sources, window), workers, window))
    first = next(groups, None)   # the workers parse; the connection is made meanwhile
    parsed = Parsed(connecting.result(), paths, list(skipped), workdir)
    done = 0
    for results in itertools.chain([first] if first is not None else [], groups):
        if not isinstance(results, GroupResults):  # rows handed over while the group goes on
            _insert_tables(parsed.con, results)
            continue
        _insert_results(parsed.con, results)
        parsed.skipped += [Skipped(r.path, r.skip_reason, r.stats.bytes) for r in results if r.skip_reason]
        done += len(results)
        if on_file:
            on_file(done, len(sources))
    if skipped:
        rows = [{"path": s.path, "skip_reason": s.reason} for s in skipped]
        _insert(parsed.con, "files", pa.Table.from_pylist(rows, schema=SCHEMAS["files"]))
    return parsed


class _Stopped(BaseException):
    """The main thread stopped taking rows (it failed): a worker ends its group."""


def _parse_groups(feed: _Feed, workers: int, window: int | None) -> Iterator[GroupResults | dict]:
    """Groups parsed in parallel. A worker hands over a group's rows as they grow (a group of
    one huge file would otherwise hold them all to its end), and at its end the GroupResults,
    through a queue of a few items: memory is bounded by a few passes' rows, not by a group or
    the job. Yields both, as they come."""
    handed: queue.Queue = queue.Queue(maxsize=workers)
    stop = threading.Event()

    def hand_over(item) -> None:
        while not stop.is_set():
            try:
                return handed.put(item, timeout=0.1)
            except queue.Full:
                continue
        raise _Stopped

    def group() -> None:
        try:
            hand_over(parse_sources(feed.group(), False, window, GROUP_LINES, hand_over))
        except _Stopped:
            pass
        except BaseException as e:  # raised again in the main thread
            try:
                hand_over(e)
            except _Stopped:
                pass

    with ThreadPoolExecutor(max_workers=workers) as pool:
        running = 0
        try:
            while True:
                while running <= workers and not feed.exhausted:
                    pool.submit(group)
                    running += 1
                if not running:
                    return
                item = handed.get()
                if isinstance(item, BaseException):
                    raise item
                running -= isinstance(item, GroupResults)
                yield item
        finally:
            stop.set()


def _has_rows(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether any file yielded anything (lines, or rows of a whole-file format)."""
    return any(con.execute(f"select exists (select 1 from {name})").fetchall()[0][0]
               for name in SCHEMAS if name != "files")


def _nothing_to_read(job_dir: str, found: int, skipped: list[Skipped]) -> str:
    """Without a single log line there is no verdict to give, not even `healthy`."""
    if not found and not skipped:
        return f"{job_dir}: no log files"
    if not skipped:
        return f"{job_dir}: no log lines in its {found} file(s)"
    first = skipped[0]
    return f"{job_dir}: no log lines; {len(skipped)} file(s) skipped, e.g. {first.path}: {first.reason}"


def _close(parsed: Parsed) -> None:
    parsed.con.close()
    if parsed.workdir:
        parsed.workdir.cleanup()


def tables_of(con: duckdb.DuckDBPyConnection, names: Iterable[str] = SCHEMAS) -> dict[str, pa.Table]:
    return {name: con.sql(f"select * from {name}").to_arrow_table() for name in names}


def job_id_of(con: duckdb.DuckDBPyConnection, paths: list[Path]) -> str:
    """The scheduler's job id when the logs name one, else the directory's (or first file's) name."""
    row = con.execute(
        "select regexp_extract(text, 'JobId=(\\d+)', 1) from events "
        "where regexp_matches(text, 'JobId=\\d+') order by file, line limit 1").fetchone()
    if row and row[0]:
        return row[0]
    first = paths[0].resolve()
    if first.is_file():
        return first.name.split(".")[0] or first.name
    return first.parent.name if first.name == "logs" else first.name


# Below this many events DuckDB's search for a join order costs more than any order it finds: a
# rule's query over a paste's few hundred rows took 55 ms to plan with it, 5 ms without (a paste's
# whole budget is a second). Above it, the orders it finds are what keep big jobs fast.
SMALL_JOB_EVENTS = 20_000
# On such a job, the optimizers that pay only on big tables (compression, statistics, build sides,
# partitions, sampling...) and a second thread cost more than they save: without them the queries,
# rules and report of a paste took 10% less (0.70 -> 0.64 s over 53 pastes) and of a 64-rank job of
# 15k events no more, with the same verdicts.
SMALL_JOB_DISABLED = ",".join((
    "join_order", "compressed_materialization", "statistics_propagation", "build_side_probe_side",
    "join_filter_pushdown", "common_subexpressions", "late_materialization", "partitioned_execution",
    "sampling_pushdown", "row_group_pruner", "regex_range", "duplicate_groups", "window_self_join",
    "aggregate_reuse", "self_join_aggregate", "top_n_window_elimination", "partial_aggregate_pushdown"))


# Views the verdict's rules read again and again (rank_events: some twenty rules, several times
# each). DuckDB plans a view's whole expansion in every reader: on a small job that costs more
# than copying its rows once (a paste's rules: 180 -> 140 ms). A big job keeps the view (a copy
# of every event's text would cost as much memory as the logs).
READ_OFTEN_VIEWS = ("rank_events",)


def run_queries(con: duckdb.DuckDBPyConnection) -> None:
    """The queries over a parsed job; the parsers are done, so the queries get the memory and the cores."""
    from . import queries
    con.execute(f"set memory_limit = '{MEMORY_LIMIT}'; set threads = {os.cpu_count() or 1}")
    small = con.execute("select count(*) from events").fetchone()[0] < SMALL_JOB_EVENTS
    if small:
        con.execute(f"set disabled_optimizers = '{SMALL_JOB_DISABLED}'; set threads = 1")
    queries.run_all(con)
    if small:
        for view in READ_OFTEN_VIEWS:   # the stages are done: nothing changes what it reads now
            con.execute(f"create temp table _{view} as select * from {view}; drop view {view}; "
                        f"alter table _{view} rename to {view}")


def decide_and_report(parsed: Parsed, inputs: Inputs):
    """Run the queries and the rule table over a parsed job: (job id, verdict, report)."""
    from . import assemble, verdict as verdicts
    run_queries(parsed.con)
    job_id = job_id_of(parsed.con, parsed.paths)
    decided = verdicts.decide(parsed.con)
    return job_id, decided, assemble.build(parsed.con, decided, job_id, shown(inputs), line_reader(parsed.paths))


CITED_LINE = 4096   # characters of a line read back for the evidence


def line_reader(paths: list[Path]) -> Callable[..., dict[int, str]]:
    """Reads given lines of a job's file back, for the evidence lines whose text the tables do not
    keep (of NCCL's COLL lines only a stream's last is kept as an event): (file, line numbers) ->
    {line: text}, as the file prints it, invalid UTF-8 replaced; {} for a file it cannot read.
    `shown=True`: what a terminal shows of each line redrawn with `\\r` (a progress bar: one physical
    line of every redraw), its last part that says something; lines without a `\\r` are left out."""
    sources: dict[str, Source] | None = None

    def read(file: str, wanted: set[int], shown: bool = False) -> dict[int, str]:
        nonlocal sources
        if sources is None:
            sources = {s.path: s for s in discover_paths(paths)[0]}
        src, out = sources.get(file), {}
        if src is None or not wanted:
            return out
        try:
            with src.open() as stream:
                left = len(wanted)
                for number, raw in enumerate(stream, 1):
                    if number not in wanted:
                        continue
                    if not shown:
                        out[number] = raw[:4 * CITED_LINE].decode("utf-8", "replace").rstrip("\r\n")[:CITED_LINE]
                    elif len(parts := [p for p in raw[-4 * CITED_LINE:].rstrip(b"\r\n").split(b"\r") if p.strip()]) > 1:
                        out[number] = parts[-1].decode("utf-8", "replace")[:CITED_LINE]
                    left -= 1
                    if not left:
                        break
        except (OSError, EOFError, ValueError):
            pass
        return out
    return read


def analyze(inputs: Inputs, workers: int = 2, on_file: Callable[[int, int], None] | None = None,
            keep_tables: bool = False, window: int | None = WINDOW,
            parse_groups: GroupParser | None = None) -> Analysis:
    """The whole analysis of one job (a directory, files, archives). The job's tables come along
    only when asked for (to store them): copied out of DuckDB they would cost as much memory as
    the logs. `window=None` types every line (see WINDOW). `parse_groups`: where the files are
    parsed (see GroupParser)."""
    parsed = parse_job(inputs, workers, on_file, window, parse_groups)
    try:
        job_id, _, report = decide_and_report(parsed, inputs)
        return Analysis(parsed.paths[0], job_id, tables_of(parsed.con) if keep_tables else {}, report)
    finally:
        _close(parsed)


def timeline(inputs: Inputs, query: "TimelineQuery") -> tuple[list[tuple], int, "Spans"]:
    """`correlator timeline`: the job's merged, aligned events as timeline.select picks them. Every
    line is typed: a window would leave out a rank's earlier progress steps."""
    from .timeline import select
    parsed = parse_job(inputs)
    try:
        run_queries(parsed.con)
        return select(parsed.con, query)
    finally:
        _close(parsed)
