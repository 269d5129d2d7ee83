#!/usr/bin/env bash
# Render an HTML report to a PNG with Debian's headless chromium, fully offline.
# Usage: scripts/screenshot_html.sh REPORT.html OUT.png
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 REPORT.html OUT.png" >&2
  exit 2
fi
report=$(realpath "$1")
out=$(realpath -m "$2")
if ! command -v chromium >/dev/null; then
  apt-get install -y chromium >&2
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --screenshot="$out" --window-size=1400,1800 \
  "file://$report" >&2
test -s "$out"
echo "$out"
