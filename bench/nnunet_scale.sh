#!/usr/bin/env bash
# bench/nnunet_scale.sh [BUILD_DIR] [RUNS] [FOLDS] [SWI_BENCH_FLAGS...] -- TotalSegmentator's scale as nnU-Net
# runs it, with `swi bench` (synthetic network, no model needed): 118 classes, a 512x512x400
# CT at 0.8x0.8x1 mm, a 1.5 mm model (nnU-Net's shape rule: 273x273x267), patch 128, tile
# step 0.5, nnU-Net's Gaussian, mirroring on all three axes, FOLDS folds (1), atlas scores
# (network-like), argmax. Further arguments go to every swi bench run (e.g. --accumulate
# float16, nnU-Net's accumulator; --mirror-by combinator, the mirroring's second buffer).
#
# Runs, alternating, RUNS times each (3): the whole job, logits streamed back to the input
# grid and reduced there ("back"), and the same run on the model grid alone, reduced there
# ("model"). Prints each run's time (swi_run's seconds, and the process's wall and user CPU
# from /usr/bin/time) and peak RSS, the plan's peak, and the median ratios back / model.
# Each run takes minutes and about 6 GiB (FOLDS 5: 10 GiB) on 2 cores.
set -euo pipefail
BUILD="${1:-build}"
RUNS="${2:-3}"
FOLDS="${3:-1}"
shift $(($# < 3 ? $# : 3))
extra=("$@")
SWI="$BUILD/swi"
[ -x "$SWI" ] || { echo "bench/nnunet_scale.sh: $SWI not built (make build)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/nnunet_scale.sh: needs GNU time (apt-get install time)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common=(--classes 118 --roi 128 --grid nnunet --tile-step-size 0.5 --mode gaussian
  --mirror-axes 0,1,2 --folds "$FOLDS" --predictor atlas --output argmax --no-floor ${extra[@]+"${extra[@]}"})
back=(--shape 512,512,400 --input-spacing 0.8,0.8,1 --spacing 1.5,1.5,1.5)

# run NAME ARGS...: one swi bench run under /usr/bin/time -v; prints one line
# `NAME seconds=S wall=W user=U peak_mib=M planned_mib=P`
run() {
  local name="$1"; shift
  /usr/bin/time -v "$SWI" bench "$@" >"$work/out" 2>"$work/err" || {
    echo "bench/nnunet_scale.sh: swi bench $* failed:" >&2; cat "$work/err" >&2; exit 1; }
  local secs planned peak wall user
  secs=$(sed -n 's/^seconds=\([0-9.]*\) .*/\1/p' "$work/out")
  planned=$(sed -n 's/.* planned_mb=\([0-9.]*\) base_rss_mb=\([0-9.]*\).*/\1 \2/p' "$work/out" |
    awk '{printf "%.0f", $1 + $2}')
  peak=$(awk '/Maximum resident set size/ {printf "%.0f", $NF / 1024}' "$work/err")
  wall=$(awk '/Elapsed \(wall clock\)/ {n = split($NF, t, ":"); s = 0;
    for (i = 1; i <= n; i++) s = s * 60 + t[i]; printf "%.1f", s}' "$work/err")
  user=$(awk '/User time \(seconds\)/ {print $NF}' "$work/err")
  echo "$name seconds=$secs wall=$wall user=$user peak_mib=$peak planned_mib=$planned"
  cp "$work/out" "$work/last_$name"
}

echo "# swi bench ${back[*]} ${common[*]}"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
results=()
model=""
for i in $(seq 1 "$RUNS"); do
  results+=("$(run back "${back[@]}" "${common[@]}")")
  echo "${results[-1]}"
  if [ -z "$model" ]; then
    model=$(sed -n 's/.*-> model grid \([0-9]*\)x\([0-9]*\)x\([0-9]*\) at.*/\1,\2,\3/p' "$work/last_back")
    grep '^plan\|^resample' "$work/last_back" | sed 's/^/# /'
    echo "# model grid alone: swi bench --shape $model ${common[*]}"
  fi
  results+=("$(run model --shape "$model" "${common[@]}")")
  echo "${results[-1]}"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# each pair's ratio (back / the model run right after it), then the medians of each measure
printf '%s\n' "${results[@]}" | awk '{ split($2, s, "="); if ($1 == "back") b = s[2]; else
  printf "pair %d: back %s s / model %s s = %.3f\n", ++p, b, s[2], b / s[2] }'
printf '%s\n' "${results[@]}" | awk '
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { k = $1; n[k]++
    for (f = 2; f <= NF; f++) { split($f, kv, "="); v[k, kv[1], n[k]] = kv[2] } }
  END {
    split("seconds wall user peak_mib planned_mib", ms, " ")
    for (m = 1; m <= 5; m++) {
      for (s = 1; s <= 2; s++) { k = s == 1 ? "back" : "model"
        delete a; for (i = 1; i <= n[k]; i++) a[i] = v[k, ms[m], i] + 0; med[k, ms[m]] = median(a, n[k]) }
      r = med["model", ms[m]] > 0 ? med["back", ms[m]] / med["model", ms[m]] : 0
      printf "median %-11s back %10s  model %10s  ratio %.3f\n", ms[m], med["back", ms[m]], med["model", ms[m]], r
    }
  }'
