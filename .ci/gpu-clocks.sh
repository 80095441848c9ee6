#!/usr/bin/env bash
# Samples the GPU's SM and memory clocks, performance state, power and utilization every
# 100 ms into FILE, in the background (reading them changes no setting), waits a second for
# the first samples and prints the sampler's pid for the caller to kill:
#   smi=$(bash .ci/gpu-clocks.sh "$out/clocks.log"); …; kill "$smi"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw,utilization.gpu \
  --format=csv,noheader -lms 100 > "$1" 2>&1 < /dev/null &
echo $!
sleep 1
