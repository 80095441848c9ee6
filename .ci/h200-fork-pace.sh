#!/usr/bin/env bash
# Run on the GPU machine from the repo root after a bundle holding device_hop and handoff
# (.ci/h200-bundle-targeted.sh with HOLO_BENCHES="device_hop handoff"): where the fork's
# latency goes (issue 17). `device_hop fork` three times at the issue's 1 µs source
# period, then twice with a source period of 12 µs (HOLO_BENCH_FORK_PACE_NS), slower than
# a sink's service time; each run has the raw threaded baseline with the release events
# polled by the producer (the issue's) and by a thread of their own (holo's layout). Then
# `device_hop fused-probe` (is a driver call slower on holo's partition thread?), five
# rounds of the hand-off bench and two of device_hop's hops (issues 13 and 12).
export HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda RUST_BACKTRACE=1
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=$(ls .gpu/bench/device_hop-* | head -1); H=$(ls .gpu/bench/handoff-* | head -1)
squeeze() { sed -E 's/ +/ /g; s/source: Backpressured/BP/; s/ResourceExhausted/RE/'; }
echo "== device_hop fork, 1 µs"; timeout 200 "$D" fork | squeeze
echo "== device_hop fork, 12 µs"; HOLO_BENCH_FORK_PACE_NS=12000 HOLO_BENCH_RUNS=2 timeout 200 "$D" fork | squeeze
echo "== device_hop fused-probe"; timeout 120 "$D" fused-probe
for round in 1 2 3 4 5; do echo "== handoff round $round"; timeout 60 "$H" --bench | grep -E "^cuda"; done
for round in 1 2; do echo "== device_hop round $round"; HOLO_BENCH_PAIRS=31 timeout 150 "$D" --bench | grep -vE "^  "; done
date -u
