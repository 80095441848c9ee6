#!/usr/bin/env bash
# Run on the GPU machine from the repo root after `bash .ci/h200-session26-bundle.sh`
# (the bundle, and in .gpu/base/ the library at 0bce933 with this checkout's bench
# sources). The twenty-sixth session's runs, most wanted first (what a timeout cuts is
# last): `device_hop cold-probe` twice (what a line of code or data costs right after a
# driver call); the fused hop before and after, alternating; the hand-off before and after;
# every `device_hop` row of the new binary; the suites of the changed emit path on CUDA;
# the two hand-off examples. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  grep -m1 "model name" /proc/cpuinfo
} | tee "$out/machine.log"
for i in 1 2; do timeout 120 "$D" cold-probe; done 2>&1 | tee "$out/cold-probe.log"
date -u
bash .ci/h200-fused-ab.sh 4 "$D" | tee "$out/fused-ab.log"
date -u
for round in 1 2 3 4; do
  order=(.gpu/base/handoff-base "$H"); [ $((round % 2)) -eq 0 ] && order=("$H" .gpu/base/handoff-base)
  for bin in "${order[@]}"; do
    echo "== handoff round $round: $(basename "$bin")"; timeout 60 "$bin" --bench | grep -E "^cuda"
  done
done | tee "$out/handoff-ab.log"
date -u
echo "== device_hop: $(basename "$D")" | tee "$out/device_hop.log"
HOLO_BENCH_PAIRS=9 timeout 150 "$D" --bench 2>&1 | tee -a "$out/device_hop.log"
date -u
for n in handoff stream_contract topics defects kernel_author device_hot_path_no_alloc; do for b in .gpu/bin/$n-*; do
  echo "test $n: $(timeout 100 "$b" --test-threads=1 2>&1 | grep -E 'test result|FAILED|panicked' | head -3)"
done; done | tee "$out/tests.log"
for e in device_array_handoff cudarc_interop; do
  echo "== example $e"; timeout 30 .gpu/examples/$e 2>&1 | tail -4
done | tee "$out/examples.log"
date -u
