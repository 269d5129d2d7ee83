"""Each query of queries/ on a tiny hand-made table (dbt style): the rows in, the answer out."""
from pathlib import Path

import duckdb
import pytest

import queries
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


def test_first_stalled_is_the_rank_behind(con):
    _collectives(con, [(r, "0", "pg_seq", 42, "ALLREDUCE", 8, "timeout") for r in (0, 1, 3)]
                 + [(2, "0", "pg_seq", 41, "ALLREDUCE", 8, "issued")])
    queries.run_all(con)
    assert con.execute("select rank, last_seq from first_stalled").fetchall() == [(2, 41)]
    assert con.execute("select seq, split from divergence").fetchall() == [(42, False)]


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
