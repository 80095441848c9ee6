#!/usr/bin/env bash
# Run on the GPU machine from the repo root after
#   BASE=b6d5ac7 HOLO_TESTS="stream_contract defects handoff dlpack device_hot_path_no_alloc kernel_author" \
#   HOLO_EXAMPLES=tensors_in_depth_cuda bash .ci/h200-ab-bundle.sh
# and the library's test binary copied into .gpu/bin/ (the A/B bundle leaves it out; with
# more, the bundle and the tree pass the device tool's 64 MiB).
# The thirty-second session's change to the fused hop's footprint (cold paths marked
# `cold_path`, `DType::size_bytes` without a table, the frame's device calls first in
# `DeviceBackend`'s vtable: 94 → 81 hot code lines, 97 → 95 data lines a frame on this
# VM's counts) on CUDA: the suites every frame's path runs through, the main example under
# compute-sanitizer, then the fused hop before (b6d5ac7) and after, alternating by turn
# (.ci/h200-fused-ab.sh), the hand-off before and after, and issue 12's table once with
# the new library. Logs go to $OUT. PART=tests runs the suites and the example only,
# PART=bench the benches only (each within one device call's 10 minutes).
export HOLO_REQUIRE_DEVICE=cuda RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
status=0
if [ "${PART:-all}" != bench ]; then
for t in .gpu/bin/*; do
  n=$(basename "$t"); timeout 150 "$t" --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
  echo "test ${n%-*}: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
  [ $rc = 0 ] || grep -E "FAILED|panicked" -A5 "$out/$n.log" | head -20
done 2>&1 | tee "$out/tests.log"
grep -q "rc=[1-9]" "$out/tests.log" && status=1
E=.gpu/examples; CS=/usr/local/cuda/bin/compute-sanitizer
for ex in $(ls $E); do
  echo "== example $ex"; HOLO_DEVICE=cuda timeout 60 $E/$ex --frames 1000 2>&1 | tail -3; echo "rc=${PIPESTATUS[0]}"
  for tool in memcheck racecheck synccheck; do
    echo "== sanitizer $tool $ex: $(HOLO_DEVICE=cuda timeout 60 $CS --tool $tool $E/$ex --frames 30 2>&1 | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' | tail -1)"
  done
done 2>&1 | tee "$out/examples.log"
fi
[ "${PART:-all}" = tests ] && exit $status
export HOLO_DEVICE=cuda
D=$(ls .gpu/bench/device_hop-* | head -1)
H=$(ls .gpu/bench/handoff-* | head -1)
echo "== fused hop, base b6d5ac7 against this session's library"; date -u
bash .ci/h200-fused-ab.sh "${TURNS:-6}" "$D" 2>&1 | tee "$out/fused-ab.log"
echo "== hand-off, base against new"; date -u
for turn in 1 2; do
  for bin in .gpu/base/handoff-base "$H"; do
    echo "== handoff turn $turn: $(basename "$bin")"; timeout 60 "$bin" --bench 2>&1 | grep -E "^cuda"
  done
done 2>&1 | tee "$out/handoff-ab.log"
echo "== device_hop --bench"; date -u
timeout 240 "$D" --bench 2>&1 | tee "$out/device_hop.log"
date -u
exit $status
