"""What a person reads, built once from the JSON report and shared by every renderer.

Every string here has gone through sanitize.clean*, lists longer than `max_rows` are cut with a
count of what was left out, and rank lists are compressed into ranges, so renderers only lay out
and escape; none of them has to think about scale or hostile text again.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..counters import COUNTER_SOURCES, seq_label
from ..ranges import compress
from .sanitize import clean, clean_line

CELL_LIMIT = 240
INLINE_LIMIT = 8  # names listed inside a sentence before "+N more"
RANGES_LIMIT = 60  # characters of rank ranges in a table cell; the rest is counted ("… +N more")
DETAIL_LIMIT = 72  # characters of a log line quoted in a table cell (the evidence section has it whole)
UNKNOWN = "—"


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    omitted: int = 0
    omitted_noun: str = "rows"
    code_columns: frozenset[int] = frozenset()  # file:line and commands: shown as code
    below: frozenset[int] = frozenset()  # long text a narrow terminal shows under its row, not in a column
    more_text: str = ""  # says what was left out when a count alone would not (earlier and later events)

    @property
    def more_line(self) -> str:
        if self.more_text:
            return self.more_text
        return f"+{self.omitted} more {self.omitted_noun}" if self.omitted else ""


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[tuple[str, Table]] = field(default_factory=list)  # (caption, table)


@dataclass
class Remedy:
    action: str
    verify: str
    expect: str = ""  # what the command shows when the fix worked


@dataclass
class Verdict:
    kind: str
    summary: str
    confidence: str
    facts: list[tuple[str, str]]  # (label, value) lines under the summary
    missing_facts: list[str]


@dataclass
class View:
    title: str
    verdict: Verdict
    sections: list[Section]
    remedies: list[Remedy]
    remedies_omitted: int
    report: dict        # what the view shows: the HTML charts draw its rows, the JSON form is it


def build(report: dict, max_rows: int = 20) -> View:
    job = report.get("job") or {}
    narrative = [clean_line(s) for s in _list(report, "narrative")]
    if len(narrative) > max_rows:
        narrative = narrative[:max_rows] + [f"+{len(narrative) - max_rows} more"]
    sections = [
        Section("What happened", paragraphs=narrative),
        _job_section(job, max_rows),
        _process_groups_section(report, max_rows),
        _divergence_section(report, max_rows),
        _rank_states_section(report, max_rows),
        _collateral_section(report, max_rows),
        _evidence_section(report, max_rows),
        timeline_section(report),
        _clock_section(report, max_rows),
    ]
    remedies = [
        Remedy(clean_line(item.get("action")), clean(item.get("verify")).strip(), clean_line(item.get("expect")))
        for item in _list(report, "remediation")
    ]
    return View(
        title=f"correlator report: {clean_line(job.get('id')) or 'job'}",
        verdict=_verdict(report, max_rows),
        sections=[s for s in sections if s.paragraphs or s.tables],
        remedies=remedies[:max_rows],
        remedies_omitted=max(0, len(remedies) - max_rows),
        report=report,
    )


def culprit_ranks(report: dict) -> set[int]:
    return {int(r) for r in (report.get("verdict") or {}).get("culprit_ranks") or []}


def _verdict(report: dict, max_rows: int) -> Verdict:
    verdict = report.get("verdict") or {}
    culprits = culprit_ranks(report)
    facts = []
    alternatives = [clean_line(k) for k in verdict.get("alternative_kinds") or []]
    if alternatives:
        facts.append(("or else", _capped_join(alternatives, max_rows)))
    if culprits:
        facts.append(("culprit ranks", compress(culprits, 3 * RANGES_LIMIT)))
    hosts = verdict.get("culprit_hosts") or []
    if hosts:
        facts.append(("culprit hosts", _capped_join(hosts, max_rows)))
    stalled = report.get("first_stalled")
    if stalled:
        facts.append(("first to stop", _first_stalled_text(stalled)))
    divergence = report.get("divergence")
    if divergence:
        facts.append(("diverged at", _divergence_text(divergence)))
    facts.append(("decided by", f"rule {clean_line(verdict.get('rule'))}" if verdict.get("rule")
                  else "no rule matched: the facts below would decide"))
    missing = [clean_line(f, CELL_LIMIT) for f in verdict.get("missing_facts") or []]
    return Verdict(
        kind=clean_line(verdict.get("kind")) or "unknown",
        summary=clean_line(verdict.get("summary")),
        confidence=clean_line(verdict.get("confidence")) or "unknown",
        facts=facts,
        missing_facts=missing[:max_rows] + ([f"+{len(missing) - max_rows} more"] if len(missing) > max_rows else []),
    )


def _first_stalled_text(stalled: dict) -> str:
    where = f"rank {clean_line(stalled.get('rank'))}"
    if stalled.get("host"):
        where += f" ({clean_line(stalled.get('host'))})"
    if stalled.get("counter") == "progress_step":  # no sequence numbers: how far its steps got
        text = f"{where}, last {clean_line(stalled.get('last_seq_label') or 'step ' + _value(stalled.get('last_seq')))}"
    elif stalled.get("last_seq") is None and not stalled.get("last_op"):
        # the others' counter, but no row of its own in it (no dump of its own, no DETAIL line)
        text = f"{where}, no {COUNTER_SOURCES.get(clean_line(stalled.get('counter')), 'collective')} of its own in the logs"
    else:
        after = _collective_text(stalled.get("pg"), stalled.get("last_seq"), stalled.get("last_op"),
                                 _label(stalled.get("last_seq_label"), stalled.get("counter"), stalled.get("last_seq")))
        text = f"{where}, last collective {after}"
    if stalled.get("last_seen"):
        text += f", last seen {clean_line(stalled.get('last_seen'))}"
    return text


def _divergence_text(divergence: dict) -> str:
    """`SequenceNumber=11 on PG 0: rank 3 has TensorShape=[3] where the others have TensorShape=[2]`:
    where, which field differs and both values, as the log prints them."""
    groups = divergence.get("groups") or []
    where = _collective_text(divergence.get("pg"), divergence.get("seq"), None,
                             _label(divergence.get("seq_label"), divergence.get("counter"), divergence.get("seq")))
    if divergence.get("difference"):
        return f"{where}: {clean_line(divergence.get('difference'), CELL_LIMIT)}"
    sides = "; ".join(f"{compress(g.get('ranks') or [], RANGES_LIMIT) or UNKNOWN}: {clean_line(g.get('op')) or 'never issued'}"
                      for g in groups[:4])
    more = f"; +{len(groups) - 4} more groups" if len(groups) > 4 else ""
    past = _ranks_past(divergence)
    return f"{where} ({sides}{more}{f'; {past}: past it' if past else ''})"


def _ranks_past(divergence: dict) -> str:
    """The ranks already in a later seq (`1`, `0-3`), whose op at this one the logs do not say."""
    return compress([r for r in divergence.get("ranks_past") or [] if isinstance(r, int)], RANGES_LIMIT)


def _label(label: object, counter: object, seq: object) -> str | None:
    """A seq as the log prints it, naming its counter: the report's label, else made from the
    counter (a report stored before labels)."""
    if label:
        return clean_line(label)
    if seq is None:
        return None
    made = seq_label(clean_line(counter) or None, seq) if isinstance(seq, int) else None
    return clean_line(made) if made else f"#{clean_line(seq)}"


def _collective_text(pg: object, seq: object, op: object, label: object = None) -> str:
    """`ALLREDUCE SeqNum=15 on PG 0`: the counter as the log prints it where the report says it."""
    number = clean_line(label) if label else f"#{clean_line(seq)}" if seq is not None else ""
    name = " ".join(p for p in (clean_line(op), number) if p) or "collective"
    group = f" on PG {clean_line(pg)}" if pg is not None else ""
    return f"{name}{group}"


def _job_section(job: dict, max_rows: int) -> Section:
    ranks_seen = job.get("ranks_seen") or []
    parts = [
        f"world size {_value(job.get('world_size'))}",
        f"ranks seen {compress(ranks_seen) or 'none'} ({len(ranks_seen)})",
        f"hosts ({len(job.get('hosts') or [])}) {_capped_join(job.get('hosts') or [], INLINE_LIMIT) or 'none'}",
        f"{_value(job.get('files'))} files, {_value(job.get('lines'))} lines, "
        f"{_value(job.get('lines_unparsed'))} unparsed",
    ]
    if job.get("lines_skimmed"):
        parts.append(f"{_value(job.get('lines_skimmed'))} earlier repeated lines (NCCL COLL, progress steps) counted, not typed (--full types them)")
    section = Section("Job", paragraphs=[f"{clean_line(job.get('id')) or 'job'} in "
                                         f"{clean_line(job.get('log_dir')) or UNKNOWN}: " + "; ".join(parts)])
    skipped = job.get("files_skipped") or []
    if skipped:
        rows = [[clean_line(f.get("path"), CELL_LIMIT), clean_line(f.get("reason"))] for f in skipped]
        section.tables.append(("Files skipped", _table(["file", "reason"], rows, max_rows, "files", code=(0,))))
    return section


def _process_groups_section(report: dict, max_rows: int) -> Section:
    """PGs whose ranks disagree get their own rows, first; PGs that ended in step together share one row.

    Jobs with tensor/pipeline parallelism have hundreds of PGs that all end alike; folding them keeps
    the table about the PGs that matter.
    """
    groups = sorted(_list(report, "process_groups"), key=lambda g: _natural_key(g.get("pg")))
    rows = []
    uniform: dict[tuple, list[dict]] = defaultdict(list)
    for group in groups:
        entries = group.get("last_seq") or []
        if len(entries) == 1:
            entry = entries[0]
            uniform[(clean_line(group.get("counter")), group.get("size"), entry.get("seq"), clean_line(entry.get("op")))].append(group)
            continue
        for entry in sorted(entries, key=lambda e: _sort_key(e.get("seq"))):
            rows.append(_pg_row([group], group.get("size"), entry.get("seq"), entry.get("op"), entry.get("ranks") or [],
                                entry.get("label")))
    for (_, size, seq, op), alike in uniform.items():
        ranks = {rank for group in alike for rank in group["last_seq"][0].get("ranks") or []}
        rows.append(_pg_row(alike, size, seq, op, ranks, alike[0]["last_seq"][0].get("label")))
    columns = ["pg", "counter", "size", "last seq", "op", "ranks", "count"]
    table = _table(columns, rows, max_rows, f"rows ({len(groups)} process groups in all)")
    return Section("Last collective per process group", tables=[("", table)] if rows else [])


def _pg_row(groups: list[dict], size: object, seq: object, op: object, ranks, seq_text: object = None) -> list[str]:
    names = [clean_line(g.get("pg")) for g in groups]
    label = compress(int(n) for n in names) if all(n.isdigit() for n in names) else _capped_join(names, 8)
    counters = sorted({clean_line(g.get("counter")) for g in groups})
    printed = _label(seq_text, groups[0].get("counter") if len(counters) == 1 else None, seq) if seq is not None else None
    return [label, ", ".join(counters) or UNKNOWN, _value(size), printed or UNKNOWN, clean_line(op) or UNKNOWN,
            compress(ranks, RANGES_LIMIT), str(len(set(ranks)))]


def _divergence_section(report: dict, max_rows: int) -> Section:
    divergence = report.get("divergence")
    if not divergence:
        return Section("Divergence")
    groups = divergence.get("groups") or []
    printed = [g.get("printed") or {} for g in groups]
    rows = [
        [compress(g.get("ranks") or [], RANGES_LIMIT), str(len(g.get("ranks") or [])),
         clean_line(g.get("op")) or "never issued", _value(g.get("numel")), _value(g.get("dtype"))]
        + ([" ".join(clean_line(p[f]) for f in ("op", "numel", "dtype") if p.get(f)) or "—"] if any(printed) else [])
        for g, p in zip(groups, printed)
    ]
    label = _label(divergence.get("seq_label"), divergence.get("counter"), divergence.get("seq"))
    caption = f"PG {clean_line(divergence.get('pg'))}, {label or UNKNOWN}"
    fields = [clean_line(f) for f in divergence.get("fields") or []]
    if fields:
        caption += f": {', '.join(fields)} differ{'s' if len(fields) == 1 else ''}"
    elif any(g.get("op") is None for g in groups):
        caption += ": a rank never issued it"
    if past := _ranks_past(divergence):
        caption += f"; rank(s) {past} already in a later one (what they issued here is not in the logs)"
    columns = ["ranks", "count", "op", "numel", "dtype"] + (["as the log prints it"] if any(printed) else [])
    return Section("Divergence", tables=[(caption, _table(columns, rows, max_rows, "groups"))])


def _rank_signature(entry: dict, culprits: set[int]) -> tuple:
    """What makes two ranks behave 'the same' for grouping: how they ended and where they stopped."""
    last = entry.get("last_collective") or {}
    return (
        int(entry.get("rank")) in culprits,
        clean_line(entry.get("end")) or "unknown",
        clean_line(last.get("pg")) if last else "",
        last.get("seq") if last else None,
        clean_line(last.get("op")) if last else "",
        clean_line(last.get("label")) if last else "",
    )


def _rank_states_section(report: dict, max_rows: int) -> Section:
    culprits = culprit_ranks(report)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for entry in _list(report, "ranks"):
        if entry.get("rank") is not None:
            groups[_rank_signature(entry, culprits)].append(entry)
    ordered = sorted(groups.items(), key=lambda item: (not item[0][0], min(e["rank"] for e in item[1])))
    rows = []
    for (is_culprit, end, pg, seq, op, label), entries in ordered:
        last = _collective_text(pg, seq, op, label) if seq is not None or op else UNKNOWN
        last_seen = max((e.get("last_seen") or "" for e in entries), default="")
        rows.append([compress((e["rank"] for e in entries), RANGES_LIMIT), str(len(entries)), end, last,
                     clean_line(last_seen) or UNKNOWN, "culprit" if is_culprit else ""])
    table = _table(["ranks", "count", "end", "last collective", "last seen (latest)", "note"], rows, max_rows, "groups")
    return Section("Rank states", tables=[("", table)] if rows else [])


def _collateral_section(report: dict, max_rows: int) -> Section:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for item in _list(report, "collateral"):
        groups[(clean_line(item.get("kind")) or "unknown", clean_line(item.get("pg")),
                item.get("seq"))].append(item)
    ordered = sorted(groups.items(), key=lambda kv: min(_sort_key(i.get("time")) for i in kv[1]))
    rows = []
    for (kind, pg, seq), items in ordered:
        ranks = [i["rank"] for i in items if i.get("rank") is not None]
        label = _label(items[0].get("seq_label"), items[0].get("counter"), seq) if seq is not None else None
        where = _collective_text(pg or None, seq, None, label) if pg or seq is not None else UNKNOWN
        first = min((i.get("time") or "" for i in items), default="")
        detail = next((clean_line(i.get("text"), DETAIL_LIMIT) for i in items if i.get("text")), "")
        rows.append([kind, compress(ranks, RANGES_LIMIT) or UNKNOWN, str(len(items)), where, clean_line(first) or UNKNOWN, detail])
    table = _table(["kind", "ranks", "count", "at", "first time", "detail"], rows, max_rows, "kinds", below=(5,))
    return Section("Collateral (consequences, not causes)", tables=[("", table)] if rows else [])


def _evidence_section(report: dict, max_rows: int) -> Section:
    rows = [
        [location(item), _value(item.get("rank")), clean_line(item.get("text"), CELL_LIMIT)]
        for item in _list(report, "evidence")
    ]
    table = _table(["file:line", "rank", "text"], rows, max_rows, "evidence lines", code=(0,), below=(2,))
    return Section("Evidence", tables=[("", table)] if rows else [])


TIMELINE_BEFORE, TIMELINE_AFTER = 4, 8  # events shown before and from the failure moment


def failure_moment(report: dict) -> tuple[str | None, str]:
    """When the failure showed, as an ISO time, and in words: the first rank's stop, else the
    first evidence line's event; (None, "") for a run that did not fail (its end is shown)."""
    stalled = report.get("first_stalled") or {}
    if stalled.get("last_seen"):
        return str(stalled["last_seen"]), f"rank {clean_line(stalled.get('rank'))} stopped at {clean_line(stalled['last_seen'])}"
    times = {(e.get("file"), e.get("line")): e.get("time") for e in _list(report, "timeline") if e.get("time")}
    for item in _list(report, "evidence"):
        when = times.get((item.get("file"), item.get("line")))
        if when:
            return str(when), f"the first evidence line, {location(item)}, at {clean_line(when)}"
    return None, ""


def timeline_section(report: dict, before: int = TIMELINE_BEFORE, after: int = TIMELINE_AFTER) -> Section:
    """The few events around the failure (the report's timeline holds its last events; `correlator
    timeline` every one): a person sees what happened next without reading the whole timeline."""
    events = [e for e in _list(report, "timeline") if e.get("time")]
    if not events:
        return Section("Timeline")
    moment, said = failure_moment(report)
    if moment is None or (report.get("verdict") or {}).get("kind") in ("healthy", "straggler"):
        start = max(0, len(events) - before - after)
        caption = f"the last {len(events) - start} events"
    else:
        centre = next((i for i, e in enumerate(events) if str(e["time"]) >= moment), len(events) - 1)
        start = max(0, min(centre - before, len(events) - before - after))
        caption = f"around the failure ({said})"
    shown = events[start:start + before + after]
    rows = [[clean_line(e.get("time")), _value(e.get("rank")), clean_line(e.get("kind")) or UNKNOWN, location(e),
             clean_line(e.get("text"), DETAIL_LIMIT)] for e in shown]
    earlier, later = start, len(events) - start - len(shown)
    parts = [f"+{n} {word} event{'s' if n != 1 else ''}" for n, word in ((earlier, "earlier"), (later, "later")) if n]
    held = f"{', '.join(parts)} in this report" if parts else ""
    # said only where this table leaves events out (the renderers show it only then)
    more = "; ".join((held, "correlator timeline JOB_DIR shows every event")) if parts else ""
    table = Table(["time", "rank", "kind", "file:line", "text"], rows, earlier + later, "events", frozenset({3}),
                  below=frozenset({3, 4}), more_text=more)
    return Section("Timeline", tables=[(caption, table)])


def _clock_section(report: dict, max_rows: int) -> Section:
    clock = report.get("clock") or {}
    if not clock:
        return Section("Clock alignment")
    offsets = sorted((clock.get("offsets_ms") or {}).items(), key=lambda kv: -abs(kv[1] or 0))
    rows = [[clean_line(host), f"{offset:+.1f}" if isinstance(offset, (int, float)) else UNKNOWN] for host, offset in offsets]
    paragraph = (f"reference host {clean_line(clock.get('reference_host')) or UNKNOWN}; "
                 f"method: {clean_line(clock.get('method')) or UNKNOWN}")
    tables = [("", _table(["host", "offset ms (largest first)"], rows, max_rows, "hosts"))] if rows else []
    return Section("Clock alignment", paragraphs=[paragraph], tables=tables)


def location(item: dict) -> str:
    path = clean_line(item.get("file"), CELL_LIMIT) or "?"
    return f"{path}:{item['line']}" if item.get("line") is not None else path


def _table(columns: list[str], rows: list[list[str]], max_rows: int, noun: str, code: tuple[int, ...] = (),
           below: tuple[int, ...] = ()) -> Table:
    return Table(columns, rows[:max_rows], max(0, len(rows) - max_rows), noun, frozenset(code), frozenset(below))


def _capped_join(values: list, limit: int) -> str:
    shown = ", ".join(clean_line(v) for v in values[:limit])
    return shown + (f" +{len(values) - limit} more" if len(values) > limit else "")


def _list(report: dict, key: str) -> list:
    return [item for item in report.get(key) or [] if item is not None]


def _value(value: object) -> str:
    return UNKNOWN if value is None else clean_line(value)


def _natural_key(value: object) -> tuple:
    """PG names sort as numbers when they are numbers ("2" before "10")."""
    text = "" if value is None else str(value)
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def _sort_key(value: object) -> tuple:
    """Sorts None last and mixed types without raising."""
    return (value is None, str(type(value)), value if value is not None else 0)
