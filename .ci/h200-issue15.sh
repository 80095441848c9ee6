#!/usr/bin/env bash
# Run on the GPU machine from the repo root after .ci/h200-bundle-issue15.sh: the
# cross-process host tests (with the bundled peer), the device suites on CUDA, the
# ipc_producer example, ipc_hop three times, and device_hop --bench once.
export RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
uname -r; lscpu | grep -E "^Model name|^CPU\(s\)" | tr -s ' '
export HOLO_IPC_PEER=$PWD/.gpu/bin/ipc_peer
status=0
run_test() { # name, extra env
  local n=$1; shift
  for b in .gpu/bin/$n-*; do
    env "$@" timeout 300 "$b" > "$out/$n.log" 2>&1; rc=$?
    echo "test $n: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
    [ $rc = 0 ] || { status=1; grep -E "FAILED|panicked" -A5 "$out/$n.log" | head -20; }
  done
}
run_test ipc
for n in stream_contract topics handoff defects device_hot_path_no_alloc holo_runtime; do
  run_test $n HOLO_REQUIRE_DEVICE=cuda
done
timeout 60 .gpu/examples/ipc_producer --frames 2000 > "$out/ipc_producer.log" 2>&1; echo "ipc_producer: rc=$?"
tail -6 "$out/ipc_producer.log"
HOLO_REQUIRE_DEVICE=cuda timeout 60 .gpu/examples/device_array_handoff --frames 500 > "$out/handoff_example.log" 2>&1; echo "device_array_handoff: rc=$?"
grep -E "client:|run summary" "$out/handoff_example.log" | head -3
for i in 1 2 3; do
  echo "== ipc_hop $i"; timeout 300 .gpu/bench/ipc_hop-* | tee "$out/ipc_hop_$i.log" | tail -5
done
echo "== device_hop --bench"; HOLO_DEVICE=cuda timeout 400 .gpu/bench/device_hop-* --bench | tee "$out/device_hop.log" | tail -25
date -u
exit $status
