"""A whole `ncclras` report, built from the format strings of NVIDIA/nccl v2.32.3
src/ras/client_support.cc, parses line by line with nothing left unrecognised."""
import polars as pl

from correlator.parsers.engine import FileContext, parse_batch

CTX = FileContext.for_mtime("ncclras.txt", 1796000000.0)

# 2 nodes x 4 processes x 1 GPU; rank 7 lags on AllReduce, one process is dead, one rank aborted.
HUNG_JOB_REPORT = """\
NCCL version 2.32.3 compiled with CUDA 12.9
CUDA runtime version 12090, driver version 12090

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      2          4            1          8        8

Communicators... (0.004s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2         4         8         7     ABORT  INCOMPLETE,ERROR,MISMATCH

Errors
======

INCOMPLETE
  Missing communicator data from 1 job process
  Process 4106 on node 10.0.0.2 managing GPU 2

DEAD
  1 job process is considered dead (unreachable via the RAS network)
  Process 4106 on node 10.0.0.2 managing GPU 2

#0-0 (78db921d1c117b4a) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 6 -- GPU 2 managed by process 4106 on node 10.0.0.2

#0-0 (78db921d1c117b4a) ERROR
  Asynchronous error on 1 rank
  Rank 3 reported Remote process error -- GPU 3 managed by process 4103 on node 10.0.0.1

Warnings
========

TIMEOUT
  Encountered 2 communication timeouts while gathering communicator data

#0-0 (78db921d1c117b4a) MISMATCH
  Communicator ranks have different status
  6 ranks have status RUNNING
  Rank 3 has status ABORT -- GPU 3 managed by process 4103 on node 10.0.0.1
  Communicator ranks have different AllReduce operation counts
  6 ranks have launched up to operation 64
  Rank 7 has launched up to operation 60 -- GPU 3 managed by process 4107 on node 10.0.0.2

"""

# The job summary of a job whose nodes run different numbers of processes (and GPUs per process).
UNEVEN_JOB_SUMMARY = """\
Job summary
===========

  Nodes  Processes
          per node
      3          4
      1          2

         Processes         GPUs
                    per process
                12            1
                 2            2

  Nodes  Processes         GPUs
(total)    (total)      (total)
      4         14           16
"""


def _parse(report: str):
    df, emitted = parse_batch(pl.Series(report.splitlines(), dtype=pl.String), 1, CTX)
    rows = {spec.name: frame for spec, frame in emitted}
    return df, rows


def test_hung_job_report_has_no_unrecognised_line():
    df, _ = _parse(HUNG_JOB_REPORT)
    assert df.filter(pl.col("kind") == "other")["text"].to_list() == []


def test_uneven_job_summary_has_no_unrecognised_line():
    df, _ = _parse(UNEVEN_JOB_SUMMARY)
    assert df.filter(pl.col("kind") == "other")["text"].to_list() == []


def test_report_names_the_lagging_rank_and_its_process():
    _, rows = _parse(HUNG_JOB_REPORT)
    lagging = rows["nccl_ras_rank_ops"].row(0, named=True)
    assert (lagging["comm_rank"], lagging["count"], lagging["pid"], lagging["host"]) == (7, 60, 4107, "10.0.0.2")
    majority = rows["nccl_ras_rank_group"].filter(pl.col("count").is_not_null()).row(0, named=True)
    assert (majority["n_ranks"], majority["count"]) == (6, 64)
    assert rows["nccl_ras_mismatch"]["op"].drop_nulls().to_list() == ["ALLREDUCE"]


def test_report_names_dead_process_and_job_shape():
    df, rows = _parse(HUNG_JOB_REPORT)
    assert rows["nccl_ras_dead"]["count"].to_list() == [1]
    assert set(rows["nccl_ras_process"]["pid"].to_list()) == {4106}
    summary = rows["nccl_ras_job_summary"].row(0, named=True)
    assert (summary["nodes"], summary["procs"], summary["gpus"]) == (2, 8, 8)
    group = rows["nccl_ras_comm_group"].row(0, named=True)
    assert (group["nranks"], group["status"], group["errors"]) == (8, "ABORT", "INCOMPLETE,ERROR,MISMATCH")
    assert rows["nccl_ras_comm_problem"]["problem"].to_list() == ["INCOMPLETE", "ERROR", "MISMATCH"]
    assert df.filter(pl.col("kind").str.starts_with("nccl_ras"))["source"].unique().to_list() == ["nccl_ras"]
