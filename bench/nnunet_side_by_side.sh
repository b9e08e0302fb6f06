#!/usr/bin/env bash
# bench/nnunet_side_by_side.sh NNUNET_ENV [THREADS] [MODEL] [I,J,K] [BUILD_DIR] -- nnU-Net v2's
# own predictor (bench/nnunet_predict.py) and `swi segment --model CONVERTED` on the same
# model, case and thread count, one after the other; prints wall time and peak RSS of each
# (/usr/bin/time -v) and their ratios. NNUNET_ENV is a shell file that makes nnunetv2
# importable (exports PYTHONPATH, e.g. the one tools/make_nnunet_reference.py's docstring
# describes). MODEL (default Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__3d_fullres)
# is a folder under tests/data/nnunet-models, converted on the fly with
# `python3 -m swi convert nnunet`; the case is a CT-like phantom of I,J,K voxels (default
# 160,160,80) made on the fly. Both use tile step 0.5, Gaussian, mirroring, folds 0,1, and
# the labels of the two are compared (agreement printed). Writes only under a temp dir.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -ge 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
ENV_FILE="$1"
THREADS="${2:-1}"
MODEL="${3:-Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__3d_fullres}"
SHAPE="${4:-160,160,80}"
BUILD="${5:-$here/build}"
PY="${SWI_PYTHON:-/usr/bin/python3}"
SWI="$BUILD/swi"
MDIR="$here/tests/data/nnunet-models/$MODEL"
[ -f "$MDIR/plans.json" ] || { echo "nnunet_side_by_side: no model folder $MDIR" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "nnunet_side_by_side: needs /usr/bin/time (Debian: time)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# shellcheck disable=SC1090
(. "$ENV_FILE"; "$PY" -c 'import nnunetv2' 2>/dev/null) ||
    (. "$ENV_FILE"; PYTHONPATH="$here/tools:$PYTHONPATH" "$PY" -c 'import nnunet_shims; nnunet_shims.install(); import nnunetv2') ||
    { echo "nnunet_side_by_side: $ENV_FILE does not make nnunetv2 importable" >&2; exit 1; }
"$PY" "$here/bench/nnunet_predict.py" --make-case "$work/case_0000.nii.gz" --shape "$SHAPE"

# peak RSS (kB) and wall seconds from /usr/bin/time -v's report
measure() {
    local log="$1"
    shift
    local rc=0
    /usr/bin/time -v -o "$log.time" "$@" >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "nnunet_side_by_side: failed ($rc): $*" >&2
        tail -20 "$log" >&2
        return "$rc"
    fi
    awk -F': ' '/Maximum resident set size/ {rss=$2}
        /Elapsed \(wall clock\)/ {n=split($2, t, ":"); s=0; for (i=1;i<=n;i++) s=s*60+t[i]}
        END {printf "%.2f %d\n", s, rss}' "$log.time"
}

nn=$(. "$ENV_FILE"; measure "$work/nnunet.log" "$PY" "$here/bench/nnunet_predict.py" \
    --model "$MDIR" --output "$work/nnunet.nii.gz" --threads "$THREADS" --folds 0,1 "$work/case_0000.nii.gz")
read -r nn_s nn_kb <<<"$nn"
swi_s="-" swi_kb="-"
if [ -x "$SWI" ]; then
    PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m swi convert nnunet "$MDIR" \
        --output "$work/model" --folds 0,1 >"$work/convert.log" 2>&1 ||
        { echo "nnunet_side_by_side: convert failed" >&2; cat "$work/convert.log" >&2; }
    if [ -f "$work/model/nnunet.json" ] && out=$(measure "$work/swi.log" "$SWI" segment --model "$work/model" --input "$work/case_0000.nii.gz" \
        --output "$work/swi.nii.gz" --threads "$THREADS"); then
        read -r swi_s swi_kb <<<"$out"
    else
        echo "nnunet_side_by_side: swi segment --model DIR failed (nnU-Net mode not built yet?)" >&2
    fi
else
    echo "nnunet_side_by_side: $SWI not built; nnU-Net only" >&2
fi

echo "model $MODEL, case $SHAPE voxels (0.8x0.8x2.5 mm), threads $THREADS, folds 0,1, mirroring, step 0.5"
printf '%-10s %10s %14s\n' "" "wall (s)" "peak RSS (MiB)"
printf '%-10s %10s %14s\n' "nnU-Net" "$nn_s" "$((nn_kb / 1024))"
if [ "$swi_s" != "-" ]; then
    printf '%-10s %10s %14s\n' "swi" "$swi_s" "$((swi_kb / 1024))"
    awk -v a="$swi_s" -v b="$nn_s" -v c="$swi_kb" -v d="$nn_kb" \
        'BEGIN {printf "%-10s %10.3f %14.3f\n", "swi/nnU-Net", a / b, c / d}'
    "$PY" - "$work/nnunet.nii.gz" "$work/swi.nii.gz" <<'PY'
import sys
import nibabel as nib
import numpy as np
a, b = (np.asarray(nib.load(f).dataobj) for f in sys.argv[1:3])
if a.shape != b.shape:
    sys.exit(f"label maps differ in shape: {a.shape} vs {b.shape}")
dice = []
for k in range(1, int(max(a.max(), b.max())) + 1):
    s = (a == k).sum() + (b == k).sum()
    dice.append(2 * ((a == k) & (b == k)).sum() / s if s else 1.0)
print("agreement: voxels %.5f, Dice per class %s" % ((a == b).mean(), " ".join("%.4f" % d for d in dice)))
PY
fi
