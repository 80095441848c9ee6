#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle with the device_hop bench
# (.ci/h200-bundle-targeted.sh, HOLO_BENCHES=device_hop). Whether the paced fork's sinks
# differ because their streams share the producer's hardware queue: `device_hop
# fork-paced` alternating between the driver's default number of hardware queues per
# context and CUDA_DEVICE_MAX_CONNECTIONS=32 (every stream of the run its own queue).
# Logs go to $OUT.
export HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=$(ls .gpu/bench/device_hop-* | head -1)
squeeze() { sed -E 's/ +/ /g; s/source: Backpressured/BP/; s/ResourceExhausted/RE/'; }
for round in 1 2 3; do
  echo "== round $round, default connections"
  HOLO_BENCH_RUNS=2 timeout 100 "$D" fork-paced | squeeze | tee -a "$out/fork-paced-default.log" | grep -E "^holo fork, default, paced on|^-- "
  echo "== round $round, CUDA_DEVICE_MAX_CONNECTIONS=32"
  CUDA_DEVICE_MAX_CONNECTIONS=32 HOLO_BENCH_RUNS=2 timeout 100 "$D" fork-paced | squeeze | tee -a "$out/fork-paced-32.log" | grep -E "^holo fork, default, paced on|^-- "
done
date -u
