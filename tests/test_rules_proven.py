"""Every verdict rule names the cases that prove it (`proven_by` in correlator/rules.toml, as ruff
ties a fixture to each rule): each is a bundled sample, a Flight Recorder or real-world corpus case,
or a rule case (tests/rule_cases), with its expected.json written before the product ran on it.
Each must be decided by that rule, and rightly: the expected kind (or one it accepts) and culprits."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from correlator.pipeline import analyze
from correlator.verdict import rules

ROOT = Path(__file__).parent.parent
PROOFS = [(rule.name, case) for rule in rules() for case in rule.proven_by]


def test_every_rule_names_a_case_that_proves_it():
    unproven = [rule.name for rule in rules() if not rule.proven_by]
    assert not unproven


def test_every_rule_case_proves_a_rule():
    named = {case for _, case in PROOFS}
    cases = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "tests" / "rule_cases").glob("*/expected.json")}
    assert cases and cases <= named, cases - named


def right(verdict: dict, want: dict) -> bool:
    """The expected kind (or one the case accepts, or, at low confidence, one of the verdict's
    alternatives with what would decide between them) and the expected culprits."""
    if verdict["culprit_ranks"] != sorted(want["culprit_ranks"]):
        return False
    kinds = {want["kind"], *want.get("accept_kinds", [])}
    return verdict["kind"] in kinds or (
        verdict["confidence"] == "low" and bool(kinds & set(verdict["alternative_kinds"])) and bool(verdict["missing_facts"]))


@pytest.mark.parametrize("rule,case", PROOFS, ids=[f"{r}:{Path(c).name}" for r, c in PROOFS])
def test_the_case_is_decided_by_its_rule_and_right(rule, case):
    where = ROOT / case
    want = json.loads((where / "expected.json").read_text())
    logs = where / "logs" if (where / "logs").is_dir() else where   # a Flight Recorder case: the dumps
    verdict = analyze(logs).report["verdict"]
    assert verdict["rule"] == rule, (verdict["rule"], verdict["kind"], verdict["culprit_ranks"])
    assert right(verdict, want), (verdict["kind"], verdict["culprit_ranks"], want["kind"], want["culprit_ranks"])
