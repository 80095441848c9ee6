import subprocess
subprocess.run(["git","apply","bench-logs/vm-2026-12-07-session38/pass-times.patch"],check=True)
p='holo-runtime/src/compile/mod.rs'; s=open(p).read()
def after(anchor, mark, s):
    if s.count(anchor)!=1: print("skip",mark); return s
    return s.replace(anchor, anchor+f"\n    pt_mark(\"{mark}\");")
s=after("        records\n    });","start",s)
s=after("    binding::host_waits(&mut edges, &allocations, &placed);","host_waits",s)
s=after("    topics::check_across_processes(&mut work, &topics);","topic_records",s)
s=after("    unique_pools(&mut work, &allocations);","unique",s)
s=after("        rank[o as usize] = u32::try_from(r).unwrap_or(u32::MAX);\n    }","rank",s)
s=after("            },\n        });\n    }","op+trig",s)
s=after("    let operators: Vec<OperatorRecord> = operators;","op+trig",s)
s=after("&allocations, &topics);","devices",s)
s=after("        warnings: work.warnings,\n    };","planstruct",s)
s=after("        .sort_by(|a, b| (a.code.name(), &a.message).cmp(&(b.code.name(), &b.message)));","sortwarn",s)
open(p,'w').write(s)
p='holo-runtime/src/compile/partition.rs'; s=open(p).read()
s=s.replace("    let n = graph.operators.len();\n","    let n = graph.operators.len();\n    super::pt_mark(\"start\");\n",1)
for a,m in [("    work.outgoing = Adjacency::from_pairs(ports, &outgoing);\n","edges"),("    work.fingerprint = fingerprint.finish();\n","sweep"),("    let pred = Adjacency::from_pairs(n, &reversed).into_sets();\n","rest")]:
    if s.count(a)==1: s=s.replace(a,a+f"    super::pt_mark(\"{m}\");\n",1)
    else: print("skip",m)
open(p,'w').write(s)
