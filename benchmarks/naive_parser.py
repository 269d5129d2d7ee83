"""The baseline: a straightforward Python line loop with the NCCL and c10 regexes of
/work/shared/formats.md, building lists of rows (what one writes first, before any engine).

    python benchmarks/naive_parser.py JOB_DIR     prints a JSON summary of what it found
"""
from __future__ import annotations

import json
import os
import re
import sys

NCCL_PREFIX = re.compile(
    r"^(?:\[(?P<ts>[^\]]+)\] )?(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) (?:\[(?P<dev>\d+)\] "
    r"(?:(?P<file>[\w./-]+):(?P<line>\d+)(?: \((?P<func>\w+)\))? NCCL (?P<lvl>WARN)|NCCL (?P<lvl2>INFO)"
    r"|(?P<ms>[\d.]+) (?P<tfunc>\w+):(?P<tline>\d+) NCCL (?P<lvl3>TRACE))|NCCL (?P<lvl4>CALL)) (?P<msg>.*)$")
NCCL_COLL = re.compile(
    r"(?P<op>\w+): opCount (?P<opcount>[0-9a-f]+) sendbuff (?P<send>0x[0-9a-f]+|\(nil\)) "
    r"recvbuff (?P<recv>0x[0-9a-f]+|\(nil\)) count (?P<count>\d+) datatype (?P<dtype>\d+) op (?P<redop>\d+) "
    r"root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-f]+) \[nranks=(?P<nranks>\d+)\] stream (?P<stream>0x[0-9a-f]+|\(nil\))")
NCCL_INIT = re.compile(
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+) .*- Init (?P<phase>START|COMPLETE)")
C10_NEW = re.compile(
    r"^(?:\[rank(?P<grank>\d+)\]:)?\[(?P<sev>[IWEF])(?P<mmdd>\d{3,4}) (?P<hms>\d\d:\d\d:\d\d)\.(?P<frac>\d{9}) "
    r"(?P<file>[^:\]]+):(?P<line>\d+)\] (?P<msg>.*)$")
C10_OLD = re.compile(r"^\[(?P<sev>[IWEF]) (?P<file>[^:\]]+):(?P<line>\d+)\] (?P<msg>.*)$")
WATCHDOG = re.compile(
    r"\[Rank (?P<rank>\d+)\] (?:Watchdog caught|Caught) collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
    r"OpType=(?P<op>\w+)(?:, NumelIn=(?P<nin>-?\d+), NumelOut=(?P<nout>-?\d+))?, Timeout\(ms\)=(?P<to>\d+)\) "
    r"ran for (?P<ran>\d+) milliseconds before timing out\.")
PROGRESS = re.compile(r"\[rank (?P<rank>\d+)\] step (?P<step>\d+)/(?P<steps>\d+)")


def parse_file(path: str, rows: dict[str, list]) -> None:
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = NCCL_PREFIX.match(line)
            if m:
                msg = m["msg"]
                c = NCCL_COLL.match(msg)
                if c:
                    rows["collectives"].append((path, number, m["host"], int(m["pid"]), c["op"], int(c["opcount"], 16),
                                                int(c["count"]), c["dtype"], c["comm"], int(c["nranks"])))
                    continue
                i = NCCL_INIT.search(msg)
                if i:
                    rows["comms"].append((path, number, m["host"], int(m["pid"]), i["comm"], int(i["rank"]), i["phase"]))
                continue
            m = C10_NEW.match(line) or C10_OLD.match(line)
            if m:
                w = WATCHDOG.search(m["msg"])
                if w:
                    rows["timeouts"].append((path, number, int(w["rank"]), int(w["seq"]), w["op"]))
                continue
            p = PROGRESS.search(line)
            if p:
                rows["progress"].append((path, number, int(p["rank"]), int(p["step"])))


def main(job_dir: str) -> dict:
    rows: dict[str, list] = {"collectives": [], "comms": [], "timeouts": [], "progress": []}
    for root, _, files in os.walk(job_dir):
        for name in sorted(files):
            if name.endswith((".log", ".txt", ".out", ".err")):
                parse_file(os.path.join(root, name), rows)
    return {name: len(found) for name, found in rows.items()}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
