"""Events that span lines: Python tracebacks, one event per exception, per rank stream.

Ranks interleave in a console capture, so lines are grouped by the stream they came from (the
torchrun tee / srun label / c10 rank) before blocks are cut. Vectorised over the batch.
"""
from __future__ import annotations

import polars as pl

# Records of one physical line share its number (parsers/records.py): their order is the frame's.
_ORDER = ["line", "idx"]
EXCEPTION_LINE = r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure|Abort|Warning|Timeout)\b(?::.*)?$"
_FRAME = r'^  File "(?P<frame_file>[^"]*)", line (?P<frame_line>\d+), in (?P<frame_fn>.*)$'
# A frame of the process group's set-up (init_process_group, its rendezvous and store): an
# exception raised under one is the set-up's failure (`init_error`), not the rank's own crash.
_SETUP_FRAME = r'^  File "[^"]*", line \d+, in (?:init_process_group|_env_rendezvous_handler|_tcp_rendezvous_handler|_create_c10d_store|_store_based_barrier|rendezvous)$'


def stream_key() -> pl.Expr:
    """The stream a line came from: its file and the rank / tee / srun label / pod inside it."""
    return pl.format("{}|{}", pl.col("file"), pl.coalesce(
        pl.col("tee_local_rank").cast(pl.String), pl.col("task").cast(pl.String),
        pl.col("rank").cast(pl.String), pl.col("pod"), pl.lit("")))


def mark_tracebacks(df: pl.DataFrame) -> pl.DataFrame:
    """Set kind traceback_start / traceback_frame / traceback on the lines of each traceback.

    An exception line that a format already recognised (a gloo timeout, a DDP mismatch) keeps
    its kind; any other becomes `traceback`, text `Type: message (in fn at file:line)`: the
    rank's own error, not a consequence of another's; or `init_error` where a frame of the
    traceback is the process group's set-up (_SETUP_FRAME), a lost connection there too."""
    opening = "Traceback (most recent call last):"
    # a logger's message may carry the traceback's first line (sglang's `Scheduler hit an
    # exception: Traceback (most recent call last):`): its prefix marks the message, the frames
    # after it come bare, so the block is the stream of the line after it, with the message's rank
    glued = pl.col("text").str.ends_with(opening) & ~pl.col("text").str.starts_with(opening)
    start = pl.col("text").str.starts_with(opening) | glued
    if not df.select(start.any()).item():
        return df
    # a piece of a record cited whole elsewhere (parsers/records.py) neither starts nor ends one
    indented = pl.col("text").str.starts_with("  ") | (pl.col("text") == "") | (pl.col("kind") == "line_piece")
    work = df.with_columns(
        _stream=pl.when(glued).then(stream_key().shift(-1).over("file", order_by=_ORDER)).otherwise(stream_key()),
    ).with_columns(
        _block=start.cast(pl.Int64).cum_sum().over("_stream", order_by=_ORDER),
    ).with_columns(
        _ends=(~indented & ~start).cast(pl.Int64).cum_sum().over(["_stream", "_block"], order_by=_ORDER),
    )
    in_block = pl.col("_block") > 0
    frame = in_block & (pl.col("_ends") == 0) & ~start
    exc = in_block & (pl.col("_ends") == 1) & ~indented & ~start & pl.col("text").str.contains(EXCEPTION_LINE)
    innermost = (
        work.filter(frame & pl.col("text").str.contains(_FRAME))
        .group_by(["_stream", "_block"]).agg(pl.col("text").sort_by("line").last().alias("_frame"),
                                             pl.col("text").str.contains(_SETUP_FRAME).any().alias("_setup"))
        .with_columns(pl.col("_frame").str.extract_groups(_FRAME).alias("_f"))
        .select("_stream", "_block", pl.format(" (in {} at {}:{})", pl.col("_f").struct.field("frame_fn"),
                                                  pl.col("_f").struct.field("frame_file"),
                                                  pl.col("_f").struct.field("frame_line")).alias("_where"), "_setup")
    )
    work = work.join(innermost, on=["_stream", "_block"], how="left").with_columns(
        rank=pl.when(frame | exc).then(pl.coalesce(
            "rank", pl.col("rank").filter(glued).first().over(["_stream", "_block"]))).otherwise(pl.col("rank")))
    return work.with_columns(
        kind=pl.when(start & pl.col("kind").is_in(["other"])).then(pl.lit("traceback_start"))
        .when(frame & (pl.col("kind") == "other")).then(pl.lit("traceback_frame"))
        .when(exc & pl.col("kind").is_in(["other", "peer_connection_lost"]) & pl.col("_setup").fill_null(False))
        .then(pl.lit("init_error"))
        .when(exc & (pl.col("kind") == "other")).then(pl.lit("traceback"))
        .otherwise(pl.col("kind")),
        text=pl.when(exc & (pl.col("kind") == "other")).then(pl.col("text") + pl.col("_where").fill_null(""))
        .otherwise(pl.col("text")),
        source=pl.when(exc | frame | start).then(pl.lit("python")).otherwise(pl.col("source")),
    ).drop("_stream", "_block", "_ends", "_where", "_setup")


LAUNCHER_SOURCES = ("slurm", "mpirun", "torchelastic", "k8s", "orchestrator")


def carry_time(df: pl.DataFrame) -> pl.DataFrame:
    """Lines without a time of their own (traceback lines, C++ frames, bare NCCL lines) take the
    time of the last timed line of the same stream, flagged `carried` in ts_inferred. A line no
    prefix marks takes the last timed line of its file: c10 marks only the first line of a message
    (`[rank1]:[E502 09:41:17 ...] ... raised the following async exception`), its continuation
    lines and C++ frames come bare, and the file's last line before them is that message. Not a
    launcher's or a scheduler's own report (srun's `task 0: Terminated`): it follows whatever line
    came before it, at a time of its own that it does not print."""
    unmarked = pl.all_horizontal(pl.col(c).is_null() for c in ("tee_local_rank", "task", "rank", "pod")) \
        & ~pl.col("source").is_in(LAUNCHER_SOURCES)
    carried = pl.when(unmarked).then(pl.col("ts").forward_fill().over("file", order_by=_ORDER)) \
        .otherwise(pl.col("ts").forward_fill().over(stream_key(), order_by=_ORDER))
    return df.with_columns(
        ts_inferred=pl.when(pl.col("ts").is_null() & carried.is_not_null())
        .then(pl.lit("carried")).otherwise(pl.col("ts_inferred")),
        ts=carried,
    )


def join_partial_records(df: pl.DataFrame) -> pl.DataFrame:
    """A CRI log splits a line longer than the runtime's buffer into `P` records ended by an `F`
    record: the first record of each run gets the whole line; the others keep their own text and
    the kind `cri_continuation`, so no byte is lost and nothing is matched twice."""
    partial = pl.col("partial") == "P"
    if not df.select(partial.any()).item():
        return df
    key = ["file", "stream"]
    cri = df.filter(pl.col("partial").is_not_null()).select("idx", "line", *key, "partial", "text")
    cri = cri.with_columns(
        _start=(pl.col("partial").shift(1).over(key, order_by=_ORDER) != "P").fill_null(True),
    ).with_columns(_run=pl.col("_start").cast(pl.Int64).cum_sum().over(key, order_by=_ORDER))
    whole = cri.group_by(*key, "_run").agg(pl.col("text").sort_by("line").str.join("").alias("_whole"))
    cri = cri.join(whole, on=[*key, "_run"], how="left")
    firsts = cri.filter(pl.col("_start")).select("idx", "_whole")
    rest = cri.filter(~pl.col("_start")).select("idx")
    return df.join(firsts, on="idx", how="left").with_columns(
        text=pl.coalesce("_whole", "text"),
        kind=pl.when(pl.col("idx").is_in(rest["idx"].implode())).then(pl.lit("cri_continuation"))
        .otherwise(pl.col("kind")),
    ).drop("_whole").sort("idx")
