#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle built with
#   HOLO_TESTS="stream_contract handoff defects dlpack device_hot_path_no_alloc fork worker_placement ipc_device opencl cuda_context kernel_author topics" \
#   HOLO_EXAMPLES="fork_streams device_array_handoff" HOLO_BENCHES="device_hop handoff" bash .ci/h200-bundle-targeted.sh
# and the peer (cargo build --release -p holo-tests --bin ipc_peer; cp target/release/ipc_peer .gpu/bin/).
# That .gpu/ is about 77 MB, past the device tool's 64 MiB: pack it as one archive
# (mv .gpu /tmp/gpu-full; mkdir .gpu; tar cf - -C /tmp/gpu-full . | xz -T2 > .gpu/all.tar.xz,
# about 12 MB) and unpack it on the device first (tar xJf .gpu/all.tar.xz -C .gpu).
# What sessions 17 to 19 changed that touches CUDA (BENCHMARKS.md, "Not run on the H200
# yet"; RELIABILITY.md, both audit rounds): `tests` runs the device suites on CUDA (and
# `opencl` on NVIDIA's OpenCL) and the two examples; `benches` runs `device_hop
# fused-probe` (issue 12), five hand-off rounds (issue 13), `device_hop fork` (issue 17)
# and two rounds of device_hop's hops. Logs go to $OUT.
what=${1:-tests}
export RUST_BACKTRACE=1 HOLO_IPC_PEER=$PWD/.gpu/bin/ipc_peer
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
run_test() { # name, then env assignments
  local n=$1; shift
  for b in .gpu/bin/$n-*; do
    [ -e "$b" ] || { echo "test $n: not in the bundle"; continue; }
    env "$@" timeout 240 "$b" --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
    echo "test $n: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
    [ $rc = 0 ] || { status=1; grep -E "FAILED|panicked" -A6 "$out/$n.log" | head -24; }
  done
}
if [ "$what" = tests ]; then
  for n in stream_contract holo_runtime handoff defects dlpack device_hot_path_no_alloc fork worker_placement cuda_context kernel_author topics ipc_device; do
    run_test "$n" HOLO_REQUIRE_DEVICE=cuda
  done
  run_test opencl HOLO_REQUIRE_DEVICE=opencl
  timeout 60 .gpu/examples/fork_streams --frames 2000 > "$out/fork_streams.log" 2>&1
  echo "fork_streams: rc=$?"; grep -E "^device|run summary" "$out/fork_streams.log"
  timeout 60 .gpu/examples/device_array_handoff --frames 200 > "$out/handoff_example.log" 2>&1
  echo "device_array_handoff: rc=$?"; grep -E "^device|run summary|client" "$out/handoff_example.log"
  printf '[deployment]\ndevice = 99\n' > "$out/dev99.toml"
  timeout 60 .gpu/examples/device_array_handoff --config "$out/dev99.toml" --frames 2 > "$out/dev99.log" 2>&1
  echo "device_array_handoff, device = 99: rc=$? $(tail -1 "$out/dev99.log")"
else
  export HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
  D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
  squeeze() { sed -E 's/ +/ /g; s/source: Backpressured/BP/; s/ResourceExhausted/RE/'; }
  echo "== device_hop fused-probe"; timeout 120 "$D" fused-probe | tee "$out/fused-probe.log"
  for round in 1 2 3 4 5; do echo "== handoff round $round"; timeout 60 "$H" --bench | grep -E "^cuda"; done | tee "$out/handoff.log"
  echo "== device_hop fork, 1 µs"; HOLO_BENCH_RUNS=1 timeout 120 "$D" fork | squeeze | tee "$out/fork.log"
  for round in 1 2; do echo "== device_hop round $round"; HOLO_BENCH_PAIRS=31 timeout 150 "$D" --bench | grep -vE "^  "; done | tee "$out/device_hop.log"
fi
date -u
exit $status
