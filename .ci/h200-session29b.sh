#!/usr/bin/env bash
# Run on the GPU machine from the repo root with the bundle of .ci/h200-session29.sh.
# The question left by that call: does the fused hop's slow state follow the GPU's clocks?
# nvidia-smi samples the SM and memory clocks, the performance state and the power every
# 100 ms (reading them changes no setting) while the fused hop runs 24 times, 7 pairs
# each, pinned to CPU 2, each run's start and end time printed. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1)
bash .ci/gpu-machine.sh | tee "$out/machine.log"
smi=$(bash .ci/gpu-clocks.sh "$out/clocks.log")
bash .ci/fused-runs.sh "$D" $(seq 1 24) 2>&1 | tee "$out/fused-runs.log"
sleep 1
kill "$smi"
date -u
