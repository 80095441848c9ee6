# Per-pass times of the compile, two instrumented host_hop binaries alternating round by round
# (each child: one size, 9 repeated compiles, glibc trim and mmap thresholds at 4 GiB; a pass's
# figure is the median of compiles 2-9, then the median over rounds). Instrumentation: each
# `pass(...)` and three marks in check_graph push (name, µs) to a thread-local, printed once
# per compile to stderr when HOLO_PASS_TIMES is set (not committed).
#
#   python3 passes_ab.py BIN [BIN ...] ROUNDS
#   python3 passes_ab.py --heap-shift B1,B2,... BIN ROUNDS N   (thirty-ninth session: one
#       binary whose bench takes HOLO_BENCH_HEAP_SHIFT, at N operators, per shift in bytes)
#
# (Thirty-ninth session: a pass one binary does not time leaves its columns blank, and a
# figure of 0 gives no growth, where both used to stop the script.)
import subprocess, os, statistics as st, sys, collections

def child(b, n, extra={}):
  env=dict(os.environ, HOLO_BENCH_COMPILE_OPERATORS=str(n), HOLO_BENCH_COMPILE_REPEAT='9', HOLO_PASS_TIMES='1',
           MALLOC_TRIM_THRESHOLD_='4294967296', MALLOC_MMAP_THRESHOLD_='4294967296', **extra)
  p=subprocess.run([b,'--bench','compile'],env=env,capture_output=True,text=True)
  d=collections.defaultdict(list)
  for l in p.stderr.splitlines():
    if l.startswith('PASS'):
      _,name,us=l.split(); d[name].append(float(us))
  return {k: st.median(v[1:]) for k,v in d.items()}

if sys.argv[1]=='--heap-shift':
  shifts=[int(x) for x in sys.argv[2].split(',')]; b=sys.argv[3]; R=int(sys.argv[4]); n=int(sys.argv[5])
  res=collections.defaultdict(list)
  for r in range(R):
    for sh in (shifts if r%2==0 else shifts[::-1]):
      for k,v in child(b, n, {'HOLO_BENCH_HEAP_SHIFT': str(sh)}).items(): res[(sh,k)].append(v)
  for k in ['sweep','edges','rest','size_queues','op+trig','edge_records','ALL']:
    print(f"{k:14s}"+"".join(f" {st.median(res[(sh,k)]):8.1f}" for sh in shifts))
  sys.exit()

bins=sys.argv[1:-1]; R=int(sys.argv[-1])
res=collections.defaultdict(list)
for r in range(R):
  for b in (bins if r%2==0 else bins[::-1]):
    for n in (1000,10000):
      for k,v in child(b, n).items(): res[(b,n,k)].append(v)
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
