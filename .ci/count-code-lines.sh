#!/usr/bin/env bash
# The fused hop's footprint in code, counted with callgrind on this machine (no GPU
# needed), as BENCHMARKS.md quotes it: `device_hop diag-null` (a device that does nothing)
# with `--dump-instr=yes`, collected inside the partition loop; per frame (the count of
# `fill_frame` calls), the instructions executed, and the distinct 64-byte lines of code
# holding every instruction executed at least 0.9 times a frame ("hot code lines"), beside
# the fewest lines those instructions' bytes could fill. After a GPU driver call, the core's
# instruction cache holds the driver's code, not holo's: each hot line is then fetched
# again (`device_hop cold-probe` prices a line on the GPU machine). It also counts the
# data lines holo's own code misses per frame when every device call evicts the L1 data
# cache first (`HOLO_BENCH_EVICT_KIB=64`, callgrind's cache simulation).
# `bash .ci/count-code-lines.sh [device_hop-binary]` (with no argument it builds the
# bench first); SHAPE=chain or fenced for another scenario. The null device's own code is
# not counted: on a GPU the driver's calls replace it.
# `bash .ci/count-code-lines.sh handoff [handoff-binary]`: the same per steady-state
# hand-off (`handoff::adopted_hand_off` on the software device, as .ci/count-instructions.sh
# collects it), without the software backend's own event calls, which CUDA replaces.
# Needs valgrind, binutils and python3.
set -eu
cd "$(git rev-parse --show-toplevel)"
mode=fused; [ "${1:-}" = handoff ] && { mode=handoff; shift; }
bench=device_hop; [ $mode = handoff ] && bench=handoff
if [ $# -eq 1 ]; then B=$1; else
  source .ci/pick.sh
  B=$(cargo bench --no-run --message-format=json -p holo-runtime --bench $bench 2>/dev/null | pick bench $bench)
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if [ $mode = fused ]; then
  HOLO_BENCH_NULL_SHAPE=${SHAPE:-fused} valgrind --tool=callgrind --dump-instr=yes --fair-sched=yes \
    --callgrind-out-file="$tmp/cg" --toggle-collect='holo_runtime::session::run::partition_loop' "$B" diag-null >/dev/null 2>&1
  frames=$(callgrind_annotate --tree=calling "$tmp/cg" 2>/dev/null | grep -m1 -E "> .*device_hop::fill_frame \(" \
    | sed -E 's/.*\(([0-9,]+)x\).*/\1/' | tr -d ,)
  what="fused hop"; per=frame; skip='null_device'
  # Data: the null device writes 64 KiB in every call (more than a core's L1 data cache),
  # and callgrind's cache simulation counts the lines holo's own code then misses (DATA=0:
  # not counted, for a bench binary from before HOLO_BENCH_EVICT_KIB).
  if [ "${DATA:-1}" = 1 ]; then
  HOLO_BENCH_EVICT_KIB=64 HOLO_BENCH_NULL_SHAPE=${SHAPE:-fused} valgrind --tool=callgrind --cache-sim=yes --fair-sched=yes \
    --callgrind-out-file="$tmp/dcg" --toggle-collect='holo_runtime::session::run::partition_loop' "$B" diag-null >/dev/null 2>&1
  callgrind_annotate --inclusive=yes --show-percs=no --show=Ir,D1mr,D1mw "$tmp/dcg" 2>/dev/null > "$tmp/d.txt"
  dframes=$(callgrind_annotate --tree=calling "$tmp/dcg" 2>/dev/null | grep -m1 -E "> .*device_hop::fill_frame \(" \
    | sed -E 's/.*\(([0-9,]+)x\).*/\1/' | tr -d ,)
  read -r tr tw < <(grep -m1 "PROGRAM TOTALS" "$tmp/d.txt" | awk '{gsub(",","",$2); gsub(",","",$3); print $2, $3}')
  read -r pr pw < <(grep -m1 -E "NullDevice::pollute \[" "$tmp/d.txt" | awk '{gsub(",","",$2); gsub(",","",$3); print $2, $3}')
  awk -v r=$((tr - pr)) -v w=$((tw - pw)) -v f="$dframes" 'BEGIN {printf "fused hop, L1 evicted in every device call: %.1f D1 read misses, %.1f D1 write misses of holo'"'"'s own per frame\n", r / f, w / f}'
  fi
else
  HOLO_BENCH_BATCHES=14 valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$tmp/cg" \
    --toggle-collect='handoff::adopted_hand_off' "$B" >/dev/null 2>&1
  frames=$(callgrind_annotate --tree=calling "$tmp/cg" 2>/dev/null | grep -m1 -E "> .*DeviceBackend::wait_event_unchecked \(" \
    | sed -E 's/.*\(([0-9,]+)x\).*/\1/' | tr -d ,)
  what="steady-state hand-off"; per=hand-off; skip='SoftwareDevice|software::'
fi
objdump -d --no-show-raw-insn -C "$B" > "$tmp/asm"
python3 - "$tmp/cg" "$tmp/asm" "$frames" "$(basename "$B")" "$what" "$per" "$skip" <<'PY'
import collections, re, sys
cg, asm_file, frames, binary, what, per, exclude = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], re.compile(sys.argv[7])
# Self cost per instruction address of the bench binary's own code (callgrind's format:
# compressed names, positions "instr line", relative addresses, call lines skipped).
names = {'ob': {}, 'fn': {}}
space = {'ob': 'ob', 'cob': 'ob', 'fn': 'fn', 'cfn': 'fn'}
ob = fn = None
cost = collections.Counter(); where = {}
last = 0; skip = False
def position(tok, prev):
    if tok == '*': return prev
    if tok.startswith('0x'): return int(tok, 16)
    if tok[0] in '+-': return prev + int(tok)
    return int(tok)
for line in open(cg):
    line = line.rstrip('\n')
    if not line: continue
    m = re.match(r'^(\w+)=\((\d+)\)(?: (.*))?', line)
    if m:
        key, ident, name = m.groups()
        if key in space:
            if name: names[space[key]][ident] = name
            if key == 'ob': ob = names['ob'][ident]
            if key == 'fn': fn = names['fn'][ident]
        continue
    if line.startswith('calls='): skip = True; continue
    if re.match(r'^[a-z]+[=:]', line): continue
    parts = line.split()
    if parts[0][0] not in '0123456789+-*': continue
    last = position(parts[0], last)
    if skip: skip = False; continue
    if len(parts) >= 3 and ob and binary in ob and not exclude.search(fn or "-"):
        cost[last] += int(parts[2]); where[last] = fn
addresses = []
for l in open(asm_file):
    m = re.match(r'^\s*([0-9a-f]+):\s', l)
    if m: addresses.append(int(m.group(1), 16))
size = {a: b - a for a, b in zip(addresses, addresses[1:])}
total = sum(cost.values()) / frames
per_fn = collections.defaultdict(lambda: [set(), 0, 0.0])
for a, c in cost.items():
    if c / frames < 0.9: continue
    f = per_fn[where[a][:90]]
    f[0].add(a // 64); f[1] += size.get(a, 4); f[2] += c / frames
lines = set().union(*(f[0] for f in per_fn.values()))
print(f"{what}: {total:.0f} instructions per {per}, {len(lines)} hot code lines "
      f"(their bytes would fill {sum(f[1] for f in per_fn.values()) / 64:.0f}), {frames} {per}s")
for name, (ls, b, i) in sorted(per_fn.items(), key=lambda x: -len(x[1][0])):
    print(f"  {len(ls):3d} lines ({b / 64:4.1f} full) {i:6.1f} instructions  {name}")
PY
