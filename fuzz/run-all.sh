#!/bin/sh
# Runs each named target for SECS seconds (default 600), one at a time, niced; the
# libFuzzer log of each goes to /tmp/fuzz-logs/<target>.log.
# Usage: fuzz/run-all.sh [SECS] target...
set -u
cd "$(dirname "$0")"
secs=${1:-600}; shift
for t in "$@"; do
  mkdir -p "corpus/$t"
  seeds=""; [ -d "seeds/$t" ] && seeds="seeds/$t"
  nice -n 19 cargo +nightly fuzz run "$t" "corpus/$t" $seeds -- \
    -max_total_time="$secs" -print_final_stats=1 > "/tmp/fuzz-logs/$t.log" 2>&1
  echo "$t exit $?" >> /tmp/fuzz-logs/summary
done
