"""Kubernetes pod status saved as JSON (`kubectl get pod(s) -o json`): how each container ended.

`status.containerStatuses[].state.terminated` (and `lastState.terminated`, the instance before a
restart) -> one `exits` row each: reason (OOMKilled -> oom_killed), exitCode, finishedAt (UTC),
host = the pod name. A pod-level `status.reason` (Evicted, DeadlineExceeded) is a row as well.
Every line of the file is kept in `events`. Text renderings (describe, yaml) are line formats in
formats/kubernetes.toml.
"""
from __future__ import annotations

import json
import re

import polars as pl

from .text import clean
from .results import FileResult, WholeFileParser, add_line_events, file_lines

_POD_KIND = re.compile(rb'"kind"\s*:\s*"(?:Pod|PodList|List)"')
_REASONS = {"OOMKilled": "oom_killed", "Error": "error", "Completed": "completed",
            "ContainerCannotRun": "container_cannot_run", "DeadlineExceeded": "deadline_exceeded",
            "Evicted": "evicted", "StartError": "start_error"}


def _claims_pod_json(path: str, head: bytes) -> bool:
    return head.lstrip().startswith(b"{") and _POD_KIND.search(head) is not None


def _reason(raw: str | None) -> str | None:
    return _REASONS.get(raw, raw.lower() if raw else None)


def _line_of(lines: list[str], needle: str) -> int:
    """1-based line of the first line containing `needle` (compact JSON: line 1)."""
    return next((i for i, text in enumerate(lines, 1) if needle in text), 1)


def _terminations(pod: dict, lines: list[str]) -> list[dict]:
    name = (pod.get("metadata") or {}).get("name")
    status = pod.get("status") or {}
    rows = []
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        for which in ("state", "lastState"):
            term = (cs.get(which) or {}).get("terminated")
            if not term:
                continue
            code = term.get("exitCode")
            rows.append({
                "line": _line_of(lines, f'"finishedAt": "{term.get("finishedAt")}"'), "host": name,
                "exit_code": code, "signal": term.get("signal"), "reason": _reason(term.get("reason")),
                "ts": term.get("finishedAt"),
                "text": f'{name}/{cs.get("name")} {which}: {term.get("reason")} exitCode={code} {term.get("message") or ""}'.strip(),
            })
    if status.get("reason"):
        rows.append({"line": _line_of(lines, f'"reason": "{status["reason"]}"'), "host": name, "exit_code": None,
                     "signal": None, "reason": _reason(status["reason"]), "ts": None,
                     "text": f'{name}: {status["reason"]} {status.get("message") or ""}'.strip()})
    return rows


def parse_pod_json(data: bytes, result: FileResult) -> None:
    doc = json.loads(data.decode("utf-8", errors="replace"))
    lines = file_lines(data, result)
    add_line_events(result, lines, "k8s_pod_json", "k8s")
    pods = doc.get("items", []) if doc.get("kind") != "Pod" else [doc]
    texts = lines["text"].to_list()
    rows = [r for pod in pods if isinstance(pod, dict) and pod.get("kind", "Pod") == "Pod" for r in _terminations(pod, texts)]
    if not rows:
        return
    schema = {"line": pl.Int64, "host": pl.String, "exit_code": pl.Int64, "signal": pl.Int64,
              "reason": pl.String, "ts": pl.String, "text": pl.String}
    table = pl.DataFrame(rows, schema=schema).with_columns(
        file=pl.lit(result.path), source=pl.lit("kubernetes"), text=clean(pl.col("text")),
        ts=pl.col("ts").str.to_datetime("%Y-%m-%dT%H:%M:%S%#z", strict=False, time_zone="UTC"))
    result.add("exits", table.to_arrow())


POD_JSON = WholeFileParser("k8s_pod_json", _claims_pod_json, parse_pod_json)
