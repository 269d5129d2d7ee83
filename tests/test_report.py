"""The human-readable reports: content, hostile log text, well-formed Markdown, offline HTML, scale."""
from __future__ import annotations

import copy
import json
import re
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from correlator.report import render
from correlator.ranges import compress
from correlator.report.sanitize import clean

FIXTURES = Path(__file__).parent / "fixtures" / "reports"
HOSTILE = "\x1b[2J\x1b]0;title\x07[bold red]x[/]<script>alert(1)</script>|`tick`"
TIME_KEYS = {"time", "first_seen", "last_seen"}
START = datetime(2026, 11, 29, 21, 0, tzinfo=timezone.utc)


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def iso(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def large_stall_report() -> dict:
    """1,024 ranks on 128 hosts: rank 7 stalls after #41, 0-6,8-511 time out in #42, 512-1023 are killed."""
    world = 1024
    host = {rank: f"node{rank // 8:03d}" for rank in range(world)}

    def end_of(rank: int) -> str:
        return "stalled" if rank == 7 else "timeout" if rank < 512 else "killed"

    ranks = [{
        "rank": rank, "host": host[rank], "first_seen": iso(0), "last_seen": iso(40 if rank == 7 else 75 + rank / 1000),
        "last_collective": {"pg": "0", "seq": 41 if rank == 7 else 42, "op": "ALLREDUCE", "time": iso(39 if rank == 7 else 45)},
        "end": end_of(rank),
    } for rank in range(world)]
    timeline = [{"time": iso(i * 0.08), "rank": i % world, "host": host[i % world], "source": "c10",
                 "kind": "watchdog_timeout" if i > 900 else "progress", "text": f"event {i} on rank {i % world}",
                 "file": f"logs/{host[i % world]}/rank{i % world}.log", "line": i + 1} for i in range(1000)]
    tp_groups = [{"pg": str(g), "counter": "pg_seq", "size": 8,
                  "last_seq": [{"seq": 900, "op": "ALLGATHER", "ranks": list(range(8 * g - 8, 8 * g))}]} for g in range(1, 129)]
    return {
        "schema_version": 1,
        "job": {"id": "job-1024", "log_dir": "big/logs", "world_size": world, "ranks_seen": list(range(world)),
                "hosts": sorted(set(host.values())), "files": 2048, "lines": 9_000_000, "lines_unparsed": 40, "files_skipped": []},
        "verdict": {"kind": "rank_stalled", "summary": "rank 7 stopped issuing collectives after ALLREDUCE #41 on PG 0",
                    "culprit_ranks": [7], "culprit_hosts": ["node000"], "confidence": "medium",
                    "missing_facts": ["a py-spy dump of rank 7"]},
        "narrative": ["Rank 7 stopped after ALLREDUCE #41.", "All other ranks waited in ALLREDUCE #42.",
                      "Ranks 512-1023 were killed by the launcher."],
        "first_stalled": {"rank": 7, "host": "node000", "pg": "0", "counter": "pg_seq", "last_seq": 41,
                          "last_op": "ALLREDUCE", "last_seen": iso(40)},
        "divergence": {"pg": "0", "counter": "pg_seq", "seq": 42, "groups": [
            {"ranks": [r for r in range(world) if r != 7], "op": "ALLREDUCE", "numel": 4096, "dtype": "BFloat16"},
            {"ranks": [7], "op": None}]},
        "process_groups": [{"pg": "0", "counter": "pg_seq", "size": world, "last_seq": [
            {"seq": 41, "op": "ALLREDUCE", "ranks": [7]},
            {"seq": 42, "op": "ALLREDUCE", "ranks": [r for r in range(world) if r != 7]}]}] + tp_groups,
        "ranks": ranks,
        "collateral": [{"rank": r, "kind": "watchdog_timeout" if r < 512 else "killed_by_launcher", "pg": "0", "seq": 42,
                        "time": iso(70 + r / 1000)} for r in range(world) if r != 7],
        "timeline": timeline,
        "evidence": [{"file": e["file"], "line": e["line"], "rank": e["rank"], "text": e["text"]} for e in timeline],
        "clock": {"reference_host": "node000", "offsets_ms": {h: float(i) for i, h in enumerate(sorted(set(host.values())))},
                  "method": "matched collective starts"},
        "remediation": [{"action": "Find what rank 7 was doing after step 41.", "verify": "py-spy dump --pid PID"}],
    }


def hostile(report: dict) -> dict:
    """Every string of the report (and every host key) carries terminal escapes, rich markup and HTML."""
    def poison(value, key=None):
        if isinstance(value, dict):
            return {poison_key(k, value): poison(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [poison(v, key) for v in value]
        if isinstance(value, str) and key not in TIME_KEYS:
            return value + HOSTILE
        return value

    def poison_key(k, parent):
        return k + HOSTILE if parent is report.get("clock", {}).get("offsets_ms") else k

    return poison(copy.deepcopy(report))


@pytest.fixture(scope="module")
def large() -> dict:
    return large_stall_report()


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Each table as rows of cell texts as a reader sees them (header first), parsed by markdown-it with tables on."""
    tables, row = [], None
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    for index, token in enumerate(tokens):
        if token.type == "table_open":
            tables.append([])
        elif token.type == "tr_open":
            row = []
            tables[-1].append(row)
        elif token.type in ("th_open", "td_open"):
            inline = tokens[index + 1]
            row.append("".join(child.content for child in inline.children or []) if inline.type == "inline" else "")
    return tables


def markdown_plain_text(text: str) -> str:
    """What a reader of the rendered Markdown sees, without the escaping backslashes."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    return "\n".join("".join(c.content for c in t.children or []) if t.type == "inline" else t.content for t in tokens)


def markdown_html_tokens(text: str) -> list[str]:
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    found = [t.type for t in tokens if t.type.startswith("html")]
    for token in tokens:
        found += [c.type for c in token.children or [] if c.type.startswith("html")]
    return found


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attributes = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += attrs


def html_tags(document: str) -> _Tags:
    parser = _Tags()
    parser.feed(document)
    return parser


# ---- ranges and sanitising ------------------------------------------------------------------------

def test_compress_ranges():
    assert compress([*range(0, 7), *range(8, 512)]) == "0-6,8-511"
    assert compress([5, 3, 4, 4, 9]) == "3-5,9"
    assert compress([]) == ""


def test_clean_removes_escape_sequences_and_their_payload():
    assert clean("a\x1b[2Jb\x1b]0;title\x07c\x1b]8;;x\x1b\\d\x9b31me\x00f") == "abcdef"
    assert clean("keep\nnewline\ttab") == "keep\nnewline\ttab"
    assert clean("bidi\u202eevil") == "bidievil"


# ---- content ----------------------------------------------------------------------------------------

def test_json_is_the_report_itself():
    report = load("missing_collective_4")
    assert json.loads(render(report, "json")) == report


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html"])
def test_missing_collective_content(fmt):
    output = render(load("missing_collective_4"), fmt, width=160)
    if fmt == "markdown":
        output = markdown_plain_text(output)
    for expected in ("missing_collective", "confidence", "high", "node2", "0-1,3", "ALLREDUCE", "never issued",
                     "logs/rank2.log:44", "watchdog_timeout", "node1", "1520.0", "What happened", "jq .verdict.kind"):
        assert expected in output, expected


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html"])
def test_healthy_has_no_failure_sections(fmt):
    output = render(load("healthy_2"), fmt, width=160)
    assert "healthy" in output
    assert "Divergence" not in output and "Collateral" not in output and "culprit ranks" not in output


def test_terminal_color_switch():
    report = load("missing_collective_4")
    assert "\x1b[" not in render(report, "terminal", color=False)
    assert "\x1b[" in render(report, "terminal", color=True)


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html"])
def test_large_report_uses_ranges_and_caps_lists(fmt, large):
    output = render(large, fmt, width=160)
    if fmt == "markdown":
        output = markdown_plain_text(output)
    assert "rank_stalled" in output
    assert "0-6,8-511" in output  # the ranks that timed out, as one range
    assert "+980 more evidence lines" in output
    assert "1-128" in output and "0-1023" in output  # the 128 tensor-parallel PGs that ended alike: one row
    assert "+120 more" in output  # hosts


def test_large_report_sizes(large):
    assert len(render(large, "terminal", width=160).splitlines()) < 250
    assert len(render(large, "markdown")) < 40_000
    assert len(render(large, "html")) < 250_000


def test_large_html_timeline_bands(large):
    document = render(large, "html")
    svg = document[document.index("<svg"):document.index("</svg>")]
    assert "★ rank 7<" in svg  # the culprit keeps a row of its own
    assert "ranks 0-6 (7)" in svg and "ranks 8-511 (504)" in svg and "ranks 512-1023 (512)" in svg
    assert svg.count("<rect x='0'") == 4  # four bands, not 1,024 rows
    assert "stop point: rank 7 after ALLREDUCE SeqNum=41 on PG 0" in svg   # the counter as the log prints it


def test_small_html_timeline_has_a_row_per_rank():
    svg = render(load("missing_collective_4"), "html")
    for label in ("rank 0<", "rank 1<", "★ rank 2<", "rank 3<", "job / launcher<"):
        assert label in svg


# ---- hostile text -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["missing_collective_4", "healthy_2"])
@pytest.mark.parametrize("color", [False, True])
def test_terminal_neutralises_hostile_text(name, color):
    output = render(hostile(load(name)), "terminal", color=color, width=400)
    assert "\x1b[2J" not in output and "\x1b]" not in output and "\x07" not in output and "title" not in output
    assert not re.search(r"[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f]", output)
    if not color:
        assert "\x1b" not in output
    assert "[bold red]x[/]" in output  # printed literally, never interpreted as markup


@pytest.mark.parametrize("name", ["missing_collective_4", "healthy_2"])
def test_html_escapes_hostile_text(name):
    document = render(hostile(load(name)), "html")
    assert "<script>" not in document and "&lt;script&gt;" in document
    assert "\x1b" not in document and "\x07" not in document and "title\x07" not in document
    tags = html_tags(document)
    assert "script" not in tags.tags and "svg" in tags.tags


@pytest.mark.parametrize("name", ["missing_collective_4", "healthy_2"])
def test_markdown_escapes_hostile_text(name):
    text = render(hostile(load(name)), "markdown")
    assert "\x1b" not in text and "\x07" not in text
    assert markdown_html_tokens(text) == []
    evidence_or_first_table = markdown_tables(text)[0]
    assert any("[bold red]x[/]<script>alert(1)</script>|`tick`" in cell for row in evidence_or_first_table for cell in row)


# ---- well-formed Markdown and offline HTML ---------------------------------------------------------

@pytest.mark.parametrize("build", [lambda: load("missing_collective_4"), lambda: hostile(load("missing_collective_4")),
                                   lambda: load("healthy_2"), large_stall_report])
def test_markdown_tables_are_well_formed(build):
    tables = markdown_tables(render(build(), "markdown"))
    assert tables
    for table in tables:
        assert len(table) >= 2
        assert all(len(row) == len(table[0]) for row in table)


def test_markdown_tables_match_the_report(large):
    by_header = {tuple(table[0]): table[1:] for table in markdown_tables(render(large, "markdown"))}
    assert by_header[("pg", "counter", "size", "last seq", "op", "ranks", "count")] == [
        ["0", "pg_seq", "1024", "SeqNum=41", "ALLREDUCE", "7", "1"],
        ["0", "pg_seq", "1024", "SeqNum=42", "ALLREDUCE", "0-6,8-1023", "1023"],
        ["1-128", "pg_seq", "8", "SeqNum=900", "ALLGATHER", "0-1023", "1024"],
    ]
    tables = markdown_tables(render(load("missing_collective_4"), "markdown"))
    by_header = {tuple(table[0]): table[1:] for table in tables}
    divergence = by_header[("ranks", "count", "op", "numel", "dtype")]
    assert divergence == [["0-1,3", "3", "ALLREDUCE", "1024", "Float"], ["2", "1", "never issued", "—", "—"]]
    evidence = by_header[("file:line", "rank", "text")]
    assert [row[0] for row in evidence] == ["logs/rank2.log:44", "logs/rank0.log:90", "logs/launcher.log:212"]


@pytest.mark.parametrize("build", [lambda: load("missing_collective_4"), lambda: load("healthy_2"), large_stall_report])
def test_html_is_offline(build):
    document = render(build(), "html")
    assert "http://" not in document and "https://" not in document
    tags = html_tags(document)
    assert not {"script", "link", "img", "iframe", "object", "embed"} & set(tags.tags)
    assert not [value for name, value in tags.attributes if name == "src"]
    # links only within the page (file:line to its line in the excerpt), each to an anchor that exists
    links = [value for name, value in tags.attributes if name == "href"]
    ids = {value for name, value in tags.attributes if name == "id"}
    assert all(link.startswith("#") and link[1:] in ids for link in links), [l for l in links if l[1:] not in ids][:3]
    assert "url(" not in document and "@import" not in document


@pytest.mark.parametrize("fmt", ["json", "terminal", "markdown", "html"])
def test_sparse_reports_render(fmt):
    """Only the contract fields, no times, no per-rank data: every format still renders."""
    report = load("missing_collective_4")
    for key in ("narrative", "process_groups", "ranks"):
        del report[key]
    report["timeline"][0]["time"] = "not a time"
    assert render({}, fmt)
    output = render(report, fmt)
    assert "missing_collective" in output


def test_html_timeline_falls_back_to_events_without_per_rank_data():
    report = load("missing_collective_4")
    del report["ranks"]
    svg = render(report, "html")
    assert "★ rank 2<" in svg and "rank 3<" in svg


def test_unknown_format_is_an_error():
    with pytest.raises(ValueError):
        render({}, "pdf")


def test_long_rank_lists_are_cut_with_a_count():
    from correlator.ranges import compress
    assert compress([0, 1, 2, 5, 7, 8, 9, 11]) == "0-2,5,7-9,11"
    assert compress(range(0, 1000, 2), 30) == "0,2,4,6,8,10,12,14,16,18,20,22 … +488 more"
    assert compress(range(512), 3) == "0-511"          # one range is never cut
    assert compress([*range(512), 600], 3) == "0-511 … +1 more"


@pytest.mark.parametrize("sample", ["tr-missing_collective-4-detail", "tr-stalled_rank-4"])
def test_the_same_logs_give_the_same_report_every_run(sample):
    """Rows that tie (two SIGTERM lines of one second, an issued and a timed-out row of one seq)
    are chosen by file and line: the report, and each citation's file, line and text, never
    change between runs (they did: `arg_min` per column could even mix two rows)."""
    from correlator.pipeline import analyze
    logs = Path(__file__).parent.parent / "samples" / sample / "logs"
    reports = {json.dumps(analyze(logs).report, sort_keys=True, default=str) for _ in range(4)}
    assert len(reports) == 1
