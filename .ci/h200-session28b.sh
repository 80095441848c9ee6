#!/usr/bin/env bash
# Run on the GPU machine from the repo root after `bash .ci/h200-session28b-bundle.sh`:
# 1. the fused hop before (0392768) and after with the whole process pinned to one CPU
#    (`taskset -c CPU`, default 2: the partition thread and the raw loop's thread then
#    run on the same core), AB turns (default 4), every pair printed;
# 2. issue 13's device paths at this checkout (.ci/h200-handoff.sh: the hand-off, CUDA
#    contexts, DLPack, topics, the CuPy test, their benches, the examples under
#    compute-sanitizer; its stream_contract and holo_runtime lines say rc=127: not in this
#    bundle, which must stay under the device tool's 64 MiB).
# Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1)
{ bash .ci/gpu-machine.sh; nvidia-smi topo -m 2>/dev/null | head -4; } | tee "$out/machine.log"
cpu=${CPU:-2}
for turn in $(seq 1 "${AB:-4}"); do
  order=(.gpu/base/device_hop-base "$D"); [ $((turn % 2)) -eq 0 ] && order=("$D" .gpu/base/device_hop-base)
  for bin in "${order[@]}"; do
    echo "== fused turn $turn: $(basename "$bin")"
    HOLO_BENCH_VERBOSE=1 HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 taskset -c "$cpu" "$bin" --bench \
      | grep -E "^fused|^  fused"
  done
done 2>&1 | tee "$out/fused-ab-pinned.log"
date -u
unset HOLO_DEVICE
OUT="$out" bash .ci/h200-handoff.sh 2>&1 | tee "$out/issue13.log"
