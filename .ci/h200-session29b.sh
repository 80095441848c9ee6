#!/usr/bin/env bash
# Run on the GPU machine from the repo root with the bundle of .ci/h200-session29.sh.
# The question left by that call: does the fused hop's slow state follow the GPU's clocks?
# nvidia-smi samples the SM and memory clocks, the performance state and the power every
# 100 ms (reading them changes no setting) while the fused hop runs 24 times, 7 pairs
# each, pinned to CPU 2, each run's start and end time printed. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1)
bash .ci/gpu-machine.sh | tee "$out/machine.log"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw,utilization.gpu \
  --format=csv,noheader -lms 100 > "$out/clocks.log" 2>&1 &
smi=$!
sleep 1
for run in $(seq 1 24); do
  t0=$(date +%s.%N)
  line=$(HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=7 timeout 60 taskset -c 2 "$D" --bench 2>&1 | grep -E "^fused hop")
  t1=$(date +%s.%N)
  echo "run $run $t0 $t1: $line"
done 2>&1 | tee "$out/fused-runs.log"
sleep 1
kill $smi
date -u
