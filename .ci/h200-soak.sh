#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle holding the `soak` test binary
# (RELIABILITY.md, "Soak"): the fork and the 4-operator chain side by side on CUDA for
# HOLO_SOAK_SECONDS (570 by default: the device tool runs a command for at most 600 s),
# sampled every 10 s, and, at the same time, one minute of the same under
# compute-sanitizer's memcheck.
export HOLO_DEVICE=cuda HOLO_REQUIRE_DEVICE=cuda RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
S=$(ls .gpu/bin/soak-* | head -1)
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
HOLO_SOAK_SECONDS=60 HOLO_SOAK_EVERY=10 /usr/local/cuda/bin/compute-sanitizer --tool memcheck \
  "$S" --nocapture > "$out/soak-memcheck.log" 2>&1 &
HOLO_SOAK_SECONDS=${HOLO_SOAK_SECONDS:-570} HOLO_SOAK_EVERY=10 "$S" --nocapture 2>&1 | tee "$out/soak.log"
status=${PIPESTATUS[0]}
wait
echo "== memcheck minute:"; grep -E "soak on|^ +[0-9]|test result|ERROR SUMMARY" "$out/soak-memcheck.log"
date -u
exit "$status"
