#!/usr/bin/env bash
# bench/dnnl.sh -- the oneDNN backend against ONNX Runtime, in one run (ratios are taken
# from the same run, back to back, so a loaded machine slows both alike).
#
#   bench/dnnl.sh [BUILD_DIR]
#
# 1. The network alone (BUILD_DIR/dnnl_net): ms per window and GFLOP/s (the convolutions'
#    2 x multiply-adds) for ONNX Runtime, oneDNN fp32 and oneDNN bf16 (where the CPU has
#    it), at THREADS threads, on models/demo.onnx (32^3 windows) and, with MONAI_SRC set,
#    bench/monai's 14-class MONAI UNet (96^3 windows; see bench/speed.sh).
# 2. `swi segment` with --backend ort and --backend dnnl (and --precision bf16): the
#    14-class UNet on bench/monai's volume with MONAI_SRC, else models/demo.onnx on a
#    deterministic 160x160x96 volume; seconds, and the labels compared.
# Each is run with libgomp's default wait policy and with OMP_WAIT_POLICY=passive (oneDNN
# threads with OpenMP; ONNX Runtime does not). A benchmark, not a test: it fails only when
# something does not run.
#
# Environment: THREADS (2), WORK (/tmp/swi-bench-dnnl), MONAI_SRC, PYTHON (/usr/bin/python3
# with numpy, nibabel; torch for the MONAI case).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
BUILD=${1:-$root/build}
THREADS=${THREADS:-2}
WORK=${WORK:-/tmp/swi-bench-dnnl}
PYTHON=${PYTHON:-/usr/bin/python3}
SWI=$BUILD/swi
NET=$BUILD/dnnl_net
die() { echo "bench/dnnl.sh: $*" >&2; exit 1; }
[ -x "$SWI" ] || die "$SWI not built"
[ -x "$NET" ] || die "$NET not built (swi built without libdnnl-dev?)"
mkdir -p "$WORK"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -n), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), THREADS=$THREADS"

models=("$root/models/demo.onnx 1 32")
case_model=$root/models/demo.onnx
case_roi=32
if [ -n "${MONAI_SRC:-}" ]; then
  PYTHONPATH="$MONAI_SRC" "$PYTHON" "$here/monai/make_inputs.py" "$WORK" >/dev/null 2>&1 || die "make_inputs.py failed"
  models+=("$WORK/unet.onnx 1 96")
  case_model=$WORK/unet.onnx
  case_roi=96
  vol=$WORK/volume.nii.gz
else
  vol=$WORK/volume.nii.gz
  "$PYTHON" - "$vol" <<'PY'
import sys, numpy as np, nibabel as nb
rng = np.random.default_rng(7)
z, y, x = np.mgrid[0:160, 0:160, 0:96].astype(np.float32)
v = np.sin(x / 9) * np.cos(y / 13) + np.sin(z / 7) + 0.2 * rng.standard_normal(z.shape).astype(np.float32)
nb.save(nb.Nifti1Image(v.astype(np.float32), np.eye(4)), sys.argv[1])
PY
fi

for wait in default passive; do
  env=()
  [ "$wait" = passive ] && env=(OMP_WAIT_POLICY=passive)
  echo
  echo "## network alone, OMP_WAIT_POLICY $wait"
  for m in "${models[@]}"; do
    set -- $m
    env "${env[@]}" "$NET" "$1" "$2" "$3" "$THREADS" 4 3 || die "dnnl_net $1 failed"
  done
  echo
  echo "## swi segment $(basename "$case_model") on $(basename "$vol"), OMP_WAIT_POLICY $wait"
  for b in "ort fp32" "dnnl fp32" "dnnl bf16"; do
    set -- $b
    out=$WORK/labels_$1_$2.nii.gz
    if ! env "${env[@]}" "$SWI" segment --model "$case_model" --input "$vol" --output "$out" --roi "$case_roi" \
        --overlap 0.25 --threads "$THREADS" --backend "$1" --precision "$2" --force 2>"$WORK/err"; then
      echo "--backend $1 --precision $2: $(tail -1 "$WORK/err")"
      continue
    fi
    printf -- "--backend %-4s --precision %s: %s\n" "$1" "$2" "$(grep -o 'network+blending [0-9.]* s' "$WORK/err")"
  done
  "$PYTHON" - "$WORK" <<'PY'
import sys, os, nibabel as nb, numpy as np
w = sys.argv[1]
ref = nb.load(f"{w}/labels_ort_fp32.nii.gz").get_fdata()
for k in ("dnnl_fp32", "dnnl_bf16"):
    p = f"{w}/labels_{k}.nii.gz"
    if os.path.exists(p):
        d = int((nb.load(p).get_fdata() != ref).sum())
        print(f"labels {k} vs ort: {d} of {ref.size} voxels differ")
PY
done
