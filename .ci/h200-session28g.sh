#!/usr/bin/env bash
# Run on the GPU machine from the repo root with the bundle of .ci/h200-session28f.sh
# (every binary at 858d9fc): every device_hop row (fenced hop, fused hop, 4-operator chain,
# 1→2 fork), 9 pairs each, unpinned, after the partition loop's idle wait moved into
# session/idle.rs; then `fork-paced` once. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1)
bash .ci/gpu-machine.sh | tee "$out/machine.log"
HOLO_BENCH_PAIRS=9 timeout 240 "$D" --bench 2>&1 | tee "$out/device_hop.log"
date -u
HOLO_BENCH_RUNS=2 timeout 150 "$D" fork-paced 2>&1 | tee "$out/fork-paced.log" | tail -30
date -u
