#!/usr/bin/env bash
# Run on the GPU machine from the repo root after
#   HOLO_TESTS="defects kernel_author device_hot_path_no_alloc" \
#   HOLO_EXAMPLES="cudarc_interop" HOLO_BENCHES="device_hop" bash .ci/h200-bundle-targeted.sh
# cudarc_interop with the cudarc user giving holo frames (a publisher's loan written with
# cudarc's memcpy_htod on its stream), plain and under compute-sanitizer; issue 12's
# device suites at this checkout; the fused hop, 7 pairs a run, four runs. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
CS=/usr/local/cuda/bin/compute-sanitizer
{
  echo "== example cudarc_interop"; HOLO_DEVICE=cuda timeout 60 .gpu/examples/cudarc_interop --frames 1000 2>&1 | tail -12; echo "rc=${PIPESTATUS[0]}"
  for tool in memcheck racecheck synccheck; do
    echo "== sanitizer $tool cudarc_interop: $(HOLO_DEVICE=cuda timeout 120 $CS --tool $tool .gpu/examples/cudarc_interop --frames 30 2>&1 | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^error' | tail -2)"
  done
} 2>&1 | tee "$out/cudarc_interop.log"
for b in .gpu/bin/*; do
  n=$(basename "$b"); timeout 180 "$b" --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
  echo "test ${n%-*}: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
done 2>&1 | tee "$out/tests.log"
D=$(ls .gpu/bench/device_hop-* | head -1)
HOLO_DEVICE=cuda bash .ci/fused-runs.sh "$D" 1 2 3 4 2>&1 | tee "$out/fused-runs.log"
date -u
