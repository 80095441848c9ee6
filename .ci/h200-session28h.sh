#!/usr/bin/env bash
# Run on the GPU machine from the repo root after `HOLO_TESTS="handoff stream_contract
# kernel_author cuda_context device_hot_path_no_alloc" HOLO_EXAMPLES=device_array_handoff
# HOLO_BENCHES=handoff bash .ci/h200-bundle-targeted.sh`: after the review's mends (one
# cold path for the CUDA backend's counted driver calls), the suites that make those calls
# on CUDA, the hand-off example and two rounds of the hand-off rows. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
H=$(ls .gpu/bench/handoff-* | head -1)
bash .ci/gpu-machine.sh | tee "$out/machine.log"
for n in handoff stream_contract kernel_author cuda_context device_hot_path_no_alloc; do for b in .gpu/bin/$n-*; do
  echo "test $n: $(timeout 120 "$b" --test-threads=1 2>&1 | grep -E 'test result|FAILED|panicked' | head -3)"
done; done | tee "$out/tests.log"
echo "== example device_array_handoff"; timeout 60 .gpu/examples/device_array_handoff 2>&1 | tail -3 | tee "$out/examples.log"
for round in 1 2; do
  echo "== handoff round $round: $(basename "$H")"; timeout 60 "$H" --bench | grep -E "^cuda"
done 2>&1 | tee "$out/handoff.log"
date -u
