"""TOML files read the way Python reads its modules: parsed once, then loaded from a marshal copy
in `__pycache__` beside them while the file's size and time stay the same.

The formats, rules and remedies are ~200 kB of TOML; tomllib takes 50 ms to parse them, a twentieth
of the second a paste's verdict may take, on every run. Where `__pycache__` cannot be written (a
read-only install), the file is parsed each time, as before."""
from __future__ import annotations

import marshal
import os
import tomllib
from pathlib import Path

# Bumped when the copy's layout changes, so an old copy is never read as a new one.
_LAYOUT = b"correlator-toml-1\n"


def load(path: Path) -> dict:
    stat = path.stat()
    key = _LAYOUT + f"{stat.st_size} {stat.st_mtime_ns}\n".encode()
    copy = path.parent / "__pycache__" / f"{path.name}.marshal"
    try:
        held = copy.read_bytes()
        if held.startswith(key):
            return marshal.loads(held[len(key):])
    except (OSError, ValueError, EOFError, TypeError):
        pass
    doc = tomllib.loads(path.read_text())
    _keep(copy, key, doc)
    return doc


def _keep(copy: Path, key: bytes, doc: dict) -> None:
    """Writes the copy through a temporary name, so a reader never sees half of it."""
    try:
        data = key + marshal.dumps(doc)
        copy.parent.mkdir(exist_ok=True)
        partial = copy.with_name(f"{copy.name}.{os.getpid()}")
        partial.write_bytes(data)
        partial.replace(copy)
    except (OSError, ValueError):  # read-only, or a value marshal cannot hold (a TOML date)
        pass
