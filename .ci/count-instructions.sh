#!/usr/bin/env bash
# holo's own instructions on two device paths, counted with callgrind on this machine (no
# GPU needed), as BENCHMARKS.md quotes them:
#   - per steady-state hand-off (`handoff` bench, software device): collected inside
#     `handoff::adopted_hand_off` (one `device_array_on` on a stream adopted once, and the
#     array's drop), less the software backend's `wait_event_unchecked` and
#     `record_event_unchecked`, over the 15 × 2000 hand-offs of that row;
#   - the cache lines a steady-state hand-off misses when every device call evicts the
#     core's L1 data cache first, as a GPU driver's calls do (`handoff cold` on the null
#     device writing 64 KiB in each call; callgrind's cache simulation, so the counts are
#     exact): D1 read and write misses inside `handoff::adopted_hand_off`, less the
#     device's calls, over its 600 hand-offs;
#   - per fused-hop frame (`device_hop diag-null`, a device that does nothing): collected
#     inside the partition loop (`--fair-sched=yes`, so the bench's own thread ends the run
#     in time), its inclusive count over the frames (`fill_frame` calls).
# `bash .ci/count-instructions.sh [handoff-binary device_hop-binary]`: with no arguments it
# builds the two benches first. Needs valgrind (apt-get install -y valgrind).
set -eu  # no pipefail: `grep -m1` closes callgrind_annotate's pipe early
cd "$(git rev-parse --show-toplevel)"
if [ $# -eq 2 ]; then H=$1; D=$2; else
  source .ci/pick.sh
  exes=$(cargo bench --no-run --message-format=json -p holo-runtime --bench handoff --bench device_hop 2>/dev/null | pick bench handoff device_hop)
  H=$(echo "$exes" | grep '/handoff-'); D=$(echo "$exes" | grep '/device_hop-')
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
inclusive() { callgrind_annotate --inclusive=yes "$1" 2>/dev/null; }
HOLO_BENCH_BATCHES=14 valgrind --tool=callgrind --callgrind-out-file="$tmp/h" \
  --toggle-collect='handoff::adopted_hand_off' "$H" >/dev/null 2>&1
total=$(inclusive "$tmp/h" | grep -m1 "PROGRAM TOTALS" | awk '{gsub(",","",$1); print $1}')
backend=$(inclusive "$tmp/h" | grep -E "^ *[0-9,]+ .*device/mod.rs:holo_runtime::device::DeviceBackend::(wait_event_unchecked|record_event_unchecked) \[" \
  | awk '{gsub(",","",$1); s+=$1} END {print s+0}')
echo "hand-off: $(( (total - backend) / 30000 )) instructions of holo's own per steady-state hand-off (software device)"
HOLO_BENCH_BATCHES=2 HOLO_BENCH_EVICT_KIB=64 valgrind --tool=callgrind --cache-sim=yes \
  --callgrind-out-file="$tmp/c" --toggle-collect='handoff::adopted_hand_off' "$H" cold >/dev/null 2>&1
callgrind_annotate --inclusive=yes --show=Ir,D1mr,D1mw "$tmp/c" 2>/dev/null >"$tmp/c.txt"
read -r cr cw < <(grep -m1 "PROGRAM TOTALS" "$tmp/c.txt" | awk '{gsub(",","",$3); gsub(",","",$5); print $3, $5}')
read -r dr dw < <(grep -E "device/mod.rs:holo_runtime::device::DeviceBackend::(wait_event_unchecked|record_event_unchecked)( \[| *$)" "$tmp/c.txt" \
  | awk '{gsub(",","",$3); gsub(",","",$5); r+=$3; w+=$5} END {print r+0, w+0}')
awk -v r=$((cr - dr)) -v w=$((cw - dw)) 'BEGIN {printf "hand-off, L1 evicted in every device call: %.1f D1 read misses, %.1f D1 write misses of holo'"'"'s own per hand-off\n", r / 600, w / 600}'
HOLO_BENCH_NULL_SHAPE=fused valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$tmp/d" \
  --toggle-collect='holo_runtime::session::run::partition_loop' "$D" diag-null >/dev/null 2>&1
frames=$(callgrind_annotate --tree=calling "$tmp/d" 2>/dev/null | grep -m1 -E "> .*device_hop::fill_frame \(" \
  | sed -E 's/.*\(([0-9,]+)x\).*/\1/' | tr -d ,)
loop=$(inclusive "$tmp/d" | grep -m1 "run::partition_loop \[" | awk '{gsub(",","",$1); print $1}')
echo "fused hop: $(( loop / frames )) instructions per frame in the partition loop (null device, $frames frames)"
