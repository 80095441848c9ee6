#!/usr/bin/env bash
# Run on the GPU machine from the repo root after .ci/h200-bundle-issue15-device.sh: the
# device cross-process suite (HOLO_IPC_DEVICE_FRAMES frames per size, default 2000), the
# host one, the device suites, ipc_producer in device mode, the benches; compute-sanitizer
# over both processes of one checksum run when it is installed.
export RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export HOLO_IPC_PEER=$PWD/.gpu/bin/ipc_peer
status=0
run_test() { # name, extra env
  local n=$1; shift
  for b in .gpu/bin/$n-*; do
    env "$@" timeout 500 "$b" --nocapture --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
    echo "test $n: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
    grep -h "ipc device checksum" "$out/$n.log"
    [ $rc = 0 ] || { status=1; grep -E "FAILED|panicked" -A8 "$out/$n.log" | head -40; }
  done
}
if [ -n "$MILLION" ]; then
  # The 10⁶-frame checksum at 256 B, 64 KiB and 4 MiB, alone.
  for b in .gpu/bin/ipc_device-*; do
    HOLO_REQUIRE_DEVICE=cuda HOLO_IPC_DEVICE_FRAMES=1000000 timeout ${MILLION_TIMEOUT:-560} "$b" device_frames_reach --nocapture > "$out/million.log" 2>&1
    echo "10^6 checksum: rc=$?"; grep -hE "ipc device checksum|test result|panicked|peer said" "$out/million.log"
  done
  date -u; exit 0
fi
run_test ipc_device HOLO_REQUIRE_DEVICE=cuda
grep -h "ipc device killed\|ipc device publisher" "$out/ipc_device.log"
run_test ipc_boundary HOLO_REQUIRE_DEVICE=cuda
run_test ipc_sessions HOLO_REQUIRE_DEVICE=cuda
run_test ipc_import_no_alloc HOLO_REQUIRE_DEVICE=cuda
run_test ipc_export_no_alloc HOLO_REQUIRE_DEVICE=cuda
if [ -z "$ONLY_DEVICE" ]; then
  run_test ipc
  run_test ipc_publish
fi
if [ -x /usr/local/cuda/bin/compute-sanitizer ] || command -v compute-sanitizer >/dev/null; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  echo "== compute-sanitizer (both processes, 500 frames per size)"
  HOLO_REQUIRE_DEVICE=cuda HOLO_IPC_DEVICE_FRAMES=500 timeout 500 "$cs" --target-processes all --tool memcheck \
    .gpu/bin/ipc_device-* device_frames_reach --nocapture > "$out/sanitizer.log" 2>&1
  echo "compute-sanitizer rc=$?"; grep -E "ERROR SUMMARY|test result|ipc device checksum" "$out/sanitizer.log" | head
else
  echo "compute-sanitizer: not installed"
fi
[ -n "$ONLY_DEVICE" ] && { date -u; exit $status; }
for b in .gpu/bench/*; do echo "== $b"; timeout 300 "$b" | tee "$out/$(basename "$b").log" | tail -12; done
timeout 60 .gpu/examples/ipc_producer --frames 2000 > "$out/ipc_producer.log" 2>&1; echo "ipc_producer: rc=$?"; tail -4 "$out/ipc_producer.log"
date -u
exit $status
