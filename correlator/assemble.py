"""Assemble the JSON report (../shared/report-contract.md, schema_version 1) from the analysis
tables and the verdict. Extra fields (narrative, process_groups, ranks) feed the renderers."""
from __future__ import annotations

import dataclasses
import re
import shlex
from datetime import datetime
from pathlib import Path

import duckdb

from .ranges import compress
from .counters import difference, dtype_name, printed_fields, printed_label, seq_label, seq_printed
from .verdict import Verdict, evidence, evidence_and_causes, line_text, remediation, step_printed

SCHEMA_VERSION = 1
TIMELINE_ROWS = 200
COLLATERAL_ROWS = 200
CULPRIT_ROWS = 40          # of the timeline's rows, at most this many kept for the culprits' own last events
# Lines worth a place on the timeline: everything a format recognised, minus the bulk.
QUIET_KINDS = ("other", "traceback_frame", "traceback_start", "cpp_frame", "python_logging", "timestamped_print", "vllm_logger",
               "nccl", "c10", "nccl_coll", "detail_running", "fr_entry")


def iso(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params=None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def job_section(con, job_id: str, log_dir: str) -> dict:
    files = _rows(con, "select count(*) filter (where skip_reason is null or lines > 0) as files, "
                       "coalesce(sum(lines), 0) as lines, coalesce(sum(lines_unparsed), 0) as unparsed, "
                       "coalesce(sum(lines_skimmed), 0) as skimmed from files")[0]
    skipped = _rows(con, "select path, skip_reason as reason from files where skip_reason is not null order by path")
    return {
        "id": job_id, "log_dir": log_dir,
        "world_size": con.execute("select n from world_size").fetchone()[0],
        "ranks_seen": [r[0] for r in con.execute("select rank from world order by rank").fetchall()],
        "hosts": [r[0] for r in con.execute(
            "select distinct host from processes where host is not null union "
            "select distinct host from events where host is not null and rank is not null order by 1").fetchall()],
        "files": files["files"], "lines": int(files["lines"]), "lines_unparsed": int(files["unparsed"]),
        "lines_skimmed": int(files["skimmed"]),  # repeated lines counted, not typed (analyze without --full)
        "files_skipped": skipped,
        # in-line rank markers that read two ways, and the reading taken
        "rank_readings": _rows(con, "select marker, reading, lines from rank_readings"),
    }


def _hosts_of(con, ranks: list[int]) -> list[str]:
    if not ranks:
        return []
    return [r[0] for r in con.execute(
        "select distinct host from rank_facts where rank in (select unnest(?::bigint[])) and host is not null order by 1",
        [ranks]).fetchall()]


def first_stalled(con, verdict: Verdict) -> dict | None:
    row = _rows(con, """select s.*, coalesce(s.host, f.host) as any_host, coalesce(s.last_seen, f.last_seen) as seen
                        from first_stalled s left join rank_facts f using (rank)""")
    if row:  # a rank with no collective at all is still named, with what else its logs show
        r = row[0]
        return {"rank": r["rank"], "host": r["any_host"], "pg": r["pg"], "counter": r["counter"],
                "last_seq": r["last_seq"], "last_op": r["last_op"], "last_seen": iso(r["seen"]),
                "last_seq_label": printed_label(r["counter"], r["last_seq"], line_text(con, r["file"], r["line"]))}
    if verdict.kind not in ("rank_stalled", "rank_crashed", "rank_exited_early", "missing_collective") or not verdict.culprit_ranks:
        return None
    # No sequence numbers: the culprit's last progress step stands for how far it got.
    rows = _rows(con, "select * from rank_facts where rank = ?", [verdict.culprit_ranks[0]])
    if not rows:  # a culprit the runtime named whose own lines are not in the logs
        return None
    r = rows[0]
    step = con.execute("""select file, line from progress where rank = ? and step = ?
                          order by ts desc nulls last, file, line limit 1""", [r["rank"], r["last_step"]]).fetchall()
    if r["last_step"] is None:   # no step of its own either: where its lines end is all there is
        return {"rank": r["rank"], "host": r["host"], "pg": None, "counter": None, "last_seq": None,
                "last_op": None, "last_seen": iso(r["last_seen"]), "last_seq_label": None}
    return {"rank": r["rank"], "host": r["host"], "pg": None, "counter": "progress_step",
            "last_seq": r["last_step"], "last_op": None, "last_seen": iso(r["last_step_at"] or r["last_seen"]),
            "last_seq_label": step_printed(con, r["last_step"], *step[0]) if step else printed_label("progress_step", r["last_step"], None)}


# The verdicts whose culprits took no part in the collective the others waited in: busy elsewhere,
# gone, or skipping it (a rank that crashed may have died inside it).
ABSENT_CULPRITS = frozenset({"rank_stalled", "rank_exited_early", "missing_collective"})


def divergence(con, culprits=(), kind: str | None = None) -> dict | None:
    """The first collective where ranks disagree, each group with what its log prints of it
    (`printed`: the op, size and dtype as the log writes them; NCCL's dtype number by name) and,
    where something differs, which field and both values (`difference`, `fields`)."""
    d = _divergence(con) or (_culprits_never_issued(con, culprits) if kind in ABSENT_CULPRITS else None)
    if d is None:
        return None
    shapes = _detail_shapes(con, d) if d["counter"] == "detail_seq" else {}
    for g in d["groups"]:
        if g.get("op") is None:
            continue
        shape = next((shapes[r] for r in g["ranks"] if shapes.get(r) is not None), None)
        g["printed"] = printed_fields(d["counter"], {**g, "shape": shape})
        if g.get("dtype") is not None and dtype_name(d["counter"], g["dtype"]) != str(g["dtype"]):
            g["dtype_printed"], g["dtype"] = g["dtype"], dtype_name(d["counter"], g["dtype"])
    issued = [g for g in d["groups"] if g.get("printed")]
    d["fields"] = [f for f in ("op", "numel", "dtype") if len({g["printed"].get(f) for g in issued}) > 1]
    d["difference"] = difference(d["counter"], d["groups"], culprits)
    return d


def _detail_shapes(con, d: dict) -> dict:
    """Each rank's DETAIL TensorShape at the divergence (the fingerprint prints the shape, not the numel)."""
    rows = con.execute("""select rank, min(shape) from collectives
                          where counter = 'detail_seq' and coalesce(pg, '0') = ? and seq = ? and shape is not null
                          group by rank""", [d["pg"], d["seq"] - 1]).fetchall()
    return dict(rows)


def _divergence(con) -> dict | None:
    if fr := fr_divergence(con):   # Flight Recorder's matching (queries/fr_findings.sql) knows more
        return fr
    d = _rows(con, "select * from divergence")
    if not d:
        return None
    d = d[0]
    groups = _rows(con, "select ranks, op, numel, dtype from seq_groups where pg = ? and counter = ? and seq = ? order by n desc, list_min(ranks)",
                   [d["pg"], d["counter"], d["seq"]])
    issued = {r for g in groups for r in g["ranks"]}
    members = [r[0] for r in con.execute(
        "select distinct rank from last_seq where pg = ? and counter = ? "
        "union select rank from speaking_ranks where pg = ? order by 1",
        [d["pg"], d["counter"], d["pg"]]).fetchall()]
    out = [{"ranks": g["ranks"], "op": g["op"], "numel": g["numel"], "dtype": g["dtype"]} for g in groups]
    # the ranks past it (queries/divergence.sql) are in no group: op null would say they never issued it
    past = [r[0] for r in con.execute("select rank from ranks_past order by rank").fetchall()]
    never = [r for r in members if r not in issued and r not in past]
    # the other side of a DETAIL report that sat in another call there (mismatch_rows.sql:
    # barrier_fingerprints): the collective its traceback waits in (blocked_calls.sql) is what it issued
    beside = dict(con.execute(
        "select b.rank_b, upper(replace(any_value(c.call), '_', '')) from barrier_fingerprints b "
        "join blocked_calls c on c.rank = b.rank_b where b.at_seq = ? and ? = 'detail_seq' group by b.rank_b",
        [d["seq"], d["counter"]]).fetchall()) if never else {}
    for op in sorted(set(beside.values())):
        out.append({"ranks": [r for r in never if beside.get(r) == op], "op": op})
    never = [r for r in never if r not in beside]
    if never:
        out.append({"ranks": never, "op": None})
    try:   # as the first line at the divergence prints it (queries/evidence.sql)
        first = con.execute("select file, line from evidence_divergence_rows where grp <> 'past' "
                              "order by rank, file, line limit 1").fetchall()
    except duckdb.CatalogException:
        first = []
    label = printed_label(d["counter"], d["seq"], line_text(con, *first[0]) if first else None)
    return {"pg": d["pg"], "counter": d["counter"], "seq": d["seq"], "groups": out, "ops": _ops(out),
            "seq_printed": seq_printed(d["counter"], d["seq"]), "seq_label": label, "ranks_past": past}


def _culprits_never_issued(con, culprits) -> dict | None:
    """Where the ranks that print a counter agree, the collective every one of them timed out in,
    as a divergence of the verdict's culprits that print none in that group (a rank busy elsewhere,
    dead or gone, that the rule named from other lines: the root a broadcast waits for, a rank whose
    only lines are unranked): the others issued it, the culprits never did."""
    if not culprits:
        return None
    rows = _rows(con, """select pg, counter, min(last_seq) as seq, any_value(last_op) as op, list(rank order by rank) as ranks
                         from last_seq group by pg, counter
                         having count(distinct last_seq) = 1 and count(distinct last_op) = 1 and bool_and(timed_out)
                            and count(*) filter (where list_contains(?::bigint[], rank)) = 0
                         order by pg, counter""", [list(culprits)])
    if len(rows) != 1:
        return None
    d = rows[0]
    groups = [{"ranks": d["ranks"], "op": d["op"], "numel": None, "dtype": None},
              {"ranks": sorted(culprits), "op": None}]
    return {"pg": d["pg"], "counter": d["counter"], "seq": d["seq"], "groups": groups, "ops": _ops(groups),
            "seq_printed": seq_printed(d["counter"], d["seq"]),
            "seq_label": printed_label(d["counter"], d["seq"], None), "ranks_past": []}


def _ops(groups: list[dict]) -> dict:
    """Per rank (as a string, in rank order), the op it issued at the divergence; null: it never issued it."""
    return {str(r): op for r, op in sorted(((r, g["op"]) for g in groups for r in g["ranks"]), key=lambda x: x[0])}


def fr_divergence(con) -> dict | None:
    """The first divergence of the Flight Recorder dumps, with each rank's op there."""
    d = _rows(con, "select pg, counter, seq, finding from fr_divergence")
    if not d or d[0]["finding"] == "timed_out":   # every rank in the same op: nobody disagrees
        return None
    d = d[0]
    rows = _rows(con, "select rank, op, numel, dtype, state, sig, seq_printed from fr_divergence_ops order by rank")
    groups: dict = {}
    for r in rows:
        key = (r["op"] is None, r["op"], r["sig"])
        groups.setdefault(key, []).append(r)
    out = []
    for (never, op, _), members in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]), kv[1][0]["rank"])):
        g = {"ranks": [m["rank"] for m in members], "op": op}
        if not never:
            numels = {m["numel"] for m in members}
            g.update(numel=int(numels.pop()) if len(numels) == 1 and None not in numels else None,
                     dtype=members[0]["dtype"], state=members[0]["state"])
        out.append(g)
    printed = next((r["seq_printed"] for r in rows if r["seq_printed"] is not None), str(d["seq"]))
    return {"pg": d["pg"], "counter": d["counter"], "seq": d["seq"], "groups": out, "seq_printed": printed,
            "seq_label": seq_label(d["counter"], d["seq"], printed), "ops": _ops(out), "finding": d["finding"]}


def collateral(con, culprits: list[int], causes: set[tuple] = frozenset()) -> list[dict]:
    """What the others did as a consequence: the collateral lines of every rank but the culprits,
    and of the launcher and the scheduler (not their reports of how a culprit's process ended), but the lines
    that are causes (the culprits' own ends, the lines the verdict's rule names: a memory kill,
    the scheduler's end of the job)."""
    rows = _rows(con, """select c.rank, c.kind, c.time, c.file, c.line, c.text,
                                (select min(pg) from collectives k where k.rank = c.rank and k.state = 'timeout') as pg,
                                (select max(seq) from collectives k where k.rank = c.rank and k.state = 'timeout') as seq,
                                (select arg_max(counter, seq) from collectives k where k.rank = c.rank and k.state = 'timeout') as counter
                         from collateral c
                         where (c.rank is null or c.rank not in (select unnest(?::bigint[])))
                           and (c.file, c.line) not in (select unnest(?::varchar[]), unnest(?::bigint[]))
                           -- a launcher's or scheduler's report of how a culprit's process ended is about
                           -- it, not the others (the stop signals the launcher sent it are what it did next)
                           and (c.kind in ('torchelastic_closing_worker', 'torchelastic_death_signal')
                                or (c.file, c.line) not in (select file, line from exits
                                                            where rank in (select unnest(?::bigint[])) and file is not null))
                         order by c.time nulls last, c.rank, c.file, c.line limit ?""",
                 [culprits or [-1], [f for f, _ in causes] or [""], [l for _, l in causes] or [-1], culprits or [-1],
                  COLLATERAL_ROWS])
    return [{"rank": r["rank"], "kind": r["kind"], "pg": r["pg"], "seq": r["seq"], "counter": r["counter"],
             "seq_label": printed_label(r["counter"], r["seq"], r["text"]), "time": iso(r["time"]),
             "file": r["file"], "line": r["line"], "text": r["text"]} for r in rows]


def timeline(con, culprits: list[int] = (), cut: bool = True) -> list[dict]:
    """The last TIMELINE_ROWS timed events (where a job fails: the first ones of a long job are
    its start-up), earliest first, tee'd copies removed; untimed ones only when fewer are timed.
    The culprits' own last CULPRIT_ROWS timed events are among them even when the others'
    timeouts and exits came later and outnumber them."""
    own = [r for r in _last_events(con, CULPRIT_ROWS, culprits, cut) if r["aligned_ts"]] if culprits else []
    # a line cut into pieces (a `\r`, a launcher's tag inside it) has an event per piece: each is
    # told apart, and ordered, by its kind, text and rank too (tqdm bars of two ranks on one line)
    keys = {(r["file"], r["line"], r["kind"], r["text"]) for r in own}
    rest = [r for r in _last_events(con, TIMELINE_ROWS, (), cut) if (r["file"], r["line"], r["kind"], r["text"]) not in keys]
    rows = sorted(own + rest[max(0, len(rest) + len(own) - TIMELINE_ROWS):],
                  key=lambda r: (r["aligned_ts"] is None, r["aligned_ts"] or 0, r["file"], r["line"], r["kind"], r["text"] or "",
                                 r["rank"] is None, r["rank"] or 0))
    return [{"time": iso(r["aligned_ts"]), "rank": r["rank"], "host": r["host"], "source": r["source"],
             "kind": r["kind"], "text": r["text"], "file": r["file"], "line": r["line"]} for r in rows]


def _last_events(con, n: int, ranks, cut: bool) -> list[dict]:
    """The last `n` timeline events (of `ranks`, if any), earliest first. Removing tee'd copies is
    a window over every event (5 GB of logs: 2.9 s); the last rows need only the events from a
    time a few rows earlier on, and copies share their time, so that cut keeps them whole. When it
    leaves too few rows (lines copied more than 4 times), or without `cut`, every event is read."""
    where = f"kind not in {QUIET_KINDS}" + (" and rank in (select unnest(?::bigint[]))" if ranks else "")
    params = [list(ranks)] if ranks else []
    sql = f"""select * from (
                  select aligned_ts, rank, host, source, kind, text, file, line from timeline_events
                  where {where} and (aligned_ts is not null or rank is not null) {{cut}}
                  order by aligned_ts desc nulls last, file desc, line desc, kind desc, text desc, rank desc nulls first limit ?)
              order by aligned_ts nulls last, file, line, kind, text, rank nulls last"""
    start = con.execute(f"""select aligned_ts from aligned_events where {where} and aligned_ts is not null
                            order by aligned_ts desc limit 1 offset ?""", [*params, 4 * n]).fetchone() if cut else None
    rows = _rows(con, sql.format(cut="and aligned_ts >= ?"), [*params, start[0], n]) if start else []
    return rows if len(rows) == n else _rows(con, sql.format(cut=""), [*params, n])


def clock(con) -> dict:
    ref = con.execute("select host from clock_reference").fetchone()
    offsets = _rows(con, "select host, offset_ms, uncertainty_ms, moments from clock_offsets order by host")
    return {"reference_host": ref[0] if ref else None,
            "offsets_ms": {o["host"]: float(o["offset_ms"]) for o in offsets},
            "uncertainty_ms": {o["host"]: float(o["uncertainty_ms"]) for o in offsets},
            "method": "median difference of matched moments (synchronous step ends, watchdog timeouts of one seq) "
                      "to the reference host; local times without zone taken as UTC"}


def _last_seq_texts(con) -> dict:
    """The text of each rank's last collective line (last_seq's file and line), one join."""
    return {(f, l): t for f, l, t in con.execute(
        """select l.file, l.line, min(e.text) from last_seq l join events e using (file, line) group by l.file, l.line""").fetchall()}


def process_groups(con, texts: dict | None = None) -> list[dict]:
    texts = _last_seq_texts(con) if texts is None else texts
    out = []
    for pg, counter, size in con.execute(
            "select pg, counter, count(*) from last_seq group by pg, counter order by pg, counter").fetchall():
        rows = _rows(con, "select last_seq as seq, last_op as op, list(rank order by rank) as ranks, "
                          "arg_min(file, rank) as file, arg_min(line, rank) as line from last_seq "
                          "where pg = ? and counter = ? group by last_seq, last_op order by last_seq, last_op nulls last",
                     [pg, counter])
        for row in rows:   # as its lowest rank's line prints it
            row["label"] = printed_label(counter, row["seq"], texts.get((row.pop("file"), row.pop("line"))))
        out.append({"pg": pg, "counter": counter, "size": size, "last_seq": rows})
    return out


def ranks(con, verdict: Verdict, texts: dict | None = None) -> list[dict]:
    rows = _rows(con, """select f.rank, f.host, f.last_seen, f.own_errors, f.collateral_errors, f.exited_zero,
                                f.terminated, f.killed_hard, f.crashed_signal,
                                (select min(ts) from events e where e.rank = f.rank) as first_seen,
                                (select arg_max(pg, last_seq) from last_seq l where l.rank = f.rank) as pg,
                                (select max(last_seq) from last_seq l where l.rank = f.rank) as seq,
                                (select arg_max(last_op, last_seq) from last_seq l where l.rank = f.rank) as op,
                                (select arg_max(counter, last_seq) from last_seq l where l.rank = f.rank) as counter,
                                (select max(last_seen) from last_seq l where l.rank = f.rank) as seq_at,
                                (select arg_max(file, last_seq) from last_seq l where l.rank = f.rank) as seq_file,
                                (select arg_max(line, last_seq) from last_seq l where l.rank = f.rank) as seq_line
                         from rank_facts f order by f.rank""")
    texts = _last_seq_texts(con) if texts is None else texts
    out = []
    for r in rows:
        end = ("crashed" if r["own_errors"] or r["killed_hard"] or r["crashed_signal"] else
               "timeout" if r["collateral_errors"] else
               "exited" if r["exited_zero"] else
               "killed" if r["terminated"] else
               "stalled" if r["rank"] in verdict.culprit_ranks and verdict.kind == "rank_stalled" else None)
        last = ({"pg": r["pg"], "seq": r["seq"], "op": r["op"], "time": iso(r["seq_at"]),
                 "label": printed_label(r["counter"], r["seq"], texts.get((r["seq_file"], r["seq_line"])))}
                if r["seq"] is not None else None)
        out.append({"rank": r["rank"], "host": r["host"], "first_seen": iso(r["first_seen"]),
                    "last_seen": iso(r["last_seen"]), "last_collective": last, "end": end})
    return out


def _ranks_phrase(ranks: list[int]) -> str:
    """Ranges for a few ranks, a count for many: a sentence stays a sentence at 1,024 ranks."""
    text = compress(ranks)
    if len(ranks) == 1:
        return f"rank {text}"
    return f"ranks {text}" if len(text) <= 60 else f"{len(ranks)} ranks"


def narrative(verdict: Verdict, report: dict) -> list[str]:
    s = [f"Verdict: {verdict.kind.replace('_', ' ')} ({verdict.confidence} confidence) — {verdict.summary}."]
    fs = report["first_stalled"]
    if fs:
        s.append(f"The first rank to stop was rank {fs['rank']}" + (f" on {fs['host']}" if fs["host"] else "")
                 + (f", last seen at {fs['last_seen']}" if fs["last_seen"] else "") + ".")
    d = report["divergence"]
    if d:
        sides = d.get("difference") or "; ".join(f"{_ranks_phrase(g['ranks'])} issued {g['op'] or 'nothing'}" for g in d["groups"])
        s.append(f"Ranks diverged at {d['seq_label']} on PG {d['pg']}: {sides}.")
    victims = sorted({c["rank"] for c in report["collateral"] if c["rank"] is not None})
    if victims:
        s.append(f"As a consequence, {_ranks_phrase(victims)} reported timeouts, lost peers or aborts (see collateral).")
    if verdict.missing_facts:
        s.append("Missing to decide: " + "; ".join(verdict.missing_facts) + ".")
    return s[:6]


def _with_difference(verdict: Verdict, diverged: dict | None) -> Verdict:
    """A mismatch's summary names the field that differs and both values: where the rule's own
    words do not, the divergence's difference is added (`...; rank 133 has count 50331648 where
    the others have count 25165824`)."""
    said = (diverged or {}).get("difference")
    if verdict.kind not in ("collective_mismatch", "missing_collective") or not said:
        return verdict
    values = re.findall(r"(?:has|have|issued) (.+?)(?= where|;|$)", said)
    if values and all(v in verdict.summary for v in values):
        return verdict
    return dataclasses.replace(verdict, summary=f"{verdict.summary}; {said}")


def build(con: duckdb.DuckDBPyConnection, verdict: Verdict, job_id: str, log_dir: Path, read_lines=None) -> dict:
    """The report; `read_lines(file, numbers)` reads cited lines back whose text no table keeps."""
    diverged = divergence(con, verdict.culprit_ranks, verdict.kind)
    verdict = _with_difference(verdict, diverged)
    cited, causes = evidence_and_causes(con, verdict, read_lines)
    report = {
        "schema_version": SCHEMA_VERSION,
        "job": job_section(con, job_id, str(log_dir)),
        "verdict": {"kind": verdict.kind, "summary": verdict.summary, "culprit_ranks": verdict.culprit_ranks,
                    "culprit_hosts": _hosts_of(con, verdict.culprit_ranks), "confidence": verdict.confidence,
                    "missing_facts": verdict.missing_facts, "alternative_kinds": verdict.alternative_kinds,
                    "rule": verdict.rule},
        "first_stalled": first_stalled(con, verdict),
        "divergence": diverged,
        "collateral": collateral(con, verdict.culprit_ranks, causes),
        "timeline": timeline(con, verdict.culprit_ranks),
        "evidence": cited,
        "clock": clock(con),
        "process_groups": process_groups(con, texts := _last_seq_texts(con)),
        "ranks": ranks(con, verdict, texts),
    }
    report["remediation"] = remediation(verdict, remedy_values(con, verdict, report))
    report["narrative"] = narrative(verdict, report)
    return report


def remedy_values(con, verdict: Verdict, report: dict) -> dict:
    """The job's own values the remedies' verify commands are filled with (shell-quoted): the
    Slurm job id, the culprit's rank, host, pid and own log file, the world size, the log directory,
    the c10d store's port where opening it failed."""
    values: dict = {"log_dir": report["job"]["log_dir"], "nranks": report["job"]["world_size"]}
    slurm = con.execute(r"""select coalesce(
            (select regexp_extract(text, 'JobId=(\d+)', 1) from events
             where contains(text, 'JobId=') and regexp_matches(text, 'JobId=\d+')
             order by file, line limit 1),
            (select regexp_extract(text, '^(\d+)\|', 1) from events where kind = 'sacct' and regexp_matches(text, '^\d+\|')
             order by file, line limit 1),
            (select regexp_extract(path, 'slurm-(\d+)\.out', 1) from files where regexp_matches(path, 'slurm-\d+\.out')
             order by path limit 1))""").fetchall()[0][0]
    values["slurm_job"] = slurm or None
    culprit = verdict.culprit_ranks[0] if verdict.culprit_ranks else None
    if culprit is not None:
        values["rank"] = culprit
        row = con.execute("""select (select any_value(host) from rank_facts where rank = ?),
                                    (select min(pid) from processes where rank = ? and pid is not null),
                                    (select min(file) from rank_by_file where rank = ?)""", [culprit] * 3).fetchall()[0]
        values["host"], values["pid"], own = row
        if own is None:   # no file of its own: the file of its first cited line
            own = next((e["file"] for e in report["evidence"] if e.get("rank") == culprit), None)
        # as a path a shell finds (the report's files are relative to the job directory)
        if own is not None and Path(values["log_dir"]).is_dir() and Path(values["log_dir"], own).is_file():
            values["culprit_log"] = str(Path(values["log_dir"], own))
    d = report.get("divergence") or {}
    values["seq_label"], values["pg"] = d.get("seq_label"), d.get("pg")
    # the store's port, as a failure to open it prints it (`port: 29526`, `[::]:29511`)
    port = con.execute(r"""select regexp_extract(text, '(?:port:? |\]:)(\d+)', 1) from events
                           where kind = 'store_host_failed' and regexp_matches(text, '(?:port:? |\]:)\d+')
                           order by file, line limit 1""").fetchall()
    values["port"] = port[0][0] if port else None
    return {k: shlex.quote(str(v)) for k, v in values.items() if v is not None and str(v) != ""}
