"""Every cross-reference between the data files and the code is checked (issue #18, items 5-6):
a format's table is a table, each field it captures lands in a column or is named as dropped,
every kind a query, a rule or the report code names is one the parsers or the queries give,
a rule's placeholders are facts the verdict has, and each rule has its remedy."""
from __future__ import annotations

import ast
import re
import string
import tomllib
from pathlib import Path

import pytest

from correlator import queries
from correlator.parsers import spec as specs
from correlator.parsers.spec import registry
from correlator.parsers.whole_files import WHOLE_FILE_PARSERS
from correlator.pipeline import create_tables
from correlator.tables import SCHEMAS
from correlator.verdict import facts, remedies, rules

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT.parent / "shared" / "report-contract.md"
TABLE_SPECS = [s for s in registry() if s.table]

# --- formats --------------------------------------------------------------------------------


def _landed(spec) -> set[str]:
    """The captured fields that reach a column of the spec's table (`into` moves one to another)."""
    columns = set(SCHEMAS[spec.table].names)
    return {f for f in spec.fields if f in columns or spec.into.get(f, {}).get("field") in columns}


@pytest.mark.parametrize("spec", TABLE_SPECS, ids=lambda s: s.name)
def test_a_formats_table_is_a_table(spec):
    assert spec.table in SCHEMAS


@pytest.mark.parametrize("spec", TABLE_SPECS, ids=lambda s: s.name)
def test_every_captured_field_lands_in_a_column_or_is_named_as_dropped(spec):
    landed = _landed(spec)
    assert [f for f in spec.fields if f not in landed and f not in spec.dropped] == [], \
        f"{spec.file}: {spec.name}: add the field's column to the table or name it in `dropped`"
    assert [f for f in spec.dropped if f in landed] == [], f"{spec.file}: {spec.name}: `dropped` names a field that lands"


def test_dropped_belongs_to_table_bound_specs():
    assert [s.name for s in registry() if s.dropped and not s.table] == []


BULK_SPEC = '''
[[format]]
name = "{name}"
layer = "message"
headers = ["h"]
literal = " op "
regex = '^\\w+ op \\d+'
split = " "
positions = {{ op = 0 }}
table = "collectives"
bulk = {{ after = " X ", keep_last_by = "op", window_after = " op ", window_chars = 4, process_chars = 4 }}
[[format.sample]]
line = "a op 1"
fields = {{ op = "a" }}
'''


def test_a_second_bulk_spec_is_an_error_at_load(tmp_path):
    (tmp_path / "a.toml").write_text(BULK_SPEC.format(name="first"))
    assert len(specs.load(tmp_path)) == 1
    (tmp_path / "b.toml").write_text(BULK_SPEC.format(name="second"))
    with pytest.raises(ValueError, match="only one format may have `bulk`"):
        specs.load(tmp_path)


# --- kinds ----------------------------------------------------------------------------------

_KIND_IS = re.compile(r"\bkind\s*(?:=|<>|!=)\s*'([a-z0-9_]+)'")
_KIND_IN = re.compile(r"\bkind\s+(?:not\s+)?in\s*\(([^)]*)\)", re.I)
_AS_KIND = re.compile(r"'([a-z0-9_]+)'\s+as\s+kind\b")


def _kinds_named(sql: str) -> set[str]:
    named = set(_KIND_IS.findall(sql))
    for listed in _KIND_IN.findall(sql):
        named |= set(re.findall(r"'([a-z0-9_]+)'", listed))
    return named


def _python_strings(folder: Path) -> list[str]:
    return [node.value for path in folder.rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def _sql_texts() -> dict[str, str]:
    texts = {p.name: p.read_text() for p in (ROOT / "queries").glob("*.sql")}
    for rule in rules():
        texts[f"rules.toml: {rule.name}"] = f"{rule.culprits}\n{rule.evidence or ''}"
    texts["correlator/*.py"] = "\n".join(_python_strings(ROOT / "correlator"))
    return texts


def _event_kinds() -> set[str]:
    """The kinds a line can have: a format's name, a whole-file parser's, a kind the parsers'
    code spells out (tracebacks, continuations, whole-file lines), or one a query gives."""
    given = {s.name for s in registry()} | {p.name for p in WHOLE_FILE_PARSERS}
    given |= {s for s in _python_strings(ROOT / "parsers") if re.fullmatch(r"[a-z][a-z0-9_]*", s)}
    for sql in _sql_texts().values():
        given |= set(_AS_KIND.findall(sql))
    return given


def test_every_kind_a_query_names_exists():
    known = _event_kinds()
    unknown = {where: sorted(_kinds_named(sql) - known) for where, sql in _sql_texts().items()}
    assert {where: kinds for where, kinds in unknown.items() if kinds} == {}


def test_every_kind_a_rule_or_the_report_code_lists_exists():
    from correlator import assemble, verdict
    listed = {f"rules.toml: {r.name}": set(r.evidence_kinds) for r in rules()}
    listed |= {"assemble.QUIET_KINDS": set(assemble.QUIET_KINDS), "verdict.REPEATING_KINDS": set(verdict.REPEATING_KINDS)}
    known = _event_kinds()
    unknown = {where: sorted(kinds - known) for where, kinds in listed.items() if kinds - known}
    assert unknown == {}


def _verdict_kinds() -> set[str]:
    """The verdict kinds of the report contract's table."""
    section = CONTRACT.read_text().split("## Verdict kinds", 1)[1]
    return set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))


@pytest.mark.skipif(not CONTRACT.exists(), reason="the report contract lives beside the checkout")
def test_every_verdict_kind_a_rule_or_the_report_names_is_in_the_contract():
    from correlator.report.html import KIND_COLORS
    kinds = _verdict_kinds()
    assert "rank_stalled" in kinds
    named = {f"rules.toml: {r.name}": {r.kind, *r.alternative_kinds} for r in rules()}
    named["report/html.py: KIND_COLORS"] = set(KIND_COLORS)
    assert {where: sorted(k - kinds) for where, k in named.items() if k - kinds} == {}


# --- rules ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fact_names() -> set[str]:
    """Every key verdict.facts gives (on an empty job: the keys do not depend on the rows), the
    Flight Recorder facts' columns, and the culprits decide() adds."""
    import duckdb
    con = duckdb.connect()
    create_tables(con)
    queries.run_all(con)
    names = set(facts(con))
    names |= {d[0] for d in con.execute("select * from fr_facts limit 0").description}
    return names | {"culprits"}


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_placeholder_of_a_rule_is_a_fact(fact_names):
    wrong = {r.name: sorted(set().union(*map(_placeholders, (r.summary, *r.missing_facts))) - fact_names)
             for r in rules()}
    assert {name: keys for name, keys in wrong.items() if keys} == {}


def test_every_rule_has_a_remedy_of_its_own_or_of_its_kind():
    """remedies.toml is keyed by rule name, else by verdict kind: a rule without its own entry
    falls back to its kind's, deliberately, and never to `unknown` by accident."""
    assert [r.name for r in rules() if r.name not in remedies() and r.kind not in remedies()] == []


def test_every_remedy_is_for_a_rule_or_a_kind():
    names = {r.name for r in rules()} | {r.kind for r in rules()} | {"unknown"}
    if CONTRACT.exists():
        names |= _verdict_kinds()
    assert sorted(set(remedies()) - names) == []


def test_rule_names_are_unique():
    names = [r.name for r in rules()]
    assert len(names) == len(set(names))


# --- the order of the queries -----------------------------------------------------------------

_CREATES = re.compile(r"\bcreate\s+(?:or\s+replace\s+)?(?:temp(?:orary)?\s+)?(?:table|view|macro)\s+(?:if\s+not\s+exists\s+)?(\w+)", re.I)
_READS = re.compile(r"\b(?:from|join)\s+(\w+)\b(?!\s*\()", re.I)
_CTES = re.compile(r"(?:\bwith\s+(?:recursive\s+)?|,\s*)(\w+)\s+as\s+(?:materialized\s+)?\(", re.I)
# Names a query reads that no query creates: DuckDB's own, and the columns `unnest(...)` reads as a table.
_NOT_TABLES = {"unnest", "range", "generate_series", "values", "information_schema", "duckdb_tables", "duckdb_views"}


def _sql(name: str, params: dict) -> str:
    sql = re.sub(r"--[^\n]*", "", queries.text(name))
    sql = re.sub(r"'(?:[^']|'')*'", "''", sql)   # no table names inside string literals
    sql = re.sub(r"\bdistinct\s+from\b", "", sql, flags=re.I)   # `is [not] distinct from`: a comparison
    for key, value in params.items():
        sql = sql.replace("{" + key + "}", value)
    return sql


def _stages_with_fr_none():
    """queries.STAGES as run_all runs it on a job without Flight Recorder dumps."""
    for name, params in queries.STAGES:
        if name == "fr_findings":
            yield "fr_none", {}
        if name not in queries.FR_STAGES:
            yield name, params


def _stages_without_rows():
    """queries.STAGES as run_all runs it on a job without the rows of ONLY_WITH_ROWS (a paste)."""
    for name, params in _stages_with_fr_none():
        yield (f"{name}_none", params) if name in queries.ONLY_WITH_ROWS else (name, params)


@pytest.mark.parametrize("stages", [queries.STAGES, tuple(_stages_with_fr_none()), tuple(_stages_without_rows())],
                         ids=["with_fr", "without_fr", "without_rows"])
def test_every_stage_reads_only_the_parsed_tables_or_what_an_earlier_stage_created(stages):
    """A stage moved before the stage that creates what it reads is a test failure, not a
    CatalogException on the jobs that take that path."""
    created = set(SCHEMAS)
    late = {}
    for name, params in stages:
        sql = _sql(name, params)
        own = set(_CREATES.findall(sql)) | set(_CTES.findall(sql))
        missing = {t for t in _READS.findall(sql) if t not in created | own | _NOT_TABLES and not t.startswith("_")}
        if missing:
            late[name] = sorted(missing)
        created |= set(_CREATES.findall(sql))
    assert late == {}


def test_every_query_file_is_run():
    run = ({name for name, _ in queries.STAGES} | {"fr_none", "evidence"}   # evidence: verdict.prepare_evidence
           | {f"{name}_none" for name in queries.ONLY_WITH_ROWS})
    assert sorted(p.stem for p in (ROOT / "queries").glob("*.sql") if p.stem not in run) == []
