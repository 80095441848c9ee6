#!/usr/bin/env bash
# Run on the GPU machine from the repo root with the bundle of .ci/h200-session28c-bundle.sh:
# whether the fused hop's gap is made of TLB misses after each driver call. glibc's
# malloc backs its heap with transparent huge pages under
# GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (glibc 2.35 and later, THP in "madvise" or
# "always" mode): holo's partition state then lies in one or two 2 MiB pages instead of
# a dozen 4 KiB ones. The fused hop of the new binary, pinned to CPU (default 2), with the
# tunable unset and set, which runs first alternating by turn, TURNS turns (default 6),
# every pair printed. Logs go to $OUT.
export RUST_BACKTRACE=1 HOLO_REQUIRE_DEVICE=cuda HOLO_DEVICE=cuda
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
D=$(ls .gpu/bench/device_hop-* | head -1)
{
  bash .ci/gpu-machine.sh; ldd --version | head -1
  echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
} | tee "$out/machine.log"
for turn in $(seq 1 "${TURNS:-6}"); do
  order=(plain hugetlb); [ $((turn % 2)) -eq 0 ] && order=(hugetlb plain)
  for mode in "${order[@]}"; do
    echo "== fused turn $turn: pinned-$mode"
    if [ "$mode" = hugetlb ]; then export GLIBC_TUNABLES=glibc.malloc.hugetlb=1; else unset GLIBC_TUNABLES; fi
    HOLO_BENCH_VERBOSE=1 HOLO_BENCH_ONLY=fused HOLO_BENCH_PAIRS=31 timeout 80 taskset -c "${CPU:-2}" "$D" --bench \
      | grep -E "^fused|^  fused"
    [ "$mode" = hugetlb ] && [ "$turn" = 1 ] && grep -m3 -E "AnonHugePages" /proc/meminfo
  done
done 2>&1 | tee "$out/fused-hugetlb.log"
unset GLIBC_TUNABLES
date -u
