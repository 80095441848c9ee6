#!/usr/bin/env bash
# The fused hop, 7 pairs a run, pinned to CPU 2, once per run number given, each line
# "run N START END: <the bench's fused-hop row>" (START and END in seconds since the epoch,
# to read against .ci/gpu-clocks.sh's samples): `bash .ci/fused-runs.sh DEVICE_HOP 1 2 3`.
D=$1; shift
for run in "$@"; do
  t0=$(date +%s.%N)
  line=$(HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=7 timeout 60 taskset -c 2 "$D" --bench 2>&1 | grep -E "^fused hop")
  echo "run $run $t0 $(date +%s.%N): $line"
done
