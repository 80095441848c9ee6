#!/usr/bin/env bash
# The thirty-eighth session's device call (the thirty-ninth's too), from the repo root after
# .ci/h200-session36-bundle.sh (the change's library) and a copy of the base's `host_hop`
# (a session's starting commit) in .gpu/bench-base/: the whole suite
# on CUDA (.ci/h200-session36-suite.sh), the examples and the kernel-launching and DLPack
# test binaries under compute-sanitizer (.ci/h200-session36-sanitizer.sh, in what is left of
# 200 s), `host_hop`'s compile section and issue 12's table (`device_hop --bench`), then the
# compile's warm and cold growth, the base against this change, alternating
# (.ci/compile-warm-cold.py), in what is left of 320 s. Each script packs its logs into one
# archive under $OUT; hops.log has each bench's exit code.
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
bash .ci/h200-session36-suite.sh; suite=$?
# `timeout 0` would mean no limit: a part whose time is gone is skipped instead.
left=$((200 - SECONDS)); sanitizer=skipped
if [ "$left" -gt 0 ]; then timeout "$left" bash .ci/h200-session36-sanitizer.sh; sanitizer=$?; fi
H=$(ls .gpu/bench/host_hop-* | head -1); D=$(ls .gpu/bench/device_hop-* | head -1)
B=$(ls .gpu/bench-base/host_hop-* | head -1)
{
  echo "== compile"; date -u; timeout 150 "$H" --bench compile; echo "compile rc $?"
  echo "== device_hop --bench"; date -u
  HOLO_DEVICE=cuda timeout 60 "$D" --bench; echo "device_hop rc $?"
  left=$((320 - SECONDS))
  if [ "$left" -gt 30 ]; then
    echo "== compile, warm and cold, base ($B) against this change ($H), 6 rounds"; date -u
    timeout "$left" python3 .ci/compile-warm-cold.py "$B" "$H" 6; echo "warm-cold rc $?"
  fi
  date -u
} 2>&1 | tee "$out/hops.log"
echo "suite rc $suite, sanitizer rc $sanitizer"
[ "$suite" = 0 ] && [ "$sanitizer" = 0 ]
