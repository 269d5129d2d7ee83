"""Render a whole HTML page to one PNG with headless Chromium, offline, through the DevTools
protocol on a pipe (standard library only): the page is laid out at WIDTH css pixels, measured,
and captured to its full height, not only the first window's worth.

Usage: python3 scripts/screenshot_html.py REPORT.html OUT.png [WIDTH]   (scripts/screenshot_html.sh wraps it)
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe"]
MAX_HEIGHT = 30_000  # css pixels; a longer page is cut there (the capture says so on stderr)


def _as_3_and_4(read_end: int, write_end: int) -> None:
    """In the child: its pipe ends as fds 3 and 4, where --remote-debugging-pipe expects them."""
    read_copy, write_copy = os.dup(read_end), os.dup(write_end)  # out of the way of 3 and 4
    os.dup2(read_copy, 3)
    os.dup2(write_copy, 4)


class DevTools:
    """Chromium's DevTools protocol over --remote-debugging-pipe: fd 3 in, fd 4 out, NUL-separated JSON."""

    def __init__(self, chromium: str, profile: str):
        ours_in, theirs_out = os.pipe()   # we read what chromium writes on its fd 4
        theirs_in, ours_out = os.pipe()   # chromium reads its fd 3
        self.process = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=lambda: _as_3_and_4(theirs_in, theirs_out))
        os.close(theirs_in)
        os.close(theirs_out)
        self.reader, self.writer = os.fdopen(ours_in, "rb"), os.fdopen(ours_out, "wb")
        self.next_id, self.buffer, self.events = 0, b"", []

    def _receive(self) -> dict:
        while b"\0" not in self.buffer:
            chunk = self.reader.read1(1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: str | None = None, **params) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.writer.write(json.dumps(message).encode() + b"\0")
        self.writer.flush()
        while True:
            reply = self._receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {method} within {timeout:g} s")
            self.events.append(self._receive())

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def screenshot(report: Path, out: Path, width: int = 1200) -> tuple[int, int]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not chromium:
        raise SystemExit("chromium not found (apt-get install -y chromium)")
    profile = tempfile.mkdtemp(prefix="correlator-shot-")
    tools = DevTools(chromium, profile)
    try:
        target = tools.call("Target.createTarget", url="about:blank")["targetId"]
        session = tools.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        tools.call("Page.enable", session)
        tools.call("Emulation.setDeviceMetricsOverride", session, width=width, height=900, deviceScaleFactor=1, mobile=False)
        tools.call("Page.navigate", session, url=report.resolve().as_uri())
        tools.wait_for("Page.loadEventFired")
        size = tools.call("Page.getLayoutMetrics", session)["cssContentSize"]
        height = min(int(size["height"] + 0.999), MAX_HEIGHT)
        if size["height"] > MAX_HEIGHT:
            print(f"page is {size['height']:.0f} px high: cut at {MAX_HEIGHT}", file=sys.stderr)
        tools.call("Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1,
                   mobile=False)
        shot = tools.call("Page.captureScreenshot", session, format="png", captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        out.write_bytes(base64.b64decode(shot["data"]))
        return width, height
    finally:
        tools.close()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__.strip().splitlines()[-1])
    w, h = screenshot(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) == 4 else 1200)
    print(f"{sys.argv[2]} ({w}x{h})")
