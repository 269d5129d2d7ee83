"""NCCL_DEBUG=INFO lines of one process, in the wording of the NCCL version being emitted
(formats.md section 1)."""
from __future__ import annotations

from dataclasses import dataclass

from . import clock

CUDA_FOR_NCCL_MINOR = {18: "12.1", 19: "12.2", 20: "12.4", 21: "12.4", 22: "12.5", 23: "12.6",
                       24: "12.6", 25: "12.8", 26: "12.8", 27: "12.9", 28: "12.9", 29: "13.0", 30: "13.0"}
BUS_IDS = ("18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000")
OP_NAMES = {"ALLREDUCE": "AllReduce", "_ALLGATHER_BASE": "AllGather", "ALLGATHER": "AllGather",
            "_REDUCE_SCATTER_BASE": "ReduceScatter", "BROADCAST": "Broadcast"}


@dataclass
class Comm:
    """One rank's view of one communicator."""
    ptr: str          # process-local `comm %p`
    comm_id: str      # identical on every member
    rank: int
    nranks: int
    stream: str


class NcclLog:
    def __init__(self, version: str, host: str, pid: int, cuda_dev: int, nvml_dev: int):
        self.version = tuple(int(x) for x in version.split(".")[:3])
        self.version_text = version
        self.host, self.pid, self.cuda_dev, self.nvml_dev = host, pid, cuda_dev, nvml_dev
        self.bus_id = BUS_IDS[nvml_dev % len(BUS_IDS)]
        self.info_prefix = f"{host}:{pid}:{pid} [{cuda_dev}] NCCL INFO "
        self.version_shown = False

    @property
    def minor(self) -> int:
        return self.version[1]

    def version_line(self) -> str:
        text = f"NCCL version {self.version_text}+cuda{CUDA_FOR_NCCL_MINOR.get(self.minor, '12.4')}"
        if self.minor <= 22:
            return text + "\n"
        return self.info_prefix + text + "\n"

    def startup(self, iface_ip: str) -> str:
        p = self.info_prefix
        return (f"{p}Bootstrap : Using eth0:{iface_ip}<0>\n"
                f"{p}cudaDriverVersion 12040\n"
                f"{p}NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:{iface_ip}<0>\n"
                f"{p}Using network IB\n")

    def _init_body(self, comm: Comm) -> str:
        return (f"comm {comm.ptr} rank {comm.rank} nranks {comm.nranks} cudaDev {self.cuda_dev} "
                f"nvmlDev {self.nvml_dev} busId {self.bus_id} commId 0x{comm.comm_id} - Init ")

    def _init_fn(self) -> str:
        if self.minor < 20:
            return ""
        return "ncclCommInitRank " if self.minor <= 22 else "ncclCommInitRankConfig "

    def init_start(self, comm: Comm) -> str:
        rank_tag = f"[Rank {comm.rank}] " if self.minor >= 29 else ""
        lines = ""
        if comm.rank == 0 and not self.version_shown:
            self.version_shown = True
            lines = self.version_line()
        return lines + f"{self.info_prefix}{rank_tag}{self._init_fn()}{self._init_body(comm)}START\n"

    def init_complete(self, comm: Comm, nnodes: int, local_ranks: int, local_rank: int) -> str:
        p = self.info_prefix
        lines = []
        if self.minor >= 20:
            lines.append(f"{p}comm {comm.ptr} rank {comm.rank} nRanks {comm.nranks} nNodes {nnodes} "
                         f"localRanks {local_ranks} localRank {local_rank} MNNVL 0\n")
        lines.append(f"{p}Connected all rings, use ring PXN 0 GDR 1\n" if self.minor >= 24
                     else f"{p}Connected all rings\n")
        lines.append(f"{p}Connected all trees\n")
        if self.minor >= 26:
            lines.append(f"{p}Init timings - {self._init_fn().strip()}: rank {comm.rank} nranks {comm.nranks} "
                         "total 0.61 (kernels 0.14, alloc 0.02, bootstrap 0.21, allgathers 0.03, topo 0.09, "
                         "graphs 0.01, connections 0.08, rest 0.03)\n")
        lines.append(f"{p}{self._init_fn()}{self._init_body(comm)}COMPLETE\n")
        return "".join(lines)

    def coll_parts(self, comm: Comm, op_type: str, count: int, dtype: int, sendbuff: str,
                   recvbuff: str) -> tuple[str, str]:
        """The COLL line split around the hex opCount, so a step's lines are built by concatenation."""
        pre = f"{self.info_prefix}{OP_NAMES[op_type]}: opCount "
        post = (f" sendbuff {sendbuff} recvbuff {recvbuff} count {count} datatype {dtype} op 0 root 0 "
                f"comm {comm.ptr} [nranks={comm.nranks}] stream {comm.stream}\n")
        return pre, post

    def end_of_comm(self, comm: Comm, what: str) -> str:
        """`Destroy`/`Abort COMPLETE`; from v2.30 these moved to the DESTROY subsystem (not logged by default)."""
        if self.minor >= 30:
            return ""
        return (f"{self.info_prefix}comm {comm.ptr} rank {comm.rank} nranks {comm.nranks} "
                f"cudaDev {self.cuda_dev} busId {self.bus_id} - {what} COMPLETE\n")

    def warn(self, t_local: float, tid: int, file_line: str, message: str) -> str:
        """WARN lines are preceded by a blank line; NCCL >= 2.26 stamps them `[%F %T] ` (local, 1 s)."""
        stamp = f"[{clock.seconds(t_local)}] " if self.minor >= 26 else ""
        return f"\n{stamp}{self.host}:{self.pid}:{tid} [{self.cuda_dev}] {file_line} NCCL WARN {message}\n"
