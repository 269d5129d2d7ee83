"""The real captured samples: every line is recognised by a declared format, nothing skipped."""
from pathlib import Path

import pytest

from correlator.pipeline import decide_and_report, parse_job

SAMPLES = sorted(p.parent for p in Path(__file__).parent.parent.glob("samples/*/expected.json"))


# Runs of scripts written in other people's styles (samples/capture/ext): their own prints
# (`Loading data`, `Creating model`, `Rank  1 , epoch  0 :  0.62`) are text no format claims.
OTHER_PEOPLES_SCRIPTS = "ext-"


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_every_line_recognised(sample):
    """Our own captures: every line. Other people's scripts: every line that says something went
    wrong (the words error_lines.sql reads a failure in), whatever the script printed around it."""
    con = parse_job(sample / "logs").con
    lines, unparsed, skipped = con.execute(
        "select sum(lines), sum(lines_unparsed), count(skip_reason) from files").fetchone()
    assert lines > 0
    assert skipped == 0
    if sample.name.startswith(OTHER_PEOPLES_SCRIPTS):
        failing = con.execute(
            r"""select file, line, text from events where kind = 'other' and regexp_matches(text,
                '(\w(Error|Exception)(:|$)|\b(error|Error|ERROR):|\bERROR\b|\bFAILED\b|Traceback|[Ff]atal error|'
                '[Ss]egmentation fault|core dumped|timed out|\b[Aa]borted\b|\bKilled\b|[Uu]nhandled|'
                '(reset|closed) by (remote )?peer|[Bb]roken pipe|out of memory)')""").fetchall()
        assert not failing, failing
        return
    leftovers = con.execute("select file, line, text from events where kind = 'other' limit 5").fetchall()
    assert unparsed == 0, leftovers


# Where a launcher's or a scheduler's lines come from (formats/*.toml `source`): torchrun's agent and
# its ChildFailedError, mpirun, srun / slurmstepd / slurmctld, Kubernetes.
LAUNCHERS = ["torchelastic", "mpirun", "slurm", "k8s"]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_no_launcher_or_scheduler_line_is_a_culprits_own_failure(sample):
    """Issue #15 item 1: a launcher's or scheduler's message (ChildFailedError and its table, the
    agent's SIGTERMs, mpirun's first process to exit, srun's task errors, slurmstepd's cancels and
    memory kills) is evidence of how a rank ended, never a rank's own error; a verdict cites a
    culprit's own line where it has one, and a launcher's line for it only as its exit."""
    parsed = parse_job(sample / "logs")
    _, verdict, report = decide_and_report(parsed, sample / "logs")
    con = parsed.con
    own = con.execute("select file, line, text from rank_events where error_class = 'own' and source in (select unnest(?))",
                      [LAUNCHERS]).fetchall()
    assert not own, own
    for rank in verdict.culprit_ranks:
        cited = [e for e in report["evidence"] if e["rank"] == rank]
        if not cited:
            continue
        source = con.execute("select any_value(source) from events where file = ? and line = ?",
                             [cited[0]["file"], cited[0]["line"]]).fetchone()[0]
        if source in LAUNCHERS:
            own_errors = con.execute("select own_errors from rank_facts where rank = ?", [rank]).fetchone()[0]
            assert own_errors == 0, f"rank {rank} has a line of its own, but a launcher's line is cited first"
            assert con.execute("select count(*) from exits where file = ? and line = ? and rank = ?",
                               [cited[0]["file"], cited[0]["line"], rank]).fetchone()[0], "a launcher line that is not the rank's exit"
