"""A report an engineer can check in ten seconds (issue #17, items 1-6): the evidence starts with
the lines that decide the verdict; every seq in the report's text is as the log prints it, naming
its counter, so grepping it finds the cited line; a mismatch names the field that differs and both
values; no broken text, and every sample's report is the same on every run; causes are never filed
as collateral; the remediation's `verify` lines are commands with the job's own values."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from html import unescape
from pathlib import Path

import pytest

from correlator import counters
from correlator.pipeline import analyze, parse_job
from correlator.report import render, view
from correlator.synth import JobSpec, generate_job

ROOT = Path(__file__).parent.parent
SAMPLES = sorted(p.parent for p in (ROOT / "samples").glob("*/expected.json"))


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    return {sample.name: analyze(sample / "logs").report for sample in SAMPLES}


@pytest.fixture(scope="module")
def nccl_512(tmp_path_factory) -> tuple[dict, dict]:
    """A 512-rank NCCL job (64 hosts) where rank 133 all-reduces twice the elements the others do."""
    root = tmp_path_factory.mktemp("nccl512")
    truth = generate_job(root, JobSpec(nranks=512, ranks_per_host=8, fault="mismatch", steps=6, seed=3))
    return truth, analyze(root / "logs").report


def location(item: dict) -> str:
    return f"{item['file']}:{item['line']}"


# --- 1. the evidence starts with the deciding lines --------------------------------------------

# For every bundled sample, the line its evidence must start with, and what that line is.
FIRST_LINE = {
    # gloo's size check on the receiver first (sized_apart_on_another_line; undecided: the clue to a mismatch)
    "slurm-collective_mismatch": "slurm-45.out:26",                        # rank 1: op.preamble.length <= op.nbytes. 1024 vs 512
    "slurm-missing_collective": "train-43-3.out:8",                        # rank 3: op.preamble.length <= op.nbytes. 512 vs 4
    # otherwise the error lines of the rank they come from, one of each kind: its own file's copy
    "tr-bn_eval_desync-4": "console.log:77",   # blocked_in_another_call: File "/work/torchenv/lib/python3.11/site-packages/torch/nn/p
    "tr-rank0_only_collective-4": "console.log:68",   # blocked_in_extra_barrier: File "/work/torchenv/lib/python3.11/site-packages/torch/dist
    "tr-rank0_only_collective-8": "console.log:125",   # blocked_in_extra_barrier: File "/work/torchenv/lib/python3.11/site-packages/torch/dist
    "tr-shape_mismatch-4": "console.log:69",   # left_behind_in_collective: File "/work/torchenv/lib/python3.11/site-packages/torch/dist
    "tr-shape_mismatch-8": "console.log:119",   # left_behind_in_collective: File "/work/torchenv/lib/python3.11/site-packages/torch/dist
    # a crash: the culprit's own error, else how its process died
    "slurm-crash_exception": "slurm-36.out:32",                            # rank 2: RuntimeError: corrupt batch
    "slurm-hang_at_exit": "slurm-1.out:46",                                # srun: StepId=1.0 task 2: running
    "slurm-crash_segfault": "slurm-37.out:1",                              # node2: task 3: Segmentation fault
    "slurm-crash_sigkill": "slurm-38.out:55",                              # node1: task 1: Killed
    "tr-crash_exception-4": "torchrun/none_w24hfrka/attempt_0/1/stderr.log:13",
    "tr-crash_exception-4-detail": "torchrun/none_2il2vs0i/attempt_0/1/stderr.log:28",   # the traceback's, not c10's copy
    "tr-crash_exception-8": "torchrun/none_uiu0ly9x/attempt_0/6/stderr.log:13",
    "tr-crash_sigkill-4": "console.log:24",                                # failed (exitcode: -9) local_rank: 2
    "tr-crash_sigkill-8": "console.log:44",                                # failed (exitcode: -9) local_rank: 3
    "tr-silent_exit-4": "console.log:24",                                  # failed (exitcode: 1) local_rank: 2, not a word of its own
    # a memory kill: the scheduler's own line
    "slurm-oom": "slurm-39.out:25",                                        # StepId=39.0 exceeded memory limit ..., being killed
    # the scheduler ended it: its step daemon's line (the one the summary quotes)
    "slurm-scancel_healthy": "slurmd-node1.log:3",                         # *** STEP 42.0 ON node1 CANCELLED AT ...
    "slurm-scheduler_time_limit": "slurmd-node1.log:3",                    # *** JOB 41 ON node1 CANCELLED ... TIME LIMIT ***
    # a stall seen in stack dumps: the culprit's innermost frame, outside any collective
    "slurm-stalled_rank_no_timeout": "slurm-40.out:49",                    # train.py, line 80 in sync_gradients
    # the runtime's own diagnosis
    "tr-ddp_param_mismatch-4": "torchrun/none_m2v3vkud/attempt_0/3/stderr.log:18",       # Rank 3 has 8 params
    "tr-ddp_param_mismatch-4-detail": "torchrun/none_kxst4jqk/attempt_0/3/stderr.log:21",
    "tr-ddp_param_mismatch-8": "torchrun/none_9qy2d971/attempt_0/6/stderr.log:18",
    "tr-shape_mismatch-4-detail": "torchrun/none_bp6cpqs5/attempt_0/3/stderr.log:56",    # Rank 3 ... TensorShape=[3]
    "tr-rank0_only_collective-4-detail": "torchrun/none_9d24bqtl/attempt_0/0/stderr.log:58",  # Rank 0 ... OpType=BARRIER
    "tr-stalled_rank-4-detail": "torchrun/none_8hted1vy/attempt_0/0/stderr.log:21",      # Rank 2 failed to pass monitoredBarrier
    # the culprit's line at the diverging collective
    "slurm-missing_collective_debug_detail": "slurm-44.out:269",           # [Rank 3] SequenceNumber=9 ... TensorShape=[1]
    "tr-missing_collective-4-detail": "torchrun/none_mzo1600i/attempt_0/2/stderr.log:22",  # SequenceNumber=11, OpType=BROADCAST
    "tr-op_order_mismatch-4-detail": "torchrun/none_s_jegr5v/attempt_0/1/stderr.log:21",   # SequenceNumber=11, OpType=BROADCAST
    "tr-missing_collective-4-fr": "flight_recorder/fr_trace_rank_2:16",    # collective_seq_id=16 op=BROADCAST
    "tr-op_order_mismatch-4-fr": "flight_recorder/fr_trace_rank_1:16",     # collective_seq_id=16 op=BROADCAST
    # the culprit never issued it: the others' line at the diverging collective
    "tr-stalled_rank-4-fr": "flight_recorder/fr_trace_rank_0:15",          # collective_seq_id=15 op=ALLREDUCE (rank 2: no dump)
    # no sequence numbers: the frame that names the culprit's call
    "tr-missing_collective-4": "console.log:86",                           # rank 2 ... in broadcast
    "tr-missing_collective-8": "console.log:263",                          # rank 5 ... in broadcast
    "tr-op_order_mismatch-4": "console.log:99",                            # rank 1 ... in broadcast
    # the culprit's last line: its last step (or its last collective)
    "tr-stalled_rank-4": "torchrun/none_9vdb7mm2/attempt_0/2/stderr.log:4",    # [rank 2] step 3/8
    "tr-stalled_rank-8": "torchrun/none_akgbu9cg/attempt_0/7/stderr.log:4",    # [rank 7] step 3/8
    "tr-uneven_inputs-4": "torchrun/none_t6ngp2sp/attempt_0/3/stderr.log:4",   # [rank 3] step 3/8
    "tr-uneven_inputs-8": "torchrun/none_lg0fmddv/attempt_0/2/stderr.log:4",   # [rank 2] step 3/8
    "tr-uneven_inputs-4-fr": "flight_recorder/fr_trace_rank_3:14",             # rank 3's last entry, collective_seq_id=14
    # a straggler: its last step (the others' last steps follow)
    "tr-straggler-4": "torchrun/none_0v5puch7/attempt_0/2/stderr.log:9",       # [rank 2] step 8/8 ... data_time 0.300s
    "tr-straggler-4-detail": "torchrun/none_dvuphytv/attempt_0/2/stderr.log:39",
    "tr-straggler-8": "torchrun/none_olm9zbfv/attempt_0/6/stderr.log:9",
    # healthy: the trainer's own word that it finished, else each rank's last step
    "tr-healthy-4": "torchrun/none_8ik9wkxm/attempt_0/0/stderr.log:10",       # [rank 0] training finished
    "tr-healthy-4-detail": "torchrun/none_f6i9mxvq/attempt_0/0/stderr.log:40",
    "tr-healthy-8": "torchrun/none_meqdt2qg/attempt_0/0/stderr.log:10",
    "slurm-healthy": "slurm-35.out:53",                                    # [rank 0] step 12/12
    # the stack captures (samples/capture/stacks), by the same conventions
    "lightning-torchrun-shape_mismatch-4": "torchrun/none_7l30y9l0/attempt_0/1/stderr.log:62",   # None: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tc
    "accel-mpirun-stalled_rank-4-fr": "flight_recorder/fr_trace_rank_0:19",   # behind_in_sequence: FR collective_seq_id=19 pg_id=0 op=BROADCAST profiling_name=gloo:broad
    "accel-mpirun-missing_collective-8": "console.log:405",   # blocked_in_another_call: File '/work/torchenv/lib/python3.11/site-packages/torch/distributed/di
    "ddp-srun-missing_collective-8": "slurm-9.out:291",   # blocked_in_another_call: File '/work/torchenv/lib/python3.11/site-packages/torch/distributed/di
    "hf-mpirun-op_order_mismatch-4": "console.log:142",   # blocked_in_another_call: File '/work/torchenv/lib/python3.11/site-packages/torch/distributed/di
    "lightning-mpirun-missing_collective-4": "console.log:373",   # blocked_in_another_call: File '/work/torchenv/lib/python3.11/site-packages/torch/distributed/di
    "accel-torchrun-rank0_only_collective-4": "console.log:139",   # blocked_in_extra_barrier: File '/work/torchenv/lib/python3.11/site-packages/torch/distributed/di
    "ddp-mpirun-rank0_only_collective-4": "console.log:56",   # blocked_in_extra_barrier: File '/work/torchenv/lib/python3.11/site-packages/torch/distributed/di
    "ddp-torchrun-healthy-4-detail": "console.log:231",   # common_mode_crash: exitcode  : -11 (pid: 23595)  (SIGSEGV)
    "ddp-torchrun-segfault_all-4": "console.log:65",   # common_mode_crash: exitcode  : -11 (pid: 22908)  (SIGSEGV)
    "hf-torchrun-healthy-4-detail": "console.log:240",   # common_mode_crash: exitcode  : -11 (pid: 10098)  (SIGSEGV)
    "lightning-torchrun-healthy-4-detail": "console.log:260",   # common_mode_crash: exitcode  : -11 (pid: 19621)  (SIGSEGV)
    "hf-mpirun-segfault_all-4": "console.log:51",   # common_mode_crash_first_reported: mpirun noticed that process rank 0 with PID 0 on node vm exited on sig
    "ddp-mpirun-shape_mismatch-8": "console.log:186",   # left_behind_in_collective: File '/work/torchenv/lib/python3.11/site-packages/torch/distributed/di
    "hf-torchrun-shape_mismatch-4": "torchrun/none_r_d28g9j/attempt_0/2/stderr.log:73",   # left_behind_in_collective: File '/work/torchenv/lib/python3.11/site-packages/torch/distributed/di
    "accel-torchrun-uneven_inputs-4": "torchrun/none_in4kr1kb/attempt_0/3/stderr.log:4",   # left_cleanly: accel_train - [RANK 3] process 3: step 3/8 loss=0.6921 data_time=0.000
    "fsdp-torchrun-uneven_inputs-4-fr": "flight_recorder/fr_trace_rank_1:33",   # left_cleanly: FR collective_seq_id=33 pg_id=0 op=BROADCAST profiling_name=gloo:broad
    "ddp-mpirun-uneven_inputs-4": "console.log:13",   # left_while_peers_lost_it: [rank 2] step 3/8 loss 1.3817 data_time 0.000s step_time 0.115s
    "ddp-srun-oom-4": "slurm-7.out:17",   # memory_kill: StepId=7.0 exceeded memory limit (1396355072 > 1258291200), being kill
    "hf-srun-oom-4": "slurm-2.out:56",   # memory_kill: StepId=2.0 exceeded memory limit (1432567808 > 1258291200), being kill
    "accel-torchrun-healthy-4": "torchrun/none_7zvt04wd/attempt_0/0/stderr.log:10",   # no_failure: accel_train - [RANK 0] process 0: training finished
    "ddp-mpirun-healthy-4": "console.log:38",   # no_failure: [rank 0] training finished
    "fsdp-srun-healthy-8": "slurm-12.out:78",   # no_failure: [rank 0] training finished
    "fsdp-torchrun-healthy-4": "torchrun/none_pcq6eeh8/attempt_0/0/stderr.log:10",   # no_failure: [rank 0] training finished
    "hf-torchrun-healthy-4": "torchrun/none_coqdx7s6/attempt_0/0/stderr.log:26",   # no_failure: Training completed. Do not forget to share your model on huggingface.c
    "lightning-mpirun-healthy-8": "console.log:116",   # no_failure: `Trainer.fit` stopped: `max_steps=8` reached.
    "lightning-torchrun-healthy-4": "console.log:64",   # no_failure: `Trainer.fit` stopped: `max_steps=8` reached.
    "accel-mpirun-crash_exception-4": "console.log:23",   # own_error_first: RuntimeError: corrupt record in /data/train-00002.tar at offset 81920 
    "accel-srun-crash_sigkill-4": "slurm-3.out:126",   # own_error_first: node2: task 2: Killed
    "ddp-mpirun-crash_sigkill-4": "console.log:72",   # own_error_first: mpirun noticed that process rank 3 with PID 0 on node vm exited on sig
    "ddp-srun-crash_exception-4": "slurm-6.out:20",   # own_error_first: RuntimeError: corrupt record in /data/train-00002.tar at offset 81920 
    "ddp-srun-srun_wait-4": "slurm-8.out:26",   # own_error_first: RuntimeError: eval shard /data/val-00003.tar: truncated file (in befor
    "fsdp-srun-crash_sigkill-4": "slurm-11.out:251",   # own_error_first: node2: task 3: Killed
    "fsdp-torchrun-crash_exception-8": "torchrun/none_v9_ege9c/attempt_0/4/stderr.log:11",   # own_error_first: RuntimeError: corrupt record in /data/train-00004.tar at offset 81920 
    "hf-torchrun-crash_exception-4": "torchrun/none_dkcq8xwe/attempt_0/1/stderr.log:31",   # own_error_first: RuntimeError: corrupt record in /data/train-00001.tar at offset 81920 
    "hf-torchrun-crash_sigkill-8": "console.log:206",   # own_error_first: failed (exitcode: -9) local_rank: 5 (pid: 9012) of binary: /work/torch
    "lightning-mpirun-crash_exception-4": "console.log:156",   # own_error_first: RuntimeError: corrupt record in /data/train-00003.tar at offset 81920 
    "lightning-srun-crash_sigkill-4": "slurm-4.out:226",   # own_error_first: node1: task 1: Killed
    "fsdp-torchrun-shape_mismatch-4-detail": "torchrun/none_7fhipkxw/attempt_0/3/stderr.log:89",   # runtime_named_mismatch: RuntimeError: Detected mismatch between collectives on ranks. Rank 3 i
    "accel-torchrun-op_order_mismatch-4-fr": "flight_recorder/fr_trace_rank_2:21",   # sequence_shifted_by_history: FR collective_seq_id=21 pg_id=0 op=BROADCAST profiling_name=gloo:broad
    "ddp-torchrun-op_order_mismatch-4-fr": "flight_recorder/fr_trace_rank_1:16",   # sequence_shifted_by_history: FR collective_seq_id=16 pg_id=0 op=BROADCAST profiling_name=gloo:broad
    "fsdp-mpirun-op_order_mismatch-4-fr": "flight_recorder/fr_trace_rank_2:43",   # sequence_shifted_by_history: FR collective_seq_id=43 pg_id=0 op=BROADCAST profiling_name=gloo:broad
    "fsdp-torchrun-missing_collective-4-detail": "torchrun/none_n45_0jzu/attempt_0/2/stderr.log:52",   # sequence_shifted_by_history: [Rank 2] Running collective: CollectiveFingerPrint(SequenceNumber=42, 
    "hf-torchrun-missing_collective-4-fr": "flight_recorder/fr_trace_rank_3:28",   # sequence_shifted_by_history: FR collective_seq_id=28 pg_id=0 op=BROADCAST profiling_name=gloo:broad
    "ddp-srun-stalled_rank-4": "slurm-10.out:16",   # silent_while_others_timed_out: [rank 2] step 3/8 loss 1.3817 data_time 0.000s step_time 0.124s
    "fsdp-mpirun-stalled_rank-4": "console.log:14",   # silent_while_others_timed_out: [rank 3] fsdp step=3/8 loss=1.3820 data_ms=0 iter_ms=165
    "hf-torchrun-stalled_rank-4": "torchrun/none__cetvcuu/attempt_0/2/stderr.log:7",   # silent_while_others_timed_out: rank 2 step 2/8: {'loss': 4.5461, 'data_time': 0.0, 'step_time': 0.04}
    "lightning-torchrun-stalled_rank-4": "torchrun/none__dj2r0q0/attempt_0/2/stderr.log:5",   # silent_while_others_timed_out: [rank: 2] Epoch 0, global step 2/8: train_loss=1.3928 data_time=0.000s
    "accel-torchrun-straggler-4": "torchrun/none_59a8vcdv/attempt_0/1/stderr.log:9",   # slow_rank: accel_train - [RANK 1] process 1: step 8/8 loss=0.6960 data_time=0.300
    "ddp-torchrun-straggler-8": "torchrun/none_z45eamh8/attempt_0/6/stderr.log:9",   # slow_rank: [rank 6] step 8/8 loss 1.3809 data_time 0.300s step_time 0.413s
    "fsdp-torchrun-straggler-4": "torchrun/none_b_71d6x9/attempt_0/1/stderr.log:9",   # slow_rank: [rank 1] fsdp step=8/8 loss=1.3723 data_ms=300 iter_ms=462
    "hf-torchrun-straggler-4": "torchrun/none_ihypk6d0/attempt_0/2/stderr.log:13",   # slow_rank: rank 2 step 8/8: {'loss': 4.5587, 'data_time': 0.3, 'step_time': 0.028
    "lightning-srun-straggler-4": "slurm-5.out:65",   # slow_rank: [rank: 2] Epoch 0, global step 8/8: train_loss=1.3703 data_time=0.300s
    "lightning-torchrun-straggler-4": "torchrun/none_ly2qkaxj/attempt_0/3/stderr.log:11",   # slow_rank: [rank: 3] Epoch 0, global step 8/8: train_loss=1.3703 data_time=0.300s
    # the gloo Flight Recorder rule captures (samples/capture/torchrun, 2026-12-01)
    "tr-shape_mismatch-2-fr": "flight_recorder/fr_trace_rank_1:16",        # fr_split_without_majority: rank 1's ALLREDUCE numel_in=3 at seq 16
    "tr-shape_mismatch-4-fr": "flight_recorder/fr_trace_rank_3:16",        # sequence_split: rank 3's ALLREDUCE numel_in=3 at seq 16, the others' 2
    "ddp-mpirun-after_loop_barrier-4": "console.log:39",      # waited_after_others_left: rank 0's last step before the barrier only it ran
    "ddp-torchrun-after_loop_barrier-4": "torchrun/none_kulvq6ba/attempt_0/0/stderr.log:9",  # the same under torchrun
    "ddp-mpirun-bad_master_addr-4": "console.log:2",          # init_errors: c10d cannot resolve MASTER_ADDR
    "ddp-mpirun-error_all-4-untagged": "console.log:9",       # crash_of_unknown_rank: the FileNotFoundError, no rank tag
    "ddp-mpirun-oom_before_init-4-untagged": "console.log:12",  # error_of_the_one_failed_rank: DefaultCPUAllocator, no rank tag
    "ddp-mpirun-missing_ranks-4": "console.log:47",           # init_errors: DistStoreError, 2/4 clients joined
    "ddp-mpirun-missing_ranks_cancelled-4": "console.log:1",  # members_never_appeared: rank 0 states world_size=4
    "ddp-torchrun-gather_shape_mismatch-4": "torchrun/none_emwo4jzo/attempt_0/2/stderr.log:6",  # shape_print_minority: rank 2's shape=[15, 4]
    "ddp-torchrun-rank0_eval_broadcast-4": "torchrun/none_m2eib78s/attempt_0/0/stderr.log:4",   # silent_while_others_timed_out: rank 0's last line
    "fsdp-torchrun-op_order_pair-2-detail": "torchrun/none_pezzkzwz/attempt_0/0/stderr.log:89",  # runtime_named_mismatch_without_majority: DETAIL's mismatch
    "tr-op_order_mismatch-2-fr": "flight_recorder/fr_trace_rank_1:16",     # fr_order_without_majority: rank 1's BROADCAST at seq 16
    "tr-lone_health_check-4-fr": "flight_recorder/fr_trace_rank_0:15",     # fr_skipped_seq: the others' ALLREDUCE seq 15 (rank 2 skips it)
    "tr-alltoall_split_mismatch-4-fr": "flight_recorder/fr_trace_rank_2:18",   # fr_alltoall_totals: rank 2's ALLTOALL at seq 18
    "tr-async_extra_broadcast-4-fr": "flight_recorder/fr_trace_rank_0:18",     # sequence_shifted: rank 0's extra BROADCAST at seq 18
    # train_prints.py captures (print() stages, a tqdm bar per rank)
    "tr-stall_before_ddp-4": "torchrun/none_it7y39op/attempt_0/2/stdout.log:2",   # prints_stopped_short: Rank 2: moving model to cpu (its last print)
    "tr-uneven_shards_health-4": "console.log:137",                         # laggards_had_finished: [Rank 0]: Rank 3 failed to pass monitoredBarrier
    "tr-uneven_shards_val-4": "torchrun/none_6rqfqxt8/attempt_0/3/stderr.log:1",  # ran_out_of_batches: rank 3's bar (one line of \r redraws, to 9/9)
    "tr-error_after_end-4": "torchrun/none_tlf8xg0z/attempt_0/0/stderr.log:10",  # errors_after_the_end: '[rank 0] training finished'
    "tr-agent_stopped-2node-2": "node2_console.log:12",  # agent_stopped_first: 'Received 15 death signal, shutting down workers'
    "tr-rank0_eval_gather-2-detail": "torchrun/none_tr5shqab/attempt_0/0/stderr.log:21",  # main_process_side_path: rank 0's ALLGATHER fingerprint at SequenceNumber=10
    "tr-oom_skip_batch-4": "console.log:20",  # caught_oom_out_of_step: rank 2's warning that it caught the OOM and skips the batch
    "tr-join_check_stall-4": "torchrun/none_1afb4grs/attempt_0/1/stderr.log:5",  # barrier_peer_log_missing: rank 1 heard nothing from rank 0
    "tr-unmatched_send-4-detail": "torchrun/none_6kcjvxzf/attempt_0/2/stderr.log:24",  # runtime_named_sequence_apart: rank 2's fingerprint at SequenceNumber=14, past the others' 13
    # runs of scripts written in other people's styles (samples/capture/ext)
    "ext-log-crash_exception-2": "torchrun/none_1x9zivpb/attempt_0/1/stderr.log:26",  # own_error_first: 'OSError: shard-00003.bin: unexpected end of record at offset'
    "ext-log-early_exit-3": "console.log:18",  # left_cleanly: '[rank 2] reached end of local shard at step 12, finishing'
    "ext-log-hang_dataload-4-cpplog": "console.log:29",  # silent_while_others_timed_out: '[rank 3] epoch 0 step 0 | loss 5.5954 | 39.6 ms/step'
    "ext-log-healthy-3": "console.log:42",  # no_failure: 'training finished'
    "ext-log-missing_collective-2": "console.log:30",  # None: 'RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/tr'
    "ext-mpi-early_exit-4": "console.log:21",  # left_while_peers_lost_it: '[rank 3] epoch 0:  25%|██▌       | 2/8 [00:00<00:00, 15.72it'
    "ext-mpi-healthy-4": "console.log:49",  # no_failure: '[rank 0] epoch 0: 100%|██████████| 8/8 [00:00<00:00,  8.72it'
    "ext-mpi-missing_collective-2": "console.log:8",  # None: '  what():  [enforce fail at /__w/pytorch/pytorch/third_party'
    "ext-mpi-size_mismatch-3-detail": "console.log:65",  # runtime_named_mismatch: 'RuntimeError: Detected mismatch between collectives on ranks'
    "ext-spawn-crash_exception-4": "console.log:51",  # own_error_first: 'OSError: image file is truncated (3 bytes not processed): sa'
    "ext-spawn-crash_sigkill-3": "console.log:20",  # own_error_first: 'torch.multiprocessing.spawn.ProcessExitedException: process '
    "ext-spawn-early_exit-2": "console.log:5",  # left_while_peers_lost_it: rank 1's last step, '[GPU1] Epoch 0 | step 4 | loss 0.2285'
    "ext-spawn-port_taken-4": "console.log:41",  # store_host_failed: 'torch.distributed.DistNetworkError: The server socket has fa'
    "ext-spawn-healthy-2": "console.log:34",  # None: rank 0's last step (its [GPU0] prints now read as rank 0), '[GPU0] Epoch 2 | step 22 | loss 0.2699'
    "ext-tv-crash_sigkill-4-cpplog": "console.log:67",  # own_error_first: 'failed (exitcode: -9) local_rank: 0 (pid: 12017) of binary: '
    "ext-tv-hang_dataload-3": "console.log:29",  # silent_while_others_timed_out: 'RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/tr'
    "ext-tv-healthy-4": "console.log:26",  # no_failure: 'Training time 0:00:01'
    "ext-tv-missing_collective-4": "console.log:68",  # blocked_in_extra_barrier: '  File "/work/torchenv/lib/python3.11/site-packages/torch/di'
    "ext-tv-size_mismatch-2": "console.log:42",  # None: 'RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/tr'
    # a Ray Train job on a two-node Ray cluster on one machine (samples/capture/ray)
    "ext-ray-node_died-2": "driver_console.log:67",  # node_died_first: '(raylet) The node with node id: ... has been marked dead'
}


def test_the_table_names_every_sample():
    assert set(FIRST_LINE) == {s.name for s in SAMPLES}


@pytest.mark.parametrize("sample", [s.name for s in SAMPLES])
def test_every_sample_cites_its_deciding_line_first(reports, sample):
    evidence = reports[sample]["evidence"]
    assert evidence and location(evidence[0]) == FIRST_LINE[sample], [location(e) for e in evidence]
    assert all(e["file"] and e["line"] and e["text"] for e in evidence)
    assert len({(e["rank"], e["text"]) for e in evidence}) == len(evidence), "a tee'd copy cited twice"


def test_the_deciding_lines_of_each_side_come_first(reports):
    """The culprit's line at the diverging collective, the others' line there, the culprit's last line."""
    first, second, third = reports["tr-missing_collective-4-fr"]["evidence"][:3]
    assert (location(first), first["rank"]) == ("flight_recorder/fr_trace_rank_2:16", 2)
    assert "collective_seq_id=16" in first["text"] and "op=BROADCAST" in first["text"]
    assert second["rank"] != 2 and "collective_seq_id=16" in second["text"] and "op=ALLREDUCE" in second["text"]
    assert third["rank"] == 2 and "step 3/8" in third["text"]
    first, second = reports["tr-missing_collective-4-detail"]["evidence"][:2]
    assert "SequenceNumber=11, OpType=BROADCAST" in first["text"] and first["rank"] == 2
    assert "SequenceNumber=11, OpType=ALLREDUCE" in second["text"] and second["rank"] != 2


def test_a_512_rank_nccl_mismatch_cites_the_line_with_the_different_count(nccl_512):
    truth, report = nccl_512
    assert report["verdict"]["culprit_ranks"] == truth["culprit_ranks"] == [133]
    first, second = report["evidence"][:2]
    assert first["rank"] == 133 and "opCount c " in first["text"] and "count 50331648 " in first["text"]
    assert second["rank"] != 133 and "opCount c " in second["text"] and "count 25165824 " in second["text"]
    assert "count 50331648 where the others have count 25165824" in report["verdict"]["summary"]


@pytest.mark.parametrize("sample", ["tr-healthy-4", "tr-healthy-8", "slurm-healthy", "tr-straggler-4", "tr-straggler-8"])
def test_healthy_and_straggler_runs_cite_their_last_steps(reports, sample):
    steps = [e for e in reports[sample]["evidence"] if re.search(r"\bstep \d+/\d+", e["text"])]
    assert steps
    first_ranks = {e["rank"] for e in steps[:4]}
    for e in steps[:len(first_ranks)]:          # each rank's first cited step is its last one
        done, total = re.search(r"\bstep (\d+)/(\d+)", e["text"]).groups()
        assert done == total, e["text"]
    assert not any(re.search(r"\bstep 1/", e["text"]) for e in reports[sample]["evidence"])


def test_every_rules_evidence_query_runs_on_real_tables():
    """Each rule's `evidence` query (correlator/rules.toml) binds and runs over a job's tables."""
    from correlator import queries
    from correlator.verdict import prepare_evidence, rules
    parsed = parse_job(ROOT / "samples" / "tr-missing_collective-4-fr" / "logs")
    queries.run_all(parsed.con)
    assert prepare_evidence(parsed.con)
    named = [r for r in rules() if r.evidence]
    assert len(named) >= 20
    for rule in named:
        parsed.con.execute(f"select * from ({rule.evidence}) limit 5").fetchall()


# --- 2. counters as printed -------------------------------------------------------------------

LABEL = r"(?:SeqNum=\d+|SequenceNumber=\d+|collective_seq_id=\d+|p2p_seq_id=\d+|opCount [0-9a-f]+|collective #\d+|step \d+)"
# the columns that quote the logs; every other cell and sentence is the report's own
QUOTED_COLUMNS = {"text", "detail"}
SEQ_COLUMNS = {"last seq", "at", "last collective"}


def own_texts(report: dict) -> list[str]:
    """Every string the report says in its own words, as every renderer shows it (view.build)."""
    shown = view.build(report, max_rows=1000)
    texts = [shown.verdict.summary, *shown.verdict.missing_facts, *(v for _, v in shown.verdict.facts)]
    for section in shown.sections:
        texts += section.paragraphs
        for caption, table in section.tables:
            texts.append(caption)
            for row in table.rows:
                texts += [cell for column, cell in zip(table.columns, row) if column not in QUOTED_COLUMNS]
    texts += [r.action for r in shown.remedies] + [getattr(r, "expect", "") for r in shown.remedies]
    return [t for t in texts if t]


def svg_texts(document: str) -> list[str]:
    return [unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", document)]


def cited_texts(report: dict) -> list[str]:
    return [e.get("text") or "" for key in ("evidence", "collateral", "timeline") for e in report.get(key) or []]


@pytest.mark.parametrize("sample", [s.name for s in SAMPLES])
def test_every_seq_in_the_report_is_found_as_printed_in_a_cited_line(reports, sample):
    report = reports[sample]
    texts = own_texts(report) + svg_texts(render(report, "html"))
    cited = cited_texts(report)
    for text in texts:
        for label in re.findall(LABEL, text):
            pattern = re.escape(label) + (r"(?![0-9a-f])" if label.startswith("opCount") else r"(?!\d)")
            assert any(re.search(pattern, line) for line in cited), f"{label!r} (in {text!r}) is in no cited line"
        # a bare number where a seq is meant (`ALLREDUCE #12`) names no counter
        assert not re.search(r"(?<!collective )#\d", text), text


@pytest.mark.parametrize("sample", ["tr-missing_collective-4-detail", "tr-stalled_rank-4-fr", "tr-crash_exception-4-detail"])
def test_seq_columns_name_their_counter(reports, sample):
    shown = view.build(reports[sample])
    cells = [cell for section in shown.sections for _, table in section.tables
             for row in table.rows for column, cell in zip(table.columns, row) if column in SEQ_COLUMNS]
    assert cells
    for cell in cells:
        assert cell == view.UNKNOWN or re.search(LABEL, cell), cell


def test_a_seq_is_said_as_the_line_it_cites_prints_it():
    """Where a line prints a counter in its own words, the report says it so: the PG status's
    `last enqueued work: N`, the Flight Recorder analyzer's `collective 318`, a trainer's `step:  10`."""
    assert counters.printed_label("pg_seq", 48119, "detected by watchdog at work: 48117, last enqueued NCCL work: "
                                  "48119, last completed NCCL work: 48116.") == "last enqueued NCCL work: 48119"
    assert counters.printed_label("pg_seq", 48117, "WorkNCCL(SeqNum=48117, OpType=ALLREDUCE") == "SeqNum=48117"
    assert counters.printed_label("fr_seq", 318, "Not all ranks joining collective 318 at entry 317") == "collective 318"
    assert counters.printed_label("progress_step", 10, "\x1b[31mstep:  10  \x1b[32mloss:  8.24") == "step:  10"
    assert counters.printed_label("detail_seq", 12, None) == "SequenceNumber=11"
    report = analyze(ROOT / "tests" / "realworld" / "a-fr_trace_text--missing-rank6-allreduce" / "logs").report
    assert report["divergence"]["seq_label"] == "collective 318"
    assert report["process_groups"][0]["last_seq"][0]["label"] == "collective 318"


def test_detail_and_nccl_counters_are_printed_as_the_logs_print_them(reports, nccl_512):
    d = reports["tr-shape_mismatch-4-detail"]["divergence"]
    assert (d["seq"], d["seq_label"]) == (12, "SequenceNumber=11")       # DETAIL is 0-based
    _, report = nccl_512
    assert report["divergence"]["seq_label"] == "opCount c"                # NCCL's opCount is hex
    assert "opCount c on PG" in report["verdict"]["summary"]


# --- 3. a mismatch names the field that differs and both values -------------------------------

def test_mismatch_verdicts_name_the_field_and_both_values(reports):
    for sample, mine, theirs in [("tr-shape_mismatch-4-detail", "TensorShape=[3]", "TensorShape=[2]"),
                                 ("slurm-missing_collective_debug_detail", "TensorShape=[1]", "TensorShape=[1024]"),
                                 ("tr-missing_collective-4-detail", "OpType=BROADCAST", "OpType=ALLREDUCE"),
                                 ("tr-missing_collective-4-fr", "op=BROADCAST", "op=ALLREDUCE"),
                                 ("tr-ddp_param_mismatch-4", "8 params", "6 params")]:
        summary = reports[sample]["verdict"]["summary"]
        said = summary[summary.index(mine):]
        assert " where the others have " in said and theirs in said.split(" where the others have ")[1], (sample, summary)
    d = reports["tr-shape_mismatch-4-detail"]["divergence"]
    assert d["fields"] == ["numel"]
    assert d["difference"] == "rank 3 has TensorShape=[3] where the others have TensorShape=[2]"
    shown = view.build(reports["tr-shape_mismatch-4-detail"])
    assert dict(shown.verdict.facts)["diverged at"] == (
        "SequenceNumber=11 on PG 0: rank 3 has TensorShape=[3] where the others have TensorShape=[2]")
    caption, table = next(s.tables[0] for s in shown.sections if s.title == "Divergence")
    assert caption == "PG 0, SequenceNumber=11: numel differs"
    assert ["3", "1", "ALLREDUCE", "3", "Float", "OpType=ALLREDUCE TensorShape=[3] TensorDtypes=Float"] in table.rows


def test_nccl_dtypes_are_named(tmp_path):
    generate_job(tmp_path, JobSpec(nranks=8, ranks_per_host=4, fault="mismatch", mismatch_kind="dtype", seed=1, steps=6))
    report = analyze(tmp_path / "logs").report
    groups = report["divergence"]["groups"]
    assert {g["dtype"] for g in groups} == {"float32", "bfloat16"}
    assert {g["dtype_printed"] for g in groups} == {"7", "9"}
    assert "datatype 9 (bfloat16) where the others have datatype 7 (float32)" in report["verdict"]["summary"]
    assert report["divergence"]["fields"] == ["dtype"]


def test_nccl_dtype_numbers_are_ncclDataType_t():
    """src/nccl.h.in: ncclInt8 0, ncclUint8 1, ncclInt32 2, ncclUint32 3, ncclInt64 4, ncclUint64 5,
    ncclFloat16 6, ncclFloat32 7, ncclFloat64 8, ncclBfloat16 9, ncclFloat8e4m3 10, ncclFloat8e5m2 11."""
    assert counters.NCCL_DTYPES == {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64",
                                    6: "float16", 7: "float32", 8: "float64", 9: "bfloat16", 10: "fp8e4m3", 11: "fp8e5m2"}
    assert counters.dtype_name("nccl_opcount", "7") == "float32"
    assert counters.dtype_name("detail_seq", "Float") == "Float"


# --- 4. no broken text, the same report on every run ------------------------------------------

BROKEN = [r"\bNone\b", r"\(\?\)", r"(?<![\w/])\?(?![\w/])", r"collective collective", r"after before", r"seq None",
          r"#None", r"(?<![\w.])\(\)", r"\bnan\b"]


@pytest.mark.parametrize("sample", [s.name for s in SAMPLES])
def test_no_broken_text(reports, sample):
    report = reports[sample]
    for text in own_texts(report) + svg_texts(render(report, "html")):
        for pattern in BROKEN:
            assert not re.search(pattern, text), f"{pattern!r} in {text!r}"
    summary = report["verdict"]["summary"]
    assert "|" not in summary and "UserId=" not in summary, "a raw sacct row or jobcomp record in the summary"
    assert len(summary) < 400, summary


def test_the_scheduler_note_is_short_and_the_same_line_every_run(reports):
    assert reports["slurm-scheduler_time_limit"]["verdict"]["summary"] == (
        "the scheduler ended the job (JOB 41 ON node1 CANCELLED AT 2026-11-29T22:33:23 DUE TO TIME LIMIT) "
        "with no earlier rank-level failure in the logs")
    assert "died first (SIGKILL (signal 9): failed (exitcode: -9) local_rank: 2 (pid: 20548)" in \
        reports["tr-crash_sigkill-4"]["verdict"]["summary"]
    assert "died first (SIGSEGV (signal 11): node2: task 3: Segmentation fault)" in \
        reports["slurm-crash_segfault"]["verdict"]["summary"]
    assert reports["tr-stalled_rank-4-fr"]["verdict"]["summary"] == (
        "rank 2 stopped issuing collectives after step 3, its last line (no Flight Recorder entry of its own in the "
        "logs); the others waited at collective_seq_id=15 on PG 0 until their timeout")


RUN = """
import hashlib, json, sys
from pathlib import Path
from correlator.pipeline import analyze
from correlator.report import render
out = {}
for sample in sys.argv[1:]:
    report = analyze(Path(sample) / "logs").report
    shown = [json.dumps(report, indent=2)] + [render(report, f) for f in ("terminal", "markdown", "html")]
    out[Path(sample).name] = [hashlib.sha256(s.encode()).hexdigest() for s in shown]
print(json.dumps(out))
"""


def test_every_samples_report_is_identical_across_three_runs():
    """Three runs in three processes (each its own hash seed, threads and file order): every
    sample's JSON report and its terminal, Markdown and HTML renderings are the same, byte for
    byte. Nothing is left out: the report has no field that changes between runs (no analysed_at;
    the history store's own analysed_at is not part of the report)."""
    args = [str(s) for s in SAMPLES]
    runs = [subprocess.Popen([sys.executable, "-c", RUN, *args], stdout=subprocess.PIPE, cwd=ROOT,
                             env={**os.environ, "PYTHONHASHSEED": str(seed)}) for seed in (1, 2, 3)]
    outputs = [json.loads(run.communicate(timeout=600)[0]) for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert set(outputs[0]) == {s.name for s in SAMPLES}
    differ = [name for name in outputs[0] if not outputs[0][name] == outputs[1][name] == outputs[2][name]]
    assert not differ


# --- 5. causes are never collateral -----------------------------------------------------------

def test_a_memory_kill_is_the_cause_not_collateral(reports):
    report = reports["slurm-oom"]
    kinds = {c["kind"] for c in report["collateral"]}
    assert not kinds & {"slurm_memory_limit", "slurm_job_memory_limit"}, kinds
    assert "exceeded memory limit" in report["evidence"][0]["text"]
    assert any("|3|node2" in e["text"] for e in report["evidence"]), "the sacct row naming MaxRSSTask 3"


def test_the_size_check_is_cited_first_and_the_culprits_path_next(reports):
    """gloo's check fired on the receiver (rank 1, a victim: its abort is collateral); the
    traceback of the rank that reached the all_reduce from another line names the culprit."""
    report = reports["slurm-collective_mismatch"]
    assert report["verdict"]["rule"] == "sized_apart_on_another_line"
    assert "op.preamble.length <= op.nbytes. 1024 vs 512" in report["evidence"][0]["text"]
    assert report["evidence"][1]["rank"] == 2 and "line 84, in sync_gradients" in report["evidence"][1]["text"]


@pytest.mark.parametrize("sample", [s.name for s in SAMPLES])
def test_how_the_culprits_died_is_not_collateral(reports, sample):
    """The culprits' own lines and how their processes ended (the launcher's line on the culprit's
    pid, srun's on its task) are the cause, never filed under collateral."""
    report = reports[sample]
    truth = json.loads((ROOT / "samples" / sample / "expected.json").read_text())
    for rank in report["verdict"]["culprit_ranks"]:
        pid = (truth.get("worker_pids") or {}).get(str(rank))
        for item in report["collateral"]:
            assert item["rank"] != rank, item
            text = item["text"] or ""
            assert not (pid and item["kind"].startswith("torchelastic_worker") and f"(pid: {pid})" in text), item
            assert not (item["kind"].startswith("srun_task") and re.search(rf"\btask {rank}:", text)), item


# --- 6. verify lines are commands with the job's own values -----------------------------------

COMMANDS = {"sacct", "correlator", "ssh", "py-spy", "grep", "find", "all_reduce_perf", "nsys", "ibstat", "ss", "ray", "kubectl", "nvidia-smi"}
PLACEHOLDERS = re.compile(r"JOBID|\bPID\b|<[^>]*>|\.\.\.|your_script|\{\w+\}|\bN\b")


@pytest.mark.parametrize("sample", [s.name for s in SAMPLES])
def test_verify_lines_are_commands_with_the_jobs_values(reports, sample):
    report = reports[sample]
    assert report["remediation"]
    for remedy in report["remediation"]:
        command = remedy["verify"]
        assert not PLACEHOLDERS.search(command), command
        words = shlex.split(command)
        words = words[:words.index("|")] if "|" in words else words
        assert words[0] in COMMANDS, command
        if "correlator" in words and any(w in words for w in ("analyze", "timeline")):
            assert f"samples/{sample}/logs" in command, command
        if "--rank" in words:
            assert int(words[words.index("--rank") + 1]) == report["verdict"]["culprit_ranks"][0]


def test_verify_lines_fill_in_the_scheduler_job_the_culprits_pid_and_host(reports):
    assert reports["slurm-oom"]["remediation"][0]["verify"].startswith("sacct -j 39 ")
    assert reports["slurm-scheduler_time_limit"]["remediation"][0]["verify"].startswith("sacct -j 41 ")
    truth = json.loads((ROOT / "samples" / "tr-stalled_rank-4" / "expected.json").read_text())
    pid = truth["worker_pids"]["2"]
    assert reports["tr-stalled_rank-4"]["remediation"][0]["verify"] == f"ssh vm py-spy dump --pid {pid}"
    assert reports["tr-straggler-4"]["remediation"][0]["verify"] == \
        f"correlator timeline {shlex.quote(str(ROOT / 'samples' / 'tr-straggler-4' / 'logs'))} --rank 2"
    assert all(r.get("expect") for r in reports["slurm-oom"]["remediation"])


def test_every_remedy_falls_back_to_a_command_the_logs_always_fill():
    doc = tomllib.loads((ROOT / "correlator" / "remedies.toml").read_text())
    for name, entry in doc.items():
        for remedy in entry["remedy"]:
            assert isinstance(remedy["verify"], list) and remedy["verify"], name
            assert set(re.findall(r"\{(\w+)\}", remedy["verify"][-1])) <= {"log_dir"}, (name, remedy["verify"][-1])
