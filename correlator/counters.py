"""The collective counters and fields as each log prints them, so that a number in the report can
be grepped for, and the report can say which field of a collective differs and both values."""
from __future__ import annotations

import re

from .ranges import compress

# How each log prints its counter, so that the report's number can be grepped for: DETAIL's
# SequenceNumber is 0-based (kept +1 inside, to line up with SeqNum), NCCL's opCount is hex.
COUNTER_LABELS = {"pg_seq": "SeqNum={}", "detail_seq": "SequenceNumber={}", "fr_seq": "collective_seq_id={}",
                  "fr_p2p_seq": "p2p_seq_id={}", "nccl_opcount": "opCount {}", "desync_seq": "collective #{}",
                  "progress_step": "step {}"}

# Where each counter is printed: what a rank lacks when it has no row of that counter.
COUNTER_SOURCES = {"pg_seq": "watchdog line", "detail_seq": "DETAIL line", "fr_seq": "Flight Recorder entry",
                   "fr_p2p_seq": "Flight Recorder entry", "nccl_opcount": "NCCL COLL line", "desync_seq": "desync report"}

# NCCL prints a collective's datatype as its ncclDataType_t number (src/nccl.h.in, the same
# numbering in every NCCL 2.x; 9 from 2.10 on, 10-11 from 2.24 on).
NCCL_DTYPES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64", 6: "float16",
               7: "float32", 8: "float64", 9: "bfloat16", 10: "fp8e4m3", 11: "fp8e5m2"}

# How each log prints a collective's op, size and dtype, where the counter's lines say them:
# the watchdog's WorkNCCL(SeqNum=15, OpType=ALLREDUCE, NumelIn=2, ...), DETAIL's
# CollectiveFingerPrint(OpType=..., TensorShape=[2], TensorDtypes=Float), the dump entries as the
# report quotes them (op=... numel_in=... dtype=...), NCCL's `AllReduce: opCount c ... count 4 datatype 7`.
FIELD_LABELS = {
    "pg_seq": {"op": "OpType={}", "numel": "NumelIn={}", "dtype": "dtype {}"},
    "detail_seq": {"op": "OpType={}", "shape": "TensorShape=[{}]", "numel": "numel {}", "dtype": "TensorDtypes={}"},
    "fr_seq": {"op": "op={}", "numel": "numel_in={}", "dtype": "dtype={}"},
    "nccl_opcount": {"op": "{}", "numel": "count {}", "dtype": "datatype {}"},
}
GENERIC_FIELDS = {"op": "{}", "numel": "numel {}", "dtype": "dtype {}"}
# NCCL's name of each op in its COLL lines (`AllReduce: opCount ...`)
NCCL_OPS = {"ALLREDUCE": "AllReduce", "BROADCAST": "Broadcast", "REDUCE": "Reduce", "ALLGATHER": "AllGather",
            "REDUCESCATTER": "ReduceScatter", "ALLTOALL": "AllToAll", "SEND": "Send", "RECV": "Recv",
            "GATHER": "Gather", "SCATTER": "Scatter"}


def seq_label(counter: str | None, seq: int | None, printed: str | None = None) -> str | None:
    """`SeqNum=15`, `SequenceNumber=11`, `opCount 4ebf`: the counter as the log writes it
    (`printed`: as a dump states it, where it is not the number itself)."""
    printed = printed if printed is not None else seq_printed(counter, seq)
    return None if printed is None else COUNTER_LABELS.get(counter, "#{}").format(printed)


# The other ways a line prints a counter's number ({} the number), after its usual label: the
# watchdog's and the PG status's `work: 48117`, the Flight Recorder analyzer's `collective 318`, a
# trainer's `step:  10`. The report says the number as the line it cites prints it.
PRINTED_FORMS = {
    "pg_seq": [r"work sequence id: {}", r"last enqueued (?:NCCL )?work: {}", r"detected by watchdog at work: {}",
               r"collective #{}", r"work: {}"],
    "fr_seq": [r"(?<=joining )collective(?:,? sequence number:)? {}", r"Collective sequence number: {}", r"sequence number:? {}"],
    # a tqdm bar counts `9/9 [00:02<00:00, ...]`
    "progress_step": [r"(?i)\b(?:global[_ ])?(?:step|iteration|iter)[ =:#]*{}", r"(?<![\d/.]){}/\d+(?=\s*\[)"],
}
_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def printed_label(counter: str | None, seq: int | None, text: str | None, printed: str | None = None) -> str | None:
    """The counter as `text` (the line the report cites for it) prints it: its usual label
    (`SeqNum=15`) where the line has it, else the line's own words for it (`last enqueued work:
    48119`, `collective 318`, `step:  10`), else the usual label."""
    label = seq_label(counter, seq, printed)
    if label is None or not text:
        return label
    number = printed if printed is not None else seq_printed(counter, seq)
    text = _ESCAPES.sub("", text)
    end = r"(?![0-9a-fA-F])" if counter == "nccl_opcount" else r"(?!\d)"
    if re.search(re.escape(label) + end, text):
        return label
    for form in PRINTED_FORMS.get(counter or "", []):
        found = re.search(form.format(re.escape(number)) + end, text)
        if found:
            return found.group(0)
    return label


def seq_printed(counter: str | None, seq: int | None) -> str | None:
    if seq is None:
        return None
    if counter == "detail_seq":
        return str(seq - 1)
    if counter == "nccl_opcount":
        return format(seq, "x")
    return str(seq)


def dtype_name(counter: str | None, dtype: object) -> str | None:
    """A dtype by name: NCCL's number (`7`) as `float32`; any other as the log names it."""
    if dtype is None:
        return None
    text = str(dtype)
    if counter == "nccl_opcount" and text.isdigit():
        return NCCL_DTYPES.get(int(text), text)
    return text


def printed_fields(counter: str | None, group: dict) -> dict[str, str]:
    """What the log prints of a group's collective, field by field: {"op": "OpType=ALLREDUCE",
    "numel": "TensorShape=[2]", "dtype": "TensorDtypes=Float"}; NCCL's datatype number with its name."""
    labels = FIELD_LABELS.get(counter or "", GENERIC_FIELDS)
    out = {}
    if group.get("op") is not None:
        op = NCCL_OPS.get(str(group["op"]), str(group["op"])) if counter == "nccl_opcount" else group["op"]
        out["op"] = labels["op"].format(op)
    if group.get("shape") is not None and "shape" in labels:
        out["numel"] = labels["shape"].format(group["shape"])
    elif group.get("numel") is not None:
        out["numel"] = labels["numel"].format(group["numel"])
    dtype = group.get("dtype_printed", group.get("dtype"))
    if dtype is not None:
        said = labels["dtype"].format(dtype)
        name = dtype_name(counter, dtype)
        out["dtype"] = f"{said} ({name})" if name != str(dtype) else said
    return out


def difference(counter: str | None, groups: list[dict], culprits=()) -> str | None:
    """Which field differs at a divergence and each side's value, as the log prints them:
    `rank 133 has count 50331648 where the others have count 25165824`; `rank 2 never issued it,
    where the others have OpType=ALLREDUCE`. None where nothing differs that the rows show."""
    groups = [g for g in groups if g.get("ranks")]
    if len(groups) < 2:
        return None
    culprits = set(culprits or ())
    mine = next((g for g in groups if culprits & set(g["ranks"])), None) \
        or min(groups, key=lambda g: (len(g["ranks"]), g["ranks"]))
    others = [g for g in groups if g is not mine]
    printed = {id(g): g.get("printed") or printed_fields(counter, g) for g in groups}
    issued = [g for g in groups if g.get("op") is not None]
    fields = [f for f in ("op", "numel", "dtype")
              if len({printed[id(g)].get(f) for g in issued}) > 1]

    def values(g: dict) -> str:
        said = [printed[id(g)].get(f) for f in fields or ("op",)]
        return ", ".join(s for s in said if s) or "?"

    who = _who(mine["ranks"])
    if len(others) == 1:
        theirs = f"the others have {values(others[0])}" if others[0].get("op") is not None else "the others never issued it"
    else:
        theirs = "; ".join(f"{_who(g['ranks'])} {_verb(g)} {values(g)}" if g.get("op") is not None
                           else f"{_who(g['ranks'])} never issued it" for g in others[:3])
        theirs += f"; +{len(others) - 3} more groups" if len(others) > 3 else ""
    if mine.get("op") is None:
        return f"{who} never issued it, where {theirs}"
    if not fields:
        return None
    return f"{who} {_verb(mine)} {values(mine)} where {theirs}"


def _who(ranks: list[int]) -> str:
    text = compress(ranks, 60)
    return f"rank {text}" if len(ranks) == 1 else f"ranks {text}"


def _verb(group: dict) -> str:
    return "has" if len(group["ranks"]) == 1 else "have"
