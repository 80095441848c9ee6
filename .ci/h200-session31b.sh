#!/usr/bin/env bash
# Run on the GPU machine from the repo root after
#   HOLO_TESTS="stream_contract defects handoff topics dlpack device_hot_path_no_alloc" \
#   HOLO_EXAMPLES="fork_streams device_array_handoff" \
#   HOLO_BENCHES="device_hop handoff" bash .ci/h200-bundle-targeted.sh
# The thirty-first session's change to the last release of a device slot (Pool::retire
# decides, Pool::release takes the step that may free the pool; RELIABILITY.md "Miri") on
# CUDA: the suites whose releases go through it (cross-partition slots, release streams,
# a tensor kept past its session), the library's tests, two examples under
# compute-sanitizer, then issue 12's table and the hand-off bench once. Logs go to $OUT.
export HOLO_REQUIRE_DEVICE=cuda RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
status=0
for t in .gpu/bin/*; do
  n=$(basename "$t"); timeout 120 "$t" --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
  echo "test ${n%-*}: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
  [ $rc = 0 ] || { status=1; grep -E "FAILED|panicked" -A5 "$out/$n.log" | head -20; }
done
E=.gpu/examples; CS=/usr/local/cuda/bin/compute-sanitizer
for ex in fork_streams device_array_handoff; do
  echo "== example $ex"; HOLO_DEVICE=cuda timeout 60 $E/$ex --frames 1000 2>&1 | tail -3; echo "rc=${PIPESTATUS[0]}"
  for tool in memcheck racecheck synccheck; do
    echo "== sanitizer $tool $ex: $(HOLO_DEVICE=cuda timeout 60 $CS --tool $tool $E/$ex --frames 30 2>&1 | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' | tail -1)"
  done
done
echo "== device_hop --bench"; date -u
HOLO_DEVICE=cuda timeout 240 $(ls .gpu/bench/device_hop-* | head -1) --bench 2>&1 | tee "$out/device_hop.log"
echo "== handoff bench"; date -u
HOLO_DEVICE=cuda timeout 60 $(ls .gpu/bench/handoff-* | head -1) --bench 2>&1 | tee "$out/handoff-bench.log"
date -u
exit $status
