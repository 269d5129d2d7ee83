"""What a synthetic job looks like: the knobs of the generator and the derived topology."""
from __future__ import annotations

from dataclasses import dataclass, field

FAULTS = (
    "none", "stall", "crash", "oom", "exit_early", "missing_collective", "mismatch",
    "transport", "init_failure", "scheduler_timeout", "straggler",
)
LAUNCHERS = ("torchrun", "srun", "kubernetes")
TORCH_ERAS = ("old", "new")

# fault -> (scenario name, verdict kind of the report contract)
FAULT_TRUTH = {
    "none": ("healthy", "healthy"),
    "stall": ("stalled_rank", "rank_stalled"),
    "crash": ("crashed_rank", "rank_crashed"),
    "oom": ("oom_killed_rank", "rank_crashed"),
    "exit_early": ("early_exit", "rank_exited_early"),
    "missing_collective": ("missing_collective", "missing_collective"),
    "mismatch": ("collective_mismatch", "collective_mismatch"),
    "transport": ("transport_failure", "transport_failure"),
    "init_failure": ("init_failure", "init_failure"),
    "scheduler_timeout": ("scheduler_time_limit", "scheduler_termination"),
    "straggler": ("straggler", "straggler"),
}


@dataclass
class JobSpec:
    nranks: int = 8
    ranks_per_host: int = 4
    n_pgs: int = 0                      # extra process groups besides the default one (TP, DP, TP, ...)
    steps: int = 20
    collectives_per_step: int = 4
    coll_lines: bool = True             # NCCL_DEBUG_SUBSYS=INIT,COLL
    nccl_version: str = "2.21.5"
    torch_era: str = "new"              # "old": torch <= ~2.1 log lines, "new": torch >= ~2.4
    launcher: str = "torchrun"
    clock_skew_s: dict[str, float] = field(default_factory=dict)   # host -> clock error in seconds
    fault: str = "stall"
    fault_ranks: list[int] | None = None   # default: one rank drawn from the seed
    fault_step: int | None = None          # 1-based step whose first collective diverges; default 2/3 of steps
    mismatch_kind: str = "size"            # "size" or "dtype"
    truncate_culprit_log: bool = False
    drop_culprit_log: bool = False
    desync_debug: bool = False
    timeout_s: float = 600.0               # process-group timeout
    step_time_s: float = 1.5
    start_time: str = "2026-11-29T21:00:00"  # true (UTC) wall clock of the launch
    job_name: str = "train"
    seed: int = 0
    target_mb: float | None = None          # size knob: raise `steps` until the logs reach about this size

    def validate(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"fault must be one of {FAULTS}, got {self.fault!r}")
        if self.launcher not in LAUNCHERS:
            raise ValueError(f"launcher must be one of {LAUNCHERS}, got {self.launcher!r}")
        if self.torch_era not in TORCH_ERAS:
            raise ValueError(f"torch_era must be one of {TORCH_ERAS}")
        if self.nranks < 2 or self.ranks_per_host < 1:
            raise ValueError("need nranks >= 2 and ranks_per_host >= 1")
        if self.mismatch_kind not in ("size", "dtype"):
            raise ValueError("mismatch_kind must be 'size' or 'dtype'")
        unknown = set(self.clock_skew_s) - set(host_names(self))
        if unknown:
            raise ValueError(f"clock_skew_s names unknown hosts {sorted(unknown)}; hosts are {host_names(self)}")
        for r in self.fault_ranks or []:
            if not 0 <= r < self.nranks:
                raise ValueError(f"fault rank {r} outside 0..{self.nranks - 1}")

    @property
    def nhosts(self) -> int:
        return -(-self.nranks // self.ranks_per_host)

    @property
    def nccl_tuple(self) -> tuple[int, int, int]:
        major, minor, patch = (int(x) for x in self.nccl_version.split(".")[:3])
        return major, minor, patch


def host_names(spec: JobSpec) -> list[str]:
    """Hostnames as the processes see them (also the keys of clock_skew_s)."""
    if spec.launcher == "srun":
        return [f"node{h + 1}" for h in range(spec.nhosts)]
    if spec.launcher == "kubernetes":
        return [f"{spec.job_name}-master-0" if h == 0 else f"{spec.job_name}-worker-{h - 1}"
                for h in range(spec.nhosts)]
    return [f"gpu-{h + 1:03d}" for h in range(spec.nhosts)]
