#!/usr/bin/env bash
# Run on the GPU machine from the repo root with the bundle of .ci/h200-session29.sh.
# After .ci/h200-session29b.sh found the GPU's SM clock at its maximum in both states of
# the fused hop, and the GPU busy 92-95 % of a fast card's frames against 50-55 % of a slow
# card's: is the slow state host-bound? `device_hop diag` times every driver call on the
# thread that makes it (host time in the driver per frame against the frame's wall time),
# beside 8 fused runs, all with the clocks and utilization sampled every 100 ms. Logs go
# to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1)
bash .ci/gpu-machine.sh | tee "$out/machine.log"
smi=$(bash .ci/gpu-clocks.sh "$out/clocks.log")
bash .ci/fused-runs.sh "$D" 1 2 3 4 2>&1 | tee "$out/fused-runs.log"
echo "diag $(date +%s.%N)" | tee "$out/diag-time.log"
timeout 200 taskset -c 2 "$D" diag 2>&1 | tee "$out/diag.log"
echo "diag end $(date +%s.%N)" | tee -a "$out/diag-time.log"
bash .ci/fused-runs.sh "$D" 5 6 7 8 2>&1 | tee -a "$out/fused-runs.log"
sleep 1
kill "$smi"
date -u
