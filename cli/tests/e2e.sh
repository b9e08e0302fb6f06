#!/usr/bin/env bash
# e2e.sh SWI COMPARE E2E_DIR WORK -- the end-to-end test of the CLI:
#   swi segment --model unet.onnx --input volume.nii.gz --output L.nii.gz --roi 32
#       --overlap 0.25 --mode gaussian --sw-batch 4 --scores S.nii.gz
# reproduces logits.f32 within 1e-4 + 1e-4|x| and labels.nii.gz under the tie rule,
# with the affine kept.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# ONNX Runtime's own process-lifetime allocations are not ours to report (ASan builds).
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan.supp:print_suppressions=0"
swi="$1" compare="$2" e2e="$3" work="$4"
if [ ! -f "$e2e/unet.onnx" ]; then
  echo "FAIL: $e2e/unet.onnx not found (SWI_GOLDEN_DIR; the repository has tests/data/golden)"
  exit 1
fi
rm -rf "$work" && mkdir -p "$work" || exit 1
start=$(date +%s.%N)
"$swi" segment --model "$e2e/unet.onnx" --input "$e2e/volume.nii.gz" \
  --output "$work/L.nii.gz" --roi 32 --overlap 0.25 --mode gaussian --sw-batch 4 \
  --scores "$work/S.nii.gz" || { echo "FAIL: swi segment exited $?"; exit 1; }
end=$(date +%s.%N)
echo "swi segment took $(echo "$end - $start" | bc 2>/dev/null || echo '?') s"
"$compare" "$e2e" "$work/L.nii.gz" "$work/S.nii.gz" || exit 1
leftover=$(find "$work" -name '.*.swi-*' | head -n1)
[ -z "$leftover" ] || { echo "FAIL: temporary file left: $leftover"; exit 1; }
exit 0
