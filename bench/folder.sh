#!/usr/bin/env bash
# bench/folder.sh [BUILD_DIR] [CASES] [I,J,K] -- folder mode against one `swi segment` per
# case: CASES crops (default 20, I,J,K default 32,40,32 voxels) of the committed e2e
# volume, segmented with the e2e U-Net (tests/data/golden/e2e) both ways; prints both
# times and their ratio. Needs python3 with numpy and nibabel; writes only under a
# temporary directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-build}"
N="${2:-20}"
SHAPE="${3:-32,40,32}"
SWI="$BUILD/swi"
E2E="$here/tests/data/golden/e2e"
PY="${SWI_PYTHON:-/usr/bin/python3}"
[ -x "$SWI" ] || { echo "bench/folder.sh: $SWI not built" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/in" "$work/sep" "$work/dir"
"$PY" - "$E2E/volume.nii.gz" "$work/in" "$N" "$SHAPE" <<'PY'
import sys
import nibabel as nib
import numpy as np
src, out, n, shape = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
i, j, k = (int(x) for x in shape.split(","))
img = nib.load(src)
d = np.asanyarray(img.dataobj)
for c in range(n):
    o = [min(c % 8, d.shape[a] - s) for a, s in enumerate((i, j, k))]
    crop = np.ascontiguousarray(d[o[0]:o[0] + i, o[1]:o[1] + j, o[2]:o[2] + k])
    nib.save(nib.Nifti1Image(crop, img.affine), "%s/case%03d.nii.gz" % (out, c))
PY
t0=$(date +%s.%N)
for f in "$work"/in/*.nii.gz; do
  "$SWI" segment -q --model "$E2E/unet.onnx" --input "$f" --output "$work/sep/$(basename "$f")"
done
t1=$(date +%s.%N)
"$SWI" segment -q --model "$E2E/unet.onnx" --input-dir "$work/in" --output-dir "$work/dir"
t2=$(date +%s.%N)
for f in "$work"/in/*.nii.gz; do
  cmp -s "$work/sep/$(basename "$f")" "$work/dir/$(basename "$f")" ||
    { echo "bench/folder.sh: $(basename "$f"): the two ways disagree" >&2; exit 1; }
done
awk -v a="$t0" -v b="$t1" -v c="$t2" -v n="$N" -v s="$SHAPE" 'BEGIN {
  printf "%d cases of %s voxels: %d separate runs %.2f s, folder mode %.2f s: %.2fx\n",
         n, s, n, b - a, c - b, (b - a) / (c - b) }'
