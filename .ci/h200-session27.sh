#!/usr/bin/env bash
# Run on the GPU machine from the repo root after `bash .ci/h200-session27-bundle.sh`
# (the bundle, and in .gpu/base/ the library and benches at 0392768). The twenty-seventh
# session's runs, most wanted first (what a timeout cuts is last): the fused hop before
# and after (the operators' fill and copy without the backend's handle check), which
# binary runs first alternating by turn; `device_ops` (one call's cost, checked and not,
# beside the raw call); every `device_hop` row of the new binary; the hand-off rows of
# the new binary; the suites of the changed paths on CUDA; two examples. Logs go to $OUT.
# `bash .ci/h200-session27.sh fused`: only the fused hop before and after, TURNS turns
# (default 10).
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
O=$(ls .gpu/bench/device_ops-* | head -1)
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  grep -m1 "model name" /proc/cpuinfo
} | tee "$out/machine.log"
turns=6; [ "${1:-}" = fused ] && turns=${TURNS:-10}
bash .ci/h200-fused-ab.sh "$turns" "$D" | tee "$out/fused-ab.log"
date -u
[ "${1:-}" = fused ] && exit 0
for i in 1 2 3; do timeout 30 "$O" --bench | grep -E "^cuda|^backend"; done 2>&1 | tee "$out/device_ops.log"
date -u
echo "== device_hop: $(basename "$D")" | tee "$out/device_hop.log"
HOLO_BENCH_PAIRS=9 timeout 150 "$D" --bench 2>&1 | tee -a "$out/device_hop.log"
date -u
for round in 1 2; do
  echo "== handoff round $round: $(basename "$H")"; timeout 60 "$H" --bench | grep -E "^cuda"
done 2>&1 | tee "$out/handoff.log"
for n in kernel_author device_hot_path_no_alloc stream_contract handoff defects; do for b in .gpu/bin/$n-*; do
  echo "test $n: $(timeout 100 "$b" --test-threads=1 2>&1 | grep -E 'test result|FAILED|panicked' | head -3)"
done; done | tee "$out/tests.log"
for e in tensors_in_depth_cuda device_array_handoff; do
  echo "== example $e"; timeout 30 .gpu/examples/$e 2>&1 | tail -4
done | tee "$out/examples.log"
date -u
