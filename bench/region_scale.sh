#!/usr/bin/env bash
# bench/region_scale.sh [BUILD_DIR] [SCALE] [REGION] -- a region of interest against the whole run, with
# `swi bench` (synthetic network) at TotalSegmentator's scale as nnU-Net runs it
# (bench/nnunet_scale.sh's settings: 118 classes, 512x512x400 at 0.8x0.8x1 mm, a 1.5 mm model,
# patch 128, tile step 0.5, nnU-Net's Gaussian and way back, mirroring on three axes), the
# region a liver-sized box of about a tenth of the volume (230 x 230 x 200 voxels).
# SCALE divides every size (shape, patch, box): 1 is the full scale (each whole run takes
# minutes and about 6 GiB on 2 cores), 2 or 4 a quick look. REGION (I0:I1,J0:J1,K0:K1 at full
# scale) replaces the default box. Prints each run's windows, swi_run's
# seconds, wall time and peak RSS, then the ratios region / whole.
set -euo pipefail
BUILD="${1:-build}"
SCALE="${2:-1}"
SWI="$BUILD/swi"
[ -x "$SWI" ] || { echo "bench/region_scale.sh: $SWI not built" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/region_scale.sh: needs GNU time (apt-get install time)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
d() { echo $(( $1 / SCALE )); }
common=(--shape "$(d 512),$(d 512),$(d 400)" --input-spacing 0.8,0.8,1 --spacing 1.5,1.5,1.5 --classes 118
  --roi "$(d 128)" --grid nnunet --tile-step-size 0.5 --mode gaussian --mirror-axes 0,1,2 --predictor atlas
  --output argmax --no-floor)
REGION="${3:-200:430,150:380,100:300}"
region=$(echo "$REGION" | tr ',:' '  ' | { read -r a b c e f g; echo "$(d "$a"):$(d "$b"),$(d "$c"):$(d "$e"),$(d "$f"):$(d "$g")"; })

# run NAME ARGS...: prints `NAME windows=N seconds=S wall=W peak_mib=M`
run() {
  local name="$1"; shift
  /usr/bin/time -v "$SWI" bench "$@" >"$work/out" 2>"$work/err" || {
    echo "bench/region_scale.sh: swi bench $* failed:" >&2; cat "$work/err" >&2; exit 1; }
  local secs wall peak windows
  secs=$(sed -n 's/^seconds=\([0-9.]*\) .*/\1/p' "$work/out")
  windows=$(sed -n 's/^plan: windows [0-9x]* = \([0-9]*\),.*/\1/p' "$work/out")
  if grep -q '^region:' "$work/out"; then
    windows=$(sed -n 's/^region: .*windows run \([0-9]*\) of.*/\1/p' "$work/out")
    grep '^region:' "$work/out" | sed 's/^/# /' >&2
  fi
  peak=$(awk '/Maximum resident set size/ {printf "%.0f", $NF / 1024}' "$work/err")
  wall=$(awk '/Elapsed \(wall clock\)/ {n = split($NF, t, ":"); s = 0;
    for (i = 1; i <= n; i++) s = s * 60 + t[i]; printf "%.1f", s}' "$work/err")
  echo "$name windows=$windows seconds=$secs wall=$wall peak_mib=$peak"
}

echo "# swi bench ${common[*]}"
echo "# region $region; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
w=$(run whole "${common[@]}")
echo "$w"
r=$(run region "${common[@]}" --region "$region")
echo "$r"
awk -v w="$w" -v r="$r" 'BEGIN {
  split(w, a, /[ =]/); split(r, b, /[ =]/);
  printf "ratio windows %.3f seconds %.3f wall %.3f peak %.3f\n", b[3] / a[3], b[5] / a[5], b[7] / a[7], b[9] / a[9] }'
