#!/usr/bin/env bash
# Run on the GPU machine from the repo root after .ci/h200-bundle.sh: issue 14's OpenCL
# parts on NVIDIA's OpenCL and on PoCL beside it — the device-contract suite (every generic
# suite runs on the first device of each OpenCL platform, plus tests/opencl.rs) with
# HOLO_REQUIRE_DEVICE=opencl, the example on each platform's first device, and the
# opencl_hop bench twice on each (BENCHMARKS.md, "OpenCL").
export HOLO_REQUIRE_DEVICE=opencl RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
clinfo -l 2>&1 || echo "clinfo is not installed (the tests list what opens)"
status=0
t() {
  n=$(basename "$1"); timeout 300 "$1" --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
  echo "test ${n%-*}: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
  [ $rc = 0 ] || { status=1; grep -E "FAILED|panicked" -A5 "$out/$n.log" | head -20; }
}
for n in opencl stream_contract handoff device_hot_path_no_alloc receive_in_place topics dlpack holo_runtime ${EXTRA_TESTS:-}; do t .gpu/bin/$n-*; done
B=$(ls .gpu/bench/opencl_hop-* | head -1)
for ordinal in 0 1 2 3; do
  # Stops at the first ordinal that names no device.
  first=$(HOLO_OPENCL_DEVICE=$ordinal $B --bench 2>&1 | sed -n 2p)
  case "$first" in opencl:*) ;; *) echo "opencl:$ordinal: $first"; break ;; esac
  echo "== example device_array_opencl on opencl:$ordinal ($first)"
  printf '[deployment]\ndevice = %s\nclient_depth = 4\n\n[camera]\nframe_bytes = 4096\n' "$ordinal" > "$out/opencl_$ordinal.toml"
  timeout 120 .gpu/examples/device_array_opencl --config "$out/opencl_$ordinal.toml" --frames 1000 2>&1 | tail -9
  rc=${PIPESTATUS[0]}; echo "rc=$rc"; [ "$rc" = 0 ] || status=1
  [ -n "${HOLO_SKIP_BENCH:-}" ] && continue   # the tests and examples only (see h200-session.sh)
  echo "== opencl_hop bench 1 on opencl:$ordinal"; date -u; HOLO_OPENCL_DEVICE=$ordinal $B --bench
  echo "== opencl_hop bench 2 on opencl:$ordinal"; date -u; HOLO_OPENCL_DEVICE=$ordinal $B --bench
done
date -u
exit $status
