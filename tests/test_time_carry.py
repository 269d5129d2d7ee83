"""Lines without a time of their own take one (parsers/multiline.py: carry_time): a rank's tagged
lines from its own stream, an untagged continuation from the line its file printed before it, a
launcher's report from nobody else's."""
from __future__ import annotations

from pathlib import Path

from correlator.pipeline import _close, parse_job

CONSOLE = """\
I0502 09:32:19.602000 61 site-packages/torch/distributed/elastic/agent/server/api.py:533] [default] Starting worker group
[rank1]:[E502 09:41:17.330871229 ProcessGroupNCCL.cpp:2084] [Rank 1] Collective WorkNCCL(SeqNum=9811, OpType=ALLREDUCE, NumelIn=268800, NumelOut=268800, Timeout(ms)=30000) raised the following async exception: NCCL error: remote process exited or there was a network error
ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
Last error:
srun: error: node7: task 1: Aborted (core dumped)
"""


def _times(tmp_path: Path) -> dict[int, tuple]:
    log = tmp_path / "console.log"
    log.write_text(CONSOLE)
    parsed = parse_job(log)
    try:
        return {line: (ts, how) for line, ts, how in
                parsed.con.execute("select line, ts, ts_inferred from events").fetchall()}
    finally:
        _close(parsed)


def test_an_untagged_continuation_takes_the_time_of_the_tagged_line_before_it(tmp_path):
    times = _times(tmp_path)
    assert times[3][1] == "carried" and times[3][0] == times[2][0]
    assert times[3][0] != times[1][0]   # not the agent's earlier untagged line


def test_a_launchers_report_takes_no_time_from_a_rank(tmp_path):
    times = _times(tmp_path)
    assert times[5][0] != times[2][0]   # srun's line keeps to the untagged stream's own times

