"""Several jobs in one input: found from the names in the tree, before anything is parsed.

`correlator analyze samples` (a tree of 100 captured runs) must not merge them into one verdict.
A job leaves names that say which job it is:

- Slurm: `slurm-<id>.out` (`slurm-<id>_<task>.out` for an array task) and srun's `%x-%j-%t.out`
  (`train-37-0.out`): the job id.
- torchrun: its `--log-dir` holds `<rdzv id>_<random>/attempt_<n>/<local rank>/`; the random part
  is per agent, so the agents (nodes) of one job share the rdzv id. With the default rdzv id
  (`none`) the id says nothing; the run is then known by where it lies.

Where a job lies is the directory its names sit in, climbing out of the names that every job's
logs use (`logs`, `torchrun`, ...) and out of host directories (`node1/`, `worker-3/`: the nodes of
one job), never above the given path. So `samples/tr-stalled_rank-4/logs/torchrun/none_x/` is
the job `samples/tr-stalled_rank-4`, and `logs/node1/torchrun/none_a` and `logs/node2/torchrun/none_b`
are one job at `logs`.

Runs of one torchrun rdzv id are one job; a torchrun run inside the directory of one Slurm job is
part of it; two Slurm job ids are two jobs, wherever they lie; torchrun runs with the default id
that lie in different job directories are different jobs; logs that leave no name (an mpirun
console) in a directory beside named jobs' directories are a job of their own. Several inputs
given together are the user's word that they are one job: every input's own directory counts as
the same place (but two Slurm job ids are still two jobs). Archives and standard input are not looked into (one job each).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .discover import _HOST_DIR, _POD

SLURM_OUTPUT = re.compile(r"^slurm-(\d+(?:_\d+)?)\.(?:out|err)$")
SRUN_OUTPUT = re.compile(r"^[^/]+?-(\d+)-\d+\.(?:out|err)$")           # srun --output=%x-%j-%t.out
ATTEMPT = re.compile(r"^attempt_\d+$")
RUN_DIR = re.compile(r"^(?P<rdzv>.+)_[a-z0-9_]{8}$")                    # tempfile.mkdtemp(prefix=f"{rdzv}_")
DEFAULT_RDZV = "none"
# Directory names that any job's logs use: they say nothing about which job.
GENERIC = {"logs", "log", "torchrun", "torchelastic", "elastic", "output", "outputs", "out", "slurm", "stdout",
           "stderr", "ranks", "workers", "nodes", "hosts", "pods", "containers", "launcher"}
MAX_ENTRIES = 200_000  # a walk of names only; a bigger tree is read as one job (as --one-job)


@dataclass
class Job:
    """One job found in the input: how it is known, where it lies, and the names that said so."""
    name: str                    # "slurm job 39", "torchrun run job-8812", "torchrun run"
    where: Path                  # the directory to give `analyze` for this job alone
    shared: bool = False         # `where` also holds another job's logs: give its files instead
    evidence: list[str] = field(default_factory=list)


@dataclass
class _Anchor:
    key: str          # the job's identity: slurm:<id>, rdzv:<id>, or place:<dir>
    kind: str         # slurm | torchrun
    label: str
    where: Path
    name: str         # the file or run directory, relative to the input


def _climb(directory: Path, root: Path) -> Path:
    """Out of generic and host directories, never above `root`."""
    while directory != root and root in directory.parents and (
            directory.name.lower() in GENERIC or _HOST_DIR.match(directory.name) or _POD.match(directory.name)):
        directory = directory.parent
    return directory


LOG_FILE = re.compile(r"\.(?:log|out|err)(?:\.gz|\.zst)?$")
LOG_DIRS = {"logs", "log", "output", "outputs", "stdout", "stderr"}   # any file in one is a log


def _unnamed(root: Path, found: list[_Anchor], logs_in: dict[Path, str]) -> list[_Anchor]:
    """Jobs that leave no name (an mpirun console, a pod's log) beside jobs that do: a directory
    next to named jobs' own directories (their parent holds it too) that holds log files (`*.log`,
    `*.out`, `*.err`, or any file in a directory such as `logs/`) and no named job is a
    job of its own, known by where it lies."""
    places = {a.where for a in found}
    beside = {p.parent for p in places if p != root and (p.parent == root or root in p.parent.parents)}
    out = []
    for parent in sorted(beside):
        for name, first in sorted(logs_in.items()):
            if name.parent != parent or name in places or any(name in p.parents or p in name.parents for p in places):
                continue
            out.append(_Anchor(f"place:{name}", "place", "logs", name, first))
    return out


def _anchors(root: Path) -> list[_Anchor]:
    """The job names in the tree under `root` (a directory; links not followed)."""
    found: list[_Anchor] = []
    logs_in: dict[Path, str] = {}   # the top directories (children of any directory) holding log files
    seen = 0
    for directory, subdirs, files in os.walk(root):
        seen += len(subdirs) + len(files)
        if seen > MAX_ENTRIES:
            return []
        here = Path(directory)
        logs = [f for f in files if LOG_FILE.search(f)] or (files if here.name.lower() in LOG_DIRS else [])
        if logs and here != root:
            for top in (here, *here.parents):   # each directory on the way up holds them
                if top == root:
                    break
                logs_in.setdefault(top, str((here / sorted(logs)[0]).relative_to(root.parent)))
        subdirs.sort()
        if any(ATTEMPT.match(d) for d in subdirs):  # a torchrun run directory
            subdirs[:] = []  # its rank directories say nothing more about the job
            match = RUN_DIR.match(here.name)
            rdzv = match["rdzv"] if match else here.name
            where = _climb(here.parent, root) if here != root else root  # given the run directory itself
            key = f"rdzv:{rdzv}" if rdzv != DEFAULT_RDZV else f"place:{where}"
            label = f"torchrun run {rdzv}" if rdzv != DEFAULT_RDZV else "torchrun run"
            found.append(_Anchor(key, "torchrun", label, where, str(here.relative_to(root.parent))))
            continue
        for name in sorted(files):
            match = SLURM_OUTPUT.match(name) or SRUN_OUTPUT.match(name)
            if match:
                found.append(_Anchor(f"slurm:{match[1]}", "slurm", f"slurm job {match[1]}", _climb(here, root),
                                     str((here / name).relative_to(root.parent))))
    return found + _unnamed(root, found, logs_in) if found else found


def _file_anchor(path: Path) -> list[_Anchor]:
    match = SLURM_OUTPUT.match(path.name) or SRUN_OUTPUT.match(path.name)
    if not match:
        return []
    return [_Anchor(f"slurm:{match[1]}", "slurm", f"slurm job {match[1]}", path.parent, str(path))]


def find_jobs(inputs: list[str] | list[Path] | str | Path) -> list[Job]:
    """The jobs that the inputs' names tell apart, in a stable order; one or none means one job."""
    given = [Path(p) for p in (inputs if isinstance(inputs, list) else [inputs]) if str(p) != "-"]
    roots = [p for p in given if p.is_dir()]
    anchors: list[_Anchor] = []
    for path in given:
        if path.is_dir():
            anchors += _anchors(path)
        elif path.is_file():
            anchors += _file_anchor(path)
    if len(given) > 1:  # given together: one place
        for anchor in anchors:
            if anchor.key.startswith("place:") and anchor.where in roots:
                anchor.key = "place:inputs"
    return _group(anchors)


def _group(anchors: list[_Anchor]) -> list[Job]:
    jobs: dict[str, Job] = {}
    slurm_at: dict[Path, set[str]] = {}
    for anchor in anchors:
        if anchor.kind == "slurm":
            slurm_at.setdefault(anchor.where, set()).add(anchor.key)
    for anchor in sorted(anchors, key=lambda a: (a.kind != "slurm", a.key, a.name)):
        key = anchor.key
        if anchor.kind == "torchrun":  # inside one Slurm job's directory: part of it
            for place in (anchor.where, *anchor.where.parents):
                owners = slurm_at.get(place)
                if owners:
                    key = next(iter(owners)) if len(owners) == 1 else key
                    break
        job = jobs.get(key)
        if job is None:
            job = jobs[key] = Job(anchor.label, anchor.where)
        elif anchor.where != job.where:  # a job's names in several places: the place that holds them all
            job.where = Path(os.path.commonpath([job.where, anchor.where]))
        job.evidence.append(anchor.name)
    places: dict[Path, int] = {}
    for job in jobs.values():
        places[job.where] = places.get(job.where, 0) + 1
    for job in jobs.values():
        job.shared = places[job.where] > 1 or any(other.where != job.where and job.where in other.where.parents
                                                  for other in jobs.values())
    return sorted(jobs.values(), key=lambda j: (str(j.where), j.name))


def separable(jobs: list[Job]) -> bool:
    """Whether each job has a directory of its own (then each can be analysed alone)."""
    return len(jobs) > 1 and not any(job.shared for job in jobs)


SHOWN = 4


def refusal(inputs: list[str] | list[Path] | str | Path, jobs: list[Job]) -> str:
    """One line: how many jobs, which ones, and how to pick one."""
    given = " ".join(str(p) for p in inputs) if isinstance(inputs, list) else str(inputs)
    names = ", ".join(_name(job) for job in jobs[:SHOWN])
    more = f", +{len(jobs) - SHOWN} more" if len(jobs) > SHOWN else ""
    if separable(jobs):
        pick = (f"analyse one at a time (correlator analyze {jobs[0].where}), store each (correlator ingest "
                f"{given}), or read them as one job (--one-job)")
    else:
        first = jobs[0]
        pick = (f"give one job's files (e.g. correlator analyze {first.evidence[0]} ...), "
                "or read them as one job (--one-job)")
    return f"{given} holds {len(jobs)} jobs: {names}{more}; {pick}"


def _name(job: Job) -> str:
    return f"{job.name} in {job.where}"
