"""PyTorch lines: c10 ProcessGroupNCCL watchdog messages and torchelastic agent lines, per era
(formats.md sections 2.1-2.7). "old" is torch <= ~2.1 (no time, no `[rankG]:`, WorkNCCL without
Numel), "new" is torch >= ~2.4."""
from __future__ import annotations

from dataclasses import dataclass

from . import clock

SITE = "/usr/local/lib/python3.10/dist-packages"
FLIGHT_RECORDER_HINT = ("Stack trace of the failed collective not found, potentially because FlightRecorder is "
                        "disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.")
CORRUPTION = ("Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
              "subsequent GPU operations might run on corrupted/incomplete data.")
TAKING_DOWN = "To avoid data inconsistency, we are taking the entire process down."
NCCL_REMOTE_ERROR = ("ncclRemoteError: A call failed possibly due to a network error or a remote process "
                     "exiting prematurely.")


@dataclass
class Work:
    seq: int
    op_type: str
    numel_in: int
    numel_out: int
    timeout_ms: int


@dataclass
class PgView:
    """One rank's membership of one process group."""
    pg_id: int
    desc: str
    rank: int


class C10Log:
    """Renders c10 MessageLogger lines of one process (stderr)."""

    def __init__(self, era: str, global_rank: int, mono_offset_s: float):
        self.era, self.global_rank, self.mono_offset_s = era, global_rank, mono_offset_s
        self.lines_written = 0

    def line(self, t_local: float, severity: str, file_line: str, message: str) -> str:
        if self.era == "old":
            return f"[{severity} {file_line}] {message}\n"
        self.lines_written += 1     # consecutive lines of one burst still advance the monotonic clock
        mono_ns = int((t_local + self.mono_offset_s) * 1e9) + 6_911 * self.lines_written
        return f"[rank{self.global_rank}]:[{clock.c10(t_local, severity, mono_ns)} {file_line}] {message}\n"

    def pg_prefix(self, pg: PgView) -> str:
        if self.era == "old":
            return f"[PG {pg.pg_id} Rank {pg.rank}] "
        desc = f"({pg.desc})" if pg.desc != "undefined" else ""
        return f"[PG ID {pg.pg_id} PG GUID {pg.pg_id}{desc} Rank {pg.rank}] "

    def work(self, w: Work) -> str:
        if self.era == "old":
            return f"WorkNCCL(SeqNum={w.seq}, OpType={w.op_type}, Timeout(ms)={w.timeout_ms})"
        return (f"WorkNCCL(SeqNum={w.seq}, OpType={w.op_type}, NumelIn={w.numel_in}, "
                f"NumelOut={w.numel_out}, Timeout(ms)={w.timeout_ms})")

    def watchdog_timeout(self, t_local: float, pg: PgView, w: Work, ran_ms: int, last_enqueued: int,
                         last_completed: int, desync_report: str = "") -> str:
        """What a rank prints when its watchdog times out a collective, up to the abort."""
        caught = (f"[Rank {pg.rank}] Watchdog caught collective operation timeout: {self.work(w)} "
                  f"ran for {ran_ms} milliseconds before timing out.")
        if self.era == "old":
            status = (f"{self.pg_prefix(pg)}Exception (either an error or timeout) detected by watchdog at work: "
                      f"{w.seq}, last enqueued NCCL work: {last_enqueued}, last completed NCCL work: {last_completed}.")
            terminated = f"[Rank {pg.rank}] NCCL watchdog thread terminated with exception: {caught}"
            return (self.line(t_local, "E", "ProcessGroupNCCL.cpp:475", caught + desync_report)
                    + self.line(t_local, "E", "ProcessGroupNCCL.cpp:1425", status)
                    + self._old_abort(t_local, terminated))
        status = (f"{self.pg_prefix(pg)} failure detected by watchdog at work sequence id: {w.seq} "
                  f"PG status: last enqueued work: {last_enqueued}, last completed work: {last_completed}")
        terminated = f"{self.pg_prefix(pg)}Process group watchdog thread terminated with exception: {caught}"
        frames = self._frames("checkTimeout", 635)
        return (self.line(t_local, "E", "ProcessGroupNCCL.cpp:632", caught + desync_report)
                + self.line(t_local, "E", "ProcessGroupNCCL.cpp:2168", status)
                + self.line(t_local, "E", "ProcessGroupNCCL.cpp:667", FLIGHT_RECORDER_HINT)
                + self.line(t_local, "E", "ProcessGroupNCCL.cpp:681", f"[Rank {pg.rank}] {CORRUPTION}")
                + self.line(t_local, "E", "ProcessGroupNCCL.cpp:695", f"[Rank {pg.rank}] {TAKING_DOWN}")
                + self.line(t_local, "E", "ProcessGroupNCCL.cpp:1895", terminated) + frames
                + "terminate called after throwing an instance of 'c10::DistBackendError'\n"
                + f"  what():  {terminated}\n" + frames)

    def _old_abort(self, t_local: float, terminated: str) -> str:
        """torch <= ~2.1: the watchdog takes the process down with a std::runtime_error."""
        return (self.line(t_local, "E", "ProcessGroupNCCL.cpp:489", CORRUPTION)
                + self.line(t_local, "E", "ProcessGroupNCCL.cpp:495", TAKING_DOWN)
                + self.line(t_local, "E", "ProcessGroupNCCL.cpp:916", terminated)
                + "terminate called after throwing an instance of 'std::runtime_error'\n"
                + f"  what():  {terminated}\n")

    def watchdog_nccl_error(self, t_local: float, pg: PgView, w: Work, nccl_version: str, last_error: str,
                            last_enqueued: int, last_completed: int) -> str:
        """What a rank prints when the watchdog finds an asynchronous NCCL error (remote/network)."""
        error = (f"NCCL error: remote process exited or there was a network error, NCCL version {nccl_version}\n"
                 f"{NCCL_REMOTE_ERROR}\nLast error:\n{last_error}")
        if self.era == "old":
            terminated = f"[Rank {pg.rank}] NCCL watchdog thread terminated with exception: {error}"
            return self._old_abort(t_local, terminated)
        status = (f"{self.pg_prefix(pg)} failure detected by watchdog at work sequence id: {w.seq} "
                  f"PG status: last enqueued work: {last_enqueued}, last completed work: {last_completed}")
        terminated = f"{self.pg_prefix(pg)}Process group watchdog thread terminated with exception: {error}"
        frames = self._frames("checkForNCCLErrorsInternal", 2027)
        return (self.line(t_local, "E", "ProcessGroupNCCL.cpp:2168", status)
                + self.line(t_local, "E", "ProcessGroupNCCL.cpp:681", f"[Rank {pg.rank}] {CORRUPTION}")
                + self.line(t_local, "E", "ProcessGroupNCCL.cpp:695", f"[Rank {pg.rank}] {TAKING_DOWN}")
                + self.line(t_local, "E", "ProcessGroupNCCL.cpp:1895", terminated) + frames
                + "terminate called after throwing an instance of 'c10::DistBackendError'\n"
                + f"  what():  {terminated}\n" + frames)

    def not_destroyed_warning(self, t_local: float) -> str:
        """torch >= 2.4 at exit of a process that did not call destroy_process_group()."""
        if self.era == "old":
            return ""
        return self.line(t_local, "W", "ProcessGroupNCCL.cpp:1250",
                         "Warning: WARNING: destroy_process_group() was not called before program exit, which "
                         "can leak resources. For more info, please see "
                         "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())")

    @staticmethod
    def _frames(func: str, line: int) -> str:
        lib = f"{SITE}/torch/lib"
        return (f"Exception raised from {func} at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:{line} "
                "(most recent call first):\n"
                f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3a2c9e31b6 in {lib}/libc10.so)\n"
                f"frame #1: c10d::ProcessGroupNCCL::WorkNCCL::{func}(std::optional<std::chrono::duration<long, "
                f"std::ratio<1l, 1000l> > >) + 0x1d2 (0x7f3a2dd0ec12 in {lib}/libtorch_cuda.so)\n"
                f"frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f3a2dd10053 in {lib}/libtorch_cuda.so)\n"
                f"frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d (0x7f3a2dd1164d in {lib}/libtorch_cuda.so)\n"
                "frame #4: <unknown function> + 0xdc253 (0x7f3a7a6b0253 in /lib/x86_64-linux-gnu/libstdc++.so.6)\n"
                "frame #5: <unknown function> + 0x94ac3 (0x7f3a7e2c5ac3 in /lib/x86_64-linux-gnu/libc.so.6)\n"
                "frame #6: clone + 0x44 (0x7f3a7e356a04 in /lib/x86_64-linux-gnu/libc.so.6)\n\n")


def desync_report(my_pg_rank: int, op_type: str, my_seq: int, states: dict[int, tuple[int, bool, str]],
                  pg_size: int) -> str:
    """TraceUtils.h retrieveDesyncReport(): states maps PG rank -> (last started seq, finished it?, op),
    ranks that never started anything are absent."""
    report = f"\n\t - [{my_pg_rank}] Timeout at collective: {op_type}, #{my_seq}"
    missing = [r for r in range(pg_size) if r not in states]
    if missing:
        return report + (f"\n\t - To our best knowledge, ranks [{', '.join(map(str, missing))}] are the lagging "
                         "ranks that caused this timeout. They never joined any collectives")
    lag_seq = min(seq for seq, _, _ in states.values())
    at_lag = sorted(r for r, (seq, _, _) in states.items() if seq == lag_seq)
    started = [r for r in at_lag if not states[r][1]]
    ended = [r for r in at_lag if states[r][1]]
    report += "\n\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:"
    if started:
        report += f"\n\t   - [{', '.join(map(str, started))}] joined but didn't finish collective #{lag_seq} (count from 1)"
    if ended:
        report += (f"\n\t     [{', '.join(map(str, ended))}] finished collective #{lag_seq}, "
                   f"but didn't join collective #{lag_seq + 1} (count from 1)")
    report += "\n\t - Snapshot of ranks' latest states:"
    for seq in sorted({seq for seq, _, _ in states.values()}):
        for finished, verb in ((False, "started"), (True, "finished")):
            by_op: dict[str, list[int]] = {}
            for r in sorted(states):
                if states[r][0] == seq and states[r][1] == finished:
                    by_op.setdefault(states[r][2], []).append(r)
            if by_op:
                report += f"\n\t   #{seq} {verb} ranks:"
                for op, ranks in by_op.items():
                    report += f"\n\t     [{', '.join(map(str, ranks))}] {verb} {op}"
    return report


class AgentLog:
    """torchelastic agent (torchrun) console lines of one host, per era."""

    def __init__(self, era: str, pid: int):
        self.era, self.pid = era, pid

    def line(self, t_local: float, severity: str, module_path: str, line_no: int, message: str) -> str:
        if self.era == "old":
            level = {"W": "WARNING", "E": "ERROR", "I": "INFO"}[severity]
            logger = module_path.removesuffix(".py").replace("/", ".")
            return f"[{clock.pylog(t_local)}] {logger}: [{level}] {message}\n"
        return f"{clock.elastic(t_local, severity)} {self.pid} {module_path}:{line_no}] {message}\n"

    def banner(self, t_local: float) -> str:
        texts = ("", "*****************************************",
                 "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your "
                 "system being overloaded, please further tune the variable for optimal performance in your "
                 "application as needed. ",
                 "*****************************************")
        return "".join(self.line(t_local, "W", "torch/distributed/run.py", 793, text) for text in texts)

    def closing(self, t_local: float, pid: int) -> str:
        if self.era == "old":
            return self.line(t_local, "W", "torch/distributed/elastic/multiprocessing/api.py", 0,
                             f"Sending process {pid} closing signal SIGTERM")
        return self.line(t_local, "W", "torch/distributed/elastic/multiprocessing/api.py", 897,
                         f"Closing process {pid} via signal SIGTERM")

    def failed(self, t_local: float, exitcode: int, local_rank: int, pid: int) -> str:
        return self.line(t_local, "E", "torch/distributed/elastic/multiprocessing/api.py", 869,
                         f"failed (exitcode: {exitcode}) local_rank: {local_rank} (pid: {pid}) of binary: "
                         "/usr/bin/python3")

    def death_signal(self, t_local: float) -> str:
        return self.line(t_local, "W", "torch/distributed/elastic/agent/server/api.py", 704,
                         "Received 15 death signal, shutting down workers")


TORCHRUN_STACK = (
    "Traceback (most recent call last):\n"
    '  File "/usr/local/bin/torchrun", line 8, in <module>\n'
    "    sys.exit(main())\n"
    f'  File "{SITE}/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper\n'
    "    return f(*args, **kwargs)\n"
    f'  File "{SITE}/torch/distributed/run.py", line 919, in main\n'
    "    run(args)\n"
    f'  File "{SITE}/torch/distributed/run.py", line 910, in run\n'
    "    elastic_launch(\n"
    f'  File "{SITE}/torch/distributed/launcher/api.py", line 138, in __call__\n'
    "    return launch_agent(self._config, self._entrypoint, list(args))\n"
)


@dataclass
class Failure:
    rank: int
    local_rank: int
    exitcode: int
    pid: int
    timestamp: int     # the agent's clock, whole seconds


SIGNAL_NAMES = {6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


def child_failed_error(script: str, fqdn: str, failures: list[Failure]) -> str:
    """torchrun's final traceback: ChildFailedError table; Root Cause = min(timestamp), ties -> first entry."""
    title = f"{script} FAILED"
    root = min(failures, key=lambda f: f.timestamp)
    formatted = []
    for idx, f in enumerate(failures):
        message = (f"Signal {-f.exitcode} ({SIGNAL_NAMES.get(-f.exitcode, 'SIG' + str(-f.exitcode))}) "
                   f"received by PID {f.pid}" if f.exitcode < 0
                   else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
        formatted.append(f"[{idx}]:\n  time      : {clock.seconds(f.timestamp, '_')}\n  host      : {fqdn}\n"
                         f"  rank      : {f.rank} (local_rank: {f.local_rank})\n"
                         f"  exitcode  : {f.exitcode} (pid: {f.pid})\n  error_file: <N/A>\n"
                         f"  traceback : {message}")
    width = min(max(len(title), *(len(line) for text in formatted for line in text.split("\n"))), 60)
    others = [text for f, text in zip(failures, formatted) if f is not root] or ["  <NO_OTHER_FAILURES>"]
    root_text = formatted[failures.index(root)]
    return (TORCHRUN_STACK
            + f'  File "{SITE}/torch/distributed/launcher/api.py", line 269, in launch_agent\n'
            + "    raise ChildFailedError(\n"
            + "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
            + f"{'=' * width}\n{title}\n{'-' * width}\nFailures:\n" + "\n".join(others)
            + f"\n{'-' * width}\nRoot Cause (first observed failure):\n{root_text}\n{'=' * width}\n")


def signal_exception(agent_pid: int) -> str:
    """torchrun's traceback when the agent itself got SIGTERM (scheduler kill, Ctrl-C)."""
    return (TORCHRUN_STACK
            + f'  File "{SITE}/torch/distributed/launcher/api.py", line 260, in launch_agent\n'
            + "    result = agent.run()\n"
            + f'  File "{SITE}/torch/distributed/elastic/multiprocessing/api.py", line 84, in _terminate_process_handler\n'
            + "    raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)\n"
            + f"torch.distributed.elastic.multiprocessing.api.SignalException: Process {agent_pid} got signal: 15\n")
