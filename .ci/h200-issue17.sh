#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle (.ci/h200-bundle-targeted.sh):
# issue 17 (the shared-stream thread, the same-stream fan-out) on CUDA — the device tests
# that cover them, the fork_streams example, `device_hop fork` three times, `fork-diag`,
# then .ci/h200-perf.sh's three bench rounds (HOLO_SKIP_PERF=1: not those). The host's CPU
# and clock source are printed first (the host hop's ratio differs from this VM's).
export HOLO_REQUIRE_DEVICE=cuda RUST_BACKTRACE=1
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
lscpu | grep -E "^Model name|^CPU\(s\)|^Thread|MHz|^Hypervisor" | tr -s ' '
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource); tsc flags: $(grep -o -w 'constant_tsc\|nonstop_tsc\|tsc_known_freq' /proc/cpuinfo | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
status=0
# fork and worker_placement: the session's teardown in a fork and the workers' CPU set,
# on CUDA (the child must make no driver call); run when the bundle holds them.
for n in stream_contract holo_runtime handoff defects dlpack device_hot_path_no_alloc fork worker_placement; do
  for b in .gpu/bin/$n-*; do
    [ -e "$b" ] || { echo "test $n: not in the bundle"; continue; }
    timeout 180 "$b" --test-threads=1 > "$out/$n.log" 2>&1; rc=$?
    echo "test $n: rc=$rc $(grep -h 'test result' "$out/$n.log" | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}')"
    [ $rc = 0 ] || { status=1; grep -E "FAILED|panicked" -A5 "$out/$n.log" | head -20; }
  done
done
sed 's/shared_process_device = false/shared_process_device = true/' examples/config/fork_streams.toml > "$out/shared.toml"
for c in examples/config/fork_streams.toml "$out/shared.toml"; do
  timeout 60 .gpu/examples/fork_streams --config "$c" --frames 2000 > "$out/fork_streams.log" 2>&1; echo "fork_streams $(basename $c): rc=$?"
  grep -E "configured|partition p|run summary|sink" "$out/fork_streams.log" | head -8
done
D=$(ls .gpu/bench/device_hop-* | head -1)
echo "== device_hop fork"; date -u
HOLO_DEVICE=cuda timeout 300 $D fork | tee "$out/fork.log" | sed -E 's/ +/ /g; s/source: Backpressured/BP/; s/ResourceExhausted/RE/'
echo "== device_hop fork-diag"; date -u
HOLO_DEVICE=cuda timeout 300 $D fork-diag | tee "$out/fork-diag.log" | sed -E 's/ +/ /g; s/source: Backpressured/BP/; s/ResourceExhausted/RE/'
[ -n "${HOLO_SKIP_PERF:-}" ] || HOLO_SKIP_TESTS=1 bash .ci/h200-perf.sh
date -u
exit $status
