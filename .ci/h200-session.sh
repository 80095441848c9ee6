#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle: the CUDA device tests (issue 13's
# hand-off, contexts, DLPack and topics, the stream contract, the fault-injection and soak
# tests, and the regressions of the teardown and release-path changes), then issue 14's
# OpenCL parts (.ci/h200-opencl.sh), the hand-off bench twice, and the CUDA examples under
# compute-sanitizer.
export HOLO_REQUIRE_DEVICE=cuda RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
t() {
  n=$(basename "$1"); timeout 180 "$1" --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
  echo "test ${n%-*}: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
  [ $rc = 0 ] || { status=1; grep -E "FAILED|panicked" -A5 "$out/$n.log" | head -20; }
}
for b in .gpu/bin/*; do case $(basename "$b") in opencl-*) ;; *) t "$b" ;; esac; done
echo "== OpenCL (.ci/h200-opencl.sh)"
bash .ci/h200-opencl.sh || status=1
export HOLO_REQUIRE_DEVICE=cuda
H=$(ls .gpu/bench/handoff-* | head -1)
# HOLO_SKIP_BENCH=1: the tests and examples only (for a run beside the soak, whose load
# would make the figures meaningless).
[ -n "${HOLO_SKIP_BENCH:-}" ] || for i in 1 2; do echo "== handoff bench $i"; date -u; HOLO_DEVICE=cuda $H --bench | grep -E "^cuda"; done
E=.gpu/examples; CS=/usr/local/cuda/bin/compute-sanitizer
for ex in cudarc_interop device_array_handoff fork_streams tensors_in_depth_cuda; do
  echo "== example $ex"; HOLO_DEVICE=cuda timeout 60 $E/$ex --frames 1000 2>&1 | tail -3; echo "rc=${PIPESTATUS[0]}"
  echo "== sanitizer memcheck $ex: $(HOLO_DEVICE=cuda timeout 60 $CS --tool memcheck $E/$ex --frames 30 2>&1 | grep -E 'ERROR SUMMARY' | tail -1)"
done
date -u
exit $status
