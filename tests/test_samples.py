"""The real captured samples: every line is recognised by a declared format, nothing skipped."""
from pathlib import Path

import pytest

from correlator.pipeline import parse_job

SAMPLES = sorted(p.parent for p in Path(__file__).parent.parent.glob("samples/*/expected.json"))


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_every_line_recognised(sample):
    con = parse_job(sample / "logs").con
    lines, unparsed, skipped = con.execute(
        "select sum(lines), sum(lines_unparsed), count(skip_reason) from files").fetchone()
    leftovers = con.execute("select file, line, text from events where kind = 'other' limit 5").fetchall()
    assert lines > 0
    assert unparsed == 0, leftovers
    assert skipped == 0
