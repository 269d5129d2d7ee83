"""The runtime model: what every rank of a job writes, and when, given a JobSpec.

Each rank gets a list of records (true time, stream, text block). Rendering of wall-clock
timestamps uses the writing host's clock (true time + its skew). The launcher model
(launchers.py) later decides which processes it kills and trims what they would have written.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from . import clock
from .nccl import Comm, NcclLog
from .spec import JobSpec, host_names
from .torchlog import C10Log, PgView, Work, desync_report

TRAIN_SCRIPT = "/workspace/train.py"
PG_DESCS = {"old": ("undefined", "undefined"), "new": ("mesh_tp", "mesh_dp")}
NUMELS = (25165824, 4194304, 16777216, 1048576, 8388608, 2097152, 33554432, 524288)
OP_CYCLE = {"tp": ("_ALLGATHER_BASE", "ALLREDUCE"), "dp": ("_REDUCE_SCATTER_BASE", "_ALLGATHER_BASE")}


@dataclass
class Position:
    """One collective of the per-step program (identical on all ranks unless a fault says otherwise)."""
    pg: int
    op_type: str
    numel: int            # NCCL count
    dtype: int            # ncclDataType_t
    index_in_pg: int      # rank in the step among the collectives of the same PG
    per_step: int         # collectives of this PG per step


@dataclass
class ProcessGroup:
    pg_id: int
    desc: str
    groups: list[list[int]]
    comm_ids: list[str]

    def group_of(self, rank: int) -> int:
        return next(i for i, members in enumerate(self.groups) if rank in members)


@dataclass(eq=False)     # identity: comparing records field by field would scan whole logs
class RankProc:
    rank: int
    host_idx: int
    host: str
    local_rank: int
    pid: int
    skew: float
    nccl: NcclLog
    c10: C10Log
    comms: dict[int, Comm] = field(default_factory=dict)
    pgs: dict[int, PgView] = field(default_factory=dict)
    records: list[tuple[float, str, str]] = field(default_factory=list)
    exit_time: float | None = None       # None: still running (hung) until someone kills it
    exit_code: int | None = None         # torchrun convention: negative = killed by that signal

    def local(self, t: float) -> float:
        return t + self.skew

    def log(self, t: float, level: str, message: str) -> tuple[float, str, str]:
        return (t, "err", f"{clock.pylog(self.local(t))} {level} [rank {self.rank}] {message}\n")


def _hex_ptr(rng: random.Random, high: int) -> str:
    return f"0x{high:x}{rng.getrandbits(28) << 4:07x}"


class JobSim:
    def __init__(self, spec: JobSpec):
        spec.validate()
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.hosts = host_names(spec)
        self.job_id = 1000 + self.rng.randrange(90000)
        self.culprits = self._culprits()
        self.fault_step = min(spec.fault_step or max(1, spec.steps * 2 // 3), spec.steps)
        self.t_launch = clock.parse_start(spec.start_time) + self.rng.uniform(0, 3600)
        self.t_init = self.t_launch + 6.0
        self.step_start = self._step_starts()
        self.pgs = self._process_groups()
        self.program = self._program()
        self.ranks = [self._make_rank(r) for r in range(spec.nranks)]
        pg0_per_step = self.program[0].per_step
        self.fault_seq = (self.fault_step - 1) * pg0_per_step + 1      # PyTorch SeqNum of the fault collective
        self.kill_time: float | None = None   # when a hung job is killed from outside (scheduler / user)
        self.notes: list[str] = []

    # ---- topology -------------------------------------------------------------------------
    def _culprits(self) -> list[int]:
        s = self.spec
        if s.fault in ("none", "scheduler_timeout"):
            return []
        chosen = sorted(set(s.fault_ranks)) if s.fault_ranks else [self.rng.randrange(s.nranks)]
        if s.fault == "transport":   # the whole host behind the failing link
            host = chosen[0] // s.ranks_per_host
            return [r for r in range(s.nranks) if r // s.ranks_per_host == host]
        return chosen

    def _step_starts(self) -> list[float]:
        starts = [0.0, self.t_init + 2.5]
        for _ in range(self.spec.steps + 1):
            starts.append(starts[-1] + self.spec.step_time_s * self.rng.uniform(0.95, 1.05))
        return starts   # index = 1-based step; [steps + 1] is the end of the last step

    def _tp_size(self) -> int:
        s = self.spec
        if 1 < s.ranks_per_host < s.nranks and s.nranks % s.ranks_per_host == 0:
            return s.ranks_per_host
        return 2 if s.nranks % 2 == 0 and s.nranks > 2 else s.nranks

    def _process_groups(self) -> list[ProcessGroup]:
        s, tp = self.spec, self._tp_size()
        pgs = [ProcessGroup(0, "default_pg", [list(range(s.nranks))], [f"{self.rng.getrandbits(64):x}"])]
        for k in range(1, s.n_pgs + 1):
            kind = "tp" if k % 2 else "dp"
            if kind == "tp":
                groups = [list(range(g, g + tp)) for g in range(0, s.nranks, tp)]
            else:
                groups = [list(range(first, s.nranks, tp)) for first in range(tp)]
            desc = PG_DESCS[s.torch_era][0 if kind == "tp" else 1]
            pgs.append(ProcessGroup(k, desc, groups, [f"{self.rng.getrandbits(64):x}" for _ in groups]))
        return pgs

    def _program(self) -> list[Position]:
        s = self.spec
        count = max(s.collectives_per_step, 2 if s.fault == "missing_collective" else 1)
        pg_of = [0 if i in (0, count - 1) or s.n_pgs == 0 else 1 + (i - 1) % s.n_pgs for i in range(count)]
        per_pg = {pg: pg_of.count(pg) for pg in set(pg_of)}
        seen: dict[int, int] = {}
        program = []
        for i, pg in enumerate(pg_of):
            idx = seen.get(pg, 0)
            seen[pg] = idx + 1
            if pg == 0:
                op, dtype = "ALLREDUCE", 7
            else:
                op, dtype = OP_CYCLE["tp" if pg % 2 else "dp"][idx % 2], 9
            program.append(Position(pg, op, NUMELS[i % len(NUMELS)], dtype, idx, per_pg[pg]))
        return program

    def _make_rank(self, r: int) -> RankProc:
        s = self.spec
        host_idx, local_rank = divmod(r, s.ranks_per_host)
        host = self.hosts[host_idx]
        pid = 60 + 12 * local_rank if s.launcher == "kubernetes" else self.rng.randrange(3000, 4_000_000)
        cuda_dev = 0 if s.launcher == "srun" else local_rank
        proc = RankProc(r, host_idx, host, local_rank, pid, float(s.clock_skew_s.get(host, 0.0)),
                        NcclLog(s.nccl_version, host, pid, cuda_dev, local_rank),
                        C10Log(s.torch_era, r, self.rng.uniform(1e4, 1e6)))
        for pg in self.pgs:
            g = pg.group_of(r)
            members = pg.groups[g]
            proc.comms[pg.pg_id] = Comm(_hex_ptr(self.rng, 0x55d6), pg.comm_ids[g], members.index(r),
                                        len(members), _hex_ptr(self.rng, 0x55d9))
            proc.pgs[pg.pg_id] = PgView(pg.pg_id, pg.desc, members.index(r))
        return proc

    # ---- numbers of the program ---------------------------------------------------------
    def seq(self, pos: Position, step: int) -> int:
        return (step - 1) * pos.per_step + pos.index_in_pg + 1

    def numel_in_out(self, pos: Position, count: int, group_size: int) -> tuple[int, int]:
        if pos.op_type in ("_ALLGATHER_BASE", "ALLGATHER"):
            return count, count * group_size
        if pos.op_type == "_REDUCE_SCATTER_BASE":
            return count * group_size, count
        return count, count

    def _coll_parts(self, p: RankProc, pos: Position, count: int | None = None,
                    dtype: int | None = None) -> tuple[str, str]:
        send = _hex_ptr(self.rng, 0x7f9e)
        recv = send if pos.op_type == "ALLREDUCE" else _hex_ptr(self.rng, 0x7f9e)
        return p.nccl.coll_parts(p.comms[pos.pg], pos.op_type, pos.numel if count is None else count,
                                 pos.dtype if dtype is None else dtype, send, recv)

    # ---- phases of one rank ---------------------------------------------------------------
    def startup(self, p: RankProc, start_nccl: bool = True) -> float:
        s = self.spec
        t = self.t_launch + 1.5 + self.rng.uniform(0, 1.5)
        p.records.append((t, "out", f"[rank {p.rank}] host={p.host} pid={p.pid} local_rank={p.local_rank} "
                                    f"world_size={s.nranks}\n"))
        p.records.append(p.log(t + 0.05, "INFO", f"starting training: {s.steps} steps, "
                                                 f"{len(self.pgs)} process groups"))
        if not start_nccl:
            return t
        ip = f"10.{p.host_idx // 250}.{p.host_idx % 250}.{10 + p.local_rank}"
        t_nccl = self.t_init + self.rng.uniform(0, 0.3)
        p.records.append((t_nccl, "out", p.nccl.startup(ip)))
        return t_nccl

    def init_comms(self, p: RankProc, complete: bool = True) -> None:
        t = self.t_init + 0.5 + self.rng.uniform(0, 0.2)
        for pg in self.pgs:
            comm = p.comms[pg.pg_id]
            text = p.nccl.init_start(comm)
            if complete:
                nnodes = len({m // self.spec.ranks_per_host for m in pg.groups[pg.group_of(p.rank)]})
                text += p.nccl.init_complete(comm, nnodes, self.spec.ranks_per_host, p.local_rank)
            p.records.append((t + 0.4 * pg.pg_id, "out", text))
            if not complete:
                return      # bootstrap of the first communicator never returns

    def run_steps(self, p: RankProc, last_step: int, late_s: float = 0.0) -> None:
        """Steps 1..last_step, completed normally: COLL lines at enqueue, a progress line at the end."""
        s, recs = self.spec, p.records
        parts = [(*self._coll_parts(p, pos), pos.per_step, pos.index_in_pg) for pos in self.program]
        noise = random.Random(self.spec.seed * 1_000_003 + p.rank)
        for step in range(1, last_step + 1):
            if s.coll_lines:
                base = step - 1
                recs.append((self.step_start[step] + 0.002, "out",
                             "".join([pre + format(base * per + idx, "x") + post for pre, post, per, idx in parts])))
            t_end = self.step_start[step + 1] - 0.05 + noise.uniform(0, 0.03) + late_s
            loss = 2.5 * math.exp(-1.5 * step / s.steps) + 0.8 + noise.uniform(-0.05, 0.05)
            recs.append(p.log(t_end, "INFO", f"step {step}/{s.steps} loss {loss:.4f}"))

    def enqueue_fault_step(self, p: RankProc, skip_first: bool = False, mismatch: bool = False) -> dict[int, int]:
        """COLL lines of the fault step as this rank enqueues them; returns its last enqueued seq per PG."""
        step, last = self.fault_step, {}
        lines = []
        for i, pos in enumerate(self.program):
            if skip_first and i == 0:
                continue
            seq = self.seq(pos, step) - (1 if skip_first and pos.pg == 0 else 0)
            last[pos.pg] = seq
            count, dtype = pos.numel, pos.dtype
            if mismatch and i == 0:
                count, dtype = self._mismatched(pos)
            pre, post = self._coll_parts(p, pos, count, dtype)
            lines.append(pre + format(seq - 1, "x") + post)
        if self.spec.coll_lines:
            p.records.append((self.step_start[step] + 0.002, "out", "".join(lines)))
        return last

    def _mismatched(self, pos: Position) -> tuple[int, int]:
        if self.spec.mismatch_kind == "dtype":
            return pos.numel, 9 if pos.dtype != 9 else 7
        return pos.numel * 2, pos.dtype

    def finish_ok(self, p: RankProc, t: float, message: str = "training finished") -> None:
        p.records.append(p.log(t, "INFO", message))
        p.records.append((t + 0.2, "out", "".join(p.nccl.end_of_comm(p.comms[pg.pg_id], "Destroy")
                                                  for pg in self.pgs)))
        p.exit_time, p.exit_code = t + 0.4, 0

    def watchdog_timeout(self, p: RankProc, work: Work, last_enqueued: int, report: str) -> None:
        t = self.step_start[self.fault_step] + self.spec.timeout_s + self.rng.uniform(0.05, 1.0)
        ran_ms = int((t - self.step_start[self.fault_step]) * 1000)
        text = p.c10.watchdog_timeout(p.local(t), p.pgs[0], work, ran_ms, last_enqueued, self.fault_seq - 1,
                                      report)
        p.records.append((t, "err", text))
        if self.spec.torch_era == "new":
            p.records.append((t + 0.01, "out", p.nccl.end_of_comm(p.comms[0], "Abort")))
        p.exit_time, p.exit_code = t + 0.05, -6

    # ---- the job --------------------------------------------------------------------------
    def run(self) -> None:
        s = self.spec
        if s.fault == "init_failure":
            return self._init_failure()
        for p in self.ranks:
            self.startup(p)
            self.init_comms(p)
        if s.fault in ("none", "straggler"):
            for p in self.ranks:
                late = self.rng.uniform(0.3, 0.6) if p.rank in self.culprits else 0.0
                self.run_steps(p, s.steps, late)
                self.finish_ok(p, self.step_start[s.steps + 1] + 0.3 + self.rng.uniform(0, 0.2))
            return
        for p in self.ranks:
            self.run_steps(p, self.fault_step - 1)
        if s.fault == "scheduler_timeout":
            for p in self.ranks:
                self.enqueue_fault_step(p)
            self.kill_time = self.step_start[self.fault_step] + 0.5
            return
        self._diverge()

    def _init_failure(self) -> None:
        for p in self.ranks:
            culprit = p.rank in self.culprits
            self.startup(p, start_nccl=not culprit)
            if not culprit:
                self.init_comms(p, complete=False)
        self.kill_time = self.t_init + max(self.spec.timeout_s, 60.0) + self.rng.uniform(30, 90)
        self.notes.append("culprit ranks hang before NCCL init; the others hang in Init of the default "
                          "communicator until the job is killed from outside")

    def _diverge(self) -> None:
        s, X = self.spec, self.fault_seq
        t_fault = self.step_start[self.fault_step]
        pos0 = self.program[0]
        last_pos0 = max((pos for pos in self.program if pos.pg == 0), key=lambda pos: pos.index_in_pg)
        waiting = [p for p in self.ranks if p.rank not in self.culprits or s.fault in ("mismatch", "missing_collective")]
        states = self._desync_states()
        for p in self.ranks:
            culprit = p.rank in self.culprits
            if culprit and s.fault in ("stall", "crash", "oom", "exit_early"):
                self._culprit_leaves(p, t_fault)
                continue
            last = self.enqueue_fault_step(p, skip_first=culprit and s.fault == "missing_collective",
                                           mismatch=culprit and s.fault == "mismatch")
            if culprit and s.fault == "transport":
                self._transport_error(p, t_fault, last[0])
                continue
            pos = last_pos0 if culprit and s.fault == "missing_collective" else pos0
            count, _ = self._mismatched(pos0) if culprit and s.fault == "mismatch" else (pos.numel, pos.dtype)
            numel_in, numel_out = self.numel_in_out(pos, count, s.nranks)
            work = Work(X, pos.op_type, numel_in, numel_out, int(s.timeout_s * 1000))
            report = desync_report(p.rank, pos.op_type, X, states, s.nranks) if s.desync_debug else ""
            self.watchdog_timeout(p, work, last[0], report)
        self.notes.append(f"{len(waiting)} ranks enqueue PG 0 SeqNum {X} (step {self.fault_step}) and time out "
                          f"after {s.timeout_s:g} s unless the launcher kills them first")

    def _desync_states(self) -> dict[int, tuple[int, bool, str]]:
        s, X = self.spec, self.fault_seq
        states = {}
        for r in range(s.nranks):
            if r in self.culprits and s.fault in ("stall", "crash", "oom", "exit_early"):
                if X > 1:
                    states[r] = (X - 1, True, self.program[-1].op_type if self.program[-1].pg == 0 else "ALLREDUCE")
            elif r in self.culprits and s.fault == "missing_collective":
                states[r] = (X, False, self.program[-1].op_type)
            else:
                states[r] = (X, False, self.program[0].op_type)
        return states

    def _culprit_leaves(self, p: RankProc, t_fault: float) -> None:
        fault = self.spec.fault
        if fault == "stall":
            return      # alive and silent: stuck (data loading, I/O) before the collective
        if fault == "crash":
            t = t_fault + self.rng.uniform(0.1, 0.5)
            p.records.append((t, "err", _crash_traceback(self.fault_step)))
            warning = p.c10.not_destroyed_warning(p.local(t + 0.2))
            if warning:
                p.records.append((t + 0.2, "err", warning))
            p.exit_time, p.exit_code = t + 0.3, 1
        elif fault == "oom":
            p.exit_time, p.exit_code = t_fault + self.rng.uniform(0.2, 2.0), -9    # SIGKILL, no last words
        elif fault == "exit_early":
            self.finish_ok(p, t_fault - 0.05, f"data exhausted after {self.fault_step - 1} steps, "
                                              "leaving the training loop")

    def _transport_error(self, p: RankProc, t_fault: float, last_enqueued: int) -> None:
        s = self.spec
        t = t_fault + 5.0 + self.rng.uniform(0, 0.05)   # the link fails once for every rank behind it
        peer_host = self.hosts[(p.host_idx + 1) % len(self.hosts)]
        peer_ip = f"10.{((p.host_idx + 1) % len(self.hosts)) // 250}.{((p.host_idx + 1) % len(self.hosts)) % 250}.10"
        if self.rng.random() < 0.5:
            file_line, message = "misc/socket.cc:50", f"socketProgress: Connection closed by remote peer {peer_host}<{43000 + p.local_rank}>"
        elif p.nccl.minor >= 23:
            file_line = "transport/net_ib.cc:2345"
            message = (f"NET/IB: Got completion from peer {peer_ip}<{52800 + p.local_rank}> with status=IBV_WC_RETRY_EXC_ERR(12) "
                       "opcode=IBV_WC_RDMA_WRITE(0) vendor_err=129 localGid ::ffff:10.0.0.1 remoteGid ::ffff:"
                       f"{peer_ip} hca mlx5_{p.local_rank % 2}")
        else:
            file_line = "transport/net_ib.cc:1696"
            message = (f"NET/IB : Got completion from peer {peer_ip}<{52800 + p.local_rank}> with status=12 opcode=0 "
                       f"len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGid ::ffff:{peer_ip}")
        p.records.append((t, "out", p.nccl.warn(p.local(t), p.pid + 17, file_line, message)))
        pos0 = self.program[0]
        numel_in, numel_out = self.numel_in_out(pos0, pos0.numel, s.nranks)
        work = Work(self.fault_seq, pos0.op_type, numel_in, numel_out, int(s.timeout_s * 1000))
        text = p.c10.watchdog_nccl_error(p.local(t + 0.1), p.pgs[0], work, s.nccl_version, message,
                                         last_enqueued, self.fault_seq - 1)
        p.records.append((t + 0.1, "err", text))
        p.exit_time, p.exit_code = t + 0.15, -6


def _crash_traceback(step: int) -> str:
    return ("Traceback (most recent call last):\n"
            f'  File "{TRAIN_SCRIPT}", line 212, in <module>\n'
            "    main()\n"
            f'  File "{TRAIN_SCRIPT}", line 181, in main\n'
            "    batch = next(batches)\n"
            f'  File "{TRAIN_SCRIPT}", line 97, in load_batch\n'
            "    tokens = decode(sample)\n"
            f"ValueError: corrupt sample in shard {step:05d}.tar: expected 2048 tokens, got 0\n")
