"""Evaluate the rule table (rules.toml) over the query results: verdict, culprits, evidence.

A rule is data: a SQL query that returns culprit ranks. The first rule that returns rows decides;
none means `unknown`, with the facts that would have decided it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import duckdb

from correlator import queries
from correlator.parsers import toml_files

from .counters import COUNTER_SOURCES, printed_label, seq_label
from .ranges import compress

HERE = Path(__file__).parent
EVIDENCE_ROWS = 10
# Kinds of line a rank writes again and again (a step, a collective): its last one says how far
# it got, so the evidence cites each rank's last one first.
REPEATING_KINDS = ("progress", "nccl_coll", "detail_running", "fr_entry", "stack_frame")
SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}
# What a runtime-named mismatch compares, in words
MISMATCH_WHAT = {"ddp_params": "DDP's parameter count", "detail_fingerprint": "DETAIL's collective fingerprint"}


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
    # the cases (a sample, a corpus case) this rule decides, right: tests/test_rules_proven.py
    proven_by: tuple = ()


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
    doc = toml_files.load(HERE / "rules.toml")
    lists = ("evidence_kinds", "alternative_kinds", "missing_facts", "proven_by")
    return tuple(Rule(**{**r, **{k: tuple(r.get(k, ())) for k in lists}}) for r in doc["rule"])


@cache
def remedies() -> dict:
    return toml_files.load(HERE / "remedies.toml")


def _one(con: duckdb.DuckDBPyConnection, sql: str):
    row = con.execute(sql).fetchone()
    return row[0] if row else None


def _at(con: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """`SequenceNumber=11 on PG 0`: where a collective is, as the line it is cited by prints its
    counter (`sql` gives pg, counter, seq and, where it knows one, the file and line of that line)."""
    row = con.execute(sql).fetchall()
    if not row or row[0][2] is None:
        return None
    pg, counter, seq, *where = row[0]
    return f"{printed_label(counter, seq, line_text(con, *where) if len(where) == 2 else None)} on PG {pg}"


def line_text(con: duckdb.DuckDBPyConnection, file: str | None, line: int | None) -> str | None:
    """The text of one line the report cites (its event), None where no event keeps it."""
    if file is None or line is None:
        return None
    row = con.execute("select text from events where file = ? and line = ? order by kind, text limit 1", [file, line]).fetchall()
    return row[0][0] if row else None


def facts(con: duckdb.DuckDBPyConnection) -> dict:
    """Named facts the summaries and the unknown verdict speak of."""
    f = {
        "nranks": _one(con, "select n from world_size"),
        "last_step": _one(con, "select max(last_step) from rank_facts"),
        "what": _one(con, "select coalesce((select any_value(what) from mismatch_minority), (select any_value(what) from mismatch_votes))"),
        "norm": _one(con, "select any_value(norm) from mismatch_minority"),
        "div_at": _divergence_at(con),
        "stalled_at": "after " + (_at(con, "select pg, counter, last_seq, file, line from first_stalled") or _stalled_without_seq(con)),
        # a rank's first error of its own; else a worker's error printed without a rank; else how a
        # process of no known rank ended (the launcher's or the raylet's word: `Worker PID: 5108 ...`)
        "own_error": _one(con, """select coalesce(
            (select text from rank_events where error_class = 'own' order by ts nulls last, file, line limit 1),
            (select text from events where rank is null and kind in ('out_of_memory', 'cuda_error', 'nccl_cuda_failure', 'fatal_python_error')
             order by ts nulls last, file, line limit 1),
            (select coalesce(x.text, (select any_value(v.text) from events v where v.file = x.file and v.line = x.line))
             from exits x where x.rank is null and (x.reason = 'worker_died' or x.signal in (4, 7, 8, 9, 11))
             order by x.ts nulls last, x.file, x.line limit 1))"""),
        "seq_apart": _one(con, "select string_agg(distinct cast(seq as varchar), '/') from seq_minority"),
        "seq_norm": _one(con, "select any_value(norm) from seq_minority"),
        "scheduler_note": _scheduler_note(con),
        "has_seq": _one(con, "select count(*) > 0 from last_seq"),
        "has_progress": _one(con, "select count(*) > 0 from progress"),
        "has_exits": _one(con, "select count(*) > 0 from exits"),
        "ranks_seen": _one(con, "select count(*) from world"),
        "seq_ranks": _one(con, "select count(distinct rank) from last_seq"),
        "idle_note": _one(con, """select coalesce(max('; no progress for ' || cast(round(epoch(idle)) as bigint) || ' s')
                                  filter (where epoch(idle) > 0), '') from progress_gap"""),
        "straggler_lag": _one(con, "select round(max(lag_ms)) from straggler_ranks"),
        # how the slow rank(s) show, in the words of what the logs measured
        "straggler_how": _one(con, """select string_agg(distinct case basis
              when 'step_end' then 'their steps end ' || cast(round(lag_ms) as bigint) || ' ms after the median rank''s'
              when 'data_wait' then 'they wait ' || cast(round(lag_ms) as bigint) || ' ms for data per step'
              when 'step_time' then 'their steps take ' || round(ratio, 1) || 'x the median rank''s'
              else 'their throughput is ' || round(ratio, 2) || 'x the median rank''s' end, '; ')
            from straggler_ranks"""),
        "minority_call": _one(con, "select coalesce((select any_value(call) from call_minority), (select any_value(call) from site_minority))"),
        "minority_site": _one(con, "select any_value(site) from site_minority"),
        "main_op": _one(con, "select any_value(op) from main_process_split"),
        "others_op": _one(con, "select any_value(others_op) from main_process_split"),
        "majority_site": _one(con, "select any_value(majority_site) from site_minority"),
        "majority_call": _one(con, "select any_value(majority_call) from call_minority"),
        "error_lines": _one(con, "select count(*) from error_lines"),
        # the store host's own failure before the others' timeouts reaching it
        "init_note": _one(con, """select text from events where kind in ('store_host_failed', 'init_error')
                                  order by kind <> 'store_host_failed', file, line limit 1"""),
        "common_how": _one(con, "select how from common_mode limit 1"),
        "behind_call": _one(con, "select any_value(call) from left_behind"),
        "behind_site": _one(con, "select any_value(site) from left_behind"),
        "shape_minority": _one(con, "select string_agg(distinct '[' || shape || ']', ', ') from shape_minority"),
        "shape_majority": _one(con, "select any_value('[' || majority_shape || ']') from shape_minority"),
        "short_total": _one(con, "select max(total) from short_totals"),
        "long_total": _one(con, "select max(others_total) from short_totals"),
        "long_step": _one(con, "select max(others_step) from short_totals"),
        "print_behind": _one(con, "select text from prints_behind order by rank limit 1"),
        "print_ahead": _one(con, """select l.text from rank_prints l join prints_behind b on l.template = b.ahead_template
                                    order by l.rank, l.k limit 1"""),
    }
    value = _one(con, "select any_value(value) from mismatch_minority")
    if f["what"] == "ddp_params" and value and f["norm"]:   # as DDP says it: `Rank 3 has 8 params`
        value, f["norm"] = f"{value} params", f"{f['norm']} params"
    f["norm_note"] = _difference(value, f["norm"])
    f["what"] = MISMATCH_WHAT.get(f["what"], f["what"])
    # the last step as the line that logged it prints it (`step=8`, `global step 8/8`); where no
    # progress line is, a summary that quotes it says so
    f["last_step"] = _last_step_printed(con, f["last_step"]) if f["last_step"] is not None else "step not logged"
    f.update(fr_facts(con))
    if f.get("fr_seq") is not None:   # as the dump states it, naming the counter: collective_seq_id=16
        f["fr_seq"] = seq_label(f.get("fr_counter"), None, str(f["fr_seq"]))
    if f["own_error"] and len(f["own_error"]) > 160:  # a notice's head and the tail that says how it ended
        f["own_error"] = f["own_error"][:80].rstrip() + " … " + f["own_error"][-76:].lstrip()
    return f


def _divergence_at(con: duckdb.DuckDBPyConnection) -> str | None:
    """Where the report's divergence is: Flight Recorder's (other than every rank timing out in one
    collective), else the counters'; as the log prints its counter."""
    try:
        row = con.execute("""select d.pg, d.counter, f.fr_seq from fr_divergence d, fr_facts f
                             where d.finding <> 'timed_out'""").fetchone()
    except duckdb.CatalogException:
        row = None
    if row and row[2] is not None:
        return f"{seq_label(row[1], None, str(row[2]))} on PG {row[0]}"
    try:   # as the first line at the divergence prints it (queries/evidence.sql)
        return _at(con, """select d.pg, d.counter, d.seq, r.file, r.line from divergence d
                           left join (select * from evidence_divergence_rows where grp <> 'past'
                                      order by rank, file, line limit 1) r on true""")
    except duckdb.CatalogException:
        return _at(con, "select pg, counter, seq from divergence")


def _last_step_printed(con: duckdb.DuckDBPyConnection, step: int) -> str:
    row = con.execute("select file, line from progress where step = ? order by rank nulls last, file, line limit 1",
                      [step]).fetchall()
    return step_printed(con, step, *row[0]) if row else printed_label("progress_step", step, None)


def step_printed(con: duckdb.DuckDBPyConnection, step: int, file: str, line: int) -> str:
    """A step as the line that logged it prints it; of a line cut into pieces (a progress bar
    redrawn with `\\r`: a piece per redraw), the piece that holds this step."""
    usual = printed_label("progress_step", step, None)
    texts = [t for (t,) in con.execute("select text from events where file = ? and line = ? and text is not null "
                                       "order by kind, text", [file, line]).fetchall()]
    labels = [printed_label("progress_step", step, t) for t in texts]
    return next((label for label in labels if label != usual), labels[0] if labels else usual)


def _stalled_without_seq(con: duckdb.DuckDBPyConnection) -> str:
    """How far the first stalled rank got where its own logs hold no row of the counter the others
    show (no Flight Recorder dump of its own, no DETAIL line): its last step, as it printed it."""
    row = con.execute("""select s.counter, f.last_step from first_stalled s left join rank_facts f using (rank)""").fetchone()
    source = COUNTER_SOURCES.get(row[0] if row else None, "collective")
    if row and row[1] is not None:
        return f"{seq_label('progress_step', row[1])}, its last line (no {source} of its own in the logs)"
    return f"its start (no {source} of its own in the logs)"


def _scheduler_note(con: duckdb.DuckDBPyConnection) -> str | None:
    """The scheduler's word that it ended the job, short and the same every run: its one-line
    messages before its accounting records, and of a record only the fields that say it."""
    try:
        row = con.execute("select e.text, x.source from evidence_scheduler_end e join exits x using (file, line) "
                          "order by e.k limit 1").fetchone()
    except duckdb.CatalogException:
        return None
    return _short_record(*row) if row else None


def _short_record(text: str, source: str | None) -> str:
    text = (text or "").strip().strip("*").strip()
    if source == "sacct" and "|" in text:        # JobID|JobName|State|...: the job, its name and state
        return "|".join(text.split("|")[:3])
    if "JobState=" in text:                       # a jobcomp or scontrol record: the fields that say it
        keep = [f for f in text.split() if f.split("=", 1)[0] in ("JobId", "JobState", "Reason")]
        return " ".join(keep)
    return text if len(text) <= 160 else text[:159] + "…"


def _culprit_error(con: duckdb.DuckDBPyConnection, culprits: list[int]) -> str | None:
    """What the culprits died of, as the evidence cites it first (queries/evidence.sql:
    evidence_culprit_errors): their first error of their own, else how their process ended
    (`SIGKILL (signal 9): failed (exitcode: -9) local_rank: 2 (pid: 20548) ...`)."""
    if not culprits or not _evidence_culprits(con, culprits):
        return None
    row = con.execute("""select (select any_value(text) from events v where v.file = e.file and v.line = e.line),
                                x.signal, x.exit_code, x.text
                         from evidence_culprit_errors e
                         left join exits x on x.file = e.file and x.line = e.line and x.rank = e.rank
                         order by e.k limit 1""").fetchone()
    if not row:
        return None
    line, signal, code, said = row
    text = (said if signal is not None or code is not None else line) or line or ""
    text = text.strip() if len(text.strip()) <= 160 else text.strip()[:159] + "…"
    if signal:
        return f"{SIGNALS.get(signal, f'signal {signal}')} (signal {signal}): {text}"
    if code:
        return f"exit code {code}: {text}"
    return text


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


def prepare_evidence(con: duckdb.DuckDBPyConnection) -> bool:
    """The views the rules' evidence queries read (queries/evidence.sql); False where the analysis
    tables they read are not there (a partial pipeline)."""
    try:
        queries.run(con, "evidence")
        return True
    except (duckdb.CatalogException, duckdb.BinderException):
        return False


def decide(con: duckdb.DuckDBPyConnection) -> Verdict:
    prepare_evidence(con)
    f = facts(con)
    for rule in rules():
        ranks = [r[0] for r in con.execute(rule.culprits).fetchall() if r[0] is not None]
        if not ranks:
            continue
        culprits = sorted({r for r in ranks if r >= 0})
        f["culprits"] = compress(culprits) if culprits else "none"
        f["own_error"] = _culprit_error(con, culprits) or f["own_error"]
        said = _Defaulting({k: v for k, v in f.items() if v is not None})
        # a fact the template already puts in brackets is not bracketed twice
        summary = rule.summary.format_map(said).replace(f"({_Defaulting.ABSENT})", _Defaulting.ABSENT)
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
    """A fact the logs do not give reads as such in a summary, not as `?` or None."""
    ABSENT = "(not in the logs)"

    def __missing__(self, key):
        return self.ABSENT


def evidence(con: duckdb.DuckDBPyConnection, verdict: Verdict, read_lines=None) -> list[dict]:
    """The lines behind the verdict, the deciding ones first (see evidence_and_causes)."""
    return evidence_and_causes(con, verdict, read_lines)[0]


def evidence_and_causes(con: duckdb.DuckDBPyConnection, verdict: Verdict,
                        read_lines=None) -> tuple[list[dict], set[tuple]]:
    """The lines behind the verdict, and of all lines those that are causes (never collateral).

    First the lines the rule names as deciding it (its `evidence` query), then the lines of the
    divergence (the culprits' and the others' at the diverging collective) and the culprits' last
    line (queries/evidence.sql: evidence_deciding), then the rest: the rule's `evidence_kinds`,
    each rank's first of each kind (of a kind a rank repeats, a step or a collective, its last),
    the culprits' first. A verdict no rule decides cites the error lines, the clues to a mismatch
    first. Tee'd copies (a rank's line again in the console) are cited once.
    Causes: the lines the rule's query names, the culprits' own errors and how they ended, the
    clues of an undecided verdict."""
    rule = next((r for r in rules() if r.name == verdict.rule), None)
    ready = _evidence_culprits(con, verdict.culprit_ranks)
    limit = 4 * EVIDENCE_ROWS
    candidates: list[tuple] = []   # (file, line, rank or None)
    causes: set[tuple] = set()
    culprits = set(verdict.culprit_ranks)
    if rule and rule.evidence:
        candidates += _ordered(con, rule.evidence, limit)
        # a line of another rank is what it saw, never the cause: the culprits' lines and the
        # scheduler's, the launcher's (no rank) are
        causes |= {(f, l) for f, l, r in _ordered(con, rule.evidence, None) if r is None or r in culprits}
    if ready:
        causes |= {(f, l) for f, l, _ in _ordered(con, "select file, line, rank, k from evidence_culprit_errors", None)}
        if rule is not None:
            candidates += _ordered(con, "select file, line, rank, k from evidence_deciding", limit)
    if rule is None:  # undecided: the error lines, a mismatch's clues first, one of each kind, earliest first
        rows = con.execute("""select file, line, rank, reading = 'collective_mismatch' from (
                                  select *, row_number() over (partition by kind order by ts nulls last, file, line) as nth
                                  from error_lines
                                  -- a tee'd copy (a rank's line again in the console): its own file's
                                  where (file, line) in (select file, line from timeline_events))
                              order by reading = 'collective_mismatch' desc nulls last, nth > 1, ts nulls last, file, line
                              limit ?""", [limit]).fetchall()
        candidates += [(f, l, r) for f, l, r, _ in rows]
        causes |= {(f, l) for f, l, _, clue in rows if clue}
        if not rows:   # nothing went wrong in words: where each rank's lines end is what was seen
            candidates += con.execute("""select file, line, rank from timeline_events
                                         qualify row_number() over (partition by rank
                                             order by aligned_ts desc nulls last, file desc, line desc) = 1
                                         order by rank nulls last limit ?""", [limit]).fetchall()
    else:
        kinds = list(rule.evidence_kinds)
        # A launcher's or scheduler's line names no rank of its own, but the exit it reports is a
        # rank's (exits): cited as that rank's, never as the rank's own line.
        candidates += con.execute(
            f"""select file, line, rank from (
                    select t.* replace (coalesce(t.rank, x.rank) as rank), row_number() over (
                        partition by coalesce(t.rank, x.rank), t.kind
                        order by (case when t.kind in {REPEATING_KINDS} then t.aligned_ts end) desc nulls last,
                                 (case when t.kind in {REPEATING_KINDS} then t.line end) desc nulls last,
                                 t.aligned_ts nulls last, t.file, t.line) as nth
                    from timeline_events t
                    left join (select file, line, min(rank) as rank from exits where rank is not null group by file, line) x
                      using (file, line)
                    where t.kind in (select unnest(?::varchar[]))
                      and not regexp_matches(coalesce(t.text, ''), '^\\s*[-=]+\\s*$'))   -- a table's rules say nothing
                order by nth > 1, coalesce(rank in (select unnest(?::bigint[])), false) desc,
                         list_position(?::varchar[], kind), nth, aligned_ts nulls last, file, line
                limit ?""", [kinds, verdict.culprit_ranks or [-1], kinds, limit]).fetchall()
    return _cite(con, candidates, read_lines), causes


def _evidence_culprits(con: duckdb.DuckDBPyConnection, culprits: list[int]) -> bool:
    """The verdict's culprits, for the views of queries/evidence.sql; False where those are not there."""
    try:
        con.execute("delete from evidence_culprits").fetchall()
    except duckdb.CatalogException:
        if not prepare_evidence(con):
            return False
        con.execute("delete from evidence_culprits").fetchall()
    if culprits:
        con.execute("insert into evidence_culprits select unnest(?::bigint[])", [list(culprits)]).fetchall()
    return True


def _ordered(con: duckdb.DuckDBPyConnection, sql: str, limit: int | None) -> list[tuple]:
    """(file, line, rank) of a query's lines in its order: by its column `k` where it has one,
    else as it returns them."""
    cur = con.execute(f"select * from ({sql}) limit 0")
    names = [d[0] for d in cur.description]
    cur.fetchall()
    rank = "rank" if "rank" in names else "null::bigint"
    order = "k, file, line" if "k" in names else "q_position"
    rows = con.execute(f"""select file, line, {rank} from (select *, row_number() over () as q_position from ({sql}))
                           where file is not null and line is not null order by {order}"""
                       + (f" limit {int(limit)}" if limit else "")).fetchall()
    return [tuple(r) for r in rows]


def _cite(con: duckdb.DuckDBPyConnection, candidates: list[tuple], read_lines=None) -> list[dict]:
    """The first EVIDENCE_ROWS distinct lines, each with its rank and text; a line whose rank and
    text an earlier one has (a tee'd copy) is left out. A line no event keeps (of NCCL's COLL
    lines the tables keep a stream's last as an event) is read back from its file (`read_lines`)."""
    order = list(dict.fromkeys((f, l) for f, l, _ in candidates))
    ranks: dict = {}
    for f, l, r in candidates:
        ranks.setdefault((f, l), r)
    if not order:
        return []
    rows = con.execute("""select e.file, e.line, e.rank, e.text from events e
                          join (select unnest(?::varchar[]) as file, unnest(?::bigint[]) as line) k using (file, line)
                          order by e.file, e.line, e.kind, e.text""",
                       [[f for f, _ in order], [l for _, l in order]]).fetchall()
    # a line cut into several records (a launcher's tag inside it) has an event per piece: the one
    # of the candidate's rank, and one that says something, is cited
    found: dict = {}
    for f, l, r, t in sorted(rows, key=lambda row: (row[2] != ranks.get(row[:2]), not (row[3] or "").strip())):
        found.setdefault((f, l), (r, t))
    # a line cut at its `\r`s (a progress bar redrawn in place) has a piece per redraw: the one a
    # terminal shows, its last, is cited (`9/9`, not the bar's `0/9`)
    pieces: dict = {}
    for f, l, r, t in rows:
        if (t or "").strip() and r == found[(f, l)][0]:
            pieces.setdefault((f, l), set()).add(t)
    redrawn = [key for key, texts in pieces.items() if len(texts) > 1]
    if redrawn and read_lines is not None:
        for file in dict.fromkeys(f for f, _ in redrawn):
            for l, last in read_lines(file, {n for f, n in redrawn if f == file}, shown=True).items():
                shown = [t for t in pieces[(file, l)] if t.strip() in last]
                if shown:
                    found[(file, l)] = (found[(file, l)][0], max(shown, key=len))
    read: set = set()
    out, seen = [], set()
    for key in order:
        if key not in found and read_lines is not None and key[0] not in read:
            # a file is read back once, for every line of it the evidence may cite, and only
            # when it comes to one of them (a 1 GB job's COLL files are 16 MB each)
            read.add(key[0])
            numbers = {l for f, l in order if f == key[0] and (f, l) not in found}
            for l, text in read_lines(key[0], numbers).items():
                found[(key[0], l)] = (None, text)
        if key not in found:
            continue
        rank, text = found[key]
        rank = rank if rank is not None else ranks.get(key)
        if (rank, text) in seen:
            continue
        seen.add((rank, text))
        out.append({"file": key[0], "line": key[1], "rank": rank, "text": text})
        if len(out) == EVIDENCE_ROWS:
            break
    return out


def remediation(verdict: Verdict, values: dict | None = None) -> list[dict]:
    """What to do, and a command that shows the fix worked, filled with the job's own values
    (`sacct -j 39`, the culprit's host and pid; correlator/assemble.py: remedy_values, shell-quoted).
    A remedy's `verify` lists commands, the best first: the first whose every value the logs know
    is taken. `expect` says what the command shows when the fix worked."""
    entry = remedies().get(verdict.rule or "unknown") or remedies().get(verdict.kind) or remedies()["unknown"]
    values = values or {}
    out = []
    for remedy in entry["remedy"]:
        commands = remedy["verify"] if isinstance(remedy["verify"], list) else [remedy["verify"]]
        command = next((c for c in (_filled(c, values) for c in commands) if c is not None), commands[-1])
        item = {"action": remedy["action"], "verify": command}
        if remedy.get("expect"):
            item["expect"] = remedy["expect"]
        out.append(item)
    return out


def _filled(command: str, values: dict) -> str | None:
    """`command` with its {placeholders} filled, None when the logs do not know one of them."""
    try:
        return command.format_map(values)
    except (KeyError, IndexError):
        return None
