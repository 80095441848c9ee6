#!/usr/bin/env bash
# Run on the GPU machine from the repo root after .ci/h200-session36-bundle.sh: the whole
# workspace's test suite at HEAD on the device, each test binary with
# HOLO_REQUIRE_DEVICE=cuda (a device suite that cannot open CUDA fails instead of
# skipping; the device-contract suite also runs on every OpenCL device that opens), the
# cross-process suites with the bundled peer, then every example for 1000 frames on CUDA
# device 0. Not run: the trybuild suites (`ui`, `holo_ui_tests`: they need cargo) and the
# proc-macro crate's unit tests (`holo_macros`: linked to the toolchain's libstd). The
# tests whose paths were fixed at build time (`cli` reads the examples' sources,
# `fuzz_regressions` the fuzz inputs, under /work/main) find them through a /work/main link
# to this tree when the machine lets one be made. Logs go to $OUT. To try the script on a
# machine without CUDA: SUITE_REQUIRE= SUITE_EXAMPLE_DEVICE=software (or SUITE_REQUIRE=opencl).
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/gpu-machine.sh > "$out/machine.log" 2>&1
T=.gpu/t; rm -rf "$T"; mkdir -p "$T"; tar xJf .gpu/suite.tar.xz -C "$T"
# `cli` checks that each example binary is no older than its source: the copy here is new.
touch "$T"/examples/*
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; } 2>/dev/null
ls -ld /work/main >> "$out/machine.log" 2>&1
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=${SUITE_REQUIRE-cuda} HOLO_IPC_PEER=$PWD/$T/peer/ipc_peer
date -u
for b in "$T"/deps/*; do
  n=$(basename "$b" | sed 's/-[0-9a-f]*$//')
  case $n in ui|holo_ui_tests|holo_macros|ipc_peer) continue ;; esac
  timeout 200 "$b" > "$out/test-$n.log" 2>&1; rc=$?
  echo "test $n: rc $rc $(grep -h 'test result' "$out/test-$n.log" | awk '{p+=$4; f+=$6; i+=$8} END {print p" passed, "f" failed, "i" ignored"}')"
done | tee "$out/tests.log"
date -u
for e in "$T"/examples/*; do
  n=$(basename "$e")
  case $n in ipc_consumer|trace_timeline) continue ;; esac
  HOLO_DEVICE=${SUITE_EXAMPLE_DEVICE:-cuda} timeout 120 "$e" --frames 1000 > "$out/example-$n.log" 2>&1
  echo "example $n: rc $? $(grep -E '^run summary' "$out/example-$n.log" | head -1)"
done | tee "$out/examples.log"
date -u
! grep -qE "rc [1-9]" "$out/tests.log" "$out/examples.log"; status=$?
# The device tool brings back a limited number of files from a call: one archive of them all.
(cd "$out" && tar czf suite-logs.tgz --remove-files machine.log tests.log examples.log test-*.log example-*.log)
exit $status
