#!/usr/bin/env bash
# Run on the GPU machine from the repo root after
#   BASE=b6d5ac7 HOLO_TESTS="stream_contract defects handoff dlpack device_hot_path_no_alloc kernel_author" \
#   HOLO_EXAMPLES=tensors_in_depth_cuda bash .ci/h200-ab-bundle.sh
# and the library's test binary copied into .gpu/bin/ (the A/B bundle leaves it out).
# The thirty-third session's run: HEAD's suites and main example on CUDA
# (.ci/h200-suites.sh; the example under compute-sanitizer too), then the fused hop of the
# base (b6d5ac7, before the thirty-second session's footprint change) against HEAD's,
# TURNS turns alternating which runs first (.ci/h200-fused-ab.sh), and issue 12's table
# once with HEAD's library. The raw fused loop's time per frame in the table tells the
# card's state (about 3.9 µs fast; the slow state about 6 µs). PART=tests or PART=bench
# runs one half. Logs go to $OUT.
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
status=0
if [ "${PART:-all}" != bench ]; then
  bash .ci/h200-suites.sh || status=1
  grep -q "rc [1-9]" "$out/tests.log" "$out/examples.log" && status=1
  CS=/usr/local/cuda/bin/compute-sanitizer
  for tool in memcheck racecheck synccheck; do
    echo "== sanitizer $tool: $(HOLO_DEVICE=cuda timeout 60 $CS --tool $tool .gpu/examples/tensors_in_depth_cuda --frames 30 2>&1 | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' | tail -1)"
  done 2>&1 | tee "$out/sanitizer.log"
fi
[ "${PART:-all}" = tests ] && exit $status
export HOLO_DEVICE=cuda
D=$(ls .gpu/bench/device_hop-* | head -1)
echo "== fused hop, base b6d5ac7 against HEAD"; date -u
bash .ci/h200-fused-ab.sh "${TURNS:-6}" "$D" 2>&1 | tee "$out/fused-ab.log"
echo "== device_hop --bench"; date -u
timeout 240 "$D" --bench 2>&1 | tee "$out/device_hop.log"
date -u
exit $status
