#!/usr/bin/env bash
# swi segment vs MONAI sliding_window_inference: the speed comparison.
# A benchmark, not a test: it exits non-zero when something fails (a missing tool, a run
# that errors, outputs that disagree), never because swi misses the 0.5x target.
#
#   bench/monai/compare.sh [SWI_BINARY] [MONAI_SRC_DIR]
#
# Arguments or environment (arguments win):
#   SWI        the swi binary                 (default: build-bench/swi, then build/swi)
#   MONAI_SRC  a directory holding monai/ of MONAI 1.4.0's source (required)
#   WORK       scratch directory              (default /tmp/swi-bench-monai)
#   RUNS       timed runs of each side        (default 2)
#   THREADS    threads for both sides         (default 2)
#   PYTHON     an interpreter with Debian's python3-torch/numpy/nibabel (default /usr/bin/python3)
#   SWI_EXTRA  extra arguments for swi segment (e.g. to try options), default none
#   SUBPIXEL   1 (default): also time swi on the same network with its stride-2
#              ConvTranspose nodes rewritten as sub-pixel Convs (subpixel.py, needs
#              python3-onnx) and check its labels too; 0: skip
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
SWI=${1:-${SWI:-}}
if [ -z "$SWI" ]; then
    for c in "$root/build-bench/swi" "$root/build/swi"; do
        [ -x "$c" ] && { SWI=$c; break; }
    done
fi
MONAI_SRC=${2:-${MONAI_SRC:-}}
[ -n "$MONAI_SRC" ] || { echo "compare.sh: give MONAI 1.4.0's source folder (argument 2 or MONAI_SRC)" >&2; exit 2; }
WORK=${WORK:-/tmp/swi-bench-monai}
RUNS=${RUNS:-2}
THREADS=${THREADS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
SWI_EXTRA=${SWI_EXTRA:-}
SUBPIXEL=${SUBPIXEL:-1}

die() { echo "compare.sh: $*" >&2; exit 1; }
[ -n "$SWI" ] && [ -x "$SWI" ] || die "no swi binary (give its path as the first argument or SWI=)"
[ -f "$MONAI_SRC/monai/__init__.py" ] || die "$MONAI_SRC/monai is not MONAI's source (fetch Project-MONAI/MONAI, git archive 1.4.0 monai | tar -x -C DIR)"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (apt-get install time)"
"$PYTHON" -c 'import torch, numpy, nibabel' 2>/dev/null ||
    die "$PYTHON lacks torch/numpy/nibabel (apt-get install python3-torch python3-numpy python3-nibabel python3-onnx)"
export PYTHONPATH="$MONAI_SRC${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=$THREADS PYTHONWARNINGS=ignore
mkdir -p "$WORK"
W=$WORK

log() { echo "== $*" >&2; }

# GNU time -v: wall seconds and peak RSS (MB) of a finished run
wall_of() { awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0;
            for (i = 1; i <= n; i++) s = s * 60 + p[i]; printf "%.2f", s }' "$1"; }
rss_of() { awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$1"; }
cpu_of() { awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.1f", u + s }' "$1"; }
busy() { # processes using >= 10% of a CPU over one second (timings on shared cores mean little)
    top -b -n 2 -d 1 -w 200 2>/dev/null | awk '/^top -/ { n++ }
        n == 2 && $1 ~ /^[0-9]+$/ && $9 + 0 >= 10 { printf "%s(%s%%) ", $12, $9 }'; }

log "inputs: UNet(3, 1->14, (16,32,64,128), strides 2, 2 res units), seed 0; volume 192x192x128 float32"
"$PYTHON" "$here/make_inputs.py" "$W" 2> "$W/make_inputs.log" || { cat "$W/make_inputs.log" >&2; die "make_inputs.py failed"; }
grep -E '^(onnx|volume):' "$W/make_inputs.log" >&2 || true

if [ "$SUBPIXEL" = 1 ] && ! "$PYTHON" -c 'import onnx' 2>/dev/null; then
    log "no python3-onnx: skipping the sub-pixel rewrite (SUBPIXEL=0)"
    SUBPIXEL=0
fi
if [ "$SUBPIXEL" = 1 ]; then
    "$PYTHON" "$here/subpixel.py" "$W/unet.onnx" "$W/unet_subpixel.onnx" || die "subpixel.py failed"
fi

swi_args=(--input "$W/volume.nii.gz" --roi 96 --overlap 0.25
          --mode gaussian --sw-batch 2 --threads "$THREADS" --force)
# shellcheck disable=SC2206
extra=($SWI_EXTRA)

declare -A T R C S
for r in $(seq 1 "$RUNS"); do
    log "run $r/$RUNS  load $(cut -d' ' -f1-3 /proc/loadavg)  running: $(busy)"
    log "  MONAI sliding_window_inference"
    sc=(); [ "$r" = 1 ] && sc=(--scores "$W/monai_S.npy")
    /usr/bin/time -v -o "$W/monai.$r.time" "$PYTHON" "$here/run_monai.py" "$W" \
        --labels "$W/monai_L.nii.gz" --threads "$THREADS" "${sc[@]}" > "$W/monai.$r.json" ||
        die "MONAI run $r failed (see $W/monai.$r.time)"
    cat "$W/monai.$r.json" >&2
    T[monai_call,$r]=$("$PYTHON" -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["swi_s"])' "$W/monai.$r.json")
    T[monai_proc,$r]=$(wall_of "$W/monai.$r.time"); R[monai,$r]=$(rss_of "$W/monai.$r.time")
    C[monai,$r]=$(cpu_of "$W/monai.$r.time")

    log "  swi segment (labels only)"
    /usr/bin/time -v -o "$W/swi.$r.time" "$SWI" segment --model "$W/unet.onnx" "${swi_args[@]}" "${extra[@]}" \
        --output "$W/swi_L.nii.gz" 2> "$W/swi.$r.err" || { cat "$W/swi.$r.err" >&2; die "swi run $r failed"; }
    grep '^swi segment' "$W/swi.$r.err" >&2 || true
    T[swi,$r]=$(wall_of "$W/swi.$r.time"); R[swi,$r]=$(rss_of "$W/swi.$r.time"); C[swi,$r]=$(cpu_of "$W/swi.$r.time")
    S[swi,$r]=$(sed -n 's/.*network+blending \([0-9.]*\) s.*/\1/p' "$W/swi.$r.err" | tail -1)

    log "  swi segment --scores S.nii.gz"
    /usr/bin/time -v -o "$W/swis.$r.time" "$SWI" segment --model "$W/unet.onnx" "${swi_args[@]}" "${extra[@]}" \
        --output "$W/swi_L_scores.nii.gz" --scores "$W/swi_S.nii.gz" 2> "$W/swis.$r.err" ||
        { cat "$W/swis.$r.err" >&2; die "swi --scores run $r failed"; }
    grep '^swi segment' "$W/swis.$r.err" >&2 || true
    T[swis,$r]=$(wall_of "$W/swis.$r.time"); R[swis,$r]=$(rss_of "$W/swis.$r.time"); C[swis,$r]=$(cpu_of "$W/swis.$r.time")
    S[swis,$r]=$(sed -n 's/.*network+blending \([0-9.]*\) s.*/\1/p' "$W/swis.$r.err" | tail -1)

    if [ "$SUBPIXEL" = 1 ]; then
        log "  swi segment, sub-pixel rewrite of the model (labels only)"
        /usr/bin/time -v -o "$W/swip.$r.time" "$SWI" segment --model "$W/unet_subpixel.onnx" "${swi_args[@]}" \
            "${extra[@]}" --output "$W/swi_L_subpixel.nii.gz" 2> "$W/swip.$r.err" ||
            { cat "$W/swip.$r.err" >&2; die "swi (sub-pixel model) run $r failed"; }
        grep '^swi segment' "$W/swip.$r.err" >&2 || true
        T[swip,$r]=$(wall_of "$W/swip.$r.time"); R[swip,$r]=$(rss_of "$W/swip.$r.time")
    fi
done

agree_rc=0
sp_labels=(); [ "$SUBPIXEL" = 1 ] && sp_labels=("$W/swi_L_subpixel.nii.gz")
log "agreement (MONAI scores vs swi --scores; labels with and without --scores)"
"$PYTHON" "$here/agree.py" "$W/monai_S.npy" "$W/monai_L.nii.gz" "$W/swi_S.nii.gz" \
    "$W/swi_L.nii.gz" "$W/swi_L_scores.nii.gz" "${sp_labels[@]}" --volume "$W/volume.nii.gz" > "$W/agree.json" ||
    agree_rc=$?
"$PYTHON" - "$W/agree.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
print(f"scores: max |swi - monai| = {a['scores_max_abs_diff']:.3g} (max |monai| {a['scores_max_abs_monai']:.3g}, "
      f"relative {a['scores_max_rel_diff']:.2g}), mean {a['scores_mean_abs_diff']:.2g}")
for l in a["labels"]:
    print(f"labels {l['file'].rsplit('/', 1)[-1]}: {l['differ']} of {a['voxels']} voxels differ from MONAI's argmax, "
          f"{l['differ_not_tie']} away from near-ties (top-2 gap < 1e-3: {a['near_ties']} voxels); "
          f"largest gap where they differ {l['max_gap_where_differ']:.2g}")
for p in a["problems"]:
    print("PROBLEM:", p)
PY

echo
echo "$("$SWI" --version 2>/dev/null | head -1)  vs  MONAI $("$PYTHON" -c 'import monai; print(monai.__version__)' 2>/dev/null) on torch $("$PYTHON" -c 'import torch; print(torch.__version__)'), $THREADS threads, $(nproc) cores"
printf '%-48s' "run"
for r in $(seq 1 "$RUNS"); do printf '%18s' "#$r time / RSS"; done; echo
row() { # label key rsskey
    printf '%-48s' "$1"
    for r in $(seq 1 "$RUNS"); do
        local t=${T[$2,$r]} m=${3:+${R[$3,$r]}}
        printf '%18s' "${t}s${m:+ / ${m}M}"
    done; echo; }
row "MONAI sliding_window_inference() call" monai_call
row "MONAI whole script (python, load, infer, save)" monai_proc monai
row "swi segment (read, infer, labels)" swi swi
row "swi segment --scores S.nii.gz" swis swis
[ "$SUBPIXEL" = 1 ] && row "swi segment, model with sub-pixel ConvTranspose" swip swip
printf '%-48s' "  swi network+blending (its summary)"
for r in $(seq 1 "$RUNS"); do printf '%18s' "${S[swi,$r]}s"; done; echo
printf '%-48s' "  CPU seconds: MONAI script / swi"
for r in $(seq 1 "$RUNS"); do printf '%18s' "${C[monai,$r]} / ${C[swi,$r]}"; done; echo
printf '%-48s' "ratio swi / MONAI call (target <= 0.5)"
for r in $(seq 1 "$RUNS"); do printf '%18s' "$(awk -v a="${T[swi,$r]}" -v b="${T[monai_call,$r]}" 'BEGIN { printf "%.3f", a / b }')"; done; echo
printf '%-48s' "ratio swi / MONAI whole script"
for r in $(seq 1 "$RUNS"); do printf '%18s' "$(awk -v a="${T[swi,$r]}" -v b="${T[monai_proc,$r]}" 'BEGIN { printf "%.3f", a / b }')"; done; echo
if [ "$SUBPIXEL" = 1 ]; then
    printf '%-48s' "ratio swi (sub-pixel model) / MONAI call"
    for r in $(seq 1 "$RUNS"); do printf '%18s' "$(awk -v a="${T[swip,$r]}" -v b="${T[monai_call,$r]}" 'BEGIN { printf "%.3f", a / b }')"; done; echo
fi
[ "$agree_rc" = 0 ] || die "swi and MONAI disagree (see $W/agree.json)"
