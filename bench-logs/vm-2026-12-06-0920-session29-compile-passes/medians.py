import collections, statistics, sys
pre=sys.argv[1]
d={}
for n in (1000,10000):
    c=collections.defaultdict(list)
    for l in open(f'{pre}-{n}.txt'):
        f=l.split()
        if f[0]=='PASS': c[f[1]].append(float(f[2]))
        else: c['TOTAL'].append(float(f[2])*1000)
    d[n]={k:statistics.median(v) for k,v in c.items()}
for k in d[1000]:
    a,b=d[1000][k],d[10000].get(k,0)
    print(f"{k:16s} {a:8.1f} {b:9.1f}  x{b/a if a else 0:5.1f}  excess {b-10*a:8.1f}")
