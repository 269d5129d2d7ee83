"""Print the score of the product on the real-world corpus (tests/realworld/): one line per case,
then the totals. `python scripts/realworld_score.py [CASE_NAME_SUBSTRING]`."""
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from realworld_check import cases, expectation, false_alarm, false_healthy, problems, thread  # noqa: E402

from correlator.pipeline import analyze  # noqa: E402


def main(pattern: str = "") -> None:
    right = crashes = healthy_wrong = alarms = 0
    chosen = [c for c in cases() if pattern in c.name]
    for case in chosen:
        want = expectation(case)
        started = time.perf_counter()
        try:
            report = analyze(case / "logs").report
        except Exception as e:  # a crash is a score, not an abort
            crashes += 1
            print(f"CRASH  {case.name}: {type(e).__name__}: {e}".splitlines()[0])
            traceback.print_exc(limit=3, file=sys.stderr)
            continue
        found = problems(report, want)
        right += not found
        healthy_wrong += false_healthy(report, want)
        alarms += false_alarm(report, want)
        v = report["verdict"]
        mark = "ok   " if not found else "WRONG"
        print(f"{mark}  {case.name}  [{thread(case)}]  got {v['kind']} {v['culprit_ranks']} ({v.get('rule')}, "
              f"{time.perf_counter() - started:.2f} s)" + ("" if not found else "  -- " + "; ".join(found)))
    threads = {thread(c) for c in chosen}
    families = {expectation(c)["family"] for c in chosen}
    print(f"\n{right}/{len(chosen)} right ({100 * right / max(1, len(chosen)):.0f}%), {crashes} crashes, "
          f"{healthy_wrong} false healthy, {alarms} false alarms; {len(threads)} threads, {len(families)} families")


if __name__ == "__main__":
    main(*sys.argv[1:])
