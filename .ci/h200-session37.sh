#!/usr/bin/env bash
# The thirty-seventh session's device call, from the repo root after
# .ci/h200-session36-bundle.sh (library as at `ca1ad1c`; `host_hop` rebuilt with the
# compile section's fifth figure): the whole suite on CUDA (.ci/h200-session36-suite.sh:
# every test binary with HOLO_REQUIRE_DEVICE=cuda, then every example), the examples and
# the kernel-launching and DLPack test binaries under compute-sanitizer
# (.ci/h200-session36-sanitizer.sh, in what is left of 230 s), then, in what is left of 250 s,
# `host_hop`'s compile section and issue 12's table (`device_hop --bench`). Each script
# packs its logs into one archive under $OUT; the last line gives the suite's and the
# sanitizer's exit codes, hops.log each bench's.
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/h200-session36-suite.sh; suite=$?
# `timeout 0` would mean no limit: a part whose time is gone is skipped instead.
left=$((230 - SECONDS)); sanitizer=skipped
if [ "$left" -gt 0 ]; then timeout "$left" bash .ci/h200-session36-sanitizer.sh; sanitizer=$?; fi
left=$((250 - SECONDS)); hops=skipped
if [ "$left" -gt 60 ]; then
  H=$(ls .gpu/bench/host_hop-* | head -1); D=$(ls .gpu/bench/device_hop-* | head -1)
  # Each bench's exit code is its own line in the log (the pipe's status would be tee's).
  {
    echo "== compile"; date -u; timeout $((left / 2)) "$H" --bench compile; echo "compile rc $?"
    echo "== device_hop --bench"; date -u
    HOLO_DEVICE=cuda timeout $((left / 2)) "$D" --bench; echo "device_hop rc $?"
    date -u
  } 2>&1 | tee "$out/hops.log"
  hops="see hops.log"
fi
echo "suite rc $suite, sanitizer rc $sanitizer, hops: $hops"
[ "$suite" = 0 ] && [ "$sanitizer" = 0 ]
