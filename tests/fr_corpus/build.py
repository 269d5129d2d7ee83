"""Build the Flight Recorder corpus: one folder per case with the per-rank dumps and expected.json.

    .venv/bin/python tests/fr_corpus/build.py tests/fr_corpus

The dumps are written as c10d writes them (torch/csrc/distributed/c10d/FlightRecorderDetail.hpp,
ProcessGroupNCCL.cpp; TorchComms' comms/torchcomms/hooks/fr/FlightRecorder.cpp), simulated per rank:

- one ring buffer per process (`TORCH_FR_BUFFER_SIZE` entries), shared by all its process groups;
  `record_id` counts every entry the process recorded, the dump lists the kept ones oldest first;
- per process group: `collective_seq_id` (seqCollective_) is bumped by each collective, once per
  coalesced group; `p2p_seq_id` (seqP2P_) by each send/recv, once per coalesced p2p group; a p2p
  entry carries the group's current collective_seq_id (not bumped), `op_id` counts every op;
- a coalesced group's ops share one seq and end with a marker entry (`nccl:coalesced`, or
  `nccl:ALLGATHER_coalesced` / `nccl:REDUCE_SCATTER_coalesced` on the collective slow path);
- p2p names carry group-local ranks: `nccl:send 1->2` on rank 1, `nccl:recv 2<-1` on rank 2;
- `pg_id` is the process-local id of the group (members only create it), `process_group` is
  (name, desc), `pg_config` maps each group name to {name, desc, ranks: "[0, 1, 2, 3]"};
- state: `completed` / `started` / `scheduled` (no start event seen yet); `retired` once the
  watchdog dropped the work (completed or timed out);
- pickle: plain dicts/lists/tuples, protocol 2 (what torch's Pickler emits); JSON
  (`_dump_nccl_trace_json`): compact, keys sorted (nlohmann's std::map), pg_status values as
  strings, `time_discovered_*_ns` 0 when unknown, no `entries` key when there are none.

The expectations are written here, by hand, from what each scenario did, before the product
ever ran on the case (see expected.json's `why`). Real gloo captures come from capture_gloo.py.
"""
from __future__ import annotations

import json
import pickle
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

T0 = 1_796_000_000_000_000_000   # ns
DEFAULT_VERSION = "2.10"


@dataclass
class PG:
    name: str
    desc: str
    ranks: list[int]
    local_id: int
    seq_coll: int = 0
    seq_p2p: int = 0
    op_id: int = 0

    def local(self, global_rank: int) -> int:
        return self.ranks.index(global_rank)


@dataclass
class Process:
    """One rank's Flight Recorder."""
    rank: int
    groups: dict           # name -> (desc, ranks)
    prefix: str = "nccl"
    version: str = DEFAULT_VERSION
    max_entries: int = 2000
    torchcomms: bool = False
    entries: list = field(default_factory=list)
    next_id: int = 0
    pgs: dict = field(default_factory=dict)
    clock: int = 0
    coalescing: PG | None = None
    tc_seq: int = 0        # TorchComms: one collective_seq_id counter for the whole process, from 0

    def pg(self, name: str) -> PG:
        if name not in self.pgs:
            desc, ranks = self.groups[name]
            assert self.rank in ranks, (self.rank, name)
            self.pgs[name] = PG(name, desc, list(ranks), len(self.pgs))
        return self.pgs[name]

    # -- recording ---------------------------------------------------------------------------
    def _record(self, pg: PG, name: str, ins, outs, dtype, out_dtype, state, is_p2p, retired=None):
        self.clock += 1_000_000
        created = T0 + self.rank * 1_000 + self.clock
        started = created + 20_000 if state in ("started", "completed") else None
        completed = created + 40_000 if state == "completed" else None
        entry = {
            "record_id": self.next_id,
            "pg_id": pg.local_id,
            "process_group": (pg.name, pg.desc),
            "collective_seq_id": self.tc_seq if self.torchcomms else pg.seq_coll,
            "p2p_seq_id": 0 if self.torchcomms else pg.seq_p2p,
            "op_id": pg.op_id,
            "profiling_name": f"{self.prefix}:{name}",
            "time_created_ns": created,
            "input_sizes": [list(s) for s in ins],
            "input_dtypes": [dtype] * len(ins),
            "output_sizes": [list(s) for s in outs],
            "output_dtypes": [out_dtype or dtype] * len(outs),
            "state": state,
            "time_discovered_started_ns": started,
            "time_discovered_completed_ns": completed,
            "retired": (state == "completed") if retired is None else retired,
            "timeout_ms": 600_000,
            "is_p2p": False if self.torchcomms else is_p2p,
        }
        if self.version not in ("2.2", "2.3", "2.4"):
            entry.update(thread_id=str(140_000_000 + self.rank), thread_name="pt_main_thread")
        self.next_id += 1
        self.tc_seq += 1
        self.entries.append(entry)
        del self.entries[:-self.max_entries]   # the ring buffer keeps the newest
        return entry

    def coll(self, pg: str, name: str, ins, outs, dtype="Float", state="completed", out_dtype=None, retired=None):
        g = self.pg(pg)
        if self.coalescing is None:
            g.seq_coll += 1
        g.op_id += 1
        return self._record(g, name, ins, outs, dtype, out_dtype, state, False, retired)

    def send(self, pg: str, peer: int, shape, dtype="Float", state="completed"):
        g = self.pg(pg)
        if self.coalescing is None:
            g.seq_p2p += 1
        g.op_id += 1
        name = "send" if self.torchcomms else f"send {g.local(self.rank)}->{g.local(peer)}"
        return self._record(g, name, [shape], [shape], dtype, None, state, True)

    def recv(self, pg: str, peer: int, shape, dtype="Float", state="completed"):
        g = self.pg(pg)
        if self.coalescing is None:
            g.seq_p2p += 1
        g.op_id += 1
        name = "recv" if self.torchcomms else f"recv {g.local(self.rank)}<-{g.local(peer)}"
        return self._record(g, name, [shape], [shape], dtype, None, state, True)

    def batch_p2p(self, pg: str, ops, state="completed"):
        """batch_isend_irecv: ops = [("send"|"recv", peer, shape)], one p2p seq for the group."""
        g = self.pg(pg)
        g.seq_p2p += 1
        self.coalescing = g
        for kind, peer, shape in ops:
            getattr(self, kind)(pg, peer, shape, state=state)
        self.coalescing = None
        self._record(g, "coalesced", [], [], "Float", None, state, True)

    def coalesced_coll(self, pg: str, ops, marker: str, dtype="Float", state="completed"):
        """The collective slow path (startCoalescing ... endCoalescing): ops = [(name, ins, outs)]."""
        g = self.pg(pg)
        g.seq_coll += 1
        self.coalescing = g
        for name, ins, outs in ops:
            self.coll(pg, name, ins, outs, dtype, state)
        self.coalescing = None
        self._record(g, marker, [], [], dtype, None, state, False)

    # -- dumping -----------------------------------------------------------------------------
    def pg_config(self) -> dict:
        out = {}
        for name, g in self.pgs.items():
            sep = "," if self.torchcomms else ", "
            out[name] = {"name": name, "desc": g.desc, "ranks": "[" + sep.join(map(str, g.ranks)) + "]"}
        return out

    def pg_status(self) -> dict:
        status = {}
        for g in self.pgs.values():
            mine = [e for e in self.entries if e["pg_id"] == g.local_id and not e["is_p2p"]]
            started = [e["collective_seq_id"] for e in mine if e["state"] in ("started", "completed")]
            completed = [e["collective_seq_id"] for e in mine if e["state"] == "completed"]
            status[str(g.local_id)] = {"last_enqueued_collective": g.seq_coll,
                                       "last_started_collective": max(started, default=-1),
                                       "last_completed_collective": max(completed, default=-1)}
        return status

    def dump(self, fmt: str) -> bytes:
        doc = {"version": self.version, "pg_config": self.pg_config(), "pg_status": self.pg_status(),
               "comm_lib_version": "2.21.5", "entries": [dict(e) for e in self.entries]}
        if fmt == "pickle":
            return pickle.dumps(doc, protocol=2)
        for e in doc["entries"]:
            e["process_group"] = list(e["process_group"])
            for key in ("time_discovered_started_ns", "time_discovered_completed_ns"):
                e[key] = e[key] or 0
        doc["pg_status"] = {k: {kk: str(vv) for kk, vv in v.items()} for k, v in doc["pg_status"].items()}
        if not doc["entries"]:
            del doc["entries"]
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


class Job:
    def __init__(self, world: int, groups: dict | None = None, **process_kw):
        self.world = world
        self.groups = {"0": ("default_pg", list(range(world))), **(groups or {})}
        self.procs = [Process(r, self.groups, **process_kw) for r in range(world)]
        for p in self.procs:
            p.pg("0")   # every rank creates the default PG first

    def __getitem__(self, rank: int) -> Process:
        return self.procs[rank]

    def all(self, fn, ranks=None):
        for p in self.procs if ranks is None else [self.procs[r] for r in ranks]:
            fn(p)


def write_case(root: Path, name: str, job: Job, expected: dict, fmt="pickle",
               filename=lambda rank: f"nccl_trace_rank_{rank}", no_dump=()) -> None:
    out = root / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for p in job.procs:
        if p.rank not in no_dump:
            (out / filename(p.rank)).write_bytes(p.dump(fmt))
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")


def expect(kind, culprits, why, divergence=None):
    return {"kind": kind, "culprit_ranks": culprits, "divergence": divergence, "why": why}


def div(counter, pg, seq_printed, ops):
    return {"counter": counter, "pg": pg, "seq_printed": str(seq_printed),
            "ops": {str(r): op for r, op in sorted(ops.items())}}


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------

def pipeline_microbatches(job: Job, microbatches: int, stages: list[int], shape=(4, 1024), last_state=None):
    """1F1B-free schedule: every microbatch forward through the stages, then backward."""
    for mb in range(microbatches):
        for i, r in enumerate(stages):          # forward
            if i > 0:
                job[r].recv("0", stages[i - 1], shape)
            if i < len(stages) - 1:
                job[r].send("0", stages[i + 1], shape)
        for i, r in reversed(list(enumerate(stages))):   # backward
            if i < len(stages) - 1:
                job[r].recv("0", stages[i + 1], shape)
            if i > 0:
                job[r].send("0", stages[i - 1], shape)


def case_healthy_p2p_pipeline(root):
    job = Job(4)
    job.all(lambda p: p.coll("0", "broadcast", [(64,)], [(64,)]))
    pipeline_microbatches(job, 3, [0, 1, 2, 3])
    job.all(lambda p: p.coll("0", "all_reduce", [(1,)], [(1,)]))     # the loss, after the p2p ops
    pipeline_microbatches(job, 2, [0, 1, 2, 3])
    write_case(root, "healthy_p2p_pipeline", job, expect(
        "healthy", [], "4-stage pipeline on the default PG: every send k->k+1 has its recv k+1<-k, "
        "every backward send its recv; sends and recvs share p2p_seq_id values across ranks without being "
        "the same op; all completed"))


def case_healthy_batch_isend_irecv(root):
    job = Job(4)
    for step in range(3):
        for p in job.procs:
            r = p.rank
            p.batch_p2p("0", [("send", (r + 1) % 4, (256,)), ("recv", (r - 1) % 4, (256,))])
        job.all(lambda p: p.coll("0", "all_reduce", [(8,)], [(8,)]))
    write_case(root, "healthy_batch_isend_irecv", job, expect(
        "healthy", [], "ring exchange with batch_isend_irecv (coalesced p2p group ending in nccl:coalesced) "
        "three times, each followed by an all_reduce; every send pairs with its peer's recv"),
        fmt="json", filename=lambda r: f"nccl_trace_rank_{r}.json")


FSDP_N = 1024


def fsdp_step(p: Process, layers=3, sizes=None, state="completed"):
    n = FSDP_N
    for layer in range(layers):
        p.coll("0", "_all_gather_base", [(n,)], [(4 * n,)], dtype="BFloat16", state=state)
    for layer in range(layers):
        p.coll("0", "_reduce_scatter_base", [(4 * n,)], [(n,)], dtype="Float", state=state)


def case_healthy_fsdp(root):
    job = Job(4)
    for step in range(2):
        job.all(fsdp_step)
        # the collective slow path: three all_gathers in one coalesced group
        job.all(lambda p: p.coalesced_coll("0", [("_all_gather_base", [(n,)], [(4 * n,)]) for n in (512, 256, 128)],
                                          "ALLGATHER_coalesced", dtype="BFloat16"))
        # the fast path: one entry for the whole group
        job.all(lambda p: p.coll("0", "all_gather_into_tensor_coalesced", [(512,), (256,)], [(2048,), (1024,)],
                                 dtype="BFloat16"))
        job.all(lambda p: p.coll("0", "reduce_scatter_tensor_coalesced", [(2048,), (1024,)], [(512,), (256,)]))
    write_case(root, "healthy_fsdp", job, expect(
        "healthy", [], "FSDP: _all_gather_base (input n, output 4n) and _reduce_scatter_base per layer, a coalesced "
        "slow-path all_gather group and the *_coalesced fast-path ops; same on every rank, all completed"))


def alltoall_uneven(p: Process, world=4, out_total=None, state="completed"):
    r = p.rank
    ins = (r + 1) * world                           # rank r sends r+1 to each peer
    outs = sum(k + 1 for k in range(world)) if out_total is None else out_total
    p.coll("0", "all_to_all", [(ins,)], [(outs,)], state=state)


def case_healthy_uneven_alltoall(root):
    job = Job(4, prefix="nccl2")
    job.all(lambda p: p.coll("0", "all_reduce", [(8,)], [(8,)]))
    job.all(alltoall_uneven)
    job.all(lambda p: p.coll("0", "all_reduce", [(8,)], [(8,)]))
    job.all(alltoall_uneven)
    write_case(root, "healthy_uneven_alltoall", job, expect(
        "healthy", [], "MoE-style all_to_all_single with uneven splits: rank r sends r+1 elements to every rank, so "
        "inputs are 4, 8, 12, 16 and every output is 10; the totals agree (40 = 40)"),
        fmt="json", filename=lambda r: f"nccl_trace_rank_{r}.json")


def case_healthy_rooted(root):
    job = Job(4, prefix="ncclx")

    def ops(p: Process):
        r = p.rank
        p.coll("0", "scatter", [(2,)] * 4 if r == 0 else [], [(2,)])
        p.coll("0", "gather", [(3,)], [(3,)] * 4 if r == 2 else [])
        p.coll("0", "broadcast", [(16,)], [(16,)])
        p.coll("0", "reduce", [(16,)], [(16,)])
        p.coll("0", "all_reduce", [(16,)], [(16,)])
    job.all(ops)
    job.all(ops)
    write_case(root, "healthy_rooted_ops", job, expect(
        "healthy", [], "scatter from root 0 (only the root has an input list), gather to root 2 (only the root has "
        "an output list), broadcast and reduce: the root's role explains the size differences"),
        filename=lambda r: f"fr_trace_rank_{r}")


def steps_allreduce(job: Job, steps: int, ranks=None, n=1000):
    for _ in range(steps):
        job.all(lambda p: p.coll("0", "all_reduce", [(n,)], [(n,)]), ranks)


def case_op_mismatch(root):
    job = Job(4)
    job.all(lambda p: p.coll("0", "broadcast", [(64,)], [(64,)]))          # seq 1
    steps_allreduce(job, 3)                                                # seq 2..4
    for p in job.procs:                                                    # seq 5
        if p.rank == 3:
            p.coll("0", "all_gather", [(1000,)], [(1000,)] * 4, state="started", retired=True)
        else:
            p.coll("0", "all_reduce", [(1000,)], [(1000,)], state="started", retired=True)
    write_case(root, "op_mismatch", job, expect(
        "collective_mismatch", [3], "at collective seq 5 rank 3 called all_gather while ranks 0-2 called all_reduce; "
        "everyone hung there (started, timed out); the program never runs all_gather, so no shift",
        div("fr_seq", "0", 5, {0: "ALLREDUCE", 1: "ALLREDUCE", 2: "ALLREDUCE", 3: "ALLGATHER"})))


def case_size_mismatch(root):
    job = Job(4)
    steps_allreduce(job, 3)                                                # seq 1..3
    for p in job.procs:                                                    # seq 4
        n = 1024 if p.rank == 1 else 1000
        p.coll("0", "all_reduce", [(n,)], [(n,)], state="started", retired=True)
    write_case(root, "size_mismatch", job, expect(
        "collective_mismatch", [1], "at seq 4 rank 1's all_reduce has 1024 elements, the others' 1000",
        div("fr_seq", "0", 4, {0: "ALLREDUCE", 1: "ALLREDUCE", 2: "ALLREDUCE", 3: "ALLREDUCE"})))


def case_dtype_mismatch(root):
    job = Job(4, version="2.7")
    steps_allreduce(job, 2)                                                # seq 1..2
    for p in job.procs:                                                    # seq 3
        dtype = "Half" if p.rank == 2 else "Float"
        p.coll("0", "all_reduce", [(1000,)], [(1000,)], dtype=dtype, state="started", retired=True)
    write_case(root, "dtype_mismatch", job, expect(
        "collective_mismatch", [2], "at seq 3 rank 2 reduces Half, the others Float",
        div("fr_seq", "0", 3, {0: "ALLREDUCE", 1: "ALLREDUCE", 2: "ALLREDUCE", 3: "ALLREDUCE"})),
        fmt="json", filename=lambda r: f"nccl_trace_rank_{r}.json")


def case_coalesced_size_mismatch(root):
    job = Job(4)
    job.all(fsdp_step)                                                     # seq 1..6
    for p in job.procs:                                                    # seq 7: one coalesced group
        sizes = (512, 300, 128) if p.rank == 0 else (512, 256, 128)
        p.coalesced_coll("0", [("_all_gather_base", [(n,)], [(4 * n,)]) for n in sizes], "ALLGATHER_coalesced",
                         dtype="BFloat16", state="started")
    write_case(root, "coalesced_size_mismatch", job, expect(
        "collective_mismatch", [0], "FSDP slow-path coalesced all_gather at seq 7: three _all_gather_base entries "
        "sharing the seq; rank 0's second tensor has 300 elements where the others have 256",
        div("fr_seq", "0", 7, {0: "ALLGATHER_COALESCED", 1: "ALLGATHER_COALESCED", 2: "ALLGATHER_COALESCED",
                               3: "ALLGATHER_COALESCED"})))


def case_alltoall_total_mismatch(root):
    job = Job(4)
    job.all(lambda p: p.coll("0", "all_reduce", [(8,)], [(8,)]))           # seq 1
    job.all(alltoall_uneven)                                               # seq 2: fine
    for p in job.procs:                                                    # seq 3: rank 2 expects 9, not 10
        alltoall_uneven(p, out_total=9 if p.rank == 2 else None, state="started")
    write_case(root, "alltoall_total_mismatch", job, expect(
        "collective_mismatch", [2], "uneven all_to_all_single at seq 3: inputs 4+8+12+16 = 40 but outputs "
        "10+10+9+10 = 39; rank 2's output split is the one off (every other output is 10; the inputs are "
        "legitimately uneven)",
        div("fr_seq", "0", 3, {0: "ALLTOALL", 1: "ALLTOALL", 2: "ALLTOALL", 3: "ALLTOALL"})))


def case_rank_scheduled_behind(root):
    job = Job(4)
    steps_allreduce(job, 6)                                                # seq 1..6
    for p in job.procs:                                                    # seq 7
        p.coll("0", "all_reduce", [(1000,)], [(1000,)], state="scheduled" if p.rank == 2 else "started")
    write_case(root, "rank_scheduled_behind", job, expect(
        "rank_stalled", [2], "every rank enqueued all_reduce seq 7, but rank 2's kernel never started (state "
        "scheduled: its stream was still busy) while ranks 0, 1, 3 started it and wait",
        div("fr_seq", "0", 7, {0: "ALLREDUCE", 1: "ALLREDUCE", 2: "ALLREDUCE", 3: "ALLREDUCE"})))


def case_rank_no_dump(root):
    job = Job(4)
    job.all(lambda p: p.coll("0", "broadcast", [(64,)], [(64,)]))          # seq 1
    steps_allreduce(job, 7)                                                # seq 2..8
    job.all(lambda p: p.coll("0", "all_reduce", [(1000,)], [(1000,)], state="started"), [0, 1, 2])   # seq 9
    hosts = {0: "host-a", 1: "host-a", 2: "host-b", 3: "host-b"}
    write_case(root, "rank_no_dump_host_names", job, expect(
        "rank_stalled", [3], "rank 3 left no dump at all; pg_config of every other dump says the default PG is "
        "[0, 1, 2, 3]; ranks 0-2 started all_reduce seq 9 and wait for it. Files are named host_rank",
        div("fr_seq", "0", 9, {0: "ALLREDUCE", 1: "ALLREDUCE", 2: "ALLREDUCE", 3: None})),
        filename=lambda r: f"{hosts[r]}_{r}", no_dump=(3,))


def case_missing_collective_shift(root):
    job = Job(4)
    job.all(lambda p: p.coll("0", "broadcast", [(64,)], [(64,)]))          # seq 1

    def step(p, skip_first=False, states=("completed",) * 3):
        ops = [("all_reduce", 16), ("all_reduce", 8), ("broadcast", 1)]
        if skip_first:
            ops = ops[1:] + ops   # it skips the first, then goes on
        for (name, n), state in zip(ops, states):
            p.coll("0", name, [(n,)], [(n,)], state=state)

    for _ in range(2):                                                     # seq 2..7
        job.all(step)
    for p in job.procs:                                                    # step 3 from seq 8
        # the CPU enqueues ahead of the stuck GPU: seq 8 started, 9 and 10 scheduled
        step(p, skip_first=(p.rank == 1), states=("started", "scheduled", "scheduled"))
    write_case(root, "missing_collective_shift", job, expect(
        "missing_collective", [1], "each step is all_reduce(16), all_reduce(8), broadcast(1); in step 3 rank 1 "
        "skipped the first all_reduce: its seq 8 is the others' seq 9 (all_reduce of 8), its seq 9 their seq 10; "
        "the CPU enqueued ahead, so the shift is visible in the scheduled entries",
        div("fr_seq", "0", 8, {0: "ALLREDUCE", 1: "ALLREDUCE", 2: "ALLREDUCE", 3: "ALLREDUCE"})))


def case_p2p_peer_mismatch(root):
    job = Job(4)
    job.all(lambda p: p.coll("0", "broadcast", [(64,)], [(64,)]))
    pipeline_microbatches(job, 2, [0, 1, 2, 3])
    # microbatch 3: rank 1 sends its activations to rank 3 instead of rank 2
    shape = (4, 1024)
    job[0].send("0", 1, shape)
    job[1].recv("0", 0, shape)
    job[1].send("0", 3, shape, state="started")          # p2p seq 10 on rank 1
    job[2].recv("0", 1, shape, state="started")          # waits for rank 1
    job[3].recv("0", 2, shape, state="started")          # waits for rank 2
    write_case(root, "p2p_peer_mismatch", job, expect(
        "collective_mismatch", [1], "pipeline 0->1->2->3; in microbatch 3 rank 1 sent to rank 3 (send 1->3), a "
        "rank that never receives from rank 1, instead of to rank 2, which waits in recv 2<-1; rank 3 waits in "
        "recv 3<-2 because rank 2 is stuck. Rank 1's p2p_seq_id there is 10 (2 microbatches x 4 + recv + send)",
        div("fr_p2p_seq", "0", 10, {1: "SEND", 3: None})))


def case_p2p_after_collective_same_counter(root):
    job = Job(4)
    for step in range(3):
        # an all_reduce (collective seq k) followed by p2p ops that carry collective_seq_id k too
        job.all(lambda p: p.coll("0", "all_reduce", [(8,)], [(8,)]))
        for r in (0, 2):
            job[r].send("0", r + 1, (128,))
            job[r + 1].recv("0", r, (128,))
        job.all(lambda p: p.coll("0", "broadcast", [(8,)], [(8,)]))
    write_case(root, "p2p_after_collective_same_counter", job, expect(
        "healthy", [], "each step: all_reduce (collective seq k), then send 0->1 / 2->3 whose entries carry the same "
        "collective_seq_id k (p2p ops do not bump it), then a broadcast; all completed"),
        filename=lambda r: f"fr_trace_rank_{r}")


def case_ring_buffer_eviction(root):
    job = Job(4, groups={"1": ("tp", [2, 3])}, max_entries=20)
    for step in range(12):
        job.all(lambda p: p.coalesced_coll("0", [("_all_gather_base", [(64,)], [(256,)])] * 2, "ALLGATHER_coalesced"))
        if step % 2 == 0:   # ranks 2 and 3 also use a sub-group: their buffers wrap sooner
            job.all(lambda p: p.coll("1", "all_reduce", [(32,)], [(32,)]), [2, 3])
    # seq 13 on the default PG: ranks 0-2 started it, rank 3 never issued it
    job.all(lambda p: p.coalesced_coll("0", [("_all_gather_base", [(64,)], [(256,)])] * 2, "ALLGATHER_coalesced",
                                      state="started"), [0, 1, 2])
    write_case(root, "ring_buffer_eviction", job, expect(
        "rank_stalled", [3], "TORCH_FR_BUFFER_SIZE=20: each rank kept only its last 20 entries, and ranks 2 and 3 "
        "(also in sub-group tp) evicted more of the default PG than ranks 0 and 1: the dumps start at different "
        "record_ids and seqs, some in the middle of a coalesced group; in the window every rank holds, all agree; "
        "rank 3 never issued the coalesced all_gather seq 13 that ranks 0-2 started",
        div("fr_seq", "0", 13, {0: "ALLGATHER_COALESCED", 1: "ALLGATHER_COALESCED", 2: "ALLGATHER_COALESCED",
                                3: None})))


def case_multi_pg_subgroup(root):
    groups = {"1": ("tp", [0, 1, 2]), "2": ("tp", [3, 4, 5]),
              "3": ("dp", [0, 3]), "4": ("dp", [1, 4]), "5": ("dp", [2, 5])}
    job = Job(6, groups=groups)
    tp = {r: "1" if r < 3 else "2" for r in range(6)}
    dp = {r: str(3 + r % 3) for r in range(6)}
    job.all(lambda p: p.coll("0", "barrier", [(1,)], [(1,)]))              # PG 0 seq 1
    for p in job.procs:   # every rank creates its groups in the same order: tp first, then dp
        p.pg(tp[p.rank]), p.pg(dp[p.rank])
    for step in range(1, 4):
        for p in job.procs:
            r = p.rank
            last = step == 3
            p.coll(tp[r], "all_reduce", [(256,)], [(256,)])                # TP seq 2*step-1
            n = 512 if last and r == 4 else 256
            hung = last and r >= 3                                         # TP group '2' hangs in seq 6
            p.coll(tp[r], "all_reduce", [(n,)], [(n,)], state="started" if hung else "completed")   # TP seq 2*step
            if not hung:                                                   # DP seq `step`; ranks 0-2 wait in
                p.coll(dp[r], "all_reduce", [(4096,)], [(4096,)], state="started" if last else "completed")
    write_case(root, "multi_pg_subgroup_divergence", job, expect(
        "collective_mismatch", [4], "6 ranks: default PG, TP groups '1' = [0,1,2] and '2' = [3,4,5], DP groups "
        "'3'..'5'; in step 3 rank 4's second TP all_reduce (TP group '2', seq 6) has 512 elements where ranks 3 "
        "and 5 have 256; ranks 0-2 completed their TP step and wait in DP all_reduce seq 3 for ranks 3-5. pg_id "
        "is 1 for both TP groups (each rank's own second group): the group is its name",
        div("fr_seq", "2", 6, {3: "ALLREDUCE", 4: "ALLREDUCE", 5: "ALLREDUCE"})))


def case_torchcomms_json(root):
    job = Job(4, prefix="ncclx", torchcomms=True, groups={"0": ("ncclx", [0, 1, 2, 3])})
    for _ in range(3):
        job.all(lambda p: p.coll("0", "all_gather_single", [(64,)], [(256,)]))
        job.all(lambda p: p.coll("0", "reduce_scatter_single", [(256,)], [(64,)]))
    for p in job.procs:
        if p.rank == 2:
            p.coll("0", "reduce_scatter_single", [(256,)], [(64,)], state="started")
        else:
            p.coll("0", "all_gather_single", [(64,)], [(256,)], state="started")
    write_case(root, "torchcomms_json_op_mismatch", job, expect(
        "collective_mismatch", [2], "TorchComms Flight Recorder JSON (profiling names ncclx:<op>, desc = backend, "
        "p2p_seq_id 0): at collective seq 7 rank 2 called reduce_scatter_single where ranks 0, 1, 3 called "
        "all_gather_single; reduce_scatter always follows all_gather here, so this is no skip: rank 2 would have to "
        "have issued an extra pair. TorchComms counts collective_seq_id per process from 0: the 7th op is seq 6",
        div("fr_seq", "0", 6, {0: "_ALLGATHER_BASE", 1: "_ALLGATHER_BASE", 2: "_REDUCE_SCATTER_BASE",
                               3: "_ALLGATHER_BASE"})),
        fmt="json", filename=lambda r: f"torchcomms_fr_trace_rank_{r}.json")


def case_nccl2_p2p_stalled(root):
    job = Job(2, prefix="nccl2")
    job.all(lambda p: p.coll("0", "broadcast", [(64,)], [(64,)]))
    for mb in range(2):
        job[0].send("0", 1, (8, 512))
        job[1].recv("0", 0, (8, 512))
    job[0].send("0", 1, (8, 512), state="started")       # p2p seq 3: rank 1 never posts the recv
    write_case(root, "nccl2_p2p_receiver_stalled", job, expect(
        "rank_stalled", [1], "2-stage pipeline (nccl2 backend): rank 1 received two microbatches, completed them, "
        "and never posted the third recv; rank 0's send 0->1 (p2p seq 3) started and waits",
        div("fr_p2p_seq", "0", 3, {0: "SEND", 1: None})))


def case_all_timed_out(root):
    job = Job(4)
    steps_allreduce(job, 4)
    job.all(lambda p: p.coll("0", "all_reduce", [(1000,)], [(1000,)], state="started", retired=True))   # seq 5
    write_case(root, "all_ranks_timed_out_same_collective", job, expect(
        "transport_failure", [], "every rank issued the same all_reduce seq 5 (same size, dtype), every kernel "
        "started, none completed, and the watchdog retired all of them (timed out): nobody is behind or different "
        "(no divergence), the collective itself never finished: a transport problem; which link, the dumps "
        "cannot say"))


def case_extra_collective(root):
    job = Job(4, version="2.4")
    steps_allreduce(job, 9, n=4096)                                        # seq 1..9
    for p in job.procs:                                                    # rank 0 runs a checkpoint barrier
        if p.rank == 0:
            p.coll("0", "all_reduce_barrier", [(1,)], [(1,)], state="started")          # seq 10
            p.coll("0", "all_reduce", [(4096,)], [(4096,)], state="scheduled")          # seq 11
        else:
            p.coll("0", "all_reduce", [(4096,)], [(4096,)], state="started")            # seq 10
    write_case(root, "extra_collective_rank0", job, expect(
        "missing_collective", [0], "rank 0 alone ran a barrier (nccl:all_reduce_barrier, a 1-element all_reduce) at "
        "seq 10, then enqueued the step's all_reduce of 4096 as seq 11; the others' seq 10 is that all_reduce: "
        "a collective in only rank 0's code path (dump version 2.4)",
        div("fr_seq", "0", 10, {0: "ALLREDUCE", 1: "ALLREDUCE", 2: "ALLREDUCE", 3: "ALLREDUCE"})))


def case_two_rank_op_tie(root):
    job = Job(2)
    job.all(lambda p: p.coll("0", "broadcast", [(64,)], [(64,)]))          # seq 1
    steps_allreduce(job, 4)                                                # seq 2..5
    for p in job.procs:                                                    # seq 6
        if p.rank == 1:
            p.coll("0", "all_gather", [(1000,)], [(1000,)] * 2, state="started", retired=True)
        else:
            p.coll("0", "all_reduce", [(1000,)], [(1000,)], state="started", retired=True)
    write_case(root, "two_rank_op_tie", job, expect(
        "collective_mismatch", [1], "two ranks, no majority: at seq 6 rank 0 all_reduces as at seqs 2-5, rank 1 "
        "calls all_gather, an op the group never issues at any other seq: rank 1's call is the odd one",
        div("fr_seq", "0", 6, {0: "ALLREDUCE", 1: "ALLGATHER"})))


def case_two_rank_swapped_order(root):
    job = Job(2)

    def step(p, swap=False, states=("completed", "completed")):
        ops = [("all_reduce", 16), ("broadcast", 1)]
        for (name, n), state in zip(reversed(ops) if swap else ops, states):
            p.coll("0", name, [(n,)], [(n,)], state=state)

    for _ in range(3):                                                     # seq 1..6
        job.all(step)
    for p in job.procs:                                                    # step 4 from seq 7
        step(p, swap=(p.rank == 1), states=("started", "scheduled"))
    write_case(root, "two_rank_swapped_order", job, expect(
        "missing_collective", [1], "two ranks, each step all_reduce(16) then broadcast(1); in step 4 rank 1 "
        "broadcasts first: at seq 7 it went from broadcast to broadcast, a step the program never takes, where "
        "rank 0 took the usual broadcast to all_reduce. Swapped or skipped, the dumps cannot tell (low "
        "confidence, collective_mismatch the alternative)",
        div("fr_seq", "0", 7, {0: "ALLREDUCE", 1: "BROADCAST"})))


def case_empty_coalescing_burns_seq(root):
    job = Job(4)
    steps_allreduce(job, 4)                                                # seq 1..4
    for p in job.procs:
        if p.rank == 2:
            # startCoalescing bumps seqCollective_ and an empty group records nothing
            # (ProcessGroupNCCL.cpp: "we burn a seq_ if someone ever does a 'start' and 'end'
            # coalescing region without doing an operation inbetween")
            p.pg("0").seq_coll += 1                                        # seq 5: no entry
            p.coll("0", "all_reduce", [(1000,)], [(1000,)], state="started")             # seq 6
        else:
            p.coalesced_coll("0", [("_all_gather_base", [(n,)], [(4 * n,)]) for n in (512, 256)],
                             "ALLGATHER_coalesced", state="started")                   # seq 5
    write_case(root, "empty_coalescing_burns_seq", job, expect(
        "missing_collective", [2], "ranks 0, 1, 3 started a coalesced all_gather at seq 5; rank 2's dump holds "
        "seqs 4 and 6 but no 5 (an empty coalescing region burned the seq): it never issued the group's seq 5, "
        "went on to its all_reduce at seq 6, and the others wait at 5",
        div("fr_seq", "0", 5, {0: "ALLGATHER_COALESCED", 1: "ALLGATHER_COALESCED", 2: None, 3: "ALLGATHER_COALESCED"})))


def case_p2p_size_mismatch(root):
    job = Job(2)
    job.all(lambda p: p.coll("0", "broadcast", [(64,)], [(64,)]))
    pipeline_microbatches(job, 2, [0, 1])                                  # p2p seq 1..4 on each rank
    job[0].send("0", 1, (4, 1024), state="started")                        # p2p seq 5
    job[1].recv("0", 0, (4, 2048), state="started")                        # p2p seq 5: twice the elements
    write_case(root, "p2p_size_mismatch", job, expect(
        "collective_mismatch", [0, 1], "two-stage pipeline; in microbatch 3 rank 0 sends 4x1024 to rank 1, which "
        "posts a recv of 4x2048: the pair disagrees on the size and both wait; which side is wrong the dumps "
        "cannot say, so both are named",
        div("fr_p2p_seq", "0", 5, {0: "SEND", 1: "RECV"})))


REAL = {
    "gloo_real_healthy_rooted_alltoall": expect(
        "healthy", [], "real gloo capture (torch 2.13): uneven all_to_all_single (inputs 4, 8, 12, 16, outputs 10), "
        "scatter from 0 (root input [4, 2], others none), gather to 2 (root output [4, 3]), broadcast, reduce, "
        "all_gather; every rank dumped at the end"),
    "gloo_real_killed_rank": expect(
        "rank_stalled", [2], "real gloo capture: rank 2 was SIGKILLed at step 3 and left no dump; pg_config in the "
        "others' dumps gives [0, 1, 2, 3]; ranks 0, 1, 3 issued all_reduce seq 6 and failed there. The dumps show "
        "only that rank 2 is missing and everyone waited for it: stalled or dead, they cannot tell",
        div("fr_seq", "0", 6, {0: "ALLREDUCE", 1: "ALLREDUCE", 2: None, 3: "ALLREDUCE"})),
}

CASES = [case_healthy_p2p_pipeline, case_healthy_batch_isend_irecv, case_healthy_fsdp, case_healthy_uneven_alltoall,
         case_healthy_rooted, case_op_mismatch, case_size_mismatch, case_dtype_mismatch, case_coalesced_size_mismatch,
         case_alltoall_total_mismatch, case_rank_scheduled_behind, case_rank_no_dump, case_missing_collective_shift,
         case_p2p_peer_mismatch, case_p2p_after_collective_same_counter, case_ring_buffer_eviction,
         case_multi_pg_subgroup, case_torchcomms_json, case_nccl2_p2p_stalled, case_all_timed_out,
         case_extra_collective, case_two_rank_op_tie, case_two_rank_swapped_order, case_empty_coalescing_burns_seq,
         case_p2p_size_mismatch]


def main(root: str) -> None:
    out = Path(root)
    for case in CASES:
        case(out)
    for name, expected in REAL.items():   # the dumps come from capture_gloo.py
        (out / name / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent))
