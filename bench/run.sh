#!/usr/bin/env bash
# bench/run.sh [BUILD_DIR] -- the streaming-engine benchmarks of the README and
# bench/RESULTS.md, all with `swi bench` (synthetic predictor, no model needed).
# Each line ends with `seconds=... peak_rss_mb=... planned_mb=... floor_multiple=...`:
# the traffic floor is measured in the same run, so compare ratios, not seconds,
# across machines. Needs about 6 GB of memory and a few minutes on 2 cores.
set -euo pipefail
BUILD="${1:-build}"
SWI="$BUILD/swi"
[ -x "$SWI" ] || { echo "bench/run.sh: $SWI not built (make build)" >&2; exit 1; }

run() {
  local name="$1"; shift
  printf '\n== %s\n$ swi bench %s\n' "$name" "$*"
  "$SWI" bench "$@" 2>/dev/null
}

# The seed case: the reference peaked at 17.0 GB (181 s).
run "seed: argmax of 384x384x256, 100 classes" \
  --shape 384,384,256 --classes 100 --roi 128 --overlap 0.25 --mode gaussian --output argmax
# A longer first axis must only add its larger input and label arrays to the peak.
run "seed, first axis 1024" \
  --shape 1024,384,256 --classes 100 --roi 128 --overlap 0.25 --mode gaussian --output argmax
# The reference's timing case: 16.5 s in MONAI, floor about 0.7 s.
run "256x256x160, 32 classes, scores" \
  --shape 256,256,160 --classes 32 --roi 96 --overlap 0.25 --mode gaussian --output scores
run "256x256x160, 32 classes, argmax" \
  --shape 256,256,160 --classes 32 --roi 96 --overlap 0.25 --mode gaussian --output argmax
# A budget: the planner fits sw-batch and pipelining under it, or refuses at once.
run "256x256x160, 32 classes, argmax, sw-batch 4 under a 1G budget" \
  --shape 256,256,160 --classes 32 --roi 96 --overlap 0.25 --mode gaussian --output argmax \
  --sw-batch 4 --max-memory 1G
