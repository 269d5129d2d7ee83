"""Each query of queries/ on a tiny hand-made table (dbt style): the rows in, the answer out."""
import re
from pathlib import Path

import duckdb
import pytest

from correlator import queries
from correlator.pipeline import analyze, create_tables
from correlator.synth import JobSpec, generate_job


@pytest.fixture
def con():
    c = duckdb.connect()
    create_tables(c)
    return c


def _collectives(con, rows):
    """rows: (rank, pg, counter, seq, op, numel, state)"""
    for rank, pg, counter, seq, op, numel, state in rows:
        con.execute("insert into collectives (file, line, rank, pg, counter, seq, op, numel_in, state) "
                    "values ('f', 1, ?, ?, ?, ?, ?, ?, ?)", [rank, pg, counter, seq, op, numel, state])


def test_identity_links_pid_and_local_rank(con):
    con.execute("insert into processes (file, line, host, pid, rank, local_rank) values ('a', 1, 'n1', 10, 5, 1)")
    con.execute("insert into events (file, line, host, pid, kind) values ('nccl.log', 1, 'n1', 10, 'nccl')")
    con.execute("insert into events (file, line, local_rank, kind) values ('r1.log', 1, 1, 'other')")
    queries.run_all(con)
    assert con.execute("select file, rank from events order by file").fetchall() == [("nccl.log", 5), ("r1.log", 5)]


def test_identity_links_a_local_rank_on_its_host_in_a_multi_node_job(con):
    con.execute("insert into processes (file, line, host, pid, rank, local_rank) values "
                "('a', 1, 'n1', 10, 3, 3), ('b', 1, 'n2', 11, 11, 3)")
    con.execute("insert into events (file, line, host, local_rank, kind) values "
                "('n2/attempt_0/3/stderr.log', 1, 'n2', 3, 'progress'), ('n3/attempt_0/3/stderr.log', 1, 'n3', 3, 'other')")
    queries.run_all(con)
    assert con.execute("select file, rank from events order by file").fetchall() == [
        ("n2/attempt_0/3/stderr.log", 11), ("n3/attempt_0/3/stderr.log", None)]


def test_identity_links_a_local_rank_that_its_console_tags_with_its_global_rank(con):
    """`[default1]:[rank9]: Traceback ...` in one agent's console: that file's other `[default1]:`
    lines (a progress bar) are rank 9's; another agent's console is not."""
    con.execute("insert into events (file, line, rank, local_rank, kind) values "
                "('node2.log', 1, 9, 1, 'traceback_start'), ('node2.log', 2, null, 1, 'progress'), "
                "('node3.log', 1, null, 1, 'progress')")
    queries.run_all(con)
    assert con.execute("select file, line, rank from events order by file, line").fetchall() == [
        ("node2.log", 1, 9), ("node2.log", 2, 9), ("node3.log", 1, None)]


def test_first_stalled_is_the_rank_behind(con):
    _collectives(con, [(r, "0", "pg_seq", 42, "ALLREDUCE", 8, "timeout") for r in (0, 1, 3)]
                 + [(2, "0", "pg_seq", 41, "ALLREDUCE", 8, "issued")])
    queries.run_all(con)
    assert con.execute("select rank, last_seq from first_stalled").fetchall() == [(2, 41)]
    assert con.execute("select seq, split from divergence").fetchall() == [(42, False)]


def test_ranks_that_time_out_in_different_collectives_diverge_after_the_lower(con):
    """Rank 1 waits in SeqNum 61877 (last completed 61876), rank 0 in 61878: the first collective
    one of them never issued is 61878."""
    _collectives(con, [(1, "0", "pg_seq", 61877, "ALLREDUCE", 1, "timeout"),
                       (0, "0", "pg_seq", 61878, "BROADCAST", 3180290, "timeout")])
    queries.run_all(con)
    assert con.execute("select pg, counter, seq, split from divergence").fetchall() == [("0", "pg_seq", 61878, False)]


def test_ranks_past_the_collective_most_ranks_wait_in_diverge_there(con):
    """Ranks 0, 2, 3 wait in SeqNum 1836; rank 1 waits in 1837 (an uneven split sent it on): 1836,
    which rank 1 did not issue as the others did, is where they diverged, and rank 1 is past it."""
    _collectives(con, [(r, "0", "pg_seq", 1836, "ALLREDUCE", 6553600, "timeout") for r in (0, 2, 3)]
                 + [(1, "0", "pg_seq", 1837, "ALLREDUCE", 2, "timeout")])
    queries.run_all(con)
    assert con.execute("select seq, split from divergence").fetchall() == [(1836, False)]
    assert con.execute("select seq, ranks from sequence_ahead").fetchall() == [(1836, [1])]


def test_a_rank_that_enqueued_further_is_not_ahead(con):
    """What a rank enqueued (the PG status's last enqueued) is ahead of where it waits: rank 1
    timed out in 1836 with the others, though it enqueued up to 1840."""
    _collectives(con, [(r, "0", "pg_seq", 1836, "ALLREDUCE", 8, "timeout") for r in range(4)])
    con.execute("insert into pg_status (file, line, rank, pg, last_enqueued, last_completed) values ('f', 2, 1, '0', 1840, 1835)")
    queries.run_all(con)
    assert con.execute("select count(*) from sequence_ahead").fetchone() == (0,)


def _comm(con, host, pid, comm, rank, nranks, line):
    con.execute("insert into comms (file, line, host, pid, comm, rank, nranks, phase) values ('f', ?, ?, ?, ?, ?, ?, 'COMPLETE')",
                [line, host, pid, comm, rank, nranks])


def test_communicators_without_a_comm_id_are_matched_in_the_order_each_process_created_them(con):
    """NCCL < 2.19 prints no commId: the first 2-rank communicator of each of two processes (ranks
    0 and 1 in it) is one communicator; its opCounts then compare, and rank 0 is behind."""
    _comm(con, "n01", 40, "0x55d0", 0, 2, 1)
    _comm(con, "n02", 28, "0x5612", 1, 2, 2)
    for rank, host, pid, comm, last in ((0, "n01", 40, "0x55d0", 24), (1, "n02", 28, "0x5612", 25)):
        con.execute("insert into collectives (file, line, rank, host, pid, comm, counter, seq, op, state) "
                    "values ('f', ?, ?, ?, ?, ?, 'nccl_opcount', ?, 'BROADCAST', 'issued')", [10 + rank, rank, host, pid, comm, last])
    queries.run_all(con)
    assert con.execute("select distinct comm_id from comms").fetchall() == [("2-rank comm #1",)]
    assert con.execute("select pg, seq from divergence").fetchall() == [("2-rank comm #1", 25)]


def test_communicators_of_one_size_with_repeated_ranks_are_left_apart(con):
    """Two TP groups of 2 on four processes: each process's first 2-rank comm holds rank 0 or 1 of
    its own group, so the four are not one communicator."""
    for pid, rank in ((1, 0), (2, 1), (3, 0), (4, 1)):
        _comm(con, "n01", pid, f"0x{pid}", rank, 2, pid)
    queries.run_all(con)
    assert con.execute("select count(*) from comms where comm_id is not null").fetchone() == (0,)


@pytest.mark.parametrize("culprit_ops,kind", [
    (["BROADCAST", "ALLREDUCE"], "collective_mismatch"),   # the pair swapped: its next op is the others' first
    (["BROADCAST", "ALLGATHER"], "missing_collective"),    # the ALLREDUCE skipped: every later op one early
])
def test_when_the_next_ops_are_visible_a_swap_is_a_mismatch_and_a_skip_a_missing_collective(con, culprit_ops, kind):
    from correlator import verdict
    others = ["ALLREDUCE", "BROADCAST", "ALLGATHER"]
    rows = [(r, "0", "detail_seq", 10 + i, op, 2, "issued") for r in (0, 1, 2) for i, op in enumerate(others)]
    rows += [(3, "0", "detail_seq", 10 + i, op, 2, "issued") for i, op in enumerate(culprit_ops)]
    _collectives(con, rows)
    queries.run_all(con)
    decided = verdict.decide(con)
    assert (decided.kind, decided.culprit_ranks) == (kind, [3])
    assert con.execute("select seq from divergence").fetchone() == (11,)   # DETAIL's 10, 0-based


def test_counters_stay_apart(con):
    # DETAIL counts from 0: its 41 is SeqNum 42, and NCCL opCounts are not SeqNums at all.
    _collectives(con, [(0, "0", "detail_seq", 41, "ALLREDUCE", 8, "issued"), (1, "0", "pg_seq", 42, "ALLREDUCE", 8, "issued"),
                       (0, "c0ffee", "nccl_opcount", 7, "ALLREDUCE", 8, "issued")])
    queries.run_all(con)
    rows = con.execute("select pg, counter, rank, last_seq from last_seq order by counter").fetchall()
    assert rows == [("0", "detail_seq", 0, 42), ("c0ffee", "nccl_opcount", 0, 7), ("0", "pg_seq", 1, 42)]


def test_size_split_and_shift(con):
    # rank 2 skipped seq 5 (a small ALLREDUCE): its 5 is everyone else's 6.
    seqs = {5: ("ALLREDUCE", 2), 6: ("BROADCAST", 100), 7: ("ALLREDUCE", 1000)}
    rows = [(r, "0", "pg_seq", s, *seqs[s], "issued") for r in (0, 1, 3) for s in (5, 6, 7)]
    rows += [(2, "0", "pg_seq", 5, *seqs[6], "issued"), (2, "0", "pg_seq", 6, *seqs[7], "issued")]
    _collectives(con, rows)
    queries.run_all(con)
    assert con.execute("select seq, split from divergence").fetchall() == [(5, True)]
    assert con.execute("select rank from shifted").fetchall() == [(2,)]


def test_the_odd_rank_out_sits_in_another_collective_call(con):
    frame = '  File "/x/torch/distributed/distributed_c10d.py", line {}, in {}'
    for rank, call in [(0, "all_reduce"), (1, "all_reduce"), (2, "broadcast"), (3, "all_reduce")]:
        for line, text in enumerate(['  File "train.py", line 9, in step', frame.format(3000, call)]):
            con.execute("insert into events (file, line, rank, kind, text) values (?, ?, ?, 'traceback_frame', ?)",
                        [f"{rank}.log", line, rank, text])
    queries.run_all(con)
    assert con.execute("select rank, call, majority_call from call_minority").fetchall() == [(2, "broadcast", "all_reduce")]


def _traceback(con, rank, frames, ts="2026-12-01 09:13:53"):
    """A rank's traceback: (path, line, fn) frames, outermost first, ending in a gloo timeout."""
    rows = [("traceback_start", "Traceback (most recent call last):")]
    rows += [("traceback_frame", f'  File "{path}", line {n}, in {fn}') for path, n, fn in frames]
    rows += [("gloo_timeout", "RuntimeError: [...unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete")]
    for line, (kind, text) in enumerate(rows, 1):
        con.execute("insert into events (file, line, rank, kind, text, ts) values (?, ?, ?, ?, ?, ?::timestamptz)",
                    [f"{rank}.log", line, rank, kind, text, ts])


def _sync_metrics(call_line, call):
    c10d = "/x/torch/distributed/distributed_c10d.py"
    return [("train.py", 252, "run_steps"), ("train.py", call_line, "sync_metrics"), (c10d, 3000, call)]


def test_the_rank_every_other_rank_went_past_was_left_behind(con):
    """gloo does not check sizes: ranks 0-1 logged one more step (they are in the next step's
    all_reduce), rank 3 is in the broadcast after the all_reduce (line 173 after 172 in the function
    both stacks share): rank 2, still in the all_reduce at 172, is the one every other rank passed."""
    for rank, step, frames in [(0, 4, _sync_metrics(172, "all_reduce")), (1, 4, _sync_metrics(172, "all_reduce")),
                               (2, 3, _sync_metrics(172, "all_reduce")), (3, 3, _sync_metrics(173, "broadcast"))]:
        _traceback(con, rank, frames)
        con.execute("insert into progress (file, line, rank, step) values (?, 0, ?, ?)", [f"{rank}.log", rank, step])
    queries.run_all(con)
    assert con.execute("select rank, call, site from left_behind").fetchall() == [(2, "all_reduce", "train.py:172 in sync_metrics")]


def test_two_ranks_left_behind_together_name_nobody(con):
    for rank, call_line, call in [(0, 173, "broadcast"), (1, 172, "all_reduce"), (2, 172, "all_reduce"), (3, 173, "broadcast")]:
        _traceback(con, rank, _sync_metrics(call_line, call))
    queries.run_all(con)
    assert con.execute("select count(*) from left_behind").fetchone() == (0,)


def test_a_rank_alone_in_a_barrier_is_named_and_a_crash_makes_positions_moot(con):
    autograd = ("/x/torch/autograd/graph.py", 979, "_engine_run_backward")
    for rank in range(4):
        frames = [("train.py", 60, "after_step"), ("/x/torch/distributed/distributed_c10d.py", 5356, "barrier")] if rank == 0 \
            else [("train.py", 50, "run_steps"), autograd]
        _traceback(con, rank, frames)
    queries.run_all(con)
    assert con.execute("select rank, call, majority_call from call_minority").fetchall() == [(0, "barrier", "_engine_run_backward")]
    con.execute("insert into events (file, line, rank, kind, text) values ('3.log', 99, 3, 'traceback', 'RuntimeError: corrupt batch')")
    queries.run_all(con)
    assert con.execute("select count(*) from call_minority").fetchone() == (0,)


def test_common_mode_every_rank_died_of_one_signal(con):
    for rank in range(4):
        con.execute("insert into exits (file, line, rank, signal, reason, source, ts) values "
                    "('console.log', ?, ?, 11, 'failure', 'torchelastic_summary', timestamptz '2026-12-01 09:21:21+00')", [rank, rank])
    queries.run_all(con)
    assert con.execute("select basis, how from common_mode").fetchall() == [("every", "SIGSEGV (signal 11)")]


def test_one_rank_crashing_while_the_others_lose_it_is_not_common_mode(con):
    con.execute("insert into exits (file, line, rank, signal, reason, source) values ('c', 1, 3, 11, 'signaled', 'mpirun')")
    for rank in range(3):
        con.execute("insert into events (file, line, rank, kind, text) values ('c', ?, ?, 'peer_connection_lost', 'Connection closed by peer')",
                    [rank + 2, rank])
        con.execute("insert into progress (file, line, rank, step) values ('c', 0, ?, 3)", [rank])
    con.execute("insert into progress (file, line, rank, step) values ('c', 0, 3, 3)")
    queries.run_all(con)
    assert con.execute("select count(*) from common_mode").fetchone() == (0,)
    con.execute("delete from events")   # nobody said a word: they died with it
    queries.run_all(con)
    assert con.execute("select basis from common_mode").fetchall() == [("first_of_silent",)]


def test_ucx_crash_reports_of_several_processes_under_torchrun_are_common_mode(con):
    """UCX's handler reports signal 11 for three pids (no rank), torchrun names one rank dead of it,
    nobody lost a peer or timed out: they died together."""
    for pid in (5120, 5122, 5125):
        con.execute("insert into exits (file, line, host, pid, signal, reason, source) values "
                    "('w0.log', ?, 'w0', ?, 11, 'signal_report', 'ucx')", [pid - 5000, pid])
    con.execute("insert into exits (file, line, rank, pid, signal, reason, source) values "
                "('w0.log', 200, 5, 5125, 11, 'worker_failed', 'torchelastic')")
    for rank in range(8):
        con.execute("insert into events (file, line, rank, kind, text) values ('w0.log', ?, ?, 'nccl', 'Init START')", [rank, rank])
    queries.run_all(con)
    assert con.execute("select basis, how from common_mode").fetchall() == [("first_of_reported", "SIGSEGV (signal 11)")]


def test_a_size_print_differs_for_the_minority_whatever_follows_it(con):
    """One print per rank of the size it hands a collective: `len(...)`, `N elements`, what follows
    (a key list, a remark) is not part of the template."""
    keys = "a,b,c,d"
    for rank, text in [(0, f"rank 0 len(log_vars): 4 keys: {keys}"), (1, f"rank 1 len(log_vars): 4 keys: {keys}"),
                       (2, "rank 2 len(log_vars): 2 keys: a,b"), (3, f"rank 3 len(log_vars): 4 keys: {keys}"),
                       (0, "rank 0: all_reduce over 400 elements (x2, the odd one)"),
                       (1, "rank 1: all_reduce over 200 elements"), (2, "rank 2: all_reduce over 200 elements")]:
        con.execute("insert into events (file, line, rank, kind, text) values ('c', ?, ?, 'other', ?)",
                    [len(text) + rank, rank, text])
    queries.run_all(con)
    assert con.execute("select rank, shape, majority_shape from shape_minority order by rank").fetchall() == [
        (0, "400", "200"), (2, "2", "4")]


def test_two_ranks_in_two_calls_name_nobody(con):
    for rank, call in [(0, "all_reduce"), (1, "broadcast")]:
        con.execute("insert into events (file, line, rank, kind, text) values ('f', ?, ?, 'traceback_frame', ?)",
                    [rank, rank, f'  File "/x/distributed_c10d.py", line 1, in {call}'])
    queries.run_all(con)
    assert con.execute("select count(*) from call_minority").fetchone() == (0,)


def test_mismatch_majority_vote(con):
    for a, na, b, nb in [(0, 6, 3, 8), (1, 6, 3, 8), (3, 8, 0, 6)]:
        con.execute("insert into mismatches (file, line, what, rank_a, n_a, rank_b, n_b) values ('f', 1, 'ddp_params', ?, ?, ?, ?)",
                    [a, na, b, nb])
    queries.run_all(con)
    assert con.execute("select rank, value, norm from mismatch_minority").fetchall() == [(3, "8", "6")]


def test_mismatch_between_two_ranks_names_nobody(con):
    con.execute("insert into mismatches (file, line, what, rank_a, n_a, rank_b, n_b) values ('f', 1, 'ddp_params', 0, 6, 1, 8)")
    queries.run_all(con)
    assert con.execute("select count(*) from mismatch_minority").fetchone() == (0,)


def test_fingerprints_apart_only_in_their_sequence_number_name_the_rank_ahead(con):
    """DETAIL reports `Sequence number: 19vs 31`, op, shape and dtype alike: rank 0 stood at 31
    while ranks 1-3 stood at 19."""
    fp = "SequenceNumber={}, OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long"
    for other in (1, 2, 3):
        con.execute("insert into mismatches (file, line, what, rank_a, fp_a, rank_b, fp_b) values ('f', ?, 'detail_fingerprint', ?, ?, 0, ?)",
                    [other, other, fp.format(19), fp.format(31)])
    queries.run_all(con)
    assert con.execute("select count(*) from mismatch_minority").fetchone() == (0,)
    assert con.execute("select rank, seq, norm from seq_minority").fetchall() == [(0, 31, 19)]


def test_a_rank_the_others_see_only_in_the_monitored_barriers_fingerprint_differs(con):
    """torch prints the other side at SequenceNumber=0 with the monitored barrier's own op when that
    rank sits in another call (a barrier): no collective of that rank, but a vote that it differs;
    a rank with a report of its own is judged by that instead."""
    fp = "SequenceNumber=88341, OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long"
    for other in (1, 2, 3):
        con.execute("insert into mismatches (file, line, what, rank_a, fp_a, rank_b, fp_b) values ('f', ?, 'detail_fingerprint', ?, ?, 0, ?)",
                    [other, other, fp, "SequenceNumber=0OpType=REDUCE"])
    queries.run_all(con)
    assert con.execute("select rank from mismatch_minority").fetchall() == [(0,)]
    assert con.execute("select count(*) from collectives where rank = 0").fetchone() == (0,)


def test_a_collective_that_raised_an_async_error_is_one_the_rank_issued(con):
    text = ("[Rank 3] Collective WorkNCCL(SeqNum=412, OpType=ALLGATHER, NumelIn=4096, NumelOut=32768, Timeout(ms)=600000) "
            "raised the following async exception: NCCL error: remote process exited or there was a network error")
    con.execute("insert into events (file, line, rank, kind, text) values ('f', 7, 3, 'nccl_remote_error', ?)", [text])
    queries.run_all(con)
    assert con.execute("select rank, pg_rank, counter, seq, op, numel_in, numel_out, state from collectives").fetchall() == [
        (3, 3, "pg_seq", 412, "ALLGATHER", 4096, 32768, "issued")]
    assert con.execute("select kind from events").fetchall() == [("nccl_remote_error",)]


def test_clock_offsets_from_matched_steps(con):
    for host, skew_ms in (("n1", 0), ("n2", 2500)):
        for step in range(1, 6):
            con.execute("insert into progress (file, line, host, rank, step, ts) values "
                        "('f', 1, ?, ?, ?, timestamptz '2026-11-29 10:00:00+00' + to_milliseconds(?))",
                        [host, 0 if host == "n1" else 4, step, step * 1000 + skew_ms])
    queries.run_all(con)
    assert con.execute("select host, offset_ms from clock_offsets").fetchall() == [("n2", 2500.0)]


def test_straggler_lags_every_step(con):
    for rank in range(4):
        for step in range(1, 7):
            lag = 400 if rank == 2 else 0
            con.execute("insert into progress (file, line, host, rank, step, ts) values "
                        "('f', 1, 'n1', ?, ?, timestamptz '2026-11-29 10:00:00+00' + to_milliseconds(?))",
                        [rank, step, step * 1000 + lag + rank])
    queries.run_all(con)
    assert [r[0] for r in con.execute("select rank from straggler_ranks").fetchall()] == [2]


def _steps(con, column, values):
    """Six steps per rank, every rank ending them together; `values`: rank -> the column's value."""
    for rank, value in values.items():
        for step in range(1, 7):
            con.execute(f"insert into progress (file, line, host, rank, step, ts, {column}) values "
                        "('f', 1, 'n1', ?, ?, timestamptz '2026-11-29 10:00:00+00' + to_milliseconds(?), ?)",
                        [rank, step, step * 1000 + rank, value])


@pytest.mark.parametrize("column,values,basis", [
    ("data_s", {0: 0.0, 1: 0.0, 2: 0.3, 3: 0.0}, "data_wait"),       # HF / Lightning / any script's data_time
    ("step_s", {0: 0.2, 1: 0.21, 2: 0.2, 3: 0.45}, "step_time"),     # step_time, iter_ms, Megatron's elapsed time
    ("rate", {0: 5400.0, 1: 5380.0, 2: 2100.0, 3: 5420.0}, "rate"),  # torchtitan tps, DeepSpeed samples/s
])
def test_straggler_from_each_timing_a_trainer_logs(con, column, values, basis):
    _steps(con, column, values)
    queries.run_all(con)
    slow = max(values, key=lambda r: values[r] if basis != "rate" else -values[r])
    assert con.execute("select rank, basis from straggler_ranks").fetchall() == [(slow, basis)]


def test_a_progress_bar_redraw_does_not_time_a_step(con):
    """A bar's rows carry the time of the line before them: they never make a rank lag."""
    _steps(con, "data_s", {r: 0.0 for r in range(4)})
    for step in range(1, 7):
        con.execute("insert into progress (file, line, host, rank, step, ts, source) values "
                    "('f', 2, 'n1', 0, ?, timestamptz '2026-11-29 10:00:00+00' + to_milliseconds(?), 'bar')",
                    [step, step * 1000 + 900])
    queries.run_all(con)
    assert con.execute("select count(*) from straggler_ranks").fetchone() == (0,)


@pytest.mark.parametrize("launcher,host,skew", [("srun", "node2", 4.0), ("torchrun", "gpu-002", -3.0)])
def test_injected_skew_is_recovered(tmp_path, launcher, host, skew):
    truth = generate_job(tmp_path, JobSpec(nranks=8, ranks_per_host=4, fault="stall", launcher=launcher,
                                           clock_skew_s={host: skew}, seed=3))
    report = analyze(tmp_path / "logs").report
    offset = report["clock"]["offsets_ms"][host]
    assert abs(offset - skew * 1000) <= report["clock"]["uncertainty_ms"][host]
    assert report["verdict"]["culprit_ranks"] == truth["culprit_ranks"]


def test_year_less_times_take_the_year_of_dated_lines(con):
    # A c10 line parsed with the year of a fresh checkout's mtime (2031), beside a dated line of 2026.
    con.execute("insert into events (file, line, host, ts, ts_inferred, kind) values "
                "('r0.log', 1, 'n1', timestamptz '2026-11-29 10:00:00+00', 'zone', 'python_logging'), "
                "('r0.log', 2, 'n1', timestamptz '2031-11-29 10:00:05+00', 'year,zone', 'c10'), "
                "('r0.log', 3, 'n1', timestamptz '2031-11-29 10:00:05+00', 'carried', 'other')")
    con.execute("insert into collectives (file, line, ts, counter, seq) values ('r0.log', 2, timestamptz '2031-11-29 10:00:05+00', 'pg_seq', 1)")
    queries.run_all(con)
    years = [r[0] for r in con.execute("select year(ts) from events order by line").fetchall()]
    assert years == [2026, 2026, 2026]
    assert con.execute("select year(ts) from collectives").fetchone() == (2026,)


def test_every_rule_has_a_remedy():
    from correlator.verdict import remedies, rules
    for rule in rules():
        entry = remedies().get(rule.name) or remedies().get(rule.kind)
        assert entry and all(r["action"] and r["verify"] for r in entry["remedy"]), rule.name


def test_the_report_timeline_ends_where_the_job_did_and_reads_only_its_last_events(tmp_path):
    """The report's timeline is the last events, where a job fails (a long job's first are its
    start-up). assemble.timeline cuts the events at a time before removing tee'd copies: the rows
    are those of reading every event (a torchrun job: every line once in the console, once in its file)."""
    from correlator import assemble
    from correlator.pipeline import parse_job
    generate_job(tmp_path, JobSpec(nranks=8, steps=300, coll_lines=False, fault="stall", seed=2))
    parsed = parse_job(tmp_path / "logs")
    queries.run_all(parsed.con)
    events = parsed.con.execute(f"select count(*) from aligned_events where kind not in {assemble.QUIET_KINDS}").fetchone()[0]
    assert events > 4 * assemble.TIMELINE_ROWS, "enough events for the cut to apply"
    fast, every = assemble.timeline(parsed.con), assemble.timeline(parsed.con, cut=False)
    assert len(fast) == assemble.TIMELINE_ROWS and fast == every
    assert len({(r["rank"], r["kind"], r["text"], r["time"]) for r in fast}) == len(fast), "no copy left"
    last = parsed.con.execute(f"select max(aligned_ts) from aligned_events where kind not in {assemble.QUIET_KINDS}").fetchone()[0]
    assert fast[-1]["time"] == assemble.iso(last) and [r["time"] for r in fast] == sorted(r["time"] for r in fast)
    # A culprit's own last events are kept even where the others' later lines outnumber them.
    quiet_rank = parsed.con.execute(f"""select rank from aligned_events where kind not in {assemble.QUIET_KINDS}
                                        and rank is not null group by rank order by max(aligned_ts) limit 1""").fetchone()[0]
    with_culprit = assemble.timeline(parsed.con, [quiet_rank])
    own = [r for r in with_culprit if r["rank"] == quiet_rank]
    assert len(with_culprit) == assemble.TIMELINE_ROWS and len(own) >= assemble.CULPRIT_ROWS
    assert [r["time"] for r in with_culprit] == sorted(r["time"] for r in with_culprit)
    others = [r for r in fast if r not in own]
    assert [r for r in with_culprit if r not in own] == others[len(others) - (len(with_culprit) - len(own)):]


def test_a_py_spy_dump_is_its_process_s_and_deepspeed_s_launcher_names_the_rank(con):
    """`Process P:` opens a dump; its frames take P, which the DeepSpeed launcher's spawn line
    (local rank 1 on node 1 of 4-process nodes) makes global rank 5."""
    con.execute("insert into events (file, line, kind, text) values "
                "('c.log', 1, 'deepspeed_node_layout', '[launch.py:152:main] nnodes=2, num_local_procs=4, node_rank=1'), "
                "('c.log', 10, 'stack_dump_process', 'Process 4242: python -u train.py --local_rank=1'), "
                "('c.log', 11, 'stack_dump_start', 'Thread 4242 (active): \"MainThread\"'), "
                "('c.log', 12, 'stack_frame', '    all_reduce (torch/distributed/distributed_c10d.py:2918)'), "
                "('c.log', 13, 'stack_frame', '    step (train.py:80)')")
    con.execute("insert into processes (file, line, pid, local_rank, source) values ('c.log', 2, 4242, 1, 'deepspeed')")
    queries.run_all(con)
    assert con.execute("select distinct rank, pid from events where line >= 10").fetchall() == [(5, 4242)]
    assert con.execute("select rank, call from blocked_calls").fetchall() == [(5, "all_reduce")]


def test_a_stack_dump_s_outermost_torch_distributed_frame_is_the_call(con):
    """py-spy lists the innermost frame first: the call is the outermost frame of distributed_c10d.py."""
    for rank, inner in [(0, "reduce_scatter_tensor"), (1, "all_reduce"), (2, "reduce_scatter_tensor")]:
        con.execute("insert into events (file, line, rank, kind, text) values "
                    "('d.log', ?, ?, 'stack_dump_start', 'Thread 7 (active): \"MainThread\"'), "
                    "('d.log', ?, ?, 'stack_frame', '    wrapper (torch/distributed/c10d_logger.py:81)'), "
                    "('d.log', ?, ?, 'stack_frame', '    ' || ? || ' (torch/distributed/distributed_c10d.py:4431)'), "
                    "('d.log', ?, ?, 'stack_frame', '    train (train.py:12)')",
                    [rank * 10, rank, rank * 10 + 1, rank, rank * 10 + 2, rank, inner, rank * 10 + 3, rank])
    queries.run_all(con)
    assert con.execute("select rank, call from blocked_calls order by rank").fetchall() == [
        (0, "reduce_scatter_tensor"), (1, "all_reduce"), (2, "reduce_scatter_tensor")]
    assert con.execute("select rank, call from call_minority").fetchall() == [(1, "all_reduce")]


def test_torchrun_role_rank_markers_are_local_ranks_mapped_by_the_rendezvous(con):
    """`--role rank` tees `[rank0]:` for local rank 0; this node's rendezvous gives it global rank 8.
    Node 0's markers (local = global) and a marker no local rank has stay as they read."""
    for f, base in (("n0.out", 0), ("n2.out", 8)):
        con.execute("insert into events (file, line, source, kind, text) values "
                    "(?, 1, 'torchelastic', 'torchelastic', '[rank] Rendezvous complete for workers. Result:'), "
                    "(?, 2, null, 'other', '  local_ranks=[0, 1]'), "
                    "(?, 3, null, 'other', '  global_ranks=[' || ? || ', ' || ? || ']')", [f, f, f, base, base + 1])
        con.execute("insert into events (file, line, rank, kind, text) values (?, 9, 1, 'other', 'step 3'), (?, 10, 9, 'c10', 'c10 line')", [f, f])
    queries.run_all(con)
    assert con.execute("select file, line, rank from events where line >= 9 order by file, line").fetchall() == [
        ("n0.out", 9, 1), ("n0.out", 10, 9), ("n2.out", 9, 9), ("n2.out", 10, 9)]
    assert con.execute("select lines from rank_readings where marker like '[rankN]%'").fetchall() == [(1,)]


def test_ras_of_two_ranks_names_the_one_that_launched_fewer(con):
    """Two ranks of a communicator, each on its own line: the one that launched fewer is behind."""
    con.execute("insert into events (file, line, kind, text) values "
                "('ras.txt', 1, 'nccl_ras_comm_problem', '#0-0 (4b9e07d2c18fa365) MISMATCH'), "
                "('ras.txt', 2, 'nccl_ras_rank_ops', '  Rank 1 has launched up to operation 301544 -- GPU 0 managed by process 2291 on node 10.0.0.2'), "
                "('ras.txt', 3, 'nccl_ras_rank_ops', '  Rank 0 has launched up to operation 301543 -- GPU 0 managed by process 2187 on node 10.0.0.1')")
    queries.run_all(con)
    assert con.execute("select ranks, verdict, seq from desync").fetchall() == [("0", "not_joined", 301543)]


def test_megatron_s_nan_check_is_the_named_rank_s_own_error(con):
    con.execute("insert into events (file, line, kind, level, text) values ('m.log', 7, 'megatron_nan_check', 'ERROR', "
                "'Unexpected result nan on rank 3 at iteration #3 invocation #2 (message=''found NaN in local grad norm'')')")
    queries.run_all(con)
    assert con.execute("select rank, own_errors from rank_facts").fetchall() == [(3, 1)]


def test_one_torchrun_agent_s_workers_are_the_job_s_ranks(con):
    """The agent names three workers (one failed as rank 2, two it SIGTERMed by pid): ranks 0-2,
    and rank 2's silent error exit is the first failure."""
    con.execute("insert into exits (file, line, pid, signal, reason, source) values "
                "('c.txt', 1, 20417, 15, 'agent_sigterm', 'torchelastic'), ('c.txt', 2, 20418, 15, 'agent_sigterm', 'torchelastic')")
    con.execute("insert into exits (file, line, rank, local_rank, pid, exit_code, reason, source) values "
                "('c.txt', 3, 2, 2, 20419, 1, 'worker_failed', 'torchelastic')")
    queries.run_all(con)
    assert con.execute("select rank from world order by rank").fetchall() == [(0,), (1,), (2,)]
    assert con.execute("select rank from rank_facts where exited_error").fetchall() == [(2,)]


def test_a_rank_silent_in_torchrun_s_console_never_issued_the_collective(con):
    """Rank 1 times out in SeqNum 3 in the agent's own console, where every worker's output goes;
    the agent's two workers are the whole job, so rank 0, with no counter there, never issued it."""
    con.execute("insert into events (file, line, rank, source, kind, text) values "
                "('k.txt', 1, null, 'torchelastic', 'torchelastic_closing_worker', 'Sending process 347 closing signal SIGTERM'), "
                "('k.txt', 2, 1, 'c10', 'watchdog_timeout', '[Rank 1] Watchdog caught collective operation timeout')")
    con.execute("insert into exits (file, line, pid, signal, reason, source) values ('k.txt', 1, 347, 15, 'agent_sigterm', 'torchelastic')")
    con.execute("insert into exits (file, line, rank, local_rank, pid, signal, reason, source) values "
                "('k.txt', 3, 1, 1, 348, 6, 'worker_failed', 'torchelastic')")
    _collectives(con, [(1, "0", "pg_seq", 3, "ALLREDUCE", None, "timeout")])
    queries.run_all(con)
    assert con.execute("select pg, counter, seq from divergence").fetchall() == [("0", "pg_seq", 3)]
    assert con.execute("select rank from speaking_ranks order by rank").fetchall() == [(0,), (1,)]


def test_a_faulthandler_dump_gives_the_call_too(con):
    """faulthandler's `  File "path", line N in fn` frames, innermost first, as py-spy's."""
    con.execute("insert into events (file, line, rank, kind, text) values "
                "('f.log', 1, 2, 'stack_dump_start', 'Current thread 0x00007f683ea77b80 (most recent call first):'), "
                "('f.log', 2, 2, 'stack_frame', '  File \"/x/torch/distributed/distributed_c10d.py\", line 2501 in all_reduce'), "
                "('f.log', 3, 2, 'stack_frame', '  File \"/x/train.py\", line 80 in sync_gradients')")
    queries.run_all(con)
    assert con.execute("select rank, call from blocked_calls").fetchall() == [(2, "all_reduce")]


def test_a_bootstrap_address_two_hosts_share_is_a_setup_error(con):
    """Docker's bridge on every host: `Bootstrap : Using docker0:172.17.0.1` from two hosts."""
    for line, host in ((1, "gpu-a01"), (2, "gpu-a02")):
        con.execute("insert into events (file, line, host, kind, text) values ('c.log', ?, ?, 'nccl', ?)",
                    [line, host, "Bootstrap : Using docker0:172.17.0.1<0>"])
    con.execute("insert into events (file, line, host, kind, text) values ('c.log', 3, 'gpu-a03', 'nccl', ?)",
                ["Bootstrap : Using ib0:10.3.4.18<0>"])
    queries.run_all(con)
    assert con.execute("select line from events where kind = 'init_error' order by line").fetchall() == [(1,), (2,)]


def test_an_out_of_memory_error_without_a_rank_is_its_devices_local_rank(con):
    con.execute("insert into processes (file, line, host, rank, local_rank) values ('a', 1, 'n1', 0, 0)")
    con.execute("insert into events (file, line, kind, text) values ('paste.log', 9, 'out_of_memory', ?)",
                ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.15 GiB total capacity)"])
    queries.run_all(con)
    assert con.execute("select local_rank, rank from events where line = 9").fetchall() == [(1, 1)]


def test_a_ddp_model_with_no_parameters_is_the_odd_one_of_two(con):
    con.execute("insert into mismatches (file, line, what, rank_a, n_a, rank_b, n_b) values ('f', 1, 'ddp_params', 0, 2, 1, 0)")
    queries.run_all(con)
    assert con.execute("select rank, value, norm from mismatch_minority").fetchall() == [(1, "0", "2")]


def test_the_rank_whose_counted_prints_stopped_short_is_behind(con):
    """Two ranks, no majority: rank 1 printed rank 0's last line and went on; rank 0 never did."""
    rows = [(0, 1, "[proc 0] training_step: batch 40"), (1, 2, "[proc 1] training_step: batch 40"),
            (1, 3, "[proc 1] training_step: batch 41")]
    for rank, line, text in rows:
        con.execute("insert into events (file, line, rank, kind, text) values ('c.log', ?, ?, 'other', ?)", [line, rank, text])
    queries.run_all(con)
    assert con.execute("select rank from prints_behind").fetchall() == [(0,)]


def _created(name: str) -> list[str]:
    return re.findall(r"create or replace temp table (\w+)", queries.text(name))


@pytest.mark.parametrize("stage", sorted(queries.ONLY_WITH_ROWS))
def test_a_stage_without_its_rows_leaves_what_its_none_file_creates(con, stage):
    """Without the rows a stage reads (a paste without a counter or a frame), run_all runs
    `<stage>_none` instead: the same tables, the same columns and types, and empty, as the stage
    itself leaves them on such a job."""
    for name, params in queries.STAGES:
        if name in queries.FR_STAGES:
            if name == "fr_findings":
                queries.run(con, "fr_none")
            continue
        queries.run(con, name, **params)
        if name == stage:
            break
    tables = _created(f"{stage}_none")
    real = {t: con.execute(f"select column_name, column_type from (describe {t})").fetchall() for t in tables}
    assert all(con.execute(f"select count(*) from {t}").fetchone() == (0,) for t in tables)
    queries.run(con, f"{stage}_none")
    assert {t: con.execute(f"select column_name, column_type from (describe {t})").fetchall() for t in tables} == real


def test_run_all_skips_a_stage_without_its_rows():
    c = duckdb.connect()
    create_tables(c)
    c.execute("insert into events (file, line, rank, kind, text) values ('a', 1, 0, 'other', 'hello')")
    queries.run_all(c)
    # tb_frames is blocked_calls.sql's own working table: only the stage itself creates it
    assert not c.execute("select count(*) from duckdb_tables() where table_name = 'tb_frames'").fetchone()[0]
    assert c.execute("select count(*) from blocked_calls").fetchone() == (0,)


def test_unranked_tracebacks_are_their_detail_reporters_and_the_one_left_the_rank_left(con):
    """A plain console of two ranks' tracebacks: the one ending in `Rank 1 is running collective`
    is rank 1's; the other, the only rank of the world left, rank 0's."""
    rows = [(1, "traceback_start"), (2, "traceback_frame"), (3, "detail_mismatch"),
            (4, "traceback_start"), (5, "traceback_frame")]
    for line, kind in rows:
        con.execute("insert into events (file, line, kind, text) values ('c.log', ?, ?, 'x')", [line, kind])
    con.execute("insert into mismatches (file, line, what, rank_a, fp_a, rank_b, fp_b) values "
                "('c.log', 3, 'detail_fingerprint', 1, 'SequenceNumber=7, OpType=BROADCAST', 0, 'SequenceNumber=0OpType=REDUCE')")
    con.execute("insert into processes (file, line, rank) values ('c.log', 0, 0), ('c.log', 0, 1)")
    queries.run_all(con)
    assert con.execute("select line, rank from events order by line").fetchall() == [
        (1, 1), (2, 1), (3, 1), (4, 0), (5, 0)]
    assert [r[1] for r in con.execute("select * from rank_readings order by marker").fetchall()] == [
        "the reporter's rank (Rank N is running collective: ...)", "the one rank of the world whose traceback is not otherwise here"]


def test_stack_dumps_that_reach_one_frame_by_two_paths_name_the_fewer(con):
    """py-spy dumps of three ranks, all in `forward`: two from the training step, one from an
    evaluation only it runs. The one is path_minority's, cited where its path parts."""
    def dump(rank, first, via):
        frames = ["    forward (model.py:71)", f"    {via[0]} (train.py:{via[1]})", "    main (train.py:300)"]
        con.execute("insert into events (file, line, rank, kind, text) values ('d.txt', ?, ?, 'stack_dump_start', ?)",
                    [first, rank, 'Thread 1 (active): "MainThread"'])
        for i, text in enumerate(frames, 1):
            con.execute("insert into events (file, line, rank, kind, text) values ('d.txt', ?, ?, 'stack_frame', ?)",
                        [first + i, rank, text])
    dump(0, 10, ("evaluate", 120))
    dump(1, 20, ("train_step", 90))
    dump(2, 30, ("train_step", 90))
    queries.run_all(con)
    assert con.execute("select rank, line, site from path_minority").fetchall() == [(0, 12, "train.py:120 in evaluate")]


def test_a_watchdog_timeout_without_a_group_is_the_group_its_failure_line_names(con):
    """torch 2.4+: `[Rank 0] Watchdog caught ... WorkNCCL(SeqNum=1214, ...)` names no group; the
    group's own `[PG ID 2 ...] failure detected by watchdog at work sequence id: 1214` does."""
    _collectives(con, [(0, None, "pg_seq", 1214, "ALLREDUCE", 8, "timeout"),
                       (0, None, "pg_seq", 57, "ALLREDUCE", 8, "timeout")])
    con.execute("insert into pg_status (file, line, rank, pg, pg_rank, seq, last_enqueued, last_completed) "
                "values ('f', 2, 0, '2', 0, 1214, 1214, 1213)")
    queries.run(con, "timeout_pg")
    assert con.execute("select seq, pg from collectives order by seq").fetchall() == [(57, None), (1214, "2")]
