#!/usr/bin/env bash
# Run on the GPU machine from the repo root after
#   HOLO_TESTS="handoff cuda_context dlpack dlpack_no_alloc topics stream_contract" \
#   HOLO_EXAMPLES="cudarc_interop dlpack_roundtrip device_array_handoff" \
#   HOLO_BENCHES="dlpack topics handoff" bash .ci/h200-bundle-targeted.sh
#   cargo build --release -p holo-py && mkdir -p .gpu/py && \
#     cp target/release/libholo_py.so .gpu/py/holo_py.abi3.so && strip .gpu/py/holo_py.abi3.so
# Issue 13's device paths at this checkout (.ci/h200-handoff.sh: the hand-off, CUDA
# contexts, DLPack, topics, the CuPy test, their benches, the examples under
# compute-sanitizer), then the hand-off bench pinned to eight CPUs in turn. Logs go to $OUT.
export RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
OUT="$out" bash .ci/h200-handoff.sh 2>&1 | tee "$out/issue13.log"
H=$(ls .gpu/bench/handoff-* | head -1)
for k in 0 2 4 6 8 10 12 14; do
  echo "== handoff pinned to cpu $k"
  HOLO_DEVICE=cuda timeout 60 taskset -c "$k" "$H" --bench 2>&1 | grep -E "^cuda"
done 2>&1 | tee "$out/handoff-per-cpu.log"
date -u
