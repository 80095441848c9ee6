#!/usr/bin/env bash
# Run on the GPU machine from the repo root after `HOLO_TESTS="topics handoff dlpack
# cuda_context" HOLO_EXAMPLES="device_array_handoff dlpack_roundtrip cudarc_interop"
# HOLO_BENCHES="topics device_hop handoff" bash .ci/h200-bundle-targeted.sh`: the
# twenty-eighth session's last call, at its last library commit: the suites of issue 13's
# subscriber and hand-off paths on CUDA, the three examples, ROUNDS rounds (default 4) of
# the topics bench, TURNS turns (default 4) of the fused hop pinned to CPU (default 2),
# two rounds of the hand-off rows. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
T=$(ls .gpu/bench/topics-* | head -1)
bash .ci/gpu-machine.sh | tee "$out/machine.log"
for n in topics handoff dlpack cuda_context; do for b in .gpu/bin/$n-*; do
  echo "test $n: $(timeout 120 "$b" --test-threads=1 2>&1 | grep -E 'test result|FAILED|panicked' | head -3)"
done; done | tee "$out/tests.log"
for e in device_array_handoff dlpack_roundtrip cudarc_interop; do
  echo "== example $e"; timeout 60 .gpu/examples/$e 2>&1 | tail -3; echo "rc=${PIPESTATUS[0]}"
done 2>&1 | tee "$out/examples.log"
for round in $(seq 1 "${ROUNDS:-4}"); do
  echo "== topics round $round: $(basename "$T")"; timeout 60 "$T" --bench | grep -E "p50|p99"
done 2>&1 | tee "$out/topics.log"
for turn in $(seq 1 "${TURNS:-4}"); do
  echo "== fused turn $turn: pinned-$(basename "$D")"
  HOLO_BENCH_VERBOSE=1 HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 taskset -c "${CPU:-2}" "$D" --bench | grep -E "^fused|^  fused"
done 2>&1 | tee "$out/fused-pinned.log"
for round in 1 2; do
  echo "== handoff round $round: $(basename "$H")"; timeout 60 "$H" --bench | grep -E "^cuda"
done 2>&1 | tee "$out/handoff.log"
date -u
