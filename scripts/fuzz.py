"""A long fuzz run of the line parsers: the properties of tests/test_fuzz.py, with many examples,
round after round until the time is up; prints how many inputs each property took.

    .venv/bin/python scripts/fuzz.py --seconds 300
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROUND = 250   # inputs per property per round
os.environ["FUZZ_EXAMPLES"] = str(ROUND)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_fuzz  # noqa: E402

PROPERTIES = {
    "parse_batch": test_fuzz.test_parse_batch_takes_any_text,
    "iter_batches": test_fuzz.test_reader_keeps_every_line_of_any_bytes,
    "parse_sources": test_fuzz.test_parse_sources_takes_any_file,
    "bulk_lane": test_fuzz.test_bulk_lane_and_engine_agree_on_any_coll_lines,
    "window": test_fuzz.test_a_window_only_leaves_out_rows_it_counts,
    "skim": test_fuzz.test_skimmed_blocks_leave_out_only_lines_the_window_leaves_out,
}


def counted(prop, counts: dict, name: str):
    """The property with a counter around the function hypothesis calls once per input."""
    inner = prop.hypothesis.inner_test

    def run(*args, **kwargs):
        counts[name] += 1
        return inner(*args, **kwargs)
    prop.hypothesis.inner_test = run
    return prop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    args = parser.parse_args()
    counts = dict.fromkeys(PROPERTIES, 0)
    props = {name: counted(prop, counts, name) for name, prop in PROPERTIES.items()}
    start = time.monotonic()
    rounds = 0
    while time.monotonic() - start < args.seconds:
        for name, prop in props.items():
            prop()   # raises (with the shrunk failing input) if a property breaks
        rounds += 1
        print(f"{time.monotonic() - start:6.0f} s  round {rounds}: " +
              ", ".join(f"{n} {c}" for n, c in counts.items()), flush=True)
    print(f"tried {sum(counts.values())} inputs in {time.monotonic() - start:.0f} s, no failure: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
