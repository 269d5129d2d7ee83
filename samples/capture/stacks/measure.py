"""The transfer score: the product's verdict on every stack sample against its expected.json, and the lines it
leaves unparsed. The only script of this harness that reads logs (through the product itself).

Usage (from the repository root, product installed in .venv):
  python3 samples/capture/stacks/measure.py [--json FILE] [NAME ...]
"""
import argparse
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent.parent
REPO = SAMPLES.parent
CORRELATOR = REPO / ".venv" / "bin" / "correlator"
sys.path.insert(0, str(HERE))
from capture import SAMPLE_LIST  # noqa: E402

SEQNUM_COUNTERS = ("pg_seq", "fr_seq", "detail_seq")


def analyze(logs: Path) -> dict:
    out = subprocess.run([str(CORRELATOR), "analyze", str(logs), "--format", "json"], capture_output=True, text=True)
    return json.loads(out.stdout)


def unparsed(logs: Path) -> list[dict]:
    out = subprocess.run([str(CORRELATOR), "parse", str(logs), "--table", "events", "--format", "json"],
                         capture_output=True, text=True).stdout
    rows = (json.loads(line) for line in out.splitlines() if line.strip())
    return [r for r in rows if r["kind"] == "other"]


WRAPPER = re.compile(r"^(\[default\d+\]:|\[1,\d+\]<std(out|err)>:|\d+: )")


def shape(text: str) -> str:
    text = WRAPPER.sub("", text)
    text = re.sub(r"0x[0-9a-f]+", "0xH", text)
    text = re.sub(r"\d+", "N", text)
    return text.strip()[:90]


def divergence_verdict(got: dict | None, want: dict | None) -> str:
    if not want:
        return "-" if not got else f"extra ({got.get('counter')} {got.get('seq')})"
    if not got:
        return "missing"
    if got.get("counter") in SEQNUM_COUNTERS:
        return "right" if (got["pg"], got["seq"]) == (want["pg"], want["seq"]) else f"wrong ({got['counter']} {got['seq']})"
    return f"other counter ({got.get('counter')} {got.get('seq')})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows, shapes = [], defaultdict(lambda: defaultdict(list))
    for sample in SAMPLE_LIST:
        if args.names and sample.name not in args.names:
            continue
        path = SAMPLES / sample.name
        if not (path / "expected.json").exists():
            continue
        want = json.loads((path / "expected.json").read_text())
        report = analyze(path / "logs")
        v = report["verdict"]
        leftovers = unparsed(path / "logs")
        for row in leftovers:
            shapes[sample.stack][shape(row["text"])].append((sample.name, row["file"], row["line"], row["text"]))
        ok_kind = v["kind"] == want["kind"]
        ok_culprits = sorted(v["culprit_ranks"]) == sorted(want["culprit_ranks"])
        # what tests/test_accuracy.py also accepts: the right culprits, low confidence, the right kind as the alternative
        ambiguous = (not (ok_kind and ok_culprits) and ok_culprits and v["confidence"] == "low"
                     and want["kind"] in v.get("alternative_kinds", []))
        rows.append({
            "sample": sample.name, "stack": sample.stack, "launcher": sample.launcher,
            "want_kind": want["kind"], "want_culprits": want["culprit_ranks"], "want_div": want["divergence"],
            "got_kind": v["kind"], "got_culprits": v["culprit_ranks"], "confidence": v["confidence"],
            "alternative_kinds": v.get("alternative_kinds", []), "rule": v.get("rule"),
            "got_div": report.get("divergence") and {k: report["divergence"].get(k) for k in ("pg", "counter", "seq")},
            "div": divergence_verdict(report.get("divergence"), want["divergence"]),
            # the logs print a SeqNum-like counter (watchdog SeqNum, DETAIL, Flight Recorder)
            "printed": bool({g["counter"] for g in report.get("process_groups") or []} & set(SEQNUM_COUNTERS)),
            "right": ok_kind and ok_culprits, "accepted": ok_kind and ok_culprits or ambiguous, "lines": report["job"]["lines"],
            "lines_unparsed": report["job"]["lines_unparsed"], "unparsed_rows": len(leftovers),
        })
    fmt = lambda c: ",".join(map(str, c)) or "-"  # noqa: E731
    print("| sample | expected kind | exp. culprits | got kind | got culprits | conf. | ok | div. seq exp. | div. got | lines / unparsed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        got_div = f"{r['got_div']['counter']} {r['got_div']['seq']}" if r["got_div"] else "-"
        print(f"| {r['sample']} | {r['want_kind']} | {fmt(r['want_culprits'])} | {r['got_kind']} | {fmt(r['got_culprits'])} | "
              f"{r['confidence']} | {'yes' if r['right'] else 'accepted (ambiguous)' if r['accepted'] else '**no**'} | {r['want_div']['seq'] if r['want_div'] else '-'} | "
              f"{got_div} ({r['div']}) | {r['lines']} / {r['lines_unparsed']} |")
    print()
    per = defaultdict(lambda: [0, 0, 0, 0, 0, 0, 0])
    order = sorted({r["stack"] for r in rows}, key=["hf", "accel", "lightning", "ddp", "fsdp"].index)
    for r in rows:
        for key in (r["stack"], f"launcher {r['launcher']}", "all"):
            per[key][0] += r["right"]
            per[key][1] += r["accepted"]
            per[key][2] += 1
            if r["want_div"]:
                per[key][4] += 1
                per[key][3] += r["div"] == "right"
                if r["printed"]:
                    per[key][6] += 1
                    per[key][5] += r["div"] == "right"
    print("| group | kind + culprits right | accepted by test_accuracy (adds low-confidence ambiguous) | divergence right (where expected has one) | divergence right where the logs print a counter |")
    print("|---|---|---|---|---|")
    for key in [*order, "launcher torchrun", "launcher mpirun", "launcher srun", "all"]:
        ok, acc, n, dok, dn, pok, pn = per[key]
        print(f"| {key} | {ok}/{n} | {acc}/{n} | {dok}/{dn} | {pok}/{pn} |")
    print()
    for stack, by_shape in shapes.items():
        print(f"### unparsed line shapes: {stack}")
        for s, hits in sorted(by_shape.items(), key=lambda kv: -len(kv[1])):
            name, file, line, text = hits[0]
            print(f"- {len(hits)}x in {len({h[0] for h in hits})} sample(s), e.g. `{name}/logs/{file}:{line}`: `{text[:160]}`")
        print()
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "shapes": {k: {s: h[:3] for s, h in v.items()} for k, v in shapes.items()}}, indent=1))


if __name__ == "__main__":
    main()
