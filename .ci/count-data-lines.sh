#!/usr/bin/env bash
# The fused hop's data footprint between two device calls, traced on this machine (no GPU
# needed): `device_hop diag-null` (a device that does nothing) under valgrind's lackey with
# every load and store traced. Every fill and copy of the null device starts a segment; per
# steady-state segment it counts the distinct 64-byte lines of data (heap, stack, statics)
# that holo's and the bench's own code touch before the next device call. After a GPU
# driver call the core's caches hold the driver's lines, not these: each is fetched again
# (`device_hop cold-probe` prices one on the GPU machine). Exact, unlike a cache model:
# it counts lines touched, whatever a cache of some size would have kept.
# `bash .ci/count-data-lines.sh [device_hop-binary]` (no argument: builds the bench first);
# LIST=1 also prints one steady frame's lines, each with the code that touched it first in
# its segment (file:line, inlined callers after `<-`). Needs valgrind, binutils, python3.
set -eu
cd "$(git rev-parse --show-toplevel)"
if [ $# -eq 1 ]; then B=$1; else
  source .ci/pick.sh
  B=$(cargo bench --no-run --message-format=json -p holo-runtime --bench device_hop 2>/dev/null | pick bench device_hop)
fi
code=$(cat <<'PY'
import collections, re, subprocess, sys, os
binary, listing = sys.argv[1], sys.argv[2] == '1'
BASE = 0x108000  # where valgrind maps a position-independent executable
excl, bounds = [], {}
for l in subprocess.run(['nm', '-S', '-C', binary], capture_output=True, text=True).stdout.splitlines():
    p = l.split(None, 3)
    if len(p) < 4 or 'null_device' not in p[3]:
        continue
    s, z = int(p[0], 16), int(p[1], 16)
    excl.append((BASE + s, BASE + s + z))
    for call in ('memset_async', 'copy_async'):
        if f'NullDevice as holo_runtime::device::DeviceBackend>::{call}' in p[3]:
            bounds[BASE + s] = call
for l in subprocess.run(['readelf', '-lW', binary], capture_output=True, text=True).stdout.splitlines():
    if 'LOAD' in l and 'R E' in l:
        p = l.split(); text = (BASE + int(p[2], 16), BASE + int(p[2], 16) + int(p[4], 16))
SKIP, KEEP = 4000, 400  # segments: warm-up left out, then counted
segs, cur, at, mine, kind, seen = [], None, 0, False, None, 0
for line in sys.stdin:
    if line[0] == 'I':
        a = int(line[3:line.index(',')], 16)
        # A device call entered from holo's code (not one null-device call from another).
        if a in bounds and mine:
            seen += 1
            if cur is not None and seen > SKIP:
                segs.append((kind, cur))
                if len(segs) == KEEP:
                    break
            cur, kind = {}, bounds[a]
        at = a
        mine = text[0] <= a < text[1] and not any(s <= a < e for s, e in excl)
    elif line[0] == ' ' and cur is not None and mine:
        cur.setdefault(int(line[3:line.index(',')], 16) >> 6, (at, line[1]))
if len(segs) < KEEP:
    sys.exit(f'only {len(segs)} steady segments traced')
n, total = collections.Counter(), collections.Counter()
for k, s in segs:
    n[k] += 1; total[k] += len(s)
print(f"fused hop: {sum(total.values()) / min(n.values()):.1f} data lines touched per frame between device calls ("
      + ', '.join(f'after each {k}: {total[k] / n[k]:.1f}' for k in sorted(n)) + f'), {len(segs)} segments')
if listing:
    (k1, s1), (k2, s2) = segs[-2], segs[-1]
    addrs = sorted({i - BASE for s in (s1, s2) for i, _ in s.values()})
    out = subprocess.run(['addr2line', '-a', '-f', '-i', '-C', '-e', binary] + [hex(a) for a in addrs],
                         capture_output=True, text=True).stdout
    blocks = re.split(r'^(0x[0-9a-f]+)\n', out, flags=re.M)[1:]
    where = {}
    for j in range(0, len(blocks), 2):
        ls = blocks[j + 1].strip().split('\n')
        where[int(blocks[j], 16)] = ' <- '.join('/'.join(ls[q + 1].split('/')[-2:]) for q in range(0, len(ls) - 1, 2))[:110]
    for line in sorted(set(s1) | set(s2)):
        print(f'{line << 6:x}', ' | '.join(f'{k}:{s[line][1]}:{where.get(s[line][0] - BASE, "?")}'
                                           for k, s in ((k1, s1), (k2, s2)) if line in s))
sys.stdout.flush()
os._exit(0)
PY
)
# Python stops reading once it has its segments; valgrind then dies of the closed pipe.
HOLO_BENCH_NULL_SHAPE=${SHAPE:-fused} valgrind --tool=lackey --trace-mem=yes --fair-sched=yes --log-fd=9 \
  "$B" diag-null 9>&1 >/dev/null 2>/dev/null | python3 -c "$code" "$B" "${LIST:-0}"
