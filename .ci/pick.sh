# Sourced by the .ci/h200-bundle-*.sh scripts. `pick KIND NAME...` reads cargo's
# `--message-format=json` on stdin and prints the executables of the targets of KIND
# (test, lib, bench, …) named NAME.
pick() { python3 -c '
import json, sys
kind, names = sys.argv[1], set(sys.argv[2:])
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and kind in m["target"]["kind"] \
            and m["target"]["name"] in names:
        print(m["executable"])
' "$@"; }
