#!/usr/bin/env bash
# Render a whole HTML report (not only its first screen) to one PNG with headless chromium, offline.
# Usage: scripts/screenshot_html.sh REPORT.html OUT.png [WIDTH]   (WIDTH in css pixels, default 1200)
set -euo pipefail
if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTH]" >&2
  exit 2
fi
if ! command -v chromium >/dev/null; then
  apt-get install -y chromium >&2
fi
out=$(realpath -m "$2")
python3 "$(dirname "$0")/screenshot_html.py" "$1" "$out" "${3:-1200}" >&2
test -s "$out"
echo "$out"
