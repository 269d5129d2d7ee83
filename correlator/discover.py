"""Find the job's files: walk the directory, open compressed files and archive members in place
(never extracting to disk), sniff binaries, and read what the path says about host and rank.

Paths inside archives are shown as `archive.tar.gz!member`; a member's name never becomes a path
on this machine, so `../x` and `/etc/x` members are harmless (they are listed, not written).
"""
from __future__ import annotations

import gzip
import io
import os
import re
import stat
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

import zstandard

from .parsers.sources import Source

_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.zst")
SMALL_MEMBER = 1 << 20              # archive members up to this size are kept in memory...
MEMBERS_IN_MEMORY = 256 << 20       # ...up to this many bytes per archive


@dataclass
class Skipped:
    path: str
    reason: str
    size: int | None = None


def _safe_name(name: str) -> str:
    """A display name for untrusted text (archive member names, file names): controls and the
    undecodable bytes of a non-UTF-8 name (surrogate escapes) become `?`."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]", "?", name)


_HOST_DIR = re.compile(r"^(?:node|host|gpu|worker|compute|nid|slurmd-)[\w.-]*?\d+$", re.I)
# Ray's worker logs, `worker-<worker id, 56 hex>-<job id>-<pid>.err`: the last number is a pid.
_RAY_WORKER_LOG = re.compile(r"^(?:python-core-)?worker-[0-9a-f]{16,}-", re.I)
_POD = re.compile(r"^(?P<pod>[a-z0-9][a-z0-9.-]*-(?:master|worker|launcher)-\d+)(?:[-_.].*)?$")


def path_hints(rel: str) -> dict:
    """host / rank / local_rank that a path states (torchrun, srun %t, DeepSpeed, k8s layouts)."""
    parts = rel.replace("!", "/").split("/")
    name = parts[-1]
    hints: dict = {}
    for i, part in enumerate(parts[:-1]):
        if part.startswith("attempt_") and i + 1 < len(parts) - 1 and parts[i + 1].isdigit():
            hints["local_rank"] = int(parts[i + 1])      # torchrun: attempt_N/<local_rank>/stdout.log
        elif _HOST_DIR.match(part):
            hints["host"] = part
        elif m := _POD.match(part):
            hints["host"] = m["pod"]
    if m := re.search(r"(?:^|[_.-])rank[_-]?(\d+)(?:[_.-]|$)", name, re.I):
        hints["rank"] = int(m[1])
    elif (m := re.match(r"^.+-\d+-(\d+)\.(?:out|err|log)$", name)) and not _RAY_WORKER_LOG.match(name):
        hints["rank"] = int(m[1])                        # srun --output=%x-%j-%t.out
    if m := re.match(r"^slurmd-([\w.-]+?)\.log", name):
        hints["host"] = m[1]
    elif m := _POD.match(name):
        hints["host"] = m["pod"]
    return hints


def _decompressor(name: str, raw: Callable[[], BinaryIO]) -> Callable[[], BinaryIO]:
    if name.endswith(".gz"):
        return lambda: gzip.GzipFile(fileobj=raw())
    if name.endswith(".zst"):
        return lambda: zstandard.ZstdDecompressor().stream_reader(raw(), read_across_frames=True)
    return raw


def _display(name: str) -> str:
    for suffix in (".gz", ".zst"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _open_tar(archive: Path) -> tarfile.TarFile:
    """A sequential reader of the archive: one pass, never a seek back (a seek back in a
    compressed archive decompresses it again from the start)."""
    if archive.name.endswith(".zst"):
        raw = zstandard.ZstdDecompressor().stream_reader(open(archive, "rb"), read_across_frames=True)
        return tarfile.open(fileobj=raw, mode="r|")
    return tarfile.open(archive, mode="r|*")


def _reread_member(archive: Path, index: int) -> Callable[[], BinaryIO]:
    """An opener for a member too large to keep in memory: reads the archive again up to it."""
    def read() -> BinaryIO:
        tar = _open_tar(archive)
        for i, member in enumerate(tar):
            if i == index:
                return tar.extractfile(member)
        raise EOFError(f"archive member {index} is gone")
    return read


def _tar_members(archive: Path, rel: str) -> tuple[list[Source], list[Skipped]]:
    """The archive's regular files; small ones are read in the listing pass itself, so that an
    archive of 10,000 small logs costs one decompression, not 10,000."""
    sources, skipped = [], []
    in_memory = 0
    try:
        with _open_tar(archive) as tar:
            for index, m in enumerate(tar):
                shown = f"{rel}!{_safe_name(m.name)}"
                if m.isdir():
                    continue
                if not m.isfile():
                    skipped.append(Skipped(shown, "archive member is a link or special file"))
                    continue
                if m.size <= SMALL_MEMBER and in_memory + m.size <= MEMBERS_IN_MEMORY:
                    data = tar.extractfile(m).read()
                    in_memory += len(data)
                    raw = (lambda data=data: io.BytesIO(data))
                else:
                    raw = _reread_member(archive, index)
                sources.append(Source(shown, _decompressor(m.name, raw), m.size, float(m.mtime),
                                      path_hints(f"{rel}/{m.name}")))
    except (tarfile.TarError, OSError, EOFError, zlib.error, zstandard.ZstdError) as e:
        where = f"after {len(sources)} member(s)" if sources else "before any member"
        skipped.append(Skipped(rel, f"unreadable archive, {where}: {type(e).__name__}"))
    return sources, skipped


def _walk(root: str, skipped: list[Skipped]) -> Iterator[tuple[str, os.DirEntry]]:
    """(path relative to root, entry) of everything but directories, in sorted order, links not
    followed. Iterative: a hostile tree may be deeper than Python's recursion limit."""
    pending = [""]
    while pending:
        rel_dir = pending.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir)) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            skipped.append(Skipped(_safe_name(rel_dir or "."), f"unreadable directory: {e.strerror}"))
            continue
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(rel)
            else:
                yield rel, entry
        pending += reversed(subdirs)


def discover(root: Path) -> tuple[list[Source], list[Skipped]]:
    """Every readable file under `root` (archives expanded in place) and every skipped one.
    A symbolic link is followed to a regular file inside the tree (Kubernetes' log directories
    are links); one that leads out of the tree is skipped and says where it points, so a hostile
    tree cannot make the report quote /etc/shadow."""
    sources: list[Source] = []
    skipped: list[Skipped] = []
    real_root = os.path.realpath(root)
    # Opened by absolute path: another process (a Ray worker) opens the same file whatever its
    # working directory.
    for rel_path, entry in _walk(os.path.abspath(root), skipped):
        rel = _safe_name(rel_path)
        try:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                target = os.path.realpath(entry.path)
                if os.path.commonpath([real_root, target]) != real_root:
                    skipped.append(Skipped(rel, f"symbolic link to outside the given directory ({_safe_name(target)})"))
                    continue
                st = os.stat(entry.path)
        except OSError as e:
            what = "symbolic link that loops or leads nowhere" if entry.is_symlink() else "unreadable"
            skipped.append(Skipped(rel, f"{what}: {e.strerror}"))
            continue
        _add_file(entry.path, rel, entry.name, st, sources, skipped)
    return sources, skipped


def _add_file(path: str, rel: str, name: str, st: os.stat_result, sources: list[Source], skipped: list[Skipped]) -> None:
    """A regular file (archives: their members) as sources; anything else is skipped with why."""
    if stat.S_ISDIR(st.st_mode):
        skipped.append(Skipped(rel, "symbolic link to a directory (not followed)"))
    elif not stat.S_ISREG(st.st_mode):
        skipped.append(Skipped(rel, "not a regular file (fifo, socket or device)"))
    elif name.endswith(_TAR_SUFFIXES):
        found, lost = _tar_members(Path(path), rel)
        sources += found
        skipped += lost
    else:
        raw = (lambda p=path: open(p, "rb"))
        sources.append(Source(rel, _decompressor(name, raw), st.st_size, st.st_mtime, path_hints(_display(rel))))


def discover_paths(paths: list[Path]) -> tuple[list[Source], list[Skipped]]:
    """The sources of a job given as directories, files and archives (the caller checked they
    exist). One directory alone keeps paths relative to it; with several inputs each file is
    shown under the name it was given by, so two `rank0.log` of two directories stay apart."""
    if len(paths) == 1 and paths[0].is_dir():
        return discover(paths[0])
    sources: list[Source] = []
    skipped: list[Skipped] = []
    names = [p.name or str(p) for p in paths]
    for path, name in zip(paths, names):
        label = _safe_name(name if names.count(name) == 1 else str(path))
        if path.is_dir():
            found, lost = discover(path)
            sources += [_under(label, s) for s in found]
            skipped += [Skipped(f"{label}/{s.path}", s.reason, s.size) for s in lost]
            continue
        try:  # a file named on the command line is read through its link, wherever it points
            st = os.stat(path)
        except OSError as e:
            skipped.append(Skipped(label, f"unreadable: {e.strerror}"))
            continue
        _add_file(os.path.abspath(path), label, path.name, st, sources, skipped)
    return sources, skipped


def _under(label: str, src: Source) -> Source:
    return Source(f"{label}/{src.path}", src.open, src.size, src.mtime, path_hints(_display(f"{label}/{src.path}")))
