#!/usr/bin/env python3
"""Groups a dhat profile of `host_hop --bench compile` at one size by what allocated:
the graph's build (the bench's chain), the compile's plan data, the compile's other
allocations (its passes' indices and scratch), and the copy of the plan the bench makes
after it.

    HOLO_BENCH_COMPILE_OPERATORS=10000 HOLO_BENCH_COMPILE_REPEAT=1 \\
      valgrind --tool=dhat --dhat-out-file=/tmp/dhat10k.json <host_hop bench> --bench compile
    python3 .ci/dhat-compile-groups.py /tmp/dhat10k.json
"""
import json
import re
import sys

d = json.load(open(sys.argv[1]))
ftbl, pps = d["ftbl"], d["pps"]
groups = {}
for p in pps:
    fs = [ftbl[i] for i in p["fs"]]
    txt = " ".join(fs)
    if "slice.rs:425" in txt:  # `<[T]>::to_vec`, as `Vec::clone` calls it: the plan's copy
        g = "the plan's copy (clone)"
    elif "compile::" not in txt:
        g = "the graph's build"
    elif re.search(r"holo_runtime::plan::", next((f for f in fs if "holo_runtime::" in f), "")):
        # The allocation's first frame that names holo names a plan type: the plan's data.
        g = "compile: the plan's data"
    else:
        g = "compile: everything else"
    a = groups.setdefault(g, [0, 0, 0])
    a[0] += p["tb"]
    a[1] += p["tbk"]
    a[2] += p["mb"]
print(f"{sys.argv[1]}: {sum(p['tb'] for p in pps) / 1e6:.2f} MB allocated in all")
for g, (tb, tbk, mb) in sorted(groups.items(), key=lambda x: -x[1][0]):
    print(f"{g:28s} {tb / 1e6:7.2f} MB in {tbk:7d} blocks (the program points' peaks summed: {mb / 1e6:.2f} MB)")
