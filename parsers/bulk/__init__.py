"""The lines that make a log big, parsed and counted without the general engine.

NCCL's per-collective COLL line is 90% and more of a COLL-heavy log, and its layout is fixed:
`<prefix> NCCL INFO <op>: opCount <hex> sendbuff ... comm 0x... [nranks=N] ...`. Three
mechanisms, one module each, change speed, never results (tests/test_bulk.py and the
differential properties of tests/test_fuzz.py compare them with the engine alone):

  lane.py    the bulk lane: the spec that declares `bulk` is read by position over the whole
             batch; its prefix is parsed by the engine once per distinct prefix, not once per
             line. A line the lane reads otherwise than the engine would (a prefix that is not
             the spec's header, or is timed; a tail its regex refuses) goes the general way.
             Of its events only the last line per stream and `keep_last_by` is kept (evidence and
             timeline need the line where a rank stopped); every line is still counted.
  window.py  the per-key window (`correlator analyze` without --full): of the lines that repeat,
             only the last `window` of their key are typed, the others counted (`lines_skimmed`).
             A hang shows where each rank stopped, and that is at the end of its stream.
  skim.py    the block skim: blocks of a batch's bytes that byte counts prove to hold one
             repeated kind, each key with `window` lines after it, are counted without being
             decoded or split (1 GB of COLL lines costs a few byte scans, not 5M typed lines).

Glossary (the words the three modules use, and only in these senses):
  bulk spec   the one format with `bulk` (nccl_coll; spec.load refuses a second)
  prefix      a line's text before the spec's `bulk.after` (`host:pid:tid [dev]` under whatever
              launcher wrapper), the same on every line of a process
  key         what the window counts lines by: for COLL lines the process (the prefix's last
              `process_chars`) and the communicator (`window_chars` after `window_after`); for
              progress steps (a `skim` word and a number) the text up to the number
  window      the last `window` lines of each key, which are typed
  outside     a line not in the window; it is left out: counted, never typed ("skimmed")
  probe       a made-up line, a prefix + `bulk.after` + "-", standing for the `_lines` lines
              with that prefix: the engine parses it once for all of them, and a per-file
              wrapper decision (srun's label on 30% of the lines) weighs it by `_lines`
  block       a range of whole lines of a batch's bytes, SKIM_BLOCK bytes or more
  group       the lines whose keys a block counts together: one probe's (COLL) or one key's (steps)

A kept untimed line takes the time of the last timed line before it in its stream (COLL lines
are all timed or all untimed in a stream NCCL writes, and the last line of a run of left-out
blocks is read, so only a hostile mix sees an older time).
"""
from .lane import finish_bulk, take_bulk
from .window import window_batch

__all__ = ["finish_bulk", "take_bulk", "window_batch"]
