#!/usr/bin/env bash
# The script this lease ran (`TURNS=8 bash run-warm.sh`), on a bundle of one binary:
# device_hop built with prefetch-prototype.patch applied to b2767a9. HOLO_WARM=N
# prefetches the first N of the partition's hot lines after each fill and copy an operator
# makes through `DeviceAccess` (unset: none); which setting runs first rotates by turn.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1)
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
  grep -m1 "model name" /proc/cpuinfo
} | tee "$out/machine.log"
read -r -a warms <<< "${WARMS:-off 24 48 999}"
n=${#warms[@]}
for turn in $(seq 1 "${TURNS:-8}"); do
  for k in $(seq 0 $((n - 1))); do
    w=${warms[$(( (k + turn) % n ))]}
    if [ "$w" = off ]; then unset HOLO_WARM; else export HOLO_WARM=$w; fi
    echo "== fused turn $turn: warm=$w"
    HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 "$D" --bench 2>&1 | grep -E "^fused|^warm" | sort -u
  done
done 2>&1 | tee "$out/fused-warm.log"
date -u
