import subprocess, os, statistics as st, sys, collections
b=sys.argv[1]; shifts=[int(x) for x in sys.argv[2].split(',')]; R=int(sys.argv[3]); n=int(sys.argv[4])
res=collections.defaultdict(list)
for r in range(R):
  for sh in (shifts if r%2==0 else shifts[::-1]):
      env=dict(os.environ, HOLO_BENCH_COMPILE_OPERATORS=str(n), HOLO_BENCH_COMPILE_REPEAT='9', HOLO_PASS_TIMES='1', HOLO_BENCH_HEAP_SHIFT=str(sh),
               MALLOC_TRIM_THRESHOLD_='4294967296', MALLOC_MMAP_THRESHOLD_='4294967296')
      p=subprocess.run([b,'--bench','compile'],env=env,capture_output=True,text=True)
      d=collections.defaultdict(list)
      for l in p.stderr.splitlines():
        if l.startswith('PASS'):
          _,name,us=l.split(); d[name].append(float(us))
      for k,v in d.items(): res[(sh,k)].append(st.median(v[1:]))
for k in ['sweep','edges','rest','size_queues','op+trig','edge_records','ALL']:
  print(f"{k:14s}"+"".join(f" {st.median(res[(sh,k)]):8.1f}" for sh in shifts))
