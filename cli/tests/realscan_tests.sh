#!/usr/bin/env bash
# realscan_tests.sh -- tests of the real-scan options of `swi segment` and `swi plan`:
# --orientation, --spacing, ensembles (several --model) and 4-D inputs as channels.
# ctest runs one case per test, as cli_tests.sh:
#
#   realscan_tests.sh --list | CASE | all
#
# Environment: SWI, SWI_PYTHON, SWI_TEST_WORK, SWI_FEATURES (cli/tests/CMakeLists.txt).
# Error cases assert the exit status, one line on stderr naming the file or option, and
# that nothing (not even a temporary) is left.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan.supp:print_suppressions=0"

CASES=(
  orientation_exact orientation_scores orientation_plan usage_orientation
  spacing_geometry spacing_identity spacing_plan spacing_budget usage_spacing spacing_overflow
  ensemble_mean ensemble_plan ensemble_mismatch_input ensemble_mismatch_output
  channels_4d channels_4d_mismatch
  card_applied card_flags_override card_embedded card_members card_bad card_no_card info_model
  export_card
)
if [ "${1:-}" = --list ]; then printf '%s\n' "${CASES[@]}"; exit 0; fi
[ $# -eq 1 ] || { echo "usage: realscan_tests.sh --list | CASE | all" >&2; exit 2; }

SWI="${SWI:-}"
PY="${SWI_PYTHON:-/usr/bin/python3}"
WORK="${SWI_TEST_WORK:-${TMPDIR:-/tmp}/swi-cli-tests}"
FEATURES="${SWI_FEATURES:-onnxruntime,nifti,png}"
DATA="$WORK/realscan-data"
[ -x "$SWI" ] || { echo "FAIL: SWI=$SWI is not an executable"; exit 1; }

fail() { echo "FAIL: $*"; [ -f "$T/err" ] && { echo "--- stderr:"; head -c 2000 "$T/err"; }; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }
need() { case ",$FEATURES," in *",$1,"*) ;; *) skip "swi built without $1";; esac; }
data() {
  need nifti; need onnxruntime
  [ -f "$DATA/.done" ] && [ ! "$here/realscan.py" -nt "$DATA/.done" ] && return 0
  "$PY" -c 'import numpy, nibabel, onnx' 2>/dev/null ||
    skip "python3 with numpy, nibabel and onnx not found ($PY); run scripts/install-deps.sh"
  mkdir -p "$WORK"
  (
    flock 9
    if [ ! -f "$DATA/.done" ] || [ "$here/realscan.py" -nt "$DATA/.done" ]; then
      rm -rf "$DATA" "$DATA.tmp"
      "$PY" "$here/realscan.py" make "$DATA.tmp" >/dev/null || exit 1
      touch "$DATA.tmp/.done" && mv "$DATA.tmp" "$DATA"
    fi
  ) 9>"$WORK/.realscan.lock" || fail "could not make the test data"
}
run() { "$SWI" "$@" >"$T/out" 2>"$T/err" </dev/null; rc=$?; }
seg() { run segment -q "$@"; }
expect_rc() { [ "$rc" -eq "$1" ] || fail "exit status $rc, expected $1"; }
expect_err() { grep -Eq -- "$1" "$T/err" || fail "stderr lacks /$1/"; }
expect_out() { grep -Eq -- "$1" "$T/out" || { cat "$T/out"; fail "stdout lacks /$1/"; }; }
one_line_err() { [ "$(wc -l <"$T/err")" -eq 1 ] || fail "stderr is not one line"; }
expect_nothing_written() {
  local left; left=$(ls -A "$T/o" 2>/dev/null)
  [ -z "$left" ] || fail "left behind in the output directory: $left"
}
error_case() {
  local code="$1" what="$2"; shift 2
  run "$@"; expect_rc "$code"; one_line_err; expect_err "$what"; expect_nothing_written
}
check() { "$PY" "$here/$1" "${@:2}" >"$T/check" 2>&1 || { cat "$T/check"; fail "$1 ${*:2}"; }; }
geometry_ok() { check clitest.py same-geometry "$1" "$2"; }

# ---- orientation -------------------------------------------------------------------------
# The volume is oblique LAS; "grad" differentiates along its window's first axis, so its
# labels say which way that axis ran. Checked against nibabel's orientation functions.
t_orientation_exact() {
  data
  for codes in RAS PIL SPR LAS; do
    seg --model "$DATA/grad.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l_$codes.nii.gz" \
      --roi 0 --orientation "$codes"
    expect_rc 0
    check realscan.py grad-labels "$T/o/l_$codes.nii.gz" "$DATA/vol.nii.gz" "$codes"
    geometry_ok "$T/o/l_$codes.nii.gz" "$DATA/vol.nii.gz"
  done
  # and the check can fail: without --orientation the RAS labels are not those
  seg --model "$DATA/grad.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/plain.nii.gz" --roi 0
  "$PY" "$here/realscan.py" grad-labels "$T/o/plain.nii.gz" "$DATA/vol.nii.gz" RAS >/dev/null &&
    fail "the grad check cannot tell orientations apart"
  return 0
}
# a pointwise model: scores and labels on the input grid equal a run without orientation
t_orientation_scores() {
  data
  seg --model "$DATA/quant4.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz" \
    --scores "$T/o/s.nii.gz" --orientation PIR --preview "$T/o/p.png"
  expect_rc 0
  check clitest.py labels "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  check clitest.py scores "$T/o/s.nii.gz" "$DATA/vol.nii.gz"
  geometry_ok "$T/o/s.nii.gz" "$DATA/vol.nii.gz"
  [ -s "$T/o/p.png" ] || case ",$FEATURES," in *,png,*) fail "no preview";; esac
}
t_orientation_plan() {
  data
  run plan --model "$DATA/quant4.onnx" --input "$DATA/vol.nii.gz" --orientation RAS
  expect_rc 0; expect_out "model +grid 20 x 24 x 16, RAS"; expect_out "input +.*20 x 24 x 16"
}
t_usage_orientation() {
  mkdir -p "$T/o"
  error_case 2 "--orientation: axis codes 'RAX': unknown code 'X'" segment --model m.onnx \
    --input x.nii.gz --output "$T/o/l.nii.gz" --orientation RAX
  error_case 2 "two codes for one axis" segment --model m.onnx --input x.nii.gz \
    --output "$T/o/l.nii.gz" --orientation RLS
}

# ---- spacing -----------------------------------------------------------------------------
t_spacing_geometry() {
  data
  seg --model "$DATA/quant4.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz" \
    --scores "$T/o/s.nii.gz" --softmax --orientation RAS --spacing 1.2,1.0,1.7
  expect_rc 0
  geometry_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  geometry_ok "$T/o/s.nii.gz" "$DATA/vol.nii.gz"
  # the quant model's label is the class nearest the intensity: after resampling there and
  # back most voxels keep it (the comparison with MONAI itself is bench/monai/realscan_agree.py)
  "$PY" - "$T/o/l.nii.gz" "$DATA/vol.nii.gz" <<'PYEOF' || fail "resampled labels too far off"
import sys, numpy as np, nibabel as nib
lab = np.asarray(nib.load(sys.argv[1]).dataobj)
v = np.asarray(nib.load(sys.argv[2]).dataobj)
exp = np.clip(np.rint(v), 0, 3)
agree = (lab == exp).mean()
print("agree", agree)
sys.exit(0 if 0.2 < agree < 1.0 else 1)
PYEOF
}
# a spacing within 1e-3 of the input's: MONAI leaves the volume alone, so does swi
t_spacing_identity() {
  data
  seg --model "$DATA/quant4.onnx" --input "$DATA/vol_diag.nii.gz" --output "$T/o/l.nii.gz" \
    --spacing 0.8005,0.8,2.4995
  expect_rc 0
  check clitest.py labels "$T/o/l.nii.gz" "$DATA/vol_diag.nii.gz"
}
t_spacing_plan() {
  data
  run plan --model "$DATA/quant4.onnx" --input "$DATA/vol.nii.gz" --orientation RAS --spacing 1.5
  expect_rc 0; expect_out "model +grid [0-9]+ x [0-9]+ x [0-9]+, RAS, 1.5 x 1.5 x 1.5 mm"
  expect_out "beside the engine"; expect_out "total +predicted peak"
}
# --max-memory covers what resampling holds beside the engine, not the engine alone: a
# model grid 4x coarser than the input, so the input-grid labels and band (10 MB) rival
# the engine (12 MB), which alone would fit in 16M
t_spacing_budget() {
  local b=(bench --shape 256,256,128 --input-spacing 0.5,0.5,0.5 --spacing 2 --classes 4 --roi 32 --no-floor)
  run "${b[@]}" --max-memory 16M
  expect_rc 1; expect_err "16.0 MiB is below the smallest plan, at least .* beside it"
  run "${b[@]}" --max-memory 40M
  expect_rc 0; expect_out "beside the engine"
  "$PY" - "$T/out" <<'PYEOF' || fail "planned total above the 40M budget"
import re, sys
m = re.search(r"planned_mb=([0-9.]+)", open(sys.argv[1]).read())
sys.exit(0 if m and float(m.group(1)) <= 40 else 1)
PYEOF
  data
  run plan --model "$DATA/quant4.onnx" --input "$DATA/vol.nii.gz" --spacing 1.5 --max-memory 1G
  expect_rc 0; expect_out "total +predicted peak .*within --max-memory"
}
t_usage_spacing() {
  mkdir -p "$T/o"
  for bad in 0 -1 1,2 nan abc 1,0,1; do
    error_case 2 "--spacing '$bad'" segment --model m.onnx --input x.nii.gz \
      --output "$T/o/l.nii.gz" --spacing "$bad"
  done
}
t_spacing_overflow() {
  data
  error_case 1 "vol.nii.gz: --spacing 1e-05,1e-05,1e-05: the resampled grid .* 2\\^40 voxels$" \
    segment -q --model "$DATA/quant4.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz" \
    --spacing 0.00001
}

# ---- ensembles ---------------------------------------------------------------------------
t_ensemble_mean() {
  data
  seg --model "$DATA/quant4.onnx" --model "$DATA/quant4_shift.onnx" --input "$DATA/vol.nii.gz" \
    --output "$T/o/l.nii.gz" --sw-batch 3
  expect_rc 0
  check realscan.py ensemble-labels "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  # one model alone is not the mean: the check can fail
  seg --model "$DATA/quant4_shift.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/one.nii.gz"
  "$PY" "$here/realscan.py" ensemble-labels "$T/o/one.nii.gz" "$DATA/vol.nii.gz" >/dev/null &&
    fail "the ensemble check cannot tell one model from the mean"
  return 0
}
t_ensemble_plan() {
  data
  run plan --model "$DATA/quant4.onnx" --model "$DATA/quant4_b1.onnx" --input "$DATA/vol.nii.gz"
  expect_rc 0; expect_out "ensemble 2 models"
}
t_ensemble_mismatch_input() {
  data
  error_case 1 "quant4.onnx and .*quant4_c2.onnx disagree: input \\[\\?,1,8,8,8\\]" segment -q \
    --model "$DATA/quant4.onnx" --model "$DATA/quant4_c2.onnx" --input "$DATA/vol.nii.gz" \
    --output "$T/o/l.nii.gz"
}
t_ensemble_mismatch_output() {
  data
  error_case 1 "quant4.onnx and .*quant5.onnx disagree: output \\[4, 8 x 8 x 8\\] vs \\[5, 8 x 8 x 8\\]" \
    segment -q --model "$DATA/quant4.onnx" --model "$DATA/quant5.onnx" \
    --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz"
}

# ---- 4-D inputs --------------------------------------------------------------------------
t_channels_4d() {
  data
  seg --model "$DATA/quant4_c2.onnx" --input "$DATA/vol_4d2.nii.gz" --output "$T/o/a.nii.gz" --zscore
  expect_rc 0
  check clitest.py labels "$T/o/a.nii.gz" "$DATA/vol.nii.gz" "$DATA/vol2.nii.gz" --zscore
  geometry_ok "$T/o/a.nii.gz" "$DATA/vol_4d2.nii.gz"
  seg --model "$DATA/quant4_c2.onnx" --input "$DATA/vol.nii.gz" --input "$DATA/vol2.nii.gz" \
    --output "$T/o/b.nii.gz" --zscore
  expect_rc 0
  check clitest.py equal "$T/o/a.nii.gz" "$T/o/b.nii.gz"
}
t_channels_4d_mismatch() {
  data
  error_case 1 "vol_4d3.nii.gz: a 4-D image \\(20x24x16x3\\) holds 3 channels .* expects 2 input channels" \
    segment -q --model "$DATA/quant4_c2.onnx" --input "$DATA/vol_4d3.nii.gz" --output "$T/o/l.nii.gz"
}

# ---- model cards ------------------------------------------------------------------------
# copy a model into $T/m with the card text $2 beside it: card_model NAME JSON
card_model() {
  mkdir -p "$T/m"
  cp "$DATA/$1.onnx" "$T/m/$1.onnx"
  [ -n "$2" ] && printf '%s\n' "$2" >"$T/m/$1.json"
  return 0
}
t_card_applied() {
  data; need json
  card_model quant4 '{"orientation": "PIR", "overlap": 0.5, "blending": "gaussian",
    "classes": ["background", "low", "mid", "high"], "channels": ["CT"]}'
  seg --model "$T/m/quant4.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz"
  expect_rc 0
  check clitest.py labels "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  grep -q '"mid"' "$T/o/l.label.txt" || fail "no ITK-SNAP label description"
  grep -q 'ITK-SnAP Label Description File' "$T/o/l.label.txt" || fail "not ITK-SNAP's header"
  grep -q '^3 high 255 225 25 255$' "$T/o/l.ctbl" || fail "no Slicer color table"
  run plan --model "$T/m/quant4.onnx" --input "$DATA/vol.nii.gz"
  expect_rc 0; expect_out "overlap 0.5,0.5,0.5, gaussian"; expect_out "model +grid .* PIR"
}
t_card_flags_override() {
  data; need json
  card_model quant4 '{"overlap": 0.5, "blending": "gaussian", "orientation": "PIR"}'
  run plan --model "$T/m/quant4.onnx" --input "$DATA/vol.nii.gz" --overlap 0.25 --mode constant \
    --orientation RAS
  expect_rc 0; expect_out "overlap 0.25,0.25,0.25, constant"; expect_out "model +grid .* RAS"
}
t_card_embedded() {
  data; need json
  run info --model "$DATA/quant4_embedded.onnx"
  expect_rc 0; expect_out "card +.*quant4_embedded.onnx \(metadata_props swi.card\)"
  expect_out "orientation +PIR"; expect_out "class 3 +three"; expect_out "output +#0 'logits'"
  seg --model "$DATA/quant4_embedded.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii"
  expect_rc 0
  check clitest.py labels "$T/o/l.nii" "$DATA/vol.nii.gz"
  grep -q '"three"' "$T/o/l.label.txt" || fail "no label description from the embedded card"
}
t_card_members() {
  data; need json
  card_model quant4 '{"members": ["quant4_shift.onnx"]}'
  cp "$DATA/quant4_shift.onnx" "$T/m/"
  seg --model "$T/m/quant4.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz"
  expect_rc 0
  check realscan.py ensemble-labels "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_card_bad() {
  data; need json
  local cases=(
    '{"roi": 8, "colour": 1}|"colour": unknown key'
    '{"roi": "eight"}|"roi": must be a number or an array of 3 numbers'
    '{"roi": 16}|"roi": 16,16,16 does not fit .*quant4.onnx, whose window is fixed at'
    '{"spacing": [1, 0, 1]}|"spacing": must be millimetres > 0'
    '{"spacing": -2}|"spacing": must be millimetres > 0'
    '{"orientation": "RAX"}|"orientation": axis codes .RAX.: unknown code .X.'
    '{"orientation": 3}|"orientation": must be a string'
    '{"classes": ["a", "b", "c"]}|"classes": names 3 classes, but .*quant4.onnx gives 4'
    '{"channels": ["t1", "t2"]}|"channels": names 2 channels, but the input has 1'
    '{"preprocessing": {"zscore": 1}}|"preprocessing.zscore": must be true or false'
    '{"preprocessing": {"gamma": 2}}|"preprocessing.gamma": unknown key'
    '{"overlap": 1.5}|"overlap": must be in \[0, 1\)'
    '{"roi": 8,|not valid JSON'
    '[8, 8, 8]|a model card must be a JSON object'
  )
  for c in "${cases[@]}"; do
    card_model quant4 "${c%%|*}"
    error_case 1 "quant4.json: ${c#*|}" segment -q --model "$T/m/quant4.onnx" \
      --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz"
  done
}
t_card_no_card() {
  data; need json
  card_model quant4 '{"bogus": 1}'
  seg --model "$T/m/quant4.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz" --no-card
  expect_rc 0
  [ ! -e "$T/o/l.label.txt" ] || fail "label description without a card"
}
t_info_model() {
  data
  run info --model "$DATA/quant4.onnx"
  expect_rc 0; expect_out "input +#0 'image' \[\?,1,8,8,8\] float32"; expect_out "card +none"
  error_case 2 "--model is required" info
}
t_export_card() {
  data; need json
  "$SWI" --version | grep -q "export: yes" || skip "swi built without export"
  mkdir -p "$T/m"
  printf '{"orientation": "LPS", "classes": ["a", "b", "c", "d"]}\n' >"$T/m/card.json"
  run export --model "$DATA/quant4.onnx" --output "$T/m/pipe.onnx" --size 20,24,16 \
    --card "$T/m/card.json" --quiet
  expect_rc 0
  run info --model "$T/m/pipe.onnx"
  expect_rc 0; expect_out "metadata_props swi.card"; expect_out "orientation +LPS"
  expect_out "class 3 +d"
  printf '[1, 2]\n' >"$T/m/bad.json"
  error_case 1 "--card .*bad.json: a model card is a JSON object" export \
    --model "$DATA/quant4.onnx" --output "$T/o/pipe.onnx" --size 20,24,16 --card "$T/m/bad.json"
}

run_case() {
  T="$WORK/realscan-$1"
  rm -rf "$T"; mkdir -p "$T/o"
  "t_$1" && echo "ok $1"
}
if [ "$1" = all ]; then
  st=0
  for c in "${CASES[@]}"; do (run_case "$c") || st=1; done
  exit $st
fi
run_case "$1"
