"""The collective counters as each log prints them, so that a number in the report can be grepped for."""
from __future__ import annotations

# How each log prints its counter, so that the report's number can be grepped for: DETAIL's
# SequenceNumber is 0-based (kept +1 inside, to line up with SeqNum), NCCL's opCount is hex.
COUNTER_LABELS = {"pg_seq": "SeqNum={}", "detail_seq": "SequenceNumber={}", "fr_seq": "collective_seq_id={}",
                  "fr_p2p_seq": "p2p_seq_id={}", "nccl_opcount": "opCount {}", "desync_seq": "collective #{}",
                  "progress_step": "step {}"}


def seq_label(counter: str | None, seq: int | None, printed: str | None = None) -> str | None:
    """`SeqNum=15`, `SequenceNumber=11`, `opCount 4ebf`: the counter as the log writes it
    (`printed`: as a dump states it, where it is not the number itself)."""
    printed = printed if printed is not None else seq_printed(counter, seq)
    return None if printed is None else COUNTER_LABELS.get(counter, "#{}").format(printed)


def seq_printed(counter: str | None, seq: int | None) -> str | None:
    if seq is None:
        return None
    if counter == "detail_seq":
        return str(seq - 1)
    if counter == "nccl_opcount":
        return format(seq, "x")
    return str(seq)
