#!/usr/bin/env bash
# capture.sh - run each failure scenario as a real 2-node x 2-task sbatch job on the local SLURM
# (shared/tools/slurm_local.sh) and save what a user would have under samples/slurm-<scenario>/logs/,
# plus expected.json built from the scenario definition, the workload's own fault record and accounting.
#
# Usage (from the repo root, cluster started with `slurm_local.sh start`):
#   samples/capture/slurm/capture.sh                 # all scenarios
#   samples/capture/slurm/capture.sh healthy oom     # some
#   samples/capture/slurm/capture.sh --finalize      # only re-settle sacct + rewrite expected.json
#   SAMPLES_OUT=/tmp/fresh samples/capture/slurm/capture.sh   # elsewhere; then check the verdicts with
#   CORRELATOR_SAMPLES=/tmp/fresh .venv/bin/python -m pytest tests/test_accuracy.py -k real_sample
# A full run ends with --finalize: slurmctld is restarted so that it re-sends the final job records
# to slurmdbd (formats.md §4.5), then sacct is re-queried until two queries 10 s apart agree.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
SLURM_LOCAL="${SLURM_LOCAL:-/work/shared/tools/slurm_local.sh}"
SLURM_LOG="${SLURM_LOCAL_DIR:-/tmp/slurm-local}/log"
SLURMCTLD_PID="${SLURM_LOCAL_DIR:-/tmp/slurm-local}/run/slurmctld.pid"
PYTHON="${TRAIN_PYTHON:-/work/torchenv/bin/python}"
WORK="${CAPTURE_WORK:-/tmp/slurm-capture}"
SAMPLES_OUT="${SAMPLES_OUT:-$REPO/samples}"   # another directory leaves the bundled samples alone
# sacct's first snapshots, kept to document how the record is revised; beside the bundled samples
# they live here, beside another capture in its own directory
EARLY_DIR="$HERE/sacct-early"; [ "$SAMPLES_OUT" = "$REPO/samples" ] || EARLY_DIR="$SAMPLES_OUT/sacct-early"
SACCT_FORMAT=JobID,JobName,State,ExitCode,DerivedExitCode,Start,End,NodeList,MaxRSS,MaxRSSTask,MaxRSSNode
ALL_SCENARIOS=(healthy crash_exception crash_segfault crash_sigkill oom stalled_rank_no_timeout
  scheduler_time_limit scancel_healthy missing_collective missing_collective_debug_detail collective_mismatch hang_at_exit)

log() { printf '[capture %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
now_ms() { date +%FT%T.%3N; }

# scenario -> SBATCH_OPTS, SRUN_OPTS, TRAIN_ARGS, KIND, CULPRITS, NOTE
define_scenario() {
  SBATCH_OPTS=""; SRUN_OPTS="--label"; TRAIN_ARGS="--steps 12"; CULPRITS="[]"; CANCEL_AFTER_STEP=""; EXTRA_ENV=""
  case "$1" in
    healthy) KIND=healthy
      NOTE="control run: 12 steps, no fault" ;;
    crash_exception) KIND=rank_crashed; CULPRITS="[2]"
      SRUN_OPTS="--label --kill-on-bad-exit=1"; TRAIN_ARGS="--steps 20 --fault exception --fault-rank 2"
      NOTE="rank 2 raises RuntimeError at step 5; srun --kill-on-bad-exit=1 SIGTERMs the other tasks" ;;
    crash_segfault) KIND=rank_crashed; CULPRITS="[3]"
      SRUN_OPTS="--output=%x-%j-%t.out"; TRAIN_ARGS="--steps 20 --fault segfault --fault-rank 3"
      NOTE="rank 3 dereferences NULL (SIGSEGV) at step 5; per-task output files, no --kill-on-bad-exit: the survivors fail in gloo on their own" ;;
    crash_sigkill) KIND=rank_crashed; CULPRITS="[1]"
      SRUN_OPTS="--label --kill-on-bad-exit=1"; TRAIN_ARGS="--steps 20 --fault sigkill --fault-rank 1"
      NOTE="rank 1 SIGKILLs itself at step 5 (what an external OOM killer or kill -9 does); --kill-on-bad-exit=1" ;;
    oom) KIND=rank_crashed; CULPRITS="[3]"; SBATCH_OPTS="--mem=800M"
      TRAIN_ARGS="--steps 20 --fault oom --fault-rank 3"
      NOTE="--mem=800M per node, memory enforced by jobacct_gather polling (JobAcctGatherParams=OverMemoryKill, no cgroup); rank 3 allocates 100 MB every 0.2 s from step 5" ;;
    stalled_rank_no_timeout) KIND=rank_stalled; CULPRITS="[1]"; SBATCH_OPTS="--time=1"
      TRAIN_ARGS="--steps 100000 --step-seconds 1 --fault stall --fault-rank 1"
      NOTE="rank 1 sleeps forever before its step-5 allreduce; torch/gloo timeout left at its 30 min default, so the 1-minute time limit ends the job (TIMEOUT is collateral)" ;;
    scheduler_time_limit) KIND=scheduler_termination; SBATCH_OPTS="--time=1"
      TRAIN_ARGS="--steps 100000 --step-seconds 1"
      NOTE="healthy run that needs far longer than its 1-minute time limit" ;;
    scancel_healthy) KIND=scheduler_termination; CANCEL_AFTER_STEP=8
      TRAIN_ARGS="--steps 100000 --step-seconds 1"
      NOTE="healthy long run cancelled with 'scancel JOBID' once rank 0 logged step 8" ;;
    missing_collective) KIND=missing_collective; CULPRITS="[3]"; SBATCH_OPTS="--time=2"
      SRUN_OPTS="--output=%x-%j-%t.out"; TRAIN_ARGS="--steps 20 --fault skip_allreduce --fault-rank 3"
      NOTE="rank 3 skips the 1024-float gradient allreduce of step 5 and issues the 1-float loss allreduce instead; per-task output files" ;;
    missing_collective_debug_detail) KIND=missing_collective; CULPRITS="[3]"; SBATCH_OPTS="--time=2"
      EXTRA_ENV="TORCH_DISTRIBUTED_DEBUG=DETAIL TORCH_CPP_LOG_LEVEL=INFO"
      TRAIN_ARGS="--steps 20 --fault skip_allreduce --fault-rank 3"
      NOTE="as missing_collective, with TORCH_DISTRIBUTED_DEBUG=DETAIL TORCH_CPP_LOG_LEVEL=INFO (collective fingerprints checked and logged per rank) and srun --label" ;;
    collective_mismatch) KIND=collective_mismatch; CULPRITS="[2]"; SBATCH_OPTS="--time=2"
      TRAIN_ARGS="--steps 20 --fault wrong_numel --fault-rank 2"
      NOTE="rank 2 allreduces a 2048-float gradient at step 5 where the others allreduce 1024 floats" ;;
    hang_at_exit) KIND=rank_stalled; CULPRITS="[2]"; SBATCH_OPTS="--time=2"
      SRUN_OPTS="--label --wait=15"; TRAIN_ARGS="--steps 8 --fault hang_at_exit --fault-rank 2"
      NOTE="rank 2 trains to the end but its process never exits (a thread it started never returns); the other tasks exit 0 and srun --wait=15 reports task 2 still running, then kills it" ;;
    *) echo "unknown scenario $1" >&2; exit 2 ;;
  esac
}

write_batch_script() { # write_batch_script <file> <truth dir>
  cat >"$1" <<EOF
#!/bin/bash
export MASTER_ADDR=127.0.0.1 MASTER_PORT=\$((20000 + SLURM_JOB_ID % 20000))
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 TRUTH_DIR="$2" $EXTRA_ENV
srun $SRUN_OPTS "$PYTHON" "$HERE/train.py" $TRAIN_ARGS
EOF
}

job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }

wait_until_gone() { # the job left the queue, incl. COMPLETING (epilogs done on every node)
  while squeue -h -j "$1" 2>/dev/null | grep -q .; do sleep 1; done
}

cancel_after_step() { # cancel_after_step <job> <dir> <step>
  local out="$2/slurm-$1.out"
  until grep -q "^0: \[rank 0\] step $3/" "$out" 2>/dev/null; do sleep 0.5; done
  log "scancel $1"
  scancel "$1"
}

cut_window() { # cut_window <logfile> <from> <to>: daemon lines whose [iso8601_ms] stamp is in [from, to]
  awk -v from="$2" -v to="$3" '{ ts = substr($1, 2, 23) } ts >= from && ts <= to' "$1"
}

node_names() { # from the saved `scontrol show job` (sacct may not have the job yet)
  scontrol show hostnames "$(sed -n 's/^ *NodeList=\([^ ]*\).*/\1/p' "$1")"
}

run_scenario() {
  local name="$1" out jobdir job t0 t1 node
  define_scenario "$name"
  out="$SAMPLES_OUT/slurm-$name"
  # neutral job name and directory: they show in scontrol/sacct/jobcomp and must not reveal the scenario
  rm -rf "$out" "$WORK/$name"; mkdir -p "$WORK" "$out/logs"
  jobdir=$(mktemp -d "$WORK/job.XXXXXX")
  ln -s "$jobdir" "$WORK/$name"; mkdir -p "$jobdir/truth"
  write_batch_script "$jobdir/job.sbatch" "$jobdir/truth"
  t0=$(now_ms)
  job=$(cd "$jobdir" && sbatch --parsable --job-name=train --nodes=2 --ntasks-per-node=2 \
    --output=slurm-%j.out $SBATCH_OPTS job.sbatch)
  echo "$job" >"$jobdir/jobid"
  log "$name: JobId=$job ($SBATCH_OPTS | srun $SRUN_OPTS | $TRAIN_ARGS)"
  [ -n "$CANCEL_AFTER_STEP" ] && cancel_after_step "$job" "$jobdir" "$CANCEL_AFTER_STEP"
  wait_until_gone "$job"
  sleep 3  # let the stepds' "done with job" and the ctld's purge lines land
  t1=$(now_ms)
  log "$name: $(job_state "$job"), window $t0 .. $t1"

  scontrol show job "$job" >"$out/logs/scontrol.txt"
  cp "$jobdir"/*-"$job"*.out "$out/logs/"
  cut_window "$SLURM_LOG/slurmctld.log" "$t0" "$t1" >"$out/logs/slurmctld.log"
  for node in $(node_names "$out/logs/scontrol.txt"); do
    cut_window "$SLURM_LOG/slurmd-$node.log" "$t0" "$t1" >"$out/logs/slurmd-$node.log"
  done
  grep "^JobId=$job " "$SLURM_LOG/jobcomp.log" >"$out/logs/jobcomp.log" || rm -f "$out/logs/jobcomp.log"
  # first snapshot, kept outside logs/ to document how the record is revised later
  sacct --parsable2 -j "$job" --format="$SACCT_FORMAT" >"$jobdir/sacct-early.txt"
}

sacct_all() { # sacct_all <scenario...>
  local name
  for name in "$@"; do sacct --parsable2 -j "$(cat "$WORK/$name/jobid")" --format="$SACCT_FORMAT"; done
}

# restart slurmctld so it re-sends the final job records, then wait until sacct is stable
settle_accounting() {
  log "restarting slurmctld to flush final job records to slurmdbd"
  scontrol shutdown slurmctld
  while [ -f "$SLURMCTLD_PID" ] && kill -0 "$(cat "$SLURMCTLD_PID")" 2>/dev/null; do sleep 0.5; done
  "$SLURM_LOCAL" start >/dev/null
  local before after=""
  before=$(sacct_all "$@")
  while :; do
    sleep 10
    after=$(sacct_all "$@")
    [ "$before" = "$after" ] && break
    before=$after
  done
  log "sacct stable"
}

finalize() { # finalize <scenario...>: final sacct.txt + expected.json
  local name job
  settle_accounting "$@"
  for name in "$@"; do
    define_scenario "$name"
    job=$(cat "$WORK/$name/jobid")
    sacct --parsable2 -j "$job" --format="$SACCT_FORMAT" >"$SAMPLES_OUT/slurm-$name/logs/sacct.txt"
    mkdir -p "$EARLY_DIR"
    cp "$WORK/$name/sacct-early.txt" "$EARLY_DIR/slurm-$name.txt"
    SCENARIO="$name" KIND="$KIND" CULPRITS="$CULPRITS" NOTE="$NOTE" JOB="$job" \
      SBATCH_OPTS="$SBATCH_OPTS" SRUN_OPTS="$SRUN_OPTS" TRAIN_ARGS="$TRAIN_ARGS" \
      TRUTH_DIR="$WORK/$name/truth" SACCT_FILE="$SAMPLES_OUT/slurm-$name/logs/sacct.txt" \
      "$PYTHON" "$HERE/write_expected.py" >"$SAMPLES_OUT/slurm-$name/expected.json"
  done
}

main() {
  local scenarios=() name
  if [ "${1:-}" = "--finalize" ]; then
    shift
    for name in "${ALL_SCENARIOS[@]}"; do [ -f "$WORK/$name/jobid" ] && scenarios+=("$name"); done
    finalize "${scenarios[@]}"
    return
  fi
  if [ $# -gt 0 ]; then scenarios=("$@"); else scenarios=("${ALL_SCENARIOS[@]}"); fi
  for name in "${scenarios[@]}"; do run_scenario "$name"; done
  finalize "${scenarios[@]}"
}

main "$@"
