#!/usr/bin/env bash
# bench/speed.sh -- swi segment against MONAI 1.4.0's sliding_window_inference on two
# cases in one run, with what makes swi fast now: window reuse, the sub-pixel rewrite,
# libdeflate. A benchmark, not a test: it exits non-zero when something fails (a tool
# missing, a run erroring, labels differing with and without reuse), never for a target.
#
#   bench/speed.sh [SWI_BINARY] [MONAI_SRC_DIR]
#
# The cases (the network of bench/monai: MONAI UNet 1 -> 14 classes, random weights,
# roi 96, overlap 0.25, gaussian, sw-batch 2, THREADS threads each side):
#   monai  bench/monai's 192x192x128 volume of smooth blobs and noise (no window repeats)
#   ct     bench/monai/ct_phantom.py's 320x320x96 body in air, in HU, clipped and scaled
#          as CT models are (-175..250 HU -> 0..1): windows of air alone repeat exactly
# Per case, back to back: MONAI; swi segment (defaults: reuse, rewrite); --no-reuse;
# --scores S.nii.gz; ONNX Runtime alone for the network calls swi made (ort_probe on the
# rewritten model, batch 2); on the monai case also --no-rewrite. Then: labels with and
# without reuse compared bitwise, swi's labels against MONAI's.
#
# Environment: SWI, MONAI_SRC (a folder holding monai/ of the 1.4.0 tag, e.g. from
# `git archive 1.4.0 monai | tar -x -C DIR` in a clone), ORT_ROOT (ONNX Runtime, to
# build ort_probe; default .deps/onnxruntime), WORK (default /tmp/swi-bench-speed),
# THREADS (2), PYTHON (/usr/bin/python3 with Debian's python3-torch, -numpy, -nibabel).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
SWI=${1:-${SWI:-$root/build/swi}}
MONAI_SRC=${2:-${MONAI_SRC:-}}
ORT_ROOT=${ORT_ROOT:-$root/.deps/onnxruntime}
WORK=${WORK:-/tmp/swi-bench-speed}
THREADS=${THREADS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
W=$WORK
die() { echo "speed.sh: $*" >&2; exit 1; }
log() { echo "== $*" >&2; }
[ -x "$SWI" ] || die "no swi binary at $SWI (argument 1 or SWI=)"
[ -f "$MONAI_SRC/monai/__init__.py" ] || die "give MONAI 1.4.0's source folder (argument 2 or MONAI_SRC)"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (apt-get install time)"
"$PYTHON" -c 'import torch, numpy, nibabel' 2>/dev/null || die "$PYTHON lacks torch/numpy/nibabel"
export PYTHONPATH="$MONAI_SRC${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=$THREADS PYTHONWARNINGS=ignore
mkdir -p "$W"

wall_of() { awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0;
            for (i = 1; i <= n; i++) s = s * 60 + p[i]; printf "%.2f", s }' "$1"; }
cpu_of() { awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.1f", u + s }' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

log "inputs"
"$PYTHON" "$here/monai/make_inputs.py" "$W" 2>"$W/make_inputs.log" || { cat "$W/make_inputs.log" >&2; die "make_inputs.py failed"; }
"$PYTHON" "$here/monai/ct_phantom.py" "$W/ct.nii.gz" >&2 || die "ct_phantom.py failed"
"$SWI" optimize -q --model "$W/unet.onnx" --output "$W/unet_rw.onnx" --force || die "swi optimize failed"
probe=""
if [ -f "$ORT_ROOT/include/onnxruntime_c_api.h" ]; then
    cc -O2 -I"$ORT_ROOT/include" "$here/monai/ort_probe.c" -L"$ORT_ROOT/lib" -lonnxruntime \
        -Wl,-rpath,"$ORT_ROOT/lib" -o "$W/ort_probe" && probe="$W/ort_probe"
fi
[ -n "$probe" ] || log "no ONNX Runtime headers under ORT_ROOT=$ORT_ROOT: skipping ORT alone"

declare -A T N C
swi_run() { # KEY CASE ARGS... : time one swi segment
    local key=$1 c=$2; shift 2
    /usr/bin/time -v -o "$W/$key.time" "$SWI" segment --model "$W/unet.onnx" --roi 96 --overlap 0.25 \
        --mode gaussian --sw-batch 2 --threads "$THREADS" --force "$@" 2>"$W/$key.err" ||
        { cat "$W/$key.err" >&2; die "swi $key failed"; }
    grep '^swi segment' "$W/$key.err" >&2 || true
    T[$key]=$(wall_of "$W/$key.time"); C[$key]=$(cpu_of "$W/$key.time")
    N[$key]=$(sed -n 's/.*windows in \([0-9]*\) calls (\([0-9]*\) run, \([0-9]*\) reused).*/\1 \2 \3/p' "$W/$key.err")
}

for c in monai ct; do
    if [ $c = monai ]; then vol=volume.nii.gz; pre=(); mpre=()
    else vol=ct.nii.gz; pre=(--clip -175,250 --scale -175,250,0,1); mpre=(--scale-range=-175,250); fi
    log "case $c: load $(cut -d' ' -f1-3 /proc/loadavg)"
    /usr/bin/time -v -o "$W/$c.monai.time" "$PYTHON" "$here/monai/run_monai.py" "$W" --volume "$vol" \
        "${mpre[@]}" --labels "$W/$c.monai_L.nii.gz" --threads "$THREADS" >"$W/$c.monai.json" ||
        die "MONAI failed on $c"
    T[$c.monai]=$("$PYTHON" -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["swi_s"])' "$W/$c.monai.json")
    swi_run $c.swi $c --input "$W/$vol" "${pre[@]}" --output "$W/$c.L.nii.gz"
    swi_run $c.noreuse $c --input "$W/$vol" "${pre[@]}" --output "$W/$c.L_noreuse.nii.gz" --no-reuse
    swi_run $c.scores $c --input "$W/$vol" "${pre[@]}" --output "$W/$c.L_scores.nii.gz" --scores "$W/$c.S.nii.gz"
    [ $c = monai ] && swi_run $c.norewrite $c --input "$W/$vol" "${pre[@]}" --output "$W/$c.L_norewrite.nii.gz" --no-rewrite
    read -r calls _ _ <<<"${N[$c.swi]}"
    T[$c.ort]=-
    if [ -n "$probe" ]; then
        "$probe" "$W/unet_rw.onnx" --batch 2 --roi 96 --calls "$calls" --threads "$THREADS" >"$W/$c.ort.log" 2>&1 ||
            { cat "$W/$c.ort.log" >&2; die "ort_probe failed"; }
        T[$c.ort]=$(sed -n 's/.* calls wall \([0-9.]*\) s.*/\1/p' "$W/$c.ort.log")
        C[$c.ort]=$(sed -n 's/.*), cpu \([0-9.]*\) s.*/\1/p' "$W/$c.ort.log")
    fi
    log "case $c: labels with and without reuse, against MONAI"
    "$PYTHON" - "$W/$c.L.nii.gz" "$W/$c.L_noreuse.nii.gz" "$W/$c.L_scores.nii.gz" "$W/$c.monai_L.nii.gz" >"$W/$c.agree" <<'PY' ||
import sys
import numpy as np, nibabel as nib
a, b, s, m = (np.asarray(nib.load(p).dataobj) for p in sys.argv[1:5])
same = a.shape == b.shape and np.array_equal(a, b) and np.array_equal(a, s)
print(f"bitwise {'identical' if same else 'DIFFERENT'}; {int((a != m).sum())} of {a.size} voxels differ from MONAI")
sys.exit(0 if same else 1)
PY
        { cat "$W/$c.agree"; die "$c: labels differ with and without reuse"; }
done

echo
echo "$("$SWI" --version | head -1), MONAI 1.4.0 on torch $("$PYTHON" -c 'import torch; print(torch.__version__)'), $THREADS threads, $(nproc) cores, load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %9s %9s %9s %9s %9s %9s %10s %9s %9s %s\n' case MONAI swi no-reuse scores ORT windows reused "swi/MONAI" "swi/ORT" "scores+"
for c in monai ct; do
    read -r _ run reused <<<"${N[$c.swi]}"
    orat=-; [ "${T[$c.ort]}" != - ] && orat=$(ratio "${T[$c.swi]}" "${T[$c.ort]}")
    printf '%-6s %8ss %8ss %8ss %8ss %8ss %9s %10s %9s %9s %s\n' $c "${T[$c.monai]}" "${T[$c.swi]}" \
        "${T[$c.noreuse]}" "${T[$c.scores]}" "${T[$c.ort]}" "$run" "$reused" \
        "$(ratio "${T[$c.swi]}" "${T[$c.monai]}")" "$orat" \
        "$(awk -v a="${T[$c.scores]}" -v b="${T[$c.swi]}" 'BEGIN { printf "%+.0f%%", (a / b - 1) * 100 }')"
    echo "       CPU seconds: swi ${C[$c.swi]}, no-reuse ${C[$c.noreuse]}, scores ${C[$c.scores]}, ORT alone ${C[$c.ort]:--}"
    echo "       labels: $(cat "$W/$c.agree")"
done
echo "monai case --no-rewrite: ${T[monai.norewrite]}s, CPU ${C[monai.norewrite]} s (ratio to MONAI $(ratio "${T[monai.norewrite]}" "${T[monai.monai]}"))"
