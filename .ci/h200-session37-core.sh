#!/usr/bin/env bash
# The thirty-seventh session's short device call, for the little device time left (from
# the repo root after .ci/h200-session36-bundle.sh): the device contract's core test
# binaries with HOLO_REQUIRE_DEVICE=cuda (`kernel_launch` first: issue 12 asks for it on
# the H200), then `kernel_launch` and the main CUDA example under compute-sanitizer's
# memcheck, within about 100 s.
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.log"
T=.gpu/t; rm -rf "$T"; mkdir -p "$T"
tar xJf .gpu/suite.tar.xz -C "$T" --wildcards 'deps/kernel_launch-*' 'deps/kernel_author-*' 'deps/defects-*' 'deps/stream_contract-*' 'deps/handoff-*' 'deps/dlpack-*' 'examples/tensors_in_depth_cuda'
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda
date -u
for n in kernel_launch kernel_author defects stream_contract handoff dlpack; do
  b=$(ls "$T"/deps/$n-* | head -1)
  timeout 40 "$b" > "$out/test-$n.log" 2>&1; rc=$?
  echo "test $n: rc $rc $(grep -h 'test result' "$out/test-$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
done | tee "$out/tests.log"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 40 "$CS" --tool memcheck --error-exitcode 3 "$(ls "$T"/deps/kernel_launch-* | head -1)" > "$out/memcheck-kernel_launch.log" 2>&1
echo "memcheck test kernel_launch: rc $? $(grep -h 'test result' "$out/memcheck-kernel_launch.log" | tail -1) $(grep -h 'ERROR SUMMARY' "$out/memcheck-kernel_launch.log" | tail -1)" | tee -a "$out/tests.log"
HOLO_DEVICE=cuda timeout 30 "$CS" --tool memcheck --error-exitcode 3 "$T/examples/tensors_in_depth_cuda" --frames 30 > "$out/memcheck-example.log" 2>&1
echo "memcheck example tensors_in_depth_cuda: rc $? $(grep -h 'ERROR SUMMARY' "$out/memcheck-example.log" | tail -1)" | tee -a "$out/tests.log"
date -u
! grep -qE "rc [1-9]" "$out/tests.log"
