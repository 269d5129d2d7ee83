"""Rewrite tests/realworld/known_wrong.toml from a score run: every case the product gets wrong
now, with what is wrong (`python scripts/realworld_score.py | python scripts/known_wrong.py`).
A case leaves the list when it is right; a fix that makes one wrong shows in the test first."""
import re
import sys
from pathlib import Path

OUT = Path(__file__).parent.parent / "tests" / "realworld" / "known_wrong.toml"
rows = []
for line in sys.stdin:
    m = re.match(r"^(?:WRONG|CRASH)\s+(\S+)\s.*?(?:--\s*(.*))?$", line.rstrip("\n"))
    if m:
        rows.append((m[1], (m[2] or "crash").replace("\\", "/").replace('"', "'")))
OUT.write_text("# Real-world cases the product gets wrong today, and what is wrong (scripts/known_wrong.py).\n"
               + "".join(f'"{name}" = "{why}"\n' for name, why in rows))
print(f"{len(rows)} known wrong -> {OUT}")
