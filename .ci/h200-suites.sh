#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle of device test binaries and
# examples (.ci/h200-bundle-targeted.sh): every test binary in .gpu/bin on CUDA
# (HOLO_REQUIRE_DEVICE=cuda: a device suite that cannot open CUDA fails instead of
# skipping), then every example in .gpu/examples on cuda:0 for 1000 frames. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in .gpu/bin/*; do
  n=$(basename "$b" | sed 's/-[0-9a-f]*$//')
  timeout 150 "$b" --test-threads=1 > "$out/test-$n.log" 2>&1
  echo "test $n: rc $? $(grep 'test result' "$out/test-$n.log" | tail -1)"
done | tee "$out/tests.log"
for e in .gpu/examples/*; do
  n=$(basename "$e")
  timeout 120 "$e" --frames 1000 > "$out/example-$n.log" 2>&1
  echo "example $n: rc $? $(tail -1 "$out/example-$n.log")"
done | tee "$out/examples.log"
date -u
