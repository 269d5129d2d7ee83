"""Launcher models: who the launcher kills and when, what it prints, and the on-disk layout it leaves.

torchrun (and torchrun inside each Kubernetes pod): one agent per host polls its workers; on the
first failed worker it SIGTERMs the remaining local ones and raises ChildFailedError. srun
(--kill-on-bad-exit --label): the first non-zero exit cancels the whole step.
"""
from __future__ import annotations

import random
import string
from pathlib import Path

from . import clock
from .simulate import RankProc, JobSim
from .torchlog import AgentLog, Failure, child_failed_error, signal_exception

SRUN_STATUS = {-6: "Aborted", -9: "Out Of Memory", -11: "Segmentation fault", -15: "Terminated"}


def _kill(p: RankProc, t: float) -> None:
    """SIGTERM from the launcher: a Python worker dies silently; drop what it would have written later."""
    p.records = [rec for rec in p.records if rec[0] <= t]
    p.exit_time, p.exit_code = t + 0.05, -15


def _hang_kill_time(sim: JobSim) -> float:
    if sim.kill_time is not None:
        return sim.kill_time
    finite = [p.exit_time for p in sim.ranks if p.exit_time is not None]
    return max(finite) + 120.0


def _ranges(ids: list[int]) -> str:
    parts, start = [], None
    for i, r in enumerate(ids):
        if start is None:
            start = r
        if i + 1 == len(ids) or ids[i + 1] != r + 1:
            parts.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(parts)


class _BlockWriter:
    """Collects text and writes it in blocks of a few MB (no per-line write calls, bounded memory)."""

    def __init__(self, path: Path, block_chars: int = 8 << 20):
        self.path, self.block_chars = path, block_chars
        self.parts: list[str] = []
        self.size = 0

    def __enter__(self) -> "_BlockWriter":
        self.file = open(self.path, "w")
        return self

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size >= self.block_chars:
            self.flush()

    def flush(self) -> None:
        self.file.write("".join(self.parts))
        self.parts, self.size = [], 0

    def __exit__(self, *exc) -> None:
        self.flush()
        self.file.close()


# ---- torchrun agent (also inside Kubernetes pods) ---------------------------------------------
def run_agents(sim: JobSim, fqdn_of) -> dict[int, list[tuple[float, str]]]:
    """Resolve each host's agent; returns host index -> agent console records (true time, text)."""
    rng = random.Random(sim.spec.seed + 7)
    era = sim.spec.torch_era
    interval = 5.0 if era == "old" else 0.1
    consoles = {}
    for h, host in enumerate(sim.hosts):
        procs = [p for p in sim.ranks if p.host_idx == h]
        agent = AgentLog(era, 1 if sim.spec.launcher == "kubernetes" else procs[0].pid - 1 - rng.randrange(1, 50))
        skew = procs[0].skew
        out = [(sim.t_launch + 0.3, agent.banner(sim.t_launch + 0.3 + skew))]
        failing = sorted((p for p in procs if p.exit_code not in (None, 0)), key=lambda p: p.exit_time)
        if failing:
            t_poll = failing[0].exit_time + rng.uniform(0.01, interval)
            failed = [p for p in procs if p.exit_code not in (None, 0) and p.exit_time <= t_poll]
            alive = [p for p in procs if p.exit_time is None or p.exit_time > t_poll]
            text = "".join(agent.closing(t_poll + skew, p.pid) for p in alive)
            first = failed[0]
            text += agent.failed(t_poll + skew, first.exit_code, first.local_rank, first.pid)
            for p in alive:
                _kill(p, t_poll)
            stamp = int(t_poll + 0.1 + skew)
            failures = [Failure(p.rank, p.local_rank, p.exit_code, p.pid, stamp) for p in failed]
            text += child_failed_error("train.py", fqdn_of(host), failures)
            out.append((t_poll, text))
        elif any(p.exit_time is None for p in procs):
            t_kill = _hang_kill_time(sim)
            alive = [p for p in procs if p.exit_time is None]
            text = agent.death_signal(t_kill + skew) + "".join(agent.closing(t_kill + skew, p.pid) for p in alive)
            for p in alive:
                _kill(p, t_kill)
            out.append((t_kill, text + signal_exception(agent.pid)))
        consoles[h] = out
    return consoles


def _rand8(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits + "_") for _ in range(8))


def _stream_text(p: RankProc, stream: str) -> str:
    return "".join(text for _, s, text in sorted((r for r in p.records if r[1] == stream), key=lambda r: r[0]))


def write_torchrun(sim: JobSim, logs: Path, consoles: dict[int, list[tuple[float, str]]],
                   dropped: set[int]) -> list[Path]:
    rng = random.Random(sim.spec.seed + 11)
    written = []
    for h, host in enumerate(sim.hosts):
        attempt = logs / host / f"{sim.job_id}_{_rand8(rng)}" / "attempt_0"
        for p in (p for p in sim.ranks if p.host_idx == h):
            rank_dir = attempt / str(p.local_rank)
            rank_dir.mkdir(parents=True, exist_ok=True)
            if p.rank in dropped:
                continue
            for stream in ("stdout", "stderr"):
                path = rank_dir / f"{stream}.log"
                path.write_text(_stream_text(p, stream[3:]))
                written.append(path)
        path = logs / host / "torchrun.log"
        path.write_text("".join(text for _, text in sorted(consoles[h], key=lambda r: r[0])))
        written.append(path)
    return written


def write_kubernetes(sim: JobSim, logs: Path, consoles: dict[int, list[tuple[float, str]]],
                     dropped: set[int]) -> list[Path]:
    """`kubectl logs --timestamps <pod>` per pod: kubelet UTC stamp per line; workers tee'd by torchrun."""
    logs.mkdir(parents=True, exist_ok=True)
    rng = random.Random(sim.spec.seed + 13)
    written = []
    for h, pod in enumerate(sim.hosts):
        procs = [p for p in sim.ranks if p.host_idx == h]
        if any(p.rank in dropped for p in procs):
            continue
        skew = procs[0].skew
        entries = [(t, "", text) for t, text in consoles[h]]
        for p in procs:
            entries.extend((t, f"[default{p.local_rank}]:", text) for t, _, text in p.records)
        entries.sort(key=lambda e: e[0])
        path = logs / f"{pod}.log"
        with _BlockWriter(path) as out:
            for t, prefix, text in entries:
                lead = clock.rfc3339_nano(t + skew + rng.uniform(0.0005, 0.02)) + " " + prefix
                body = text[:-1] if text.endswith("\n") else text
                out.add(lead + body.replace("\n", "\n" + lead) + "\n")
        written.append(path)
    return written


# ---- srun --------------------------------------------------------------------------------------
def run_srun(sim: JobSim) -> list[tuple[float, int | None, str]]:
    """Resolve srun --kill-on-bad-exit; returns its own lines and slurmstepd's as
    (true time, label task or None, text)."""
    rng = random.Random(sim.spec.seed + 17)
    job, node1_skew = sim.job_id, sim.ranks[0].skew
    lines: list[tuple[float, int | None, str]] = []
    bad = sorted((p for p in sim.ranks if p.exit_code not in (None, 0)), key=lambda p: p.exit_time)
    for p in bad:
        if p.exit_code == -9:   # cgroup OOM: that node's stepd reports through its first task
            first_task = p.host_idx * sim.spec.ranks_per_host
            lines.append((p.exit_time + 0.01, first_task,
                          f"slurmstepd: error: Detected 1 oom-kill event(s) in StepId={job}.0. Some of your "
                          "processes may have been killed by the cgroup out-of-memory handler.\n"))
    if bad:
        t_first = bad[0].exit_time
        reported = [p for p in bad if p.exit_time <= t_first + 0.01]
        lines.append((t_first + 0.02, None, _exit_lines(sim, reported)))
        t_kill = t_first + rng.uniform(0.1, 0.6)
        lines.append((t_kill, None, f"srun: launch/slurm: _step_signal: Terminating StepId={job}.0\n"))
        lines.append((t_kill + 0.01, 0, f"slurmstepd: error: *** STEP {job}.0 ON {sim.hosts[0]} CANCELLED AT "
                                        f"{clock.seconds(t_kill + node1_skew, 'T')} ***\n"))
        lines.append((t_kill + 0.02, None, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"))
        for p in sim.ranks:
            if p.exit_time is None or p.exit_time > t_kill:
                _kill(p, t_kill)
        reported_ranks = {p.rank for p in reported}
        rest = [p for p in sim.ranks if p.exit_code != 0 and p.rank not in reported_ranks]
        if rest:
            lines.append((t_kill + 0.3, None, _exit_lines(sim, rest)))
        return lines
    if any(p.exit_time is None for p in sim.ranks):
        t_kill = _hang_kill_time(sim)
        at = clock.seconds(t_kill + node1_skew, "T")
        lines.append((t_kill, None, f"slurmstepd: error: *** JOB {job} ON {sim.hosts[0]} CANCELLED AT {at} "
                                    "DUE TO TIME LIMIT ***\n"))
        lines.append((t_kill + 0.01, 0, f"slurmstepd: error: *** STEP {job}.0 ON {sim.hosts[0]} CANCELLED AT {at} "
                                        "DUE TO TIME LIMIT ***\n"))
        lines.append((t_kill + 0.02, None, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"))
        alive = [p for p in sim.ranks if p.exit_time is None]
        for p in alive:
            _kill(p, t_kill)
        lines.append((t_kill + 0.3, None, _exit_lines(sim, alive)))
    return lines


def _exit_lines(sim: JobSim, procs: list[RankProc]) -> str:
    """srun's task exit errors: one line per node and status, identical statuses merged into a range."""
    groups: dict[tuple[int, str], list[int]] = {}
    for p in sorted(procs, key=lambda p: p.rank):
        code = p.exit_code
        status = f"Exited with exit code {code}" if code > 0 else SRUN_STATUS.get(code, "Killed")
        groups.setdefault((p.host_idx, status), []).append(p.rank)
    return "".join(f"srun: error: {sim.hosts[h]}: {'task' if len(ids) == 1 else 'tasks'} {_ranges(ids)}: {status}\n"
                   for (h, status), ids in sorted(groups.items()))


def write_srun(sim: JobSim, logs: Path, srun_lines: list[tuple[float, int | None, str]],
               dropped: set[int]) -> list[Path]:
    logs.mkdir(parents=True, exist_ok=True)
    width = len(str(sim.spec.nranks - 1))
    entries = [(t, label, text) for t, label, text in srun_lines]
    for p in sim.ranks:
        if p.rank not in dropped:
            entries.extend((t, p.rank, text) for t, _, text in p.records)
    entries.sort(key=lambda e: e[0])
    leads = [f"{task:>{width}}: " for task in range(sim.spec.nranks)]
    path = logs / f"slurm-{sim.job_id}.out"
    with _BlockWriter(path) as out:
        for _, label, text in entries:
            if label is None:
                out.add(text)
                continue
            lead = leads[label]
            body = text[:-1] if text.endswith("\n") else text
            out.add(lead + body.replace("\n", "\n" + lead) + "\n")
    return [path]
