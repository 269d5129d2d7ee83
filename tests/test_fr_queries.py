"""The Flight Recorder queries (queries/fr_*.sql), each on tiny hand-made dump tables (the style of
tests/test_queries.py): the rows in, the answer out."""
from __future__ import annotations

import math

import duckdb
import pytest

from correlator import queries
from correlator.pipeline import create_tables


@pytest.fixture
def con():
    c = duckdb.connect()
    create_tables(c)
    return c


def _sizes(shapes) -> str:
    return "[" + ",".join("[" + ",".join(map(str, s)) + "]" for s in shapes) + "]"


def _dumps(con, entries, groups=None, first_record_id=None):
    """entries: {rank: [dict(op=..., seq=..., ...)]}; groups: {name: [global ranks]} in every dump's
    pg_config (default: group "0" of every rank with a dump)."""
    groups = groups if groups is not None else {"0": sorted(entries)}
    for rank, rows in entries.items():
        file = f"nccl_trace_rank_{rank}"
        con.execute("insert into fr_dumps values (?, null, ?, '2.10', ?, ?, ?)",
                    [file, rank, len(rows), (first_record_id or {}).get(rank, 0),
                     any(r.get("state", "completed") != "scheduled" for r in rows)])
        for name, ranks in groups.items():
            con.execute("insert into fr_groups values (?, ?, ?, ?, ?)",
                        [file, rank, name, "default_pg" if name == "0" else "sub", ranks])
        for i, r in enumerate(rows):
            op = r["op"]
            ins, outs = r.get("ins", [[8]]), r.get("outs", r.get("ins", [[8]]))
            numel = lambda shapes: sum(math.prod(s) for s in shapes)
            p2p = op.split(" ")[0] in ("send", "recv")
            src = dst = None
            if p2p and " " in op:
                left, right = op.split(" ")[1].replace("<-", "->").split("->")
                src, dst = (int(left), int(right)) if "->" in op else (int(right), int(left))
            pg = r.get("pg", "0")
            con.execute(
                "insert into fr_entries (file, line, rank, record_id, pg_id, pg_name, pg_desc, collective_seq_id, "
                "p2p_seq_id, op_id, is_p2p, profiling_name, fr_op, op, marker, local_src, local_dst, in_sizes, "
                "out_sizes, in_numel, out_numel, in_count, out_count, in_dtypes, out_dtypes, state, retired) "
                "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [file, i + 1, rank, (first_record_id or {}).get(rank, 0) + i, r.get("pg_id", int(pg) if pg.isdigit() else 9),
                 pg, "default_pg" if pg == "0" else "sub", r.get("seq", 0), r.get("p2p", 0), i + 1, p2p,
                 f"nccl:{op}", op.split(" ")[0], op.split(" ")[0].upper(), op.endswith("coalesced") and op[0].isupper()
                 or op == "coalesced", src, dst, _sizes(ins), _sizes(outs), numel(ins), numel(outs), len(ins), len(outs),
                 r.get("dtype", "Float"), r.get("dtype", "Float"), r.get("state", "completed"), r.get("retired", True)])


def _one(con, sql):
    return con.execute(sql).fetchall()


FR_AND_COUNTERS = queries.FR_STAGES | {"mismatch_rows", "world", "last_seq", "first_stalled", "divergence"}


def _run(con):
    """The stages these tables feed, in the pipeline's order (run_all would also run the ~30 others)."""
    for name, params in queries.STAGES:
        if name in FR_AND_COUNTERS:
            queries.run(con, name, **params)


def test_a_send_and_its_recv_are_a_pair_not_a_mismatch(con):
    _dumps(con, {0: [dict(op="all_reduce", seq=1), dict(op="send 0->1", seq=1, p2p=1, ins=[[4, 4]])],
                 1: [dict(op="all_reduce", seq=1), dict(op="recv 1<-0", seq=1, p2p=1, ins=[[4, 4]])]})
    _run(con)
    assert _one(con, "select src, dst, send_rank, recv_rank from fr_p2p_pairs") == [(0, 1, 0, 1)]
    assert _one(con, "select count(*) from fr_p2p_unmatched") == [(0,)]
    # the p2p entries carry collective_seq_id 1 like the all_reduce before them: one collective at seq 1
    assert _one(con, "select seq, sigs from fr_seq") == [(1, 1)]
    assert _one(con, "select count(*) from fr_divergence") == [(0,)]
    assert _one(con, "select counter, count(*) from collectives group by counter") == [("fr_seq", 2)]


def test_a_send_to_a_rank_that_never_receives_from_it_is_the_wrong_peer(con):
    # pipeline 0 -> 1 -> 2, twice; then rank 0 sends to rank 2, which never receives from it,
    # while rank 1 waits for it (and rank 2 for rank 1)
    r0 = [dict(op="send 0->1", p2p=k) for k in (1, 2)] + [dict(op="send 0->2", p2p=3, state="started", retired=False)]
    r1 = [dict(op=o, p2p=k) for k, o in enumerate(["recv 1<-0", "send 1->2", "recv 1<-0", "send 1->2"], 1)]
    r1 += [dict(op="recv 1<-0", p2p=5, state="started", retired=False)]
    r2 = [dict(op="recv 2<-1", p2p=k, state="started" if k == 3 else "completed", retired=k < 3) for k in (1, 2, 3)]
    _dumps(con, {0: r0, 1: r1, 2: r2})
    _run(con)
    assert _one(con, "select owner, peer, seq, channel_used from fr_p2p_waits order by owner") == [
        (0, 2, 3, False), (1, 0, 5, True), (2, 1, 3, True)]
    assert _one(con, "select finding, culprits, seq from fr_divergence") == [("p2p_wrong_peer", [0], 3)]
    assert _one(con, "select rank, op from fr_divergence_ops order by rank") == [(0, "SEND"), (2, None)]


def test_a_send_whose_peer_never_posts_the_recv_names_the_peer(con):
    _dumps(con, {0: [dict(op="send 0->1", p2p=k, state="started" if k == 3 else "completed") for k in (1, 2, 3)],
                 1: [dict(op="recv 1<-0", p2p=k) for k in (1, 2)]})
    _run(con)
    assert _one(con, "select finding, culprits, seq from fr_divergence") == [("p2p_unposted", [1], 3)]
    assert _one(con, "select rank, last_seq from first_stalled") == [(1, 2)]


def test_uneven_all_to_all_adds_up_and_a_wrong_total_names_the_odd_output(con):
    def a2a(rank, out):
        return [dict(op="all_to_all", seq=1, ins=[[(rank + 1) * 3]], outs=[[out]])]
    _dumps(con, {r: a2a(r, 6) for r in range(3)})          # inputs 3, 6, 9; outputs 6, 6, 6
    _run(con)
    assert _one(con, "select sigs, in_total, out_total from fr_seq") == [(1, 18, 18)]
    assert _one(con, "select count(*) from fr_divergence") == [(0,)]

    con2 = duckdb.connect()
    create_tables(con2)
    _dumps(con2, {r: a2a(r, 5 if r == 1 else 6) for r in range(3)})
    _run(con2)
    assert _one(con2, "select finding, culprits, seq from fr_divergence") == [("alltoall_totals", [1], 1)]


def test_the_root_of_a_scatter_or_gather_may_hold_what_the_others_do_not(con):
    _dumps(con, {r: [dict(op="scatter", seq=1, ins=[[2]] * 3 if r == 0 else [], outs=[[2]]),
                     dict(op="gather", seq=2, ins=[[3]], outs=[[3]] * 3 if r == 2 else [])] for r in range(3)})
    _run(con)
    assert _one(con, "select seq, sigs from fr_seq order by seq") == [(1, 1), (2, 1)]
    assert _one(con, "select distinct numel_in from collectives where seq = 1") == [(2,)]


def test_a_coalesced_group_is_compared_as_a_set(con):
    def group(rank, sizes):
        return [dict(op="_all_gather_base", seq=1, ins=[[n]], outs=[[3 * n]]) for n in sizes] + \
               [dict(op="ALLGATHER_coalesced", seq=1, ins=[], outs=[])]
    _dumps(con, {0: group(0, (4, 8)), 1: group(1, (8, 4)), 2: group(2, (4, 8))})
    _run(con)
    assert _one(con, "select sigs from fr_seq") == [(1,)]
    assert _one(con, "select distinct op from collectives") == [("ALLGATHER_COALESCED",)]

    con2 = duckdb.connect()
    create_tables(con2)
    _dumps(con2, {0: group(0, (4, 8)), 1: group(1, (6, 6)), 2: group(2, (4, 8))})   # same total, other sizes
    _run(con2)
    assert _one(con2, "select finding, culprits from fr_divergence") == [("split", [1])]
    # the old counters' queries see the split too, though op, total size and dtype are alike
    assert _one(con2, "select seq, split from divergence") == [(1, True)]


def test_a_rank_still_scheduled_while_the_others_started_is_behind(con):
    _dumps(con, {r: [dict(op="all_reduce", seq=1),
                     dict(op="all_reduce", seq=2, state="scheduled" if r == 1 else "started", retired=False)]
                 for r in range(3)})
    _run(con)
    assert _one(con, "select finding, seq, culprits from fr_divergence") == [("state_behind", 2, [1])]
    assert _one(con, "select rank, last_seq from first_stalled") == [(1, 2)]


def test_a_member_without_a_dump_is_missing_where_the_others_wait(con):
    _dumps(con, {r: [dict(op="all_reduce", seq=1), dict(op="all_reduce", seq=2, state="started", retired=False)]
                 for r in (0, 1)}, groups={"0": [0, 1, 2]})
    _run(con)
    assert _one(con, "select finding, seq, culprits from fr_divergence") == [("silent", 2, [2])]
    assert _one(con, "select rank, op from fr_divergence_ops order by rank") == [(0, "ALL_REDUCE"), (1, "ALL_REDUCE"), (2, None)]


def test_gloo_a_member_without_a_dump_is_missing_where_the_oldest_wait_is(con):
    """gloo records no kernel state: each member's last entry is where it waits. A broadcast's root
    served rank 2, which went on to seq 20; ranks 0 and 3 still wait in 19 for rank 1, which left no
    dump: the divergence is 19, not the 20 only rank 2 reached."""
    sched = dict(state="scheduled", retired=False)
    held = {r: [dict(op="all_reduce", seq=18, **sched), dict(op="broadcast", seq=19, **sched)] for r in (0, 2, 3)}
    held[2].append(dict(op="all_reduce", seq=20, ins=[[22946]], **sched))
    _dumps(con, held, groups={"0": [0, 1, 2, 3]})
    _run(con)
    assert _one(con, "select finding, culprits, seq from fr_divergence") == [("silent", [1], 19)]


def test_entries_before_the_latest_first_seq_are_not_compared(con):
    # rank 1's buffer wrapped: it kept seq 3 on (seq 3 only in part: one of two ops); rank 0 kept all
    r0 = [dict(op="all_reduce", seq=1, ins=[[1]]), dict(op="all_reduce", seq=2, ins=[[2]])]
    r0 += [dict(op="_all_gather_base", seq=3, ins=[[4]], outs=[[8]]), dict(op="_all_gather_base", seq=3, ins=[[6]], outs=[[12]]),
           dict(op="ALLGATHER_coalesced", seq=3, ins=[], outs=[]), dict(op="all_reduce", seq=4)]
    r1 = [dict(op="_all_gather_base", seq=3, ins=[[6]], outs=[[12]]), dict(op="ALLGATHER_coalesced", seq=3, ins=[], outs=[]),
          dict(op="all_reduce", seq=4)]
    _dumps(con, {0: r0, 1: r1}, first_record_id={1: 3})
    _run(con)
    assert _one(con, "select cut from fr_cut") == [(4,)]
    assert _one(con, "select count(*) from fr_divergence") == [(0,)]
    assert _one(con, "select seq, split from divergence") == []


def test_a_group_is_its_name_and_members_not_its_process_local_id(con):
    # ranks 0,1 and 2,3 each have their sub-group as pg_id 1; the names differ
    entries = {r: [dict(op="all_reduce", seq=1, pg="1" if r < 2 else "2", pg_id=1, ins=[[9 if r == 3 else 4]])]
               for r in range(4)}
    _dumps(con, entries, groups={"0": [0, 1, 2, 3], "1": [0, 1], "2": [2, 3]})
    _run(con)
    assert _one(con, "select pg, members from fr_group order by pg") == [("1", [0, 1]), ("2", [2, 3])]
    assert _one(con, "select pg, seq, sigs from fr_seq join fr_group using (gkey) order by pg") == [("1", 1, 1), ("2", 1, 2)]


def test_without_dumps_the_fr_outputs_are_there_and_empty(con):
    queries.run_all(con)
    for table in ("fr_divergence", "fr_divergence_ops", "fr_facts", "fr_evidence"):
        assert _one(con, f"select count(*) from {table}") == [(0,)]


def test_fr_none_gives_the_columns_of_the_fr_stages(con):
    _dumps(con, {0: [dict(op="all_reduce", seq=1)], 1: [dict(op="all_reduce", seq=1)]})
    _run(con)
    real = {t: _one(con, f"select column_name, column_type from (describe {t})")
            for t in ("fr_divergence", "fr_divergence_ops", "fr_facts", "fr_evidence", "fr_coverage")}
    queries.run(con, "fr_none")
    for table, columns in real.items():
        assert _one(con, f"select column_name, column_type from (describe {table})") == columns, table


def test_two_ranks_that_disagree_the_one_the_history_never_saw_is_odd(con):
    steps = [dict(op="all_reduce", seq=s, ins=[[100]]) for s in (1, 2, 3)]
    _dumps(con, {0: steps + [dict(op="all_reduce", seq=4, ins=[[100]], state="started")],
                 1: steps + [dict(op="all_reduce", seq=4, ins=[[101]], state="started")]})
    _run(con)
    assert _one(con, "select finding, culprits, seq from fr_divergence") == [("split_tie", [1], 4)]


def test_two_ranks_in_another_order_the_one_off_the_programs_order_is_odd(con):
    # each step: all_reduce(16), all_reduce(8); in step 3 rank 1 goes straight to the 8
    steps = [dict(op="all_reduce", seq=s, ins=[[16 if s % 2 else 8]]) for s in (1, 2, 3, 4)]
    _dumps(con, {0: steps + [dict(op="all_reduce", seq=5, ins=[[16]], state="started"),
                             dict(op="all_reduce", seq=6, ins=[[8]], state="scheduled")],
                 1: steps + [dict(op="all_reduce", seq=5, ins=[[8]], state="started"),
                             dict(op="all_reduce", seq=6, ins=[[16]], state="scheduled")]})
    _run(con)
    assert _one(con, "select finding, culprits, seq from fr_divergence") == [("order_tie", [1], 5)]


def test_a_seq_a_rank_skipped_between_two_it_holds_is_missing_there(con):
    rows = lambda skip: [dict(op="all_reduce", seq=s) for s in (1, 2, 3, 4) if s != skip]
    _dumps(con, {0: rows(None), 1: rows(3), 2: rows(None)})
    _run(con)
    assert _one(con, "select finding, culprits, seq from fr_divergence") == [("hole", [1], 3)]


def test_a_process_wide_count_is_compared_by_order_in_the_group(con):
    # TorchComms numbers every op of a process: rank 0's p2p ops take values its peers do not have
    r0 = [dict(op="all_reduce", seq=0), dict(op="send", seq=1), dict(op="all_reduce", seq=2)]
    r1 = [dict(op="all_reduce", seq=0), dict(op="recv", seq=1), dict(op="all_reduce", seq=2)]
    r2 = [dict(op="all_reduce", seq=0), dict(op="all_reduce", seq=1)]
    _dumps(con, {0: r0, 1: r1, 2: r2})
    _run(con)
    assert _one(con, "select rank, per_process from fr_numbering order by rank") == [(0, True), (1, True), (2, False)]
    assert _one(con, "select rank, seq, seq_printed from fr_coll order by rank, seq") == [
        (0, 1, "0"), (0, 2, "2"), (1, 1, "0"), (1, 2, "2"), (2, 0, "0"), (2, 1, "1")]


def test_dumps_agree_only_when_every_member_dumped(con):
    """fr_coverage, which the healthy rule reads: two members' dumps of a group of two can show
    agreement; one dump of a group of four cannot (the others may be where it stopped)."""
    _dumps(con, {0: [dict(op="all_reduce", seq=1)], 1: [dict(op="all_reduce", seq=1)]})
    _run(con)
    assert _one(con, "select dumped, undumped from fr_coverage") == [(2, 0)]


def test_one_dump_of_a_larger_group_shows_no_agreement(con):
    _dumps(con, {0: [dict(op="all_reduce", seq=1)]}, groups={"0": [0, 1, 2, 3]})
    _run(con)
    assert _one(con, "select dumped, undumped from fr_coverage") == [(1, 3)]
