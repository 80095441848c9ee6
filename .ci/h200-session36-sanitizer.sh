#!/usr/bin/env bash
# Run on the GPU machine from the repo root after .ci/h200-session36-bundle.sh: every
# CUDA example for 30 frames under compute-sanitizer's memcheck, racecheck and synccheck,
# and the test binaries that launch kernels or hand device memory to other libraries
# (`kernel_launch`, `kernel_author`, `dlpack`) under memcheck,
# with HOLO_REQUIRE_DEVICE=cuda. Each line: the tool, the binary, its exit code and the
# sanitizer's summary line. The logs go to $OUT in one archive. Not run yet: the
# thirty-sixth session, which wrote it, got no device machine for it.
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
# The per-binary logs wait outside $OUT and enter it as one archive at the end (the device
# tool brings back a limited number of files; the summary, $OUT/sanitizer.log, comes back
# even if the call is cut short).
S=/tmp/sanitizer-logs; rm -rf "$S"; mkdir -p "$S"
T=.gpu/t; rm -rf "$T"; mkdir -p "$T"; tar xJf .gpu/suite.tar.xz -C "$T"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
date -u
for ex in tensors_in_depth_cuda fork_streams cudarc_interop dlpack_roundtrip device_array_handoff; do
  for tool in memcheck racecheck synccheck; do
    timeout 60 "$CS" --tool "$tool" --error-exitcode 3 "$T/examples/$ex" --frames 30 > "$S/$tool-$ex.log" 2>&1
    echo "$tool example $ex: rc $? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$S/$tool-$ex.log" | tail -1)"
  done
done | tee "$out/sanitizer.log"
for n in kernel_launch kernel_author dlpack; do
  b=$(ls "$T"/deps/$n-* | head -1)
  timeout 150 "$CS" --tool memcheck --error-exitcode 3 "$b" --test-threads=1 > "$S/memcheck-test-$n.log" 2>&1
  echo "memcheck test $n: rc $? $(grep -h 'test result' "$S/memcheck-test-$n.log" | tail -1) $(grep -h 'ERROR SUMMARY' "$S/memcheck-test-$n.log" | tail -1)"
done | tee -a "$out/sanitizer.log"
date -u
tar czf "$out/sanitizer-logs.tgz" -C /tmp sanitizer-logs
! grep -qE "rc [1-9]" "$out/sanitizer.log"
