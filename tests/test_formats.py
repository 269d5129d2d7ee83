"""Every format declares its own sample lines; each must parse to the declared fields."""
import polars as pl
import pytest

from parsers.engine import FileContext, _candidates, _fields, parse_batch
from parsers.spec import registry

CTX = FileContext.for_mtime("sample.log", 1796000000.0)   # 2026-11-30 UTC
CASES = [(spec, i, sample) for spec in registry() for i, sample in enumerate(spec.samples)]


def _isolated(spec, line):
    """The spec alone on the line (wrappers and headers see the raw line)."""
    matched, values = _fields(spec, pl.col("text"), _candidates(spec, pl.col("text"), pl.lit(True)))
    out = pl.DataFrame({"text": [line]}).select(matched.alias("_m"), **values)
    return out.row(0, named=True)


def _in_pipeline(spec, line):
    """The line through every layer: the spec must win, and its emitted row carries the fields."""
    df, emitted = parse_batch(pl.Series([line], dtype=pl.String), 1, CTX)
    assert df["kind"][0] == spec.name, f"line went to {df['kind'][0]!r}"
    rows = [r for s, r in emitted if s.name == spec.name]
    return rows[0].row(0, named=True) if rows else {}


@pytest.mark.parametrize("spec,i,sample", CASES, ids=[f"{s.name}-{i}" for s, i, _ in CASES])
def test_sample(spec, i, sample):
    if spec.layer == "message":
        got = _in_pipeline(spec, sample.line)
    else:
        got = _isolated(spec, sample.line)
        assert got["_m"], "the spec does not match its own sample"
    for name, want in sample.fields.items():
        assert got.get(name) == want, f"{name}: {got.get(name)!r} != {want!r}"


def test_every_format_has_samples_and_unique_names():
    names = [s.name for s in registry()]
    assert len(names) == len(set(names))
    assert all(s.samples for s in registry())
