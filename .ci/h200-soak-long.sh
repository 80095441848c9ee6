#!/usr/bin/env bash
# The 10-minute soak (RELIABILITY.md, "Soak") across the device tool's 600-second limit per
# command: `start` launches the soak (HOLO_SOAK_SECONDS, 620 by default) detached from the
# command, in its own session, logging under /tmp/holo-soak, and one minute of it under
# compute-sanitizer's memcheck beside it, then returns; `collect` — a later command on the
# same machine — waits for both to end and prints and copies their logs to $OUT.
#   run: bash .ci/h200-soak-long.sh start && bash .ci/h200-session.sh   (first command)
#   run: bash .ci/h200-soak-long.sh collect                               (second command)
set -u
dir=/tmp/holo-soak; out=${OUT:-/tmp/gpu-out}; mkdir -p "$dir" "$out"
case "${1:-}" in
start)
  S=$(ls "$PWD"/.gpu/bin/soak-* | head -1)
  date -u > "$dir/started"
  HOLO_DEVICE=cuda HOLO_REQUIRE_DEVICE=cuda HOLO_SOAK_SECONDS=${HOLO_SOAK_SECONDS:-620} HOLO_SOAK_EVERY=10 \
    setsid nohup bash -c "\"$S\" --nocapture > $dir/soak.log 2>&1; echo \"rc=\$?\" >> $dir/soak.log; date -u >> $dir/soak.log" \
    < /dev/null > /dev/null 2>&1 &
  HOLO_DEVICE=cuda HOLO_REQUIRE_DEVICE=cuda HOLO_SOAK_SECONDS=60 HOLO_SOAK_EVERY=10 \
    setsid nohup bash -c "/usr/local/cuda/bin/compute-sanitizer --tool memcheck \"$S\" --nocapture > $dir/memcheck.log 2>&1" \
    < /dev/null > /dev/null 2>&1 &
  sleep 2; echo "soak started $(cat "$dir/started"): $(pgrep -fc soak-) processes"
  ;;
collect)
  echo "soak started $(cat "$dir/started" 2>/dev/null)"
  for _ in $(seq 1 570); do grep -q '^rc=' "$dir/soak.log" 2>/dev/null && break; sleep 1; done
  cp "$dir/soak.log" "$out/soak-long.log"; cp "$dir/memcheck.log" "$out/soak-long-memcheck.log" 2>/dev/null
  cat "$dir/soak.log"
  echo "== memcheck minute:"; grep -E "soak on|^ +[0-9]|test result|ERROR SUMMARY" "$dir/memcheck.log"
  grep -q '^rc=0' "$dir/soak.log"
  ;;
*) echo "usage: $0 start|collect" >&2; exit 2 ;;
esac
