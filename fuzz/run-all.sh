#!/bin/sh
# Runs each named target for SECS seconds, one at a time, niced, on its corpus
# (fuzz/corpus/<target>, not checked in) and seeds (fuzz/seeds/<target>); the libFuzzer
# log of each goes to $HOLO_FUZZ_LOGS/<target>.log (default /tmp/fuzz-logs), and a line
# "<target> exit <status>" to $HOLO_FUZZ_LOGS/summary.
# Usage: fuzz/run-all.sh SECS target...
set -u
cd "$(dirname "$0")"
secs=$1; shift
logs=${HOLO_FUZZ_LOGS:-/tmp/fuzz-logs}
mkdir -p "$logs"
for t in "$@"; do
  mkdir -p "corpus/$t"
  seeds=""; [ -d "seeds/$t" ] && seeds="seeds/$t"
  nice -n 19 cargo +nightly fuzz run "$t" "corpus/$t" $seeds -- \
    -max_total_time="$secs" -print_final_stats=1 > "$logs/$t.log" 2>&1
  echo "$t exit $?" >> "$logs/summary"
done
