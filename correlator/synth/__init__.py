"""Synthetic NCCL/PyTorch job logs with a known truth, for the accuracy suite and the benchmarks."""
from .generate import generate_job
from .spec import FAULTS, LAUNCHERS, JobSpec, host_names

__all__ = ["FAULTS", "LAUNCHERS", "JobSpec", "generate_job", "host_names"]
