#!/usr/bin/env bash
# Run on the GPU machine from the repo root after `HOLO_TESTS=handoff
# HOLO_EXAMPLES=device_array_handoff HOLO_BENCHES="device_hop handoff" bash
# .ci/h200-bundle-targeted.sh`. The question: is a card's "slow state" (the fused hop's raw
# loop at 6.4-6.8 us a frame instead of 3.8-4.2, holo's gap over it 440 ns instead of
# 160-190) a property of the CPU the loop runs on? The machine's topology (NUMA nodes, the
# GPU's local CPUs, clocks), then the fused hop pinned to each CPU in turn, twice (ascending,
# then descending, so a drift in time is not read as a CPU's), then the hand-off rows pinned
# to four CPUs, the hand-off suite and example as a check. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1)
H=$(ls .gpu/bench/handoff-* | head -1)
bash .ci/gpu-machine.sh | tee "$out/machine.log"
{
  echo "== lscpu"; lscpu
  echo "== numactl -H"; numactl -H 2>&1 | head -20
  echo "== nvidia-smi topo -m"; nvidia-smi topo -m 2>&1
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-F' 'a-f' | sed 's/^0000//')
  for d in /sys/bus/pci/devices/*"${bus#*:}"; do
    echo "== $d: numa_node $(cat "$d/numa_node" 2>/dev/null), local_cpulist $(cat "$d/local_cpulist" 2>/dev/null)"
  done
  echo "== clocks"; nvidia-smi --query-gpu=pstate,clocks.sm,clocks.mem,clocks.max.sm,pcie.link.gen.current,pcie.link.width.current,power.draw --format=csv
  echo "== cpu MHz"; grep MHz /proc/cpuinfo | sort | uniq -c
} 2>&1 | tee "$out/topology.log"
n=$(nproc)
for sweep in up down; do
  if [ $sweep = up ]; then cpus=$(seq 0 $((n - 1))); else cpus=$(seq $((n - 1)) -1 0); fi
  for k in $cpus; do
    line=$(HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=7 timeout 60 taskset -c "$k" "$D" --bench 2>&1 | grep -E "^fused hop")
    echo "$sweep cpu $k: $line"
  done
done 2>&1 | tee "$out/fused-per-cpu.log"
date -u
for k in 0 $((n / 4)) $((n / 2)) $((n - 1)); do
  echo "== handoff pinned to cpu $k"; timeout 60 taskset -c "$k" "$H" --bench 2>&1 | grep -E "^cuda"
done 2>&1 | tee "$out/handoff-per-cpu.log"
for b in .gpu/bin/handoff-*; do
  echo "test handoff: $(timeout 120 "$b" --test-threads=1 2>&1 | grep -E 'test result|FAILED|panicked' | head -3)"
done | tee "$out/tests.log"
echo "== example device_array_handoff"; timeout 60 .gpu/examples/device_array_handoff 2>&1 | tail -3 | tee "$out/examples.log"
date -u
