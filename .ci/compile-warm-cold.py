#!/usr/bin/env python3
"""Issue 12's compile growth, warm against cold: `host_hop`'s one-size children
(`HOLO_BENCH_COMPILE_OPERATORS`), repeated compiles with glibc's trim and mmap thresholds
out of play (the compile section's figure 3), with and without `HOLO_BENCH_COMPILE_EVICT`
(a 128 MiB sweep before each compile and each copy: figure 5), for ROUNDS rounds. Each
round runs 1,000 then 10,000 operators of both kinds, the kinds' order alternating round by
round; the growth is taken per round, then its median and quartiles.

Given several `host_hop` binaries (a change and its base), each round runs every one of
them, their order alternating too, so that the VM's changes of speed reach them alike.

    python3 .ci/compile-warm-cold.py target/release/deps/host_hop-<hash> 30
    python3 .ci/compile-warm-cold.py /tmp/host_hop-base target/release/deps/host_hop-<hash> 30
"""
import subprocess, os, statistics as st, sys
BINS=sys.argv[1:-1]; R=int(sys.argv[-1])
base=dict(os.environ, MALLOC_TRIM_THRESHOLD_="4294967296", MALLOC_MMAP_THRESHOLD_="4294967296", HOLO_BENCH_COMPILE_REPEAT="9")
def child(b, n, evict):
    e=dict(base, HOLO_BENCH_COMPILE_OPERATORS=str(n))
    if evict: e["HOLO_BENCH_COMPILE_EVICT"]="1"
    w=subprocess.run([b,"--bench","compile"],env=e,capture_output=True,text=True).stdout.split()
    return float(w[2]), float(w[7])
res={(b,n,ev):[] for b in BINS for n in (1000,10000) for ev in (False,True)}
for r in range(R):
    for b in (BINS if r%2==0 else BINS[::-1]):
        for ev in ((False,True) if r%2==0 else (True,False)):
            for n in (1000,10000):
                res[(b,n,ev)].append(child(b,n,ev))
for b in BINS:
    if len(BINS)>1: print(b)
    for ev in (False,True):
        a=res[(b,1000,ev)]; c=res[(b,10000,ev)]
        g=[y[0]/x[0] for x,y in zip(a,c)]; gc=[y[1]/x[1] for x,y in zip(a,c)]
        print(f"{'evicted' if ev else 'warm   '}: 1k {st.median([x[0] for x in a]):.3f} ms, 10k {st.median([y[0] for y in c]):.3f} ms; growth per round median x{st.median(g):.1f} (quartiles {st.quantiles(g,n=4)[0]:.1f}-{st.quantiles(g,n=4)[2]:.1f}); copy x{st.median(gc):.1f}")
        print("   per round:", " ".join(f"{x:.1f}" for x in g))
