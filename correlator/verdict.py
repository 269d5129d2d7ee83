"""Evaluate the rule table (rules.toml) over the query results: verdict, culprits, evidence.

A rule is data: a SQL query that returns culprit ranks. The first rule that returns rows decides;
none means `unknown`, with the facts that would have decided it.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import duckdb

from .counters import seq_label
from .report.ranges import compress

HERE = Path(__file__).parent
EVIDENCE_ROWS = 8


@dataclass(frozen=True)
class Rule:
    name: str
    kind: str
    confidence: str
    culprits: str
    summary: str
    evidence_kinds: tuple = ()
    # When the logs name the culprits but cannot tell two kinds apart: the other kind(s), and
    # what would decide between them (reported as missing_facts).
    alternative_kinds: tuple = ()
    missing_facts: tuple = ()
    evidence: str | None = None     # SQL returning (file, line) of the deciding lines, in order


@dataclass
class Verdict:
    kind: str
    rule: str | None
    culprit_ranks: list[int]
    confidence: str
    summary: str
    facts: dict
    missing_facts: list[str] = field(default_factory=list)
    alternative_kinds: list[str] = field(default_factory=list)


@cache
def rules() -> tuple[Rule, ...]:
    doc = tomllib.loads((HERE / "rules.toml").read_text())
    lists = ("evidence_kinds", "alternative_kinds", "missing_facts")
    return tuple(Rule(**{**r, **{k: tuple(r.get(k, ())) for k in lists}}) for r in doc["rule"])


@cache
def remedies() -> dict:
    return tomllib.loads((HERE / "remedies.toml").read_text())


def _one(con: duckdb.DuckDBPyConnection, sql: str):
    row = con.execute(sql).fetchone()
    return row[0] if row else None


def _at(con: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """`SequenceNumber=11 on PG 0`: where a collective is, as the log prints its counter."""
    row = con.execute(sql).fetchone()
    if not row or row[2] is None:
        return None
    return f"{seq_label(row[1], row[2])} on PG {row[0]}"


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(_one(con, f"select count(*) from duckdb_tables() where table_name = '{name}'"))


def facts(con: duckdb.DuckDBPyConnection) -> dict:
    """Named facts the summaries and the unknown verdict speak of."""
    f = {
        "nranks": _one(con, "select n from world_size"),
        "last_step": _one(con, "select max(last_step) from rank_facts"),
        "what": _one(con, "select coalesce((select any_value(what) from mismatch_minority), (select any_value(what) from mismatch_votes))"),
        "norm": _one(con, "select any_value(norm) from mismatch_minority"),
        # the divergence the report shows: Flight Recorder's matching where there are dumps
        "div_at": _at(con, "select pg, counter, seq from (select pg, counter, seq, 0 as k from fr_divergence "
                           "where counter = 'fr_seq' union all select pg, counter, seq, 1 from divergence) order by k limit 1")
                  if _has_table(con, "fr_divergence") else _at(con, "select pg, counter, seq from divergence"),
        "stalled_at": ("after " + (_at(con, "select pg, counter, last_seq from first_stalled") or "?"))
                      if _one(con, "select last_seq is not null from first_stalled") else "before any collective of its own in the logs",
        "own_error": _one(con, "select text from rank_events where error_class = 'own' order by ts nulls last, file, line limit 1"),
        "scheduler_note": _one(con, "select text from exits where reason in ('time_limit', 'cancelled', 'preemption', "
                                    "'node_failure', 'scancel', 'timeout') order by ts nulls last, source <> 'slurmstepd' limit 1"),
        "has_seq": _one(con, "select count(*) > 0 from last_seq"),
        "has_progress": _one(con, "select count(*) > 0 from progress"),
        "has_exits": _one(con, "select count(*) > 0 from exits"),
        "ranks_seen": _one(con, "select count(*) from world"),
        "seq_ranks": _one(con, "select count(distinct rank) from last_seq"),
        "idle_s": _one(con, "select round(epoch(idle)) from progress_gap"),
        "straggler_lag": _one(con, "select round(max(lag_ms)) from straggler_ranks"),
        # how the slow rank(s) show, in the words of what the logs measured
        "straggler_how": _one(con, """select string_agg(distinct case basis
              when 'step_end' then 'their steps end ' || cast(round(lag_ms) as bigint) || ' ms after the median rank''s'
              when 'data_wait' then 'they wait ' || cast(round(lag_ms) as bigint) || ' ms for data per step'
              when 'step_time' then 'their steps take ' || round(ratio, 1) || 'x the median rank''s'
              else 'their throughput is ' || round(ratio, 2) || 'x the median rank''s' end, '; ')
            from straggler_ranks"""),
        "minority_call": _one(con, "select any_value(call) from call_minority"),
        "majority_call": _one(con, "select any_value(majority_call) from call_minority"),
        "error_lines": _one(con, "select count(*) from error_lines"),
        "common_how": _one(con, "select how from common_mode limit 1"),
        "behind_call": _one(con, "select any_value(call) from left_behind"),
        "behind_site": _one(con, "select any_value(site) from left_behind"),
    }
    f["norm_note"] = _difference(_one(con, "select any_value(value) from mismatch_minority"), f["norm"])
    f.update(fr_facts(con))
    return f


def _fields(fingerprint: str) -> dict[str, str]:
    """`OpType=ALLREDUCE, TensorShape=[3], TensorDtypes=Float, ...` -> {field: value}; commas
    inside brackets or parentheses (TensorOptions(dtype=float, ...)) belong to their value."""
    fields, depth, start = {}, 0, 0
    for i, ch in enumerate(fingerprint + ","):
        depth += ch in "([" and 1 or ch in ")]" and -1 or 0
        if ch == "," and depth == 0:
            key, _, value = fingerprint[start:i].strip().partition("=")
            if key:
                fields[key] = value
            start = i + 1
    return fields


def _difference(value: str | None, norm: str | None) -> str:
    """Which field of the culprits' collective differs from the others', with both values."""
    if not value or not norm:
        return f"the others have {norm}" if norm else "see evidence"
    mine, theirs = _fields(value), _fields(norm)
    differ = [k for k in dict.fromkeys([*theirs, *mine]) if mine.get(k) != theirs.get(k)]
    if not differ or not (set(mine) & set(theirs)):   # not fingerprints (a DDP parameter count)
        return f"{value} where the others have {norm}"
    return "; ".join(f"{k}={mine.get(k, '(none)')} where the others have {k}={theirs.get(k, '(none)')}" for k in differ)


def fr_facts(con: duckdb.DuckDBPyConnection) -> dict:
    """The Flight Recorder divergence's facts (queries/fr_findings.sql: fr_facts), named fr_*."""
    try:
        cur = con.execute("select * from fr_facts")
    except duckdb.CatalogException:   # the FR stages did not run (a partial pipeline)
        return {}
    row = cur.fetchone()
    return dict(zip((d[0] for d in cur.description), row)) if row else {}


def _missing_facts(f: dict) -> list[str]:
    missing = []
    rerun = ("rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL (and TORCH_CPP_LOG_LEVEL=INFO), "
             "NCCL_DEBUG_SUBSYS=COLL, or Flight Recorder dumps (TORCH_FR_BUFFER_SIZE) from every rank")
    if not f["has_seq"]:
        missing.append(f"per-rank collective sequence numbers: {rerun}")
    elif f["seq_ranks"] < (f["nranks"] or 0):
        missing.append(f"the last collective of every rank: only {f['seq_ranks']} of {f['nranks']} ranks reported one "
                       f"(watchdogs report only the ranks they fired on); {rerun}")
    if not f["has_exits"]:
        missing.append("how each rank's process ended: the launcher's summary (torchrun ChildFailedError, srun errors) or scheduler accounting")
    if not f["has_progress"]:
        missing.append("per-rank progress lines (step counters with timestamps)")
    if not f["ranks_seen"]:
        missing.append("any line that names a rank: per-rank logs or a launcher prefix ([default0]:, srun --label)")
    # Whatever else is there, where each rank stood during the hang decides most cases.
    missing.append("a stack dump of every rank taken during the hang (py-spy dump --pid PID, or faulthandler on SIGTERM)")
    return missing


def decide(con: duckdb.DuckDBPyConnection) -> Verdict:
    f = facts(con)
    for rule in rules():
        ranks = [r[0] for r in con.execute(rule.culprits).fetchall() if r[0] is not None]
        if not ranks:
            continue
        culprits = sorted({r for r in ranks if r >= 0})
        f["culprits"] = compress(culprits) if culprits else "none"
        said = _Defaulting({k: v for k, v in f.items() if v is not None})
        summary = rule.summary.format_map(said)
        missing = [m.format_map(said) for m in rule.missing_facts]
        return Verdict(rule.kind, rule.name, culprits, rule.confidence, summary, f, missing, list(rule.alternative_kinds))
    readings = [r[0] for r in con.execute("select reading from error_readings order by position").fetchall()]
    if f["error_lines"]:
        summary = (f"{f['error_lines']} error line(s), but the logs do not show which rank started the failure"
                   + (f"; best reading: {readings[0].replace('_', ' ')}" if readings else ""))
    else:
        summary = "no failure in the logs, but nothing shows the run ended well either (no clean exits, final step or COMPLETED)"
    return Verdict("unknown", None, [], "low", summary, f, _missing_facts(f), readings)


class _Defaulting(dict):
    def __missing__(self, key):
        return "?"


def evidence(con: duckdb.DuckDBPyConnection, verdict: Verdict) -> list[dict]:
    """The lines behind the verdict: the rule's kinds, culprits' lines first, earliest first."""
    rule = next((r for r in rules() if r.name == verdict.rule), None)
    if rule and rule.evidence:
        rows = con.execute(f"""select e.file, e.line, e.rank, e.text
                               from (select *, row_number() over () as k from ({rule.evidence})) q
                               join aligned_events e using (file, line) order by q.k limit ?""",
                           [EVIDENCE_ROWS]).fetchall()
        return [{"file": f, "line": l, "rank": r, "text": t} for f, l, r, t in rows]
    if rule is None:  # undecided: the error lines, one of each kind first, earliest first
        rows = con.execute("""select file, line, rank, text from (
                                  select *, row_number() over (partition by kind order by ts nulls last, file, line) as nth
                                  from error_lines)
                              order by nth > 1, ts nulls last, file, line limit ?""", [EVIDENCE_ROWS]).fetchall()
        return [{"file": f, "line": l, "rank": r, "text": t} for f, l, r, t in rows]
    kinds = list(rule.evidence_kinds)
    culprits = verdict.culprit_ranks or [-1]
    # A launcher's or scheduler's line names no rank of its own, but the exit it reports is a
    # rank's (exits): cited as that rank's, never as the rank's own line. Table borders say nothing.
    rows = con.execute(
        """select t.file, t.line, coalesce(t.rank, x.rank) as rank, t.text from timeline_events t
           left join (select file, line, min(rank) as rank from exits where rank is not null group by file, line) x
             using (file, line)
           where t.kind in (select unnest(?::varchar[])) and not regexp_matches(t.text, '^ *[-=]{10,} *$')
           order by coalesce(coalesce(t.rank, x.rank) in (select unnest(?::bigint[])), false) desc,
                    list_position(?::varchar[], t.kind), t.aligned_ts nulls last, t.file, t.line
           limit ?""", [kinds, culprits, kinds, EVIDENCE_ROWS]).fetchall()
    return [{"file": f, "line": l, "rank": r, "text": t} for f, l, r, t in rows]


def remediation(verdict: Verdict) -> list[dict]:
    entry = remedies().get(verdict.rule or "unknown") or remedies().get(verdict.kind) or remedies()["unknown"]
    return [{"action": a["action"], "verify": a["verify"]} for a in entry["remedy"]]
