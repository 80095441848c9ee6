#!/usr/bin/env bash
# Run on the GPU machine from the repo root after `HOLO_TESTS=handoff
# HOLO_EXAMPLES=device_array_handoff HOLO_BENCHES="device_hop handoff" bash
# .ci/h200-bundle-targeted.sh`. The question: what the fused hop's copy costs the host by
# the call that makes it (`device_hop copy-probe`: cuMemcpyAsync against
# cuMemcpyDtoDAsync_v2), beside the fused hop and the hand-off as they are. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1)
H=$(ls .gpu/bench/handoff-* | head -1)
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
for r in 1 2; do
  timeout 120 taskset -c 2 "$D" copy-probe 2>&1
  bash .ci/fused-runs.sh "$D" "$r.1" "$r.2"
done 2>&1 | tee "$out/copy-probe.log"
for k in 2 6; do
  echo "== handoff pinned to cpu $k"; timeout 60 taskset -c "$k" "$H" --bench 2>&1 | grep -E "^cuda"
done 2>&1 | tee "$out/handoff.log"
date -u
