# Per-pass times of the compile, two instrumented host_hop binaries alternating round by round
# (each child: one size, 9 repeated compiles, glibc trim and mmap thresholds at 4 GiB; a pass's
# figure is the median of compiles 2-9, then the median over rounds). Instrumentation: each
# `pass(...)` and three marks in check_graph push (name, µs) to a thread-local, printed once
# per compile to stderr when HOLO_PASS_TIMES is set (not committed).
import subprocess, os, statistics as st, sys, collections
bins=sys.argv[1:-1]; R=int(sys.argv[-1])
res=collections.defaultdict(list)
for r in range(R):
  for b in (bins if r%2==0 else bins[::-1]):
    for n in (1000,10000):
      env=dict(os.environ, HOLO_BENCH_COMPILE_OPERATORS=str(n), HOLO_BENCH_COMPILE_REPEAT='9', HOLO_PASS_TIMES='1',
               MALLOC_TRIM_THRESHOLD_='4294967296', MALLOC_MMAP_THRESHOLD_='4294967296')
      p=subprocess.run([b,'--bench','compile'],env=env,capture_output=True,text=True)
      d=collections.defaultdict(list)
      for l in p.stderr.splitlines():
        if l.startswith('PASS'):
          _,name,us=l.split(); d[name].append(float(us))
      for k,v in d.items(): res[(b,n,k)].append(st.median(v[1:]))
names=[]
for (b,n,k) in res:
  if k not in names: names.append(k)
print(f"{'pass':16s}" + "".join(f" {os.path.basename(b)[:14]:>14s} 1k  10k  growth" for b in bins))
for k in names:
  row=f"{k:16s}"
  for b in bins:
    if not res[(b,1000,k)]: row+=' '*25; continue
    a=st.median(res[(b,1000,k)]); c=st.median(res[(b,10000,k)])
    row+=f" {a:9.1f} {c:9.1f} x{(c/a if a else 0):5.1f}"
  print(row)
