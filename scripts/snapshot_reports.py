"""Write every bundled sample's report as the user sees it, to compare two versions of the code
byte for byte: `python scripts/snapshot_reports.py DIR` writes, per `samples/*/expected.json`
sample, its JSON report and its terminal, Markdown and HTML renderings, and the `timeline` and
`formats` commands' output; `diff -r BEFORE AFTER` then shows any change a refactor made."""
from __future__ import annotations

import sys
from pathlib import Path

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
RENDERINGS = ("json", "terminal", "markdown", "html")


def snapshot(out: Path) -> int:
    from correlator.cli import app
    runner = CliRunner()
    samples = sorted(p.parent for p in (ROOT / "samples").glob("*/expected.json"))
    for sample in samples:
        folder = out / sample.name
        folder.mkdir(parents=True, exist_ok=True)
        for fmt in RENDERINGS:
            shown = runner.invoke(app, ["analyze", str(sample / "logs"), "--format", fmt, "--color", "never"])
            (folder / f"report.{fmt}").write_text(f"exit {shown.exit_code}\n{shown.output}")
        shown = runner.invoke(app, ["timeline", str(sample / "logs"), "--limit", "0", "--one-job"])
        (folder / "timeline.txt").write_text(f"exit {shown.exit_code}\n{shown.output}")
    (out / "formats.txt").write_text(runner.invoke(app, ["formats"]).output)
    return len(samples)


if __name__ == "__main__":
    print(f"{snapshot(Path(sys.argv[1]))} samples written to {sys.argv[1]}")
