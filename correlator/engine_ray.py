"""The parse stage on Ray: the job's files in groups, each group one Ray task running the same
`parsers.files.parse_sources` as the in-process pipeline; the groups' tables come back through
Ray's object store and go into the job's DuckDB as the in-process groups' do, so the queries,
the verdict and the report are the in-process ones.

Needs `pip install 'correlator[ray]'`. The workers open the files by the absolute paths the
driver found (a shared filesystem on a multi-node cluster) and need correlator installed.

Faults: a worker that dies mid-task (killed, out of memory, node lost) is retried by Ray up to
TASK_RETRIES times; a task is a pure function of its files, so a retry gives the same rows and
nothing is counted twice (the driver takes each group's result once). A file a worker cannot read
is that file's read error or skip reason, exactly as in-process: parse_sources never raises for bad
input.
"""
from __future__ import annotations

import logging
import socket
from enum import Enum
from typing import Callable, Iterator

from correlator.parsers.files import GroupResults, parse_sources

from .discover import Source
from .unused_modules import allow as allow_unused
from .pipeline import GROUP_BYTES, GROUP_FILES, WINDOW_GROUP_BYTES, GroupParser

TASK_RETRIES = 3
# Ray itself waits minutes for a cluster that is not there: a plain TCP connect says it sooner.
PROBE_TIMEOUT_S = 5.0
# Groups in flight per CPU of the cluster: enough to keep every core busy while the driver
# inserts the finished ones, few enough that the object store holds only a few groups' rows.
IN_FLIGHT_PER_CPU = 2


class EngineError(Exception):
    """Ray is missing, unreachable, or lost a group past its retries: exit 2, one line."""


def _ray():
    allow_unused()  # Ray's driver uses numpy, and may use pandas
    try:
        import ray
    except ImportError:
        raise EngineError("--engine ray needs Ray: pip install 'correlator[ray]'") from None
    return ray


def connect(address: str | None) -> None:
    """Join the cluster at `address` (`auto`, `HOST:PORT`, `ray://HOST:10001`), else start a
    local one; a session already connected (the tests') is kept."""
    ray = _ray()
    if ray.is_initialized():
        return
    if address:
        _probe(address)
    try:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False)
    except Exception as error:  # Ray raises ConnectionError, RuntimeError or ValueError by case
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise EngineError(f"cannot reach {where}: {message}") from None


def _probe(address: str) -> None:
    """Refuse at once a HOST:PORT (or ray://HOST:PORT) where nothing listens; `auto` and other
    forms are left to Ray."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as error:
        raise EngineError(f"cannot reach the Ray cluster at {address}: {error.strerror or type(error).__name__}") from None


def parse_group(sources: list[Source], window: int | None) -> GroupResults:
    """One group's rows, all of them at once (a task's result is one object)."""
    return parse_sources(iter(sources), False, window)


def split_groups(sources: list[Source], max_bytes: int, max_files: int = GROUP_FILES) -> list[list[Source]]:
    """Consecutive files up to the byte and file caps: each group pays the engine passes' fixed
    cost once, and a job of one huge file is still one task per file."""
    groups: list[list[Source]] = []
    size = 0
    for src in sources:
        if not groups or size >= max_bytes or len(groups[-1]) >= max_files:
            groups.append([])
            size = 0
        groups[-1].append(src)
        size += src.size or 0
    return groups


def group_parser(address: str | None = None, group_bytes: int | None = None,
                 parse: Callable[[list[Source], int | None], GroupResults] = parse_group) -> GroupParser:
    """A pipeline.GroupParser that runs `parse` for each group of files as a Ray task.
    `group_bytes` overrides the group size (tests split small jobs into many groups)."""
    connect(address)
    ray = _ray()
    task = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(parse)

    def parse_groups(sources: list[Source], window: int | None) -> Iterator[GroupResults]:
        max_bytes = group_bytes or (GROUP_BYTES if window is None else WINDOW_GROUP_BYTES)
        pending = iter(split_groups(sources, max_bytes))
        in_flight = max(2, IN_FLIGHT_PER_CPU * int(ray.cluster_resources().get("CPU", 1)))
        running: dict = {}
        try:
            while True:
                for group in pending:
                    running[task.remote(group, window)] = group
                    if len(running) >= in_flight:
                        break
                if not running:
                    return
                [done], _ = ray.wait(list(running), num_returns=1)
                group = running.pop(done)
                yield _result(ray, done, group)
        finally:
            for ref in running:  # the driver stopped taking rows (it failed): free the cluster
                ray.cancel(ref, force=True)

    return parse_groups


def _result(ray, ref, group: list[Source]) -> GroupResults:
    """A finished task's rows; a parser's own exception is raised as itself (a bug, as
    in-process), a lost task past its retries as one line."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:
        raise error.as_instanceof_cause() from None
    except ray.exceptions.RayError as error:
        first = group[0].path if group else "?"
        raise EngineError(f"ray lost the group of {len(group)} file(s) from {first} after {TASK_RETRIES} "
                          f"retries: {type(error).__name__}") from None


class Engine(str, Enum):
    local = "local"
    ray = "ray"


ENGINE_HELP = "Where the files are parsed: local (in this process, the default) or ray (a Ray cluster's tasks)."
ADDRESS_HELP = ("With --engine ray: the cluster to join (auto, HOST:PORT, ray://HOST:10001; default $RAY_ADDRESS, "
                "else a local Ray started for this command).")


def parser_for(engine: Engine, address: str | None) -> GroupParser | None:
    """The GroupParser of the command's --engine (None: in-process); --address needs --engine ray."""
    if engine is Engine.ray:
        return group_parser(address)
    if address:
        raise EngineError("--address needs --engine ray")
    return None
