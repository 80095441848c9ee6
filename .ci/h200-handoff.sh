#!/usr/bin/env bash
# Run on the GPU machine from the repo root after .ci/h200-bundle.sh: issue 13's device
# paths — the hand-off, CUDA contexts, DLPack, topics and the CuPy test, their benches,
# and the examples under compute-sanitizer — then the device-contract suite.
export HOLO_REQUIRE_DEVICE=cuda RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
t() {
  [ -e "$1" ] || { echo "test $(basename "$1"): not in this bundle"; return; }
  n=$(basename "$1"); timeout 120 "$1" --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
  echo "test ${n%-*}: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
  [ $rc = 0 ] || { status=1; grep -E "FAILED|panicked" -A5 "$out/$n.log" | head -20; }
}
for n in handoff cuda_context dlpack dlpack_no_alloc topics stream_contract holo_runtime ${EXTRA_TESTS:-}; do t .gpu/bin/$n-*; done
echo "== CuPy through DLPack (holo-py/tests/test_cupy.py)"
PYTHONPATH=.gpu/py timeout 120 python3 holo-py/tests/test_cupy.py || status=1
echo "== dlpack bench"; date -u; HOLO_DEVICE=cuda $(ls .gpu/bench/dlpack-* | head -1) --bench
if ls .gpu/bench/topics-* >/dev/null 2>&1; then
  echo "== topics bench"; date -u; HOLO_DEVICE=cuda $(ls .gpu/bench/topics-* | head -1) --bench
fi
echo "== handoff bench 1"; date -u; HOLO_DEVICE=cuda $(ls .gpu/bench/handoff-* | head -1) --bench
echo "== handoff bench 2"; date -u; HOLO_DEVICE=cuda $(ls .gpu/bench/handoff-* | head -1) --bench
E=.gpu/examples; CS=/usr/local/cuda/bin/compute-sanitizer
for ex in cudarc_interop dlpack_roundtrip device_array_handoff ${EXTRA_EXAMPLES:-}; do
  echo "== example $ex"; HOLO_DEVICE=cuda timeout 60 $E/$ex --frames 1000 2>&1 | tail -4; echo "rc=${PIPESTATUS[0]}"
  for tool in memcheck racecheck synccheck; do
    echo "== sanitizer $tool $ex: $(HOLO_DEVICE=cuda timeout 60 $CS --tool $tool $E/$ex --frames 30 2>&1 | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' | tail -1)"
  done
done
date -u
exit $status
