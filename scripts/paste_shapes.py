"""How the real-world verdicts stand up to the shapes a paste takes on its way to a bug report.

Every one-file case of tests/realworld/ that the product gets right is rewritten as a terminal, a
mail client or a web page would hand it over (cut at a terminal's width, CRLF line ends, ANSI
colours, quoted in a reply, its first fifth lost, blank lines doubled, indented as a Markdown code
block) and analysed again; a shape keeps a case when the verdict is still right. Prints, per shape,
how many cases keep their verdict and which do not; a figure, not an assertion
(tests/test_wrapped.py asserts the terminal widths).

    .venv/bin/python scripts/paste_shapes.py [SHAPE ...]
"""
from __future__ import annotations

import json
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from realworld_check import ROOT, cut_at_width, indented, quoted  # noqa: E402

from correlator.pipeline import analyze  # noqa: E402


def _lines(change):
    return lambda text: "\n".join(change(line) for line in text.split("\n"))


SHAPES = {
    **{f"cut{width}": partial(cut_at_width, width=width) for width in (80, 120, 200)},
    "crlf": lambda text: text.replace("\n", "\r\n"),
    "ansi": _lines(lambda l: f"\x1b[33m{l}\x1b[0m" if "WARN" in l or "rror" in l else l),
    "quoted": quoted,
    "head_lost": lambda text: "\n".join(text.split("\n")[len(text.split("\n")) // 5:]),
    "blank_doubled": lambda text: text.replace("\n", "\n\n"),
    "indented": indented,
}


def right(verdict: dict, want: dict) -> bool:
    kinds = {want["kind"], *want.get("accept_kinds", [])}
    return verdict["culprit_ranks"] == sorted(want["culprit_ranks"]) and (
        verdict["kind"] in kinds or (verdict["confidence"] == "low" and bool(kinds & set(verdict["alternative_kinds"]))))


def main() -> None:
    names = sys.argv[1:] or list(SHAPES)
    kept: dict[str, list] = {name: [] for name in names}
    for case in sorted(p.parent for p in ROOT.glob("*/expected.json")):
        files = [p for p in (case / "logs").rglob("*") if p.is_file()]
        want = json.loads((case / "expected.json").read_text())
        if len(files) != 1 or not right(analyze(case / "logs").report["verdict"], want):
            continue
        text = files[0].read_text(errors="replace")
        for name in names:
            with tempfile.TemporaryDirectory() as where:
                (Path(where) / files[0].name).write_text(SHAPES[name](text))
                verdict = analyze(Path(where)).report["verdict"]
            kept[name].append((case.name, right(verdict, want), verdict["kind"], verdict["culprit_ranks"]))
    for name, rows in kept.items():
        lost = [r for r in rows if not r[1]]
        print(f"{name}: {len(rows) - len(lost)}/{len(rows)} keep their verdict")
        for case, _, kind, culprits in lost:
            print(f"    {case}: {kind} {culprits}")


if __name__ == "__main__":
    main()
