# Sourced by the .ci/h200-bundle-*.sh scripts. `pick KIND [NAME...]` reads cargo's
# `--message-format=json` on stdin and prints the executables of the targets of KIND
# (test, lib, bench, example, …) named NAME, or of every target of KIND when no NAME is
# given. KIND `harness` is every executable built as a test harness (`cargo test
# --no-run`: the unit tests of libraries and binaries as well as `tests/*.rs`).
pick() { python3 -c '
import json, sys
kind, names = sys.argv[1], set(sys.argv[2:])
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    wanted = m["profile"]["test"] if kind == "harness" else kind in m["target"]["kind"]
    if wanted and (not names or m["target"]["name"] in names):
        print(m["executable"])
' "$@"; }
