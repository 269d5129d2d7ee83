"""The HTML report as a person reads it: the culprit's op and the divergence labelled on the chart,
a per-rank progress plot, file:line linked to its line in an embedded excerpt, nothing said only by
a hover tooltip, and a screenshot of the whole page (headless Chromium, when installed)."""
from __future__ import annotations

import copy
import json
import re
import shutil
import struct
import subprocess
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from correlator.pipeline import analyze
from correlator.report import render

ROOT = Path(__file__).parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "reports"


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def samples() -> dict[str, dict]:
    names = ("tr-stalled_rank-4", "tr-straggler-4", "tr-shape_mismatch-4-detail")
    return {name: analyze(ROOT / "samples" / name / "logs").report for name in names}


class Page(HTMLParser):
    """What a reader sees (text outside <title>, <style>), what only a tooltip says (<title> inside
    the SVGs), the links and the anchors."""

    def __init__(self, document: str):
        super().__init__()
        self.visible, self.tooltips, self.links, self.ids = [], [], [], {}
        self._stack: list[str] = []
        self._current_id: list[str | None] = []
        self.feed(document)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag not in ("br", "meta", "line", "circle", "rect", "path"):
            self._stack.append(tag)
            self._current_id.append(attrs.get("id"))
            if attrs.get("id"):
                self.ids[attrs["id"]] = ""
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])

    def handle_endtag(self, tag):
        if self._stack and self._stack[-1] == tag:
            self._stack.pop()
            self._current_id.pop()

    def handle_data(self, data):
        if "title" in self._stack and "svg" in self._stack:
            self.tooltips.append(data)
        elif "style" not in self._stack and "title" not in self._stack:
            self.visible.append(data)
            for anchor in self._current_id:
                if anchor:
                    self.ids[anchor] += data

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.visible).split())


def svg_texts(document: str) -> list[str]:
    """The visible <text> of the SVG charts."""
    return [unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", document)]


# --- the chart labels the culprit's op and the divergence -------------------------------------------

def test_the_chart_labels_the_culprits_op_and_the_divergence(samples):
    document = render(samples["tr-shape_mismatch-4-detail"], "html")
    texts = svg_texts(document)
    assert any(t.startswith("diverged at ALLREDUCE #12 (detail_seq) on PG 0: numel 2 on ranks 0-2; numel 3 on rank 3")
               for t in texts), texts
    assert "ALLREDUCE #12 on PG 0: numel 3 (others 2)" in texts            # on the culprit's row
    assert "class='t-divergence'" in document


def test_a_never_issued_collective_is_labelled_on_the_culprits_row():
    report = load("missing_collective_4")
    texts = svg_texts(render(report, "html"))
    assert any(t.startswith("diverged at ALLREDUCE #42") and "rank 2 never issued it" in t for t in texts), texts
    culprit = [t for t in texts if t.endswith(": never issued it")]
    assert culprit, texts


def test_an_op_mismatch_names_both_ops_on_the_culprits_row():
    report = load("missing_collective_4")
    report["divergence"]["groups"] = [{"ranks": [0, 1, 3], "op": "ALLREDUCE", "numel": 1024, "dtype": "Float"},
                                      {"ranks": [2], "op": "BROADCAST", "numel": 1024, "dtype": "Float"}]
    for entry in report["ranks"]:
        if entry["rank"] == 2:
            entry["last_collective"] = {**entry["last_collective"], "op": "BROADCAST", "seq": 42}
    texts = svg_texts(render(report, "html"))
    assert any("op ALLREDUCE on ranks 0-1,3; op BROADCAST on rank 2" in t for t in texts), texts
    assert any(t.startswith("BROADCAST #42") and t.endswith("others ALLREDUCE") for t in texts), texts


# --- the progress plot ------------------------------------------------------------------------------

def _progress_svg(document: str) -> str:
    start = document.index("aria-label='training step of each rank against aligned time'")
    return document[start:document.index("</svg>", start)]


def test_a_stall_shows_on_the_progress_plot(samples):
    report = samples["tr-stalled_rank-4"]
    svg = _progress_svg(render(report, "html"))
    assert "★ rank 2: last step 3" in svg and "ranks 0-1,3: last step 3" in svg
    # the others lived on after their last step (waiting for rank 2) until their timeouts: dashed
    assert svg.count("class='p-wait'") == 3 + 1  # and the legend's
    assert "ended: timeout" in svg and "ended: killed" in svg


def test_a_straggler_shows_on_the_progress_plot(samples):
    svg = _progress_svg(render(samples["tr-straggler-4"], "html"))
    assert "★ rank 2: 0.300 s per step" in svg and "ranks 0-1,3: 0.000 s per step" in svg
    assert "★ rank 2: last step 8" in svg


def test_no_progress_lines_no_plot():
    report = load("missing_collective_4")
    report["timeline"] = [e for e in report["timeline"] if e.get("kind") != "progress"]
    assert "no progress plot" in render(report, "html")


# --- file:line links to an embedded excerpt -----------------------------------------------------------

@pytest.mark.parametrize("name", ["tr-stalled_rank-4", "tr-shape_mismatch-4-detail"])
def test_every_file_line_links_to_its_line_in_the_excerpt(samples, name):
    report = samples[name]
    document = render(report, "html")
    page = Page(document)
    for item in report["evidence"][:20]:
        where = f"{item['file']}:{item['line']}"
        link = re.search(r"<a class='loc' href='#([^']+)'><code>" + re.escape(where) + "</code></a>", document)
        assert link, where
        anchor = link.group(1)
        assert anchor in page.ids, anchor
        shown = " ".join(page.ids[anchor].split())
        assert shown.startswith(str(item["line"])) and " ".join(item["text"].split())[:80] in shown, (where, shown)
    assert page.links and all(link[1:] in page.ids for link in page.links)


# --- nothing only in a tooltip --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tr-stalled_rank-4", "tr-straggler-4", "tr-shape_mismatch-4-detail"])
def test_nothing_is_said_only_by_a_tooltip(samples, name):
    page = Page(render(samples[name], "html"))
    visible = page.text
    assert page.tooltips
    for tooltip in page.tooltips:
        tooltip = " ".join(tooltip.split())
        if ": end " in tooltip:  # a band: how it ended (the legend's colours, the rank states) and its last collective
            label, _, rest = tooltip.partition(": end ")
            end, _, last = rest.partition(", last collective ")
            assert f"ended: {end}" in visible, tooltip
            assert last in ("none", "unknown", "mixed") or last in visible, tooltip
        elif ": last collective " in tooltip:
            assert tooltip.split(": last collective ", 1)[1] in visible, tooltip
        else:  # a dot: an event (time, rank, kind, text), listed in the timeline table
            time, rest = tooltip.split(" ", 1)
            text = re.sub(r"\s*\(\+\d+ more events here\)$", "", rest.partition(":")[2].strip()).rstrip("…")[:60]
            assert time in visible and text in visible, tooltip


def test_the_timeline_table_lists_every_event_of_the_report(samples):
    report = samples["tr-stalled_rank-4"]
    document = render(report, "html")
    assert f"Timeline events (all {len(report['timeline'])} of the report)" in document


# --- a screenshot of the whole page -----------------------------------------------------------------------

@pytest.mark.skipif(not shutil.which("chromium"), reason="needs chromium (apt-get install -y chromium)")
def test_the_screenshot_script_renders_the_whole_page(samples, tmp_path):
    report = copy.deepcopy(samples["tr-stalled_rank-4"])
    page = tmp_path / "r.html"
    page.write_text(render(report, "html"))
    shot = tmp_path / "r.png"
    run = subprocess.run([str(ROOT / "scripts" / "screenshot_html.sh"), str(page), str(shot)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    # the page is longer than any one window: the excerpt at its end is in the picture too
    assert width == 1200 and height > 2400, (width, height)
