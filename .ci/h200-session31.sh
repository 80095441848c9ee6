#!/usr/bin/env bash
# Run on the GPU machine from the repo root after
#   HOLO_TESTS="handoff cuda_context dlpack dlpack_no_alloc device_hot_path_no_alloc" \
#   HOLO_EXAMPLES="cudarc_interop dlpack_roundtrip device_array_handoff" \
#   HOLO_BENCHES="dlpack handoff device_hop" bash .ci/h200-bundle-targeted.sh
#   cargo build --release -p holo-py && mkdir -p .gpu/py && \
#     cp target/release/libholo_py.so .gpu/py/holo_py.abi3.so && strip .gpu/py/holo_py.abi3.so
# The thirty-first session's change to the DLPack export (its capsule's shape and strides
# pointers set after the box became a raw pointer, RELIABILITY.md "Miri") on CUDA:
# .ci/h200-handoff.sh (the DLPack suites, the CuPy test, the DLPack round trip, the
# hand-off, the examples under compute-sanitizer), then issue 12's table once
# (`device_hop --bench`) and the allocation check of the device hot path. Logs go to $OUT.
export RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
EXTRA_TESTS=device_hot_path_no_alloc OUT="$out" bash .ci/h200-handoff.sh 2>&1 | tee "$out/handoff.log"
status=${PIPESTATUS[0]}
echo "== device_hop --bench"; date -u
HOLO_DEVICE=cuda timeout 240 $(ls .gpu/bench/device_hop-* | head -1) --bench 2>&1 | tee "$out/device_hop.log"
date -u
exit $status
