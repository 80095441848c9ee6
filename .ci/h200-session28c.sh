#!/usr/bin/env bash
# Run on the GPU machine from the repo root after `bash .ci/h200-session28c-bundle.sh`:
# 1. the topics bench before (e32fbf3: a subscriber yielding after every check past its
#    first 64) and after (its receive waiting as an idle partition does), alternating,
#    ROUNDS rounds (default 5);
# 2. the fused hop of the new binary (its ratio balanced over which side runs first),
#    TURNS turns (default 6) with the process pinned to CPU (default 2), then as many
#    unpinned, every pair printed;
# 3. two rounds of the hand-off rows; the topics suite on CUDA; device_array_handoff.
# Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
T=$(ls .gpu/bench/topics-* | head -1)
bash .ci/gpu-machine.sh | tee "$out/machine.log"
for round in $(seq 1 "${ROUNDS:-5}"); do
  order=(.gpu/base/topics-base "$T"); [ $((round % 2)) -eq 0 ] && order=("$T" .gpu/base/topics-base)
  for bin in "${order[@]}"; do
    echo "== topics round $round: $(basename "$bin")"; timeout 60 "$bin" --bench | grep -E "p50|p99"
  done
done 2>&1 | tee "$out/topics-ab.log"
date -u
cpu=${CPU:-2}
for turn in $(seq 1 "${TURNS:-6}"); do
  echo "== fused turn $turn: pinned-$(basename "$D")"
  HOLO_BENCH_VERBOSE=1 HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 taskset -c "$cpu" "$D" --bench | grep -E "^fused|^  fused"
done 2>&1 | tee "$out/fused-pinned.log"
for turn in $(seq 1 "${TURNS:-6}"); do
  echo "== fused turn $turn: $(basename "$D")"
  HOLO_BENCH_VERBOSE=1 HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 "$D" --bench | grep -E "^fused|^  fused"
done 2>&1 | tee "$out/fused.log"
date -u
for round in 1 2; do
  echo "== handoff round $round: $(basename "$H")"; timeout 60 "$H" --bench | grep -E "^cuda"
done 2>&1 | tee "$out/handoff.log"
for b in .gpu/bin/topics-*; do
  echo "test topics: $(timeout 100 "$b" --test-threads=1 2>&1 | grep -E 'test result|FAILED|panicked' | head -3)"
done | tee "$out/tests.log"
echo "== example device_array_handoff"; timeout 30 .gpu/examples/device_array_handoff 2>&1 | tail -4 | tee "$out/examples.log"
date -u
