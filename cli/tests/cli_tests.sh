#!/usr/bin/env bash
# cli_tests.sh -- tests of the `swi` command: every option, every bad input, signals
# and output safety. ctest runs one case per test:
#
#   cli_tests.sh --list          the case names
#   cli_tests.sh CASE            run one case (exit 0 pass, 1 fail, 77 skipped)
#   cli_tests.sh all             run every case here, in order
#
# Environment (set by cli/tests/CMakeLists.txt): SWI (the binary), SWI_E2E
# (tests/data/golden/e2e), SWI_PYTHON (python3 with numpy, nibabel, onnx), SWI_TEST_WORK
# (scratch), SWI_FEATURES (onnxruntime,nifti,png as built).
#
# Each error case asserts the exit status, that stderr is one line naming the file or
# option and the problem, and that no output (nor temporary) file is left.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# ONNX Runtime's own process-lifetime allocations are not ours to report (ASan builds).
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan.supp:print_suppressions=0"

CASES=(
  # help and usage (exit 0 / 2)
  help_main help_version help_segment help_plan help_demo help_bench help_export help_cmd
  usage_no_command usage_unknown_command usage_missing_model usage_missing_input
  usage_missing_output usage_unknown_option usage_option_needs_value usage_extra_argument
  usage_token_at_fault usage_did_you_mean usage_one_dash_long opt_short_and_underscore_forms
  usage_roi usage_overlap usage_mode usage_sigma usage_padding usage_cval usage_sw_batch
  usage_threads usage_max_memory usage_clip usage_scale usage_device usage_head
  usage_output_ext usage_scores_ext usage_preview_ext usage_softmax_needs_scores
  usage_same_output usage_dynamic_roi_needed
  # options that change the result, checked against numpy
  opt_default opt_uncompressed opt_roi_per_axis opt_roi_zero opt_overlap opt_mode_gaussian
  opt_sigma_scale opt_padding_modes opt_cval opt_sw_batch opt_fixed_batch opt_threads
  opt_max_memory opt_scores opt_softmax opt_tta opt_clip opt_scale opt_zscore
  opt_clip_scale_zscore opt_multi_input opt_preview opt_preview_sizes opt_force opt_head opt_uint16_labels
  opt_quiet opt_summary opt_progress_tty opt_progress_log opt_progress_folder opt_device_cuda opt_nifti2 opt_big_endian
  opt_4d_singleton opt_dtypes
  input_sibling_nii input_gzip_named_nii input_plain_named_gz
  nonfinite_warn nonfinite_fail nonfinite_big_endian nonfinite_float64 nonfinite_second_channel
  usage_nonfinite
  # bad NIfTI input (exit 1, nothing written)
  bad_input_missing bad_input_directory bad_input_unreadable bad_input_empty
  bad_input_random bad_input_text_gz bad_input_truncated_header bad_input_truncated_data
  bad_input_truncated_data_gz bad_input_truncated_stream bad_input_corrupt_gz bad_input_gz_claims
  bad_input_sizeof_hdr bad_input_no_magic bad_input_two_file bad_input_dim0
  bad_input_dim_zero bad_input_dim_negative bad_input_dims_overflow
  bad_input_dims_overflow_nifti2 bad_input_dims_disagree_with_data bad_input_4d
  bad_input_2d bad_input_rgb bad_input_complex bad_input_unknown_datatype
  bad_input_vox_offset bad_input_extension bad_input_channel_sizes_differ bad_input_channel_geometry
  # bad models (exit 1, nothing written)
  bad_model_missing bad_model_not_onnx bad_model_random bad_model_empty bad_model_directory
  bad_model_two_inputs bad_model_rank bad_model_channels bad_model_output_rank
  bad_model_output_type bad_model_input_type bad_model_zoomed_output bad_model_roi_mismatch
  bad_model_nan bad_model_head_out_of_range
  # output safety and signals
  safe_existing_output safe_output_dir_missing safe_output_is_directory
  safe_output_not_regular safe_no_leftovers_after_error safe_sigint safe_sigterm
  safe_concurrent_same_output safe_budget_too_small
  # without --max-memory the run must fit the memory available (faked: SWI_AVAILABLE_MEMORY)
  avail_refused avail_refused_store avail_max_memory_overrides avail_plan_reports avail_fits_smaller_batch
  budget_covers_reading
  # a region of interest: bitwise the whole run's inside, 0 outside (docs/regions.md)
  region_bitwise region_plan usage_region
  # an output that is an input, or another output, under another name (exit 1, untouched)
  same_input_name same_input_relative same_input_symlink same_input_hardlink
  same_input_second_channel same_input_symlinked_dir same_model same_outputs_relative
  same_outputs_symlinked_dir same_outputs_hardlink same_outputs_preview
  # plan, demo, e2e extras
  plan_grid plan_overlap plan_memory plan_budget plan_writes_nothing plan_huge_header
  # window reuse (on by default): bitwise the same results as --no-reuse
  usage_reuse_cache reuse_labels_scores reuse_tta reuse_plan reuse_e2e
  # network rewrites (on by default) and swi optimize
  help_optimize usage_optimize optimize_e2e optimize_bad_model rewrite_plan
  e2e_tta e2e_preview demo_run
)

if [ "${1:-}" = --list ]; then
  printf '%s\n' "${CASES[@]}"
  exit 0
fi
[ $# -eq 1 ] || { echo "usage: cli_tests.sh --list | CASE | all" >&2; exit 2; }

SWI="${SWI:-}"
E2E="${SWI_E2E:-}"
PY="${SWI_PYTHON:-/usr/bin/python3}"
WORK="${SWI_TEST_WORK:-${TMPDIR:-/tmp}/swi-cli-tests}"
FEATURES="${SWI_FEATURES:-onnxruntime,nifti,png}"
DATA="$WORK/data"

[ -x "$SWI" ] || { echo "FAIL: SWI=$SWI is not an executable"; exit 1; }

# ---- helpers ---------------------------------------------------------------------------
fail() { echo "FAIL: $*"; [ -f "$T/err" ] && { echo "--- stderr:"; head -c 2000 "$T/err"; }; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }
need() {
  case ",$FEATURES," in *",$1,"*) ;; *) skip "swi built without $1";; esac
}
# the golden e2e case is committed (tests/data/golden/e2e): missing, it is a failure
need_e2e() { [ -f "$E2E/unet.onnx" ] || fail "e2e model not found: $E2E/unet.onnx (SWI_E2E)"; }

# make the shared test data once (volumes, broken files, ONNX models)
data() {
  need nifti
  [ -f "$DATA/.done" ] && [ ! "$here/clitest.py" -nt "$DATA/.done" ] && return 0
  "$PY" -c 'import numpy, nibabel, onnx' 2>/dev/null ||
    skip "python3 with numpy, nibabel and onnx not found ($PY); run scripts/install-deps.sh"
  mkdir -p "$WORK"
  (
    flock 9
    if [ ! -f "$DATA/.done" ] || [ "$here/clitest.py" -nt "$DATA/.done" ]; then
      rm -rf "$DATA" "$DATA.tmp"
      "$PY" "$here/clitest.py" make "$DATA.tmp" >/dev/null || exit 1
      touch "$DATA.tmp/.done" && mv "$DATA.tmp" "$DATA"
    fi
  ) 9>"$WORK/.lock" || fail "could not make the test data"
}

# run swi; stdout -> $T/out, stderr -> $T/err, status -> $rc
run() {
  "$SWI" "$@" >"$T/out" 2>"$T/err" </dev/null
  rc=$?
}
expect_rc() { [ "$rc" -eq "$1" ] || fail "exit status $rc, expected $1 (swi ${*:2})"; }
expect_err() {
  grep -Eq -- "$1" "$T/err" || fail "stderr lacks /$1/"
}
expect_out() {
  grep -Eq -- "$1" "$T/out" || { cat "$T/out"; fail "stdout lacks /$1/"; }
}
one_line_err() {
  local n
  n=$(wc -l <"$T/err")
  [ "$n" -eq 1 ] || fail "stderr has $n lines, expected one"
}
# no file in $T/o (outputs and temporaries alike)
expect_nothing_written() {
  local left
  left=$(ls -A "$T/o" 2>/dev/null)
  [ -z "$left" ] || fail "left behind in the output directory: $left"
}
# usage error: exit 2, one line naming $1
usage_case() {
  local what="$1"; shift
  run "$@"
  expect_rc 2
  one_line_err
  expect_err "$what"
  expect_err "--help"
  expect_nothing_written
}
# runtime error: exit 1, one line matching $1, nothing written
error_case() {
  local what="$1"; shift
  run "$@"
  expect_rc 1
  one_line_err
  expect_err "$what"
  expect_nothing_written
}
seg() { run segment -q "$@"; }
labels_ok() { "$PY" "$here/clitest.py" labels "$@" >"$T/check" 2>&1 || { cat "$T/check"; fail "labels"; }; }
scores_ok() { "$PY" "$here/clitest.py" scores "$@" >"$T/check" 2>&1 || { cat "$T/check"; fail "scores"; }; }
geometry_ok() { "$PY" "$here/clitest.py" same-geometry "$1" "$2" >"$T/check" 2>&1 || { cat "$T/check"; fail "geometry"; }; }
dtype_is() {
  local d
  d=$("$PY" "$here/clitest.py" dtype "$1")
  [ "$d" = "$2" ] || fail "$1 has dtype $d, expected $2"
}
no_temps() {
  local left
  left=$(find "$1" -maxdepth 1 -name '.*.swi-*' 2>/dev/null | head -n1)
  [ -z "$left" ] || fail "temporary file left: $left"
}
quant_args() { echo --model "$DATA/quant4.onnx" --input "$DATA/vol.nii.gz"; }

# ---- help and usage --------------------------------------------------------------------
# region_inside WHOLE PART I0 I1 J0 J1 K0 K1 [OUTSIDE]: PART equals WHOLE in the box, OUTSIDE (0) elsewhere
region_inside() {
  "$PY" - "$@" >"$T/check" 2>&1 <<'PYEOF' || { cat "$T/check"; fail "region"; }
import sys, numpy as np, nibabel as nib
a = np.asarray(nib.load(sys.argv[1]).dataobj); b = np.asarray(nib.load(sys.argv[2]).dataobj)
lo = [int(v) for v in sys.argv[3:9:2]]; hi = [int(v) for v in sys.argv[4:9:2]]
out = float(sys.argv[9]) if len(sys.argv) > 9 else 0
m = np.zeros(a.shape[:3], bool); m[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] = True
assert a.shape == b.shape and m.any() and (~m).any()
assert np.array_equal(a[m], b[m]), "inside differs"
assert (b[~m] == out).all(), "outside is not background"
print("ok")
PYEOF
}
t_region_bitwise() {
  data; need onnxruntime; need_e2e
  local common=(--model "$E2E/unet.onnx" --input "$E2E/volume.nii.gz" --overlap 0.5 --mode gaussian)
  seg "${common[@]}" --output "$T/o/w.nii.gz" --scores "$T/o/ws.nii.gz"; expect_rc 0
  seg "${common[@]}" --output "$T/o/r.nii.gz" --scores "$T/o/rs.nii.gz" --region 5:23,29:50,2:17; expect_rc 0
  region_inside "$T/o/w.nii.gz" "$T/o/r.nii.gz" 5 23 29 50 2 17
  region_inside "$T/o/ws.nii.gz" "$T/o/rs.nii.gz" 5 23 29 50 2 17
  # through a resampling to another spacing and orientation
  seg "${common[@]}" --spacing 1.3,0.9,3.1 --orientation PIR --output "$T/o/w2.nii.gz"; expect_rc 0
  run segment "${common[@]}" --spacing 1.3,0.9,3.1 --orientation PIR --output "$T/o/r2.nii.gz" --region 0:14,11:40,6:12
  expect_rc 0; expect_err "windows run [0-9]+ of [0-9]+"
  region_inside "$T/o/w2.nii.gz" "$T/o/r2.nii.gz" 0 14 11 40 6 12
  # the labels outside kept from another map
  seg "${common[@]}" --output "$T/o/k.nii.gz" --region 5:23,29:50,2:17 --keep-outside "$T/o/w.nii.gz"; expect_rc 0
  "$PY" "$here/clitest.py" equal "$T/o/w.nii.gz" "$T/o/k.nii.gz" >"$T/check" 2>&1 || { cat "$T/check"; fail "keep-outside"; }
}
t_region_plan() {
  data; need onnxruntime; need_e2e
  run plan --model "$E2E/unet.onnx" --input "$E2E/volume.nii.gz" --overlap 0.5 --region 0:8,0:8,0:8
  expect_rc 0; expect_out "^region .*windows run [0-9]+ of [0-9]+"
  local n m
  read -r n m < <(sed -n 's/.*windows run \([0-9]*\) of \([0-9]*\).*/\1 \2/p' "$T/out")
  [ "$n" -gt 0 ] && [ "$n" -lt "$m" ] || fail "windows run $n of $m"
}
t_usage_region() {
  data
  usage_case "--region '1:2,3': give I0:I1,J0:J1,K0:K1" segment $(quant_args) --output "$T/o/l.nii.gz" --region 1:2,3
  usage_case "--region '4:4,0:1,0:1'" segment $(quant_args) --output "$T/o/l.nii.gz" --region 4:4,0:1,0:1
  usage_case "--region-mm 'a'" segment $(quant_args) --output "$T/o/l.nii.gz" --region-mm a
  usage_case "--margin '-1'" segment $(quant_args) --output "$T/o/l.nii.gz" --region 0:1,0:1,0:1 --margin -1
  # the job's own refusals (swi_job_open, the volume's size): usage errors too
  local c
  for c in "name one region|--region 0:1,0:1,0:1 --region-mm 0:1,0:1,0:1" \
           "--keep-outside applies to a region|--keep-outside x.nii.gz" \
           "holds no voxel|--region 900:901,0:1,0:1"; do
    run segment $(quant_args) --output "$T/o/l.nii.gz" ${c#*|}
    expect_rc 2; one_line_err; expect_err "${c%%|*}"; expect_nothing_written
  done
}
t_help_main() { run --help; expect_rc 0; expect_out "segment"; expect_out "plan"; expect_out "demo"; expect_out "Examples"; }
t_help_version() { run --version; expect_rc 0; expect_out "^swi [0-9]+\.[0-9]+\.[0-9]+"; expect_out "ONNX Runtime"; }
t_help_segment() { run segment --help; expect_rc 0; expect_out "Examples"; expect_out "--max-memory"; expect_out "--tta"; }
t_help_plan() { run plan --help; expect_rc 0; expect_out "Examples"; expect_out "swi plan"; }
t_help_demo() { run demo --help; expect_rc 0; expect_out "Dice"; }
t_help_bench() { run bench --help; [ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || fail "swi bench --help exited $rc"; }
t_help_export() { run export --help; expect_rc 0; [ -s "$T/out" ] || [ -s "$T/err" ] || fail "no help text"; }
t_help_cmd() { run help segment; expect_rc 0; expect_out "Examples"; }
t_usage_no_command() { run; expect_rc 2; expect_err "usage"; }
t_usage_unknown_command() { run frobnicate; expect_rc 2; one_line_err; expect_err "unknown command 'frobnicate'"; }
t_usage_missing_model() { usage_case "--model is required" segment --input x.nii.gz --output "$T/o/l.nii.gz"; }
t_usage_missing_input() { usage_case "--input is required" segment --model m.onnx --output "$T/o/l.nii.gz"; }
t_usage_missing_output() { usage_case "--output is required" segment --model m.onnx --input x.nii.gz; }
t_usage_unknown_option() { usage_case "unknown option '--frob'" segment --frob --model m.onnx --input x.nii.gz --output "$T/o/l.nii.gz"; }
t_usage_option_needs_value() { usage_case "'--roi' needs a value" segment --model m.onnx --input x.nii.gz --output "$T/o/l.nii.gz" --roi; }
# the token at fault as typed, never the value of the option before it
t_usage_token_at_fault() {
  usage_case "unknown option '-x' \\(in '-xyz'\\)" segment --model m.onnx -xyz --input x.nii.gz --output "$T/o/l.nii.gz"
  ! grep -q "m.onnx" "$T/err" || fail "the message names m.onnx, not the option at fault"
}
t_usage_did_you_mean() {
  usage_case "unknown option '--modle'; did you mean --model\\?" segment --modle m.onnx --input x.nii.gz --output "$T/o/l.nii.gz"
  usage_case "did you mean --overlap\\?" segment --model m.onnx --overlpa 0.5 --input x.nii.gz --output "$T/o/l.nii.gz"
  usage_case "unknown option '--frobnicate'" segment --frobnicate --model m.onnx
  ! grep -q "did you mean" "$T/err" || fail "a suggestion for an option nothing like any"
}
# -model is a long option with one dash, not -m with the value "odel"
t_usage_one_dash_long() {
  usage_case "unknown option '-model'; did you mean --model\\?" segment -model m.onnx --input x.nii.gz --output "$T/o/l.nii.gz"
  usage_case "unknown option '-r' \\(in '-roi'\\); did you mean --roi\\?" segment --model m.onnx -roi 32 --input x.nii.gz --output "$T/o/l.nii.gz"
}
# -m/-i/-o and nnU-Net's underscores mean what the long options mean
t_opt_short_and_underscore_forms() {
  data; need onnxruntime
  seg -m "$DATA/quant4.onnx" -i "$DATA/vol.nii.gz" -o "$T/o/l.nii.gz" --sw_batch 2
  expect_rc 0
  labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_usage_extra_argument() { usage_case "unexpected argument 'stray'" segment --model m.onnx --input x.nii.gz --output "$T/o/l.nii.gz" stray; }
seg_usage() { local what="$1"; shift; usage_case "$what" segment --model m.onnx --input x.nii.gz --output "$T/o/l.nii.gz" "$@"; }
t_usage_roi() { seg_usage "--roi '1,2'" --roi 1,2; seg_usage "--roi '-3'" --roi -3; seg_usage "--roi 'abc'" --roi abc; }
t_usage_overlap() { seg_usage "--overlap '1'" --overlap 1; seg_usage "--overlap '-0.1'" --overlap -0.1; seg_usage "--overlap '0.1,0.2'" --overlap 0.1,0.2; }
t_usage_mode() { seg_usage "--mode 'linear'" --mode linear; }
t_usage_sigma() { seg_usage "--sigma-scale '0'" --sigma-scale 0; seg_usage "--sigma-scale 'nan'" --sigma-scale nan; }
t_usage_padding() { seg_usage "--padding-mode 'zeros'" --padding-mode zeros; }
t_usage_cval() { seg_usage "--cval 'x'" --cval x; }
t_usage_sw_batch() { seg_usage "--sw-batch '0'" --sw-batch 0; seg_usage "--sw-batch '2.5'" --sw-batch 2.5; }
t_usage_threads() { seg_usage "--threads '-1'" --threads -1; }
t_usage_max_memory() { seg_usage "--max-memory '4X'" --max-memory 4X; seg_usage "--max-memory '-1G'" --max-memory -1G; seg_usage "--max-memory '0'" --max-memory 0; }
t_usage_clip() { seg_usage "--clip '3,1'" --clip 3,1; seg_usage "--clip '1'" --clip 1; }
t_usage_scale() { seg_usage "--scale '1,1,0,1'" --scale 1,1,0,1; seg_usage "--scale '1,2,3'" --scale 1,2,3; }
t_usage_device() { seg_usage "--device 'tpu'" --device tpu; }
t_usage_head() { seg_usage "--head '-1'" --head -1; }
t_usage_output_ext() { usage_case "--output '.*l.txt'" segment --model m.onnx --input x.nii.gz --output "$T/o/l.txt"; }
t_usage_scores_ext() { seg_usage "--scores '.*s.txt'" --scores "$T/o/s.txt"; }
t_usage_preview_ext() { seg_usage "--preview '.*p.jpg'" --preview "$T/o/p.jpg"; }
t_usage_softmax_needs_scores() { seg_usage "--softmax applies to --scores" --softmax; }
t_usage_same_output() { seg_usage "two different outputs" --scores "$T/o/l.nii.gz"; }
t_usage_dynamic_roi_needed() {
  data; need onnxruntime
  run segment --model "$DATA/quant4_dyn.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz"
  expect_rc 2; one_line_err; expect_err "dynamic"; expect_err "--roi"; expect_nothing_written
}

# ---- options ---------------------------------------------------------------------------
t_opt_default() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz"
  expect_rc 0
  [ ! -s "$T/err" ] || fail "-q printed something"
  labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  geometry_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  dtype_is "$T/o/l.nii.gz" uint8
  no_temps "$T/o"
}
t_opt_uncompressed() {
  data; need onnxruntime
  seg --model "$DATA/quant4.onnx" --input "$DATA/vol.nii" --output "$T/o/l.nii"
  expect_rc 0
  [ "$(head -c 2 "$T/o/l.nii" | od -An -tx1 | tr -d ' ')" != "1f8b" ] || fail ".nii output is gzipped"
  labels_ok "$T/o/l.nii" "$DATA/vol.nii"
  geometry_ok "$T/o/l.nii" "$DATA/vol.nii"
}
t_opt_roi_per_axis() {
  data; need onnxruntime
  seg --model "$DATA/quant4_dyn.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz" --roi 8,6,4
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  run plan --model "$DATA/quant4_dyn.onnx" --input "$DATA/vol.nii.gz" --roi 8,6,4
  expect_rc 0; expect_out "window +8 x 6 x 4"
}
t_opt_roi_zero() {
  data; need onnxruntime
  run plan --model "$DATA/quant4_dyn.onnx" --input "$DATA/vol.nii.gz" --roi 0,8,0
  expect_rc 0; expect_out "window +20 x 8 x 16"; expect_out "grid +1 x 4 x 1 "
  seg --model "$DATA/quant4_dyn.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz" --roi 0,8,0
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_opt_overlap() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --overlap 0.5,0.7,0
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_opt_mode_gaussian() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --scores "$T/o/s.nii.gz" --mode gaussian --overlap 0.5
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"; scores_ok "$T/o/s.nii.gz" "$DATA/vol.nii.gz"
}
t_opt_sigma_scale() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --mode gaussian --sigma-scale 0.3,0.05,1
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  run plan $(quant_args) --mode gaussian --sigma-scale 0.3
  expect_rc 0; expect_out "sigma 0.3,0.3,0.3"
}
t_opt_padding_modes() {
  data; need onnxruntime
  # a 32^3 window on a 10x12x8 volume: everything is padding-dependent except the volume
  for m in constant reflect replicate circular; do
    rm -f "$T/o/l.nii.gz"
    seg --model "$DATA/quant4_dyn.onnx" --input "$DATA/small.nii.gz" --output "$T/o/l.nii.gz" \
      --roi 16 --padding-mode $m
    if [ "$m" = reflect ]; then
      # reflect needs a pad smaller than the image: 16 on 8 along k is not
      [ "$rc" -ne 0 ] && continue
    fi
    expect_rc 0
    labels_ok "$T/o/l.nii.gz" "$DATA/small.nii.gz"
  done
  run plan --model "$DATA/quant4_dyn.onnx" --input "$DATA/small.nii.gz" --roi 16 --padding-mode circular
  expect_rc 0; expect_out "circular padding"; expect_out "padded +16 x 16 x 16"
}
t_opt_cval() {
  data; need onnxruntime
  seg --model "$DATA/quant4_dyn.onnx" --input "$DATA/small.nii.gz" --output "$T/o/l.nii.gz" --roi 16 --cval 2.5
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/small.nii.gz"
}
t_opt_sw_batch() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --sw-batch 5
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  run plan $(quant_args) --sw-batch 5
  expect_rc 0; expect_out "up to 5 windows"
}
t_opt_fixed_batch() {
  data; need onnxruntime
  # the model's batch is fixed at 1: each engine batch of 3 is cut into 3 network runs
  seg --model "$DATA/quant4_b1.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz" --sw-batch 3
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_opt_threads() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --threads 1
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  rm -f "$T/o/l.nii.gz"
  seg $(quant_args) --output "$T/o/l.nii.gz" --threads 3
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_opt_max_memory() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --max-memory 1G --sw-batch 8
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_opt_scores() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --scores "$T/o/s.nii.gz"
  expect_rc 0
  scores_ok "$T/o/s.nii.gz" "$DATA/vol.nii.gz"
  geometry_ok "$T/o/s.nii.gz" "$DATA/vol.nii.gz"
  dtype_is "$T/o/s.nii.gz" float32
  [ "$("$PY" "$here/clitest.py" shape "$T/o/s.nii.gz")" = "20 24 16 4" ] || fail "scores shape"
}
t_opt_softmax() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --scores "$T/o/s.nii" --softmax
  expect_rc 0; scores_ok "$T/o/s.nii" "$DATA/vol.nii.gz" --softmax; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_opt_tta() {
  data; need onnxruntime
  # the quant models are voxel-wise, so mirroring changes nothing: same scores
  seg $(quant_args) --output "$T/o/l.nii.gz" --scores "$T/o/s.nii.gz" --tta --sw-batch 3
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"; scores_ok "$T/o/s.nii.gz" "$DATA/vol.nii.gz"
  run plan $(quant_args) --tta; expect_rc 0; expect_out "x8 for --tta"
}
t_opt_clip() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --clip 0.7,2.2
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz" --clip 0.7,2.2
}
t_opt_scale() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --scores "$T/o/s.nii.gz" --scale 0,3.6,3,0
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz" --scale 0,3.6,3,0
  scores_ok "$T/o/s.nii.gz" "$DATA/vol.nii.gz" --scale 0,3.6,3,0
}
t_opt_zscore() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --scores "$T/o/s.nii.gz" --zscore
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz" --zscore
  scores_ok "$T/o/s.nii.gz" "$DATA/vol.nii.gz" --zscore
}
t_opt_clip_scale_zscore() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --clip 0.5,3 --scale 0.5,3,0,10 --zscore
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz" --clip 0.5,3 --scale 0.5,3,0,10 --zscore
}
t_opt_multi_input() {
  data; need onnxruntime
  seg --model "$DATA/quant4_c2.onnx" --input "$DATA/vol.nii.gz" --input "$DATA/vol2.nii.gz" \
    --output "$T/o/l.nii.gz" --scores "$T/o/s.nii.gz" --zscore
  expect_rc 0
  labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz" "$DATA/vol2.nii.gz" --zscore
  scores_ok "$T/o/s.nii.gz" "$DATA/vol.nii.gz" "$DATA/vol2.nii.gz" --zscore
  geometry_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_opt_preview() {
  data; need onnxruntime; need png
  seg $(quant_args) --output "$T/o/l.nii.gz" --preview "$T/o/p.png"
  expect_rc 0
  local wh
  wh=$("$PY" "$here/clitest.py" png "$T/o/p.png") || fail "preview is not a PNG"
  # panels 20x24, 20x16, 24x16 enlarged 11x: (20+20+24)*11 + 8 wide, 24*11 high
  [ "$wh" = "712 264" ] || fail "preview is $wh pixels, expected 712 264"
}
t_opt_preview_sizes() {
  data; need onnxruntime; need png
  # one voxel (enlarged), and 3000 x 6 x 4 (kept within 8192 pixels wide)
  local f wh
  for f in one long; do
    seg --model "$DATA/quant4_dyn.onnx" --roi 8 --input "$DATA/$f.nii.gz" --output "$T/o/$f.nii.gz" \
      --preview "$T/o/$f.png"
    expect_rc 0
    labels_ok "$T/o/$f.nii.gz" "$DATA/$f.nii.gz"
    wh=$("$PY" "$here/clitest.py" png "$T/o/$f.png") || fail "$f.png is not a PNG"
    case "$f:$wh" in
      "one:56 16"|"long:6014 6") ;;
      *) fail "$f.png is $wh pixels";;
    esac
  done
}
t_opt_force() {
  data; need onnxruntime
  echo old >"$T/o/l.nii.gz"
  seg $(quant_args) --output "$T/o/l.nii.gz"
  expect_rc 1; one_line_err; expect_err "already exists"; expect_err "--force"
  [ "$(cat "$T/o/l.nii.gz")" = old ] || fail "existing output was modified"
  no_temps "$T/o"
  seg $(quant_args) --output "$T/o/l.nii.gz" --force
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"; no_temps "$T/o"
}
t_opt_head() {
  data; need onnxruntime
  # output 1 is -output 0: its argmax is the class farthest from s
  seg --model "$DATA/quant4_2out.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l0.nii.gz"
  expect_rc 0; labels_ok "$T/o/l0.nii.gz" "$DATA/vol.nii.gz"
  seg --model "$DATA/quant4_2out.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l1.nii.gz" --head 1
  expect_rc 0
  "$PY" "$here/clitest.py" equal "$T/o/l0.nii.gz" "$T/o/l1.nii.gz" >/dev/null && fail "--head 1 gave the labels of output 0"
  run plan --model "$DATA/quant4_2out.onnx" --input "$DATA/vol.nii.gz" --head 1
  expect_rc 0; expect_out "output 'neg'"
}
t_opt_uint16_labels() {
  data; need onnxruntime
  seg --model "$DATA/quant300.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz" --scale 0,3.6,0,290
  expect_rc 0
  dtype_is "$T/o/l.nii.gz" uint16
  labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz" --classes 300 --scale 0,3.6,0,290
}
t_opt_quiet() {
  data; need onnxruntime
  run segment -q $(quant_args) --output "$T/o/l.nii.gz"
  expect_rc 0; [ ! -s "$T/err" ] && [ ! -s "$T/out" ] || fail "--quiet printed"
}
t_opt_summary() {
  data; need onnxruntime
  run segment $(quant_args) --output "$T/o/l.nii.gz"
  expect_rc 0; one_line_err
  expect_err "windows in [0-9]+ calls"; expect_err "windows/s"; expect_err "peak RSS"
  grep -q $'\r' "$T/err" && fail "progress bar drawn although stderr is not a terminal"
  return 0
}
t_opt_progress_tty() {
  data; need onnxruntime
  command -v script >/dev/null || skip "script(1) not available"
  local cmd
  cmd="$(printf '%q ' "$SWI" segment --model "$DATA/quant4.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz" --sw-batch 1)"
  script -qec "$cmd" /dev/null >"$T/tty" 2>&1 </dev/null
  rc=$?
  expect_rc 0
  grep -q "windows" "$T/tty" && grep -q "ETA" "$T/tty" && grep -q "/s" "$T/tty" || { cat "$T/tty"; fail "no progress bar on a terminal"; }
}
# a run logged (stderr not a terminal): a line at most once a period (SWI_PROGRESS_PERIOD) and
# at each 10 % step, the first after one period; -q none
PROGRESS_RE='^swi segment: [0-9]+/[0-9]+ windows \([0-9]+ %\), [0-9.]+ windows/s, ETA [0-9:]+, RSS [0-9.]+ [KMGT]?i?B$'
t_opt_progress_log() {
  data; need onnxruntime
  local args=(segment --model "$DATA/quant4_dyn.onnx" --roi 16 --overlap 0.75 --input "$DATA/big.nii.gz"
    --threads 1 --sw-batch 1)
  local t0 t1 n max
  t0=$(date +%s.%N)
  SWI_PROGRESS_PERIOD=0.2 run "${args[@]}" --output "$T/o/l.nii.gz"
  t1=$(date +%s.%N)
  expect_rc 0
  grep -q $'\r' "$T/err" && fail "a bar drawn in a log"
  n=$(grep -c ' windows (' "$T/err")
  [ "$n" -ge 3 ] || fail "$n progress lines, expected several"
  grep ' windows (' "$T/err" | grep -Evq "$PROGRESS_RE" && fail "a line not as expected: $(grep ' windows (' "$T/err" | grep -Ev "$PROGRESS_RE" | head -1)"
  # at most one a period, plus one at each 10 % step
  max=$("$PY" -c "import sys; print(int((float(sys.argv[2]) - float(sys.argv[1])) / 0.2) + 11)" "$t0" "$t1")
  [ "$n" -le "$max" ] || fail "$n lines in $max periods and steps"
  tail -n1 "$T/err" | grep -q "peak RSS" || fail "the summary is not last"
  # the default period (10 s): a short run says its summary alone
  run "${args[@]}" --output "$T/o/l2.nii.gz"
  expect_rc 0; one_line_err; expect_err "peak RSS"
  SWI_PROGRESS_PERIOD=0.2 run "${args[@]}" -q --output "$T/o/l3.nii.gz"
  expect_rc 0; [ ! -s "$T/err" ] || fail "-q printed"
}
# folder mode: each case's lines and its line when done tell the whole folder's cases done
# and ETA, logged or on a terminal
t_opt_progress_folder() {
  data; need onnxruntime
  mkdir -p "$T/in"
  for c in a b c; do cp "$DATA/big.nii.gz" "$T/in/$c.nii.gz"; done
  local args=(segment --model "$DATA/quant4_dyn.onnx" --roi 16 --overlap 0.5 --input-dir "$T/in" --threads 1)
  SWI_PROGRESS_PERIOD=0.05 run "${args[@]}" --output-dir "$T/res"
  expect_rc 0
  for i in 1 2 3; do
    expect_err "^swi segment: \[$i/3\] [abc]: done, [0-9.]+ s; $i/3 cases done, folder ETA [0-9:]+$"
  done
  grep -Eq '^swi segment: [abc]: [0-9]+/[0-9]+ windows \([0-9]+ %\), .*, RSS [^;]+; [0-2]/3 cases done, folder ETA [0-9:-]+$' \
    "$T/err" || fail "no progress line with the folder's cases and ETA"
  expect_err "3 done, 0 failed, 0 skipped"
  command -v script >/dev/null || return 0
  local cmd
  cmd="$(printf '%q ' "$SWI" "${args[@]}" --output-dir "$T/res2")"
  script -qec "$cmd" /dev/null >"$T/tty" 2>&1 </dev/null
  grep -aq "cases done, folder ETA" "$T/tty" || { cat "$T/tty"; fail "no folder progress on a terminal"; }
}
t_opt_device_cuda() {
  data; need onnxruntime
  seg $(quant_args) --output "$T/o/l.nii.gz" --device cuda
  if [ "$rc" -eq 0 ]; then
    labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"   # a CUDA build of ONNX Runtime
  else
    expect_rc 1; one_line_err; expect_err "cuda|CUDA"; expect_nothing_written
  fi
}
t_opt_nifti2() {
  data; need onnxruntime
  seg --model "$DATA/quant4.onnx" --input "$DATA/vol_n2.nii.gz" --output "$T/o/l.nii.gz" --scores "$T/o/s.nii.gz"
  expect_rc 0
  labels_ok "$T/o/l.nii.gz" "$DATA/vol_n2.nii.gz"; geometry_ok "$T/o/l.nii.gz" "$DATA/vol_n2.nii.gz"
  geometry_ok "$T/o/s.nii.gz" "$DATA/vol_n2.nii.gz"
  local v
  v=$("$PY" -c "import nibabel as n,sys; print(n.load(sys.argv[1]).header['sizeof_hdr'])" "$T/o/l.nii.gz")
  [ "$v" = 540 ] || fail "NIfTI-2 input gave a $v-byte header"
}
t_opt_big_endian() {
  data; need onnxruntime
  seg --model "$DATA/quant4.onnx" --input "$DATA/vol_be.nii" --output "$T/o/l.nii.gz"
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol_be.nii"; geometry_ok "$T/o/l.nii.gz" "$DATA/vol_be.nii"
}
t_opt_4d_singleton() {
  data; need onnxruntime
  seg --model "$DATA/quant4.onnx" --input "$DATA/vol_4d1.nii.gz" --output "$T/o/l.nii.gz"
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol_4d1.nii.gz"
}
t_opt_dtypes() {
  data; need onnxruntime
  # every scalar type with scl_slope/scl_inter: the scores are -(v - c)^2 of the scaled v
  for d in u8 i8 i16 u16 i32 u32 i64 u64 f32 f64; do
    rm -f "$T/o/"*
    seg --model "$DATA/quant4.onnx" --input "$DATA/dt_$d.nii" --output "$T/o/l.nii.gz" --scores "$T/o/s.nii"
    [ "$rc" -eq 0 ] || fail "dt_$d.nii: exit $rc"
    scores_ok "$T/o/s.nii" "$DATA/dt_$d.nii"
  done
}
# ---- file names that mislead niftilib ---------------------------------------------------
t_input_sibling_nii() {
  data; need onnxruntime
  # scan.nii.gz beside a different scan.nii: the voxels must come from scan.nii.gz
  mkdir -p "$T/in"
  cp "$DATA/vol.nii.gz" "$T/in/scan.nii.gz"
  gzip -dc "$DATA/vol2.nii.gz" >"$T/in/scan.nii"
  seg --model "$DATA/quant4.onnx" --input "$T/in/scan.nii.gz" --output "$T/o/l.nii.gz"
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
  seg --model "$DATA/quant4.onnx" --input "$T/in/scan.nii" --output "$T/o/l2.nii.gz"
  expect_rc 0; labels_ok "$T/o/l2.nii.gz" "$DATA/vol2.nii.gz"
}
t_input_gzip_named_nii() {
  data; need onnxruntime
  cp "$DATA/vol.nii.gz" "$T/g.nii"   # gzip data under a plain name
  seg --model "$DATA/quant4.onnx" --input "$T/g.nii" --output "$T/o/l.nii.gz"
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_input_plain_named_gz() {
  data; need onnxruntime
  cp "$DATA/vol.nii" "$T/p.nii.gz"   # plain data under a gzip name
  seg --model "$DATA/quant4.onnx" --input "$T/p.nii.gz" --output "$T/o/l.nii.gz"
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii"
}

# ---- bad NIfTI input -------------------------------------------------------------------
bad_input() {
  local file="$1" what="$2"
  data; need onnxruntime
  error_case "$(basename "$file"): .*$what" segment --model "$DATA/quant4.onnx" --input "$file" --output "$T/o/l.nii.gz"
}
t_bad_input_missing() { data; bad_input "$DATA/nope.nii.gz" "cannot open: No such file"; }
t_bad_input_directory() { data; mkdir -p "$T/d.nii"; bad_input "$T/d.nii" "is a directory"; }
t_bad_input_unreadable() {
  data; need onnxruntime
  cp "$DATA/vol.nii.gz" "$T/u.nii.gz"; chmod 000 "$T/u.nii.gz"
  if [ "$(id -u)" -eq 0 ]; then
    command -v setpriv >/dev/null || skip "root, and no setpriv to drop privileges"
    chmod 777 "$T" "$T/o"; chmod o+x "$(dirname "$T")" 2>/dev/null
    # GCOV_PREFIX: a coverage build's counters are not writable by nobody; send them aside
    setpriv --reuid=65534 --regid=65534 --clear-groups env GCOV_PREFIX="$T/gcov" \
      "$SWI" segment -q --model "$DATA/quant4.onnx" \
      --input "$T/u.nii.gz" --output "$T/o/l.nii.gz" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    expect_rc 1; one_line_err; expect_err "u.nii.gz: cannot open: Permission denied"; expect_nothing_written
  else
    bad_input "$T/u.nii.gz" "cannot open: Permission denied"
  fi
}
# ulimit -v KB for the memory-bound tests; AddressSanitizer reserves terabytes of shadow
# address space, so a sanitizer build runs them unbounded (the plain build checks the bound)
limit_address_space() {
  if command -v ldd >/dev/null && ldd "$SWI" 2>/dev/null | grep -q libasan; then return 0; fi
  ulimit -v "$1"
}
t_bad_input_empty() { data; bad_input "$DATA/empty.nii" "not a NIfTI file"; }
t_bad_input_random() { data; bad_input "$DATA/random.nii" "not a NIfTI file"; }
t_bad_input_text_gz() { data; bad_input "$DATA/text.nii.gz" "not a NIfTI file"; }
t_bad_input_truncated_header() { data; bad_input "$DATA/trunc_header.nii" "not a NIfTI file \(200 bytes"; }
t_bad_input_truncated_data() { data; bad_input "$DATA/trunc_data.nii" "truncated"; }
t_bad_input_truncated_data_gz() { data; bad_input "$DATA/trunc_data.nii.gz" "truncated or corrupt"; }
# a 53-byte .nii.gz whose header claims 2^38 voxels: refused by deflate's bound when opened,
# naming the file, before anything is allocated for them (under 1.5 GB of address space)
t_bad_input_gz_claims() {
  data; need onnxruntime
  "$PY" - "$T/claims.nii.gz" <<'PYEOF' || fail "could not make the file"
import gzip, sys
import numpy as np, nibabel as nib
h = nib.Nifti1Header(); h.set_data_dtype(np.uint8); h.set_data_shape((8192, 8192, 4096))
open(sys.argv[1], "wb").write(gzip.compress(h.binaryblock + b"\0" * 4))
PYEOF
  (limit_address_space 1500000; exec "$SWI" segment -q --model "$DATA/quant4.onnx" --input "$T/claims.nii.gz" \
    --output "$T/o/l.nii.gz" >"$T/out" 2>"$T/err" </dev/null)
  rc=$?
  expect_rc 1; one_line_err; expect_nothing_written
  expect_err "claims.nii.gz: the header describes 8192 x 8192 x 4096 voxels .*deflate inflates at most 1032:1"
}
t_bad_input_truncated_stream() { data; bad_input "$DATA/trunc_stream.nii.gz" "truncated or corrupt"; }
t_bad_input_corrupt_gz() { data; bad_input "$DATA/corrupt.nii.gz" "corrupt"; }
t_bad_input_sizeof_hdr() { data; bad_input "$DATA/bad_sizeof.nii" "header size field is 123"; }
t_bad_input_no_magic() { data; bad_input "$DATA/bad_magic.nii" "no NIfTI magic"; }
t_bad_input_two_file() { data; bad_input "$DATA/two_file.nii" "two-file NIfTI"; }
t_bad_input_dim0() { data; bad_input "$DATA/bad_dim0.nii" "dim\[0\] = 9"; }
t_bad_input_dim_zero() { data; bad_input "$DATA/bad_dimzero.nii" "dim\[1\] = 0"; }
t_bad_input_dim_negative() { data; bad_input "$DATA/bad_dimneg.nii" "dim\[2\] = -5"; }
t_bad_input_dims_overflow() { data; bad_input "$DATA/huge_dims.nii" "sizes overflow"; }
t_bad_input_dims_overflow_nifti2() { data; bad_input "$DATA/n2_overflow.nii" "sizes overflow"; }
t_bad_input_dims_disagree_with_data() { data; bad_input "$DATA/big_dims.nii" "truncated: the header describes 2000 x 2000 x 2000"; }
t_bad_input_4d() { data; bad_input "$DATA/vol_4d3.nii.gz" "4-D image \(20x24x16x3\)"; }
t_bad_input_2d() { data; bad_input "$DATA/vol_2d.nii.gz" "2-D image"; }
t_bad_input_rgb() { data; bad_input "$DATA/bad_rgb.nii" "unsupported datatype RGB24"; }
t_bad_input_complex() { data; bad_input "$DATA/bad_complex.nii" "unsupported datatype COMPLEX64"; }
t_bad_input_unknown_datatype() { data; bad_input "$DATA/bad_dtype.nii" "unknown datatype code 77"; }
t_bad_input_vox_offset() { data; bad_input "$DATA/bad_voxoffset.nii" "vox_offset"; }
t_bad_input_extension() { data; bad_input "$DATA/bad_ext.txt" "not a NIfTI file name"; }
t_bad_input_channel_sizes_differ() {
  data; need onnxruntime
  error_case "small.nii.gz: size 10x12x8 differs" segment --model "$DATA/quant4_c2.onnx" \
    --input "$DATA/vol.nii.gz" --input "$DATA/small.nii.gz" --output "$T/o/l.nii.gz"
}
# the same size on another grid (origin moved, axes swapped): refused naming both files, in
# swi segment and swi plan; within the tolerance (2e-4 mm): segmented
t_bad_input_channel_geometry() {
  data; need onnxruntime
  error_case "vol2_moved.nii.gz: origin \(220, -90, 30\) mm lies 100 mm from .*vol.nii.gz's \(120, -90, 30\); channels must share one grid" \
    segment --model "$DATA/quant4_c2.onnx" --input "$DATA/vol.nii.gz" --input "$DATA/vol2_moved.nii.gz" \
    --output "$T/o/l.nii.gz"
  error_case "vol2_swapped.nii.gz: voxel axis i is \(0.05, 0.8, 0\) mm, .*vol.nii.gz's is \(-0.8, 0, 0\)" \
    segment --model "$DATA/quant4_c2.onnx" --input "$DATA/vol.nii.gz" --input "$DATA/vol2_swapped.nii.gz" \
    --output "$T/o/l.nii.gz"
  run plan --model "$DATA/quant4_c2.onnx" --input "$DATA/vol.nii.gz" --input "$DATA/vol2_moved.nii.gz"
  expect_rc 1; one_line_err; expect_err "vol2_moved.nii.gz: origin"
  seg --model "$DATA/quant4_c2.onnx" --input "$DATA/vol.nii.gz" --input "$DATA/vol2_near.nii.gz" \
    --output "$T/o/l.nii.gz"
  expect_rc 0
  # folder mode: the case whose channels disagree fails, the other is segmented
  mkdir -p "$T/in" "$T/fo"
  cp "$DATA/vol.nii.gz" "$T/in/a_0000.nii.gz"; cp "$DATA/vol2_moved.nii.gz" "$T/in/a_0001.nii.gz"
  cp "$DATA/vol.nii.gz" "$T/in/b_0000.nii.gz"; cp "$DATA/vol2_near.nii.gz" "$T/in/b_0001.nii.gz"
  seg --model "$DATA/quant4_c2.onnx" --input-dir "$T/in" --output-dir "$T/fo"
  expect_rc 1; expect_err "a_0001.nii.gz: origin .* lies 100 mm from .*a_0000.nii.gz's"
  [ -f "$T/fo/b.nii.gz" ] && [ ! -e "$T/fo/a.nii.gz" ] || fail "folder mode: b segmented, a not"
}

# ---- bad models ------------------------------------------------------------------------
bad_model() {
  local model="$1" what="$2"; shift 2
  data; need onnxruntime
  error_case "$(basename "$model"): .*$what" segment --model "$model" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz" "$@"
}
t_bad_model_missing() { data; bad_model "$DATA/nope.onnx" "cannot open"; }
t_bad_model_not_onnx() { data; bad_model "$DATA/not_onnx.onnx" "not an ONNX model"; }
t_bad_model_random() { data; bad_model "$DATA/random.onnx" "not an ONNX model"; }
t_bad_model_empty() { data; bad_model "$DATA/empty.onnx" "not an ONNX model"; }
t_bad_model_directory() { data; bad_model "$DATA" "is a directory"; }
t_bad_model_two_inputs() { data; bad_model "$DATA/two_inputs.onnx" "has 2 inputs"; }
t_bad_model_rank() { data; bad_model "$DATA/rank4.onnx" "rank 4"; }
t_bad_model_channels() { data; bad_model "$DATA/quant4_c2.onnx" "expects 2 input channels"; }
t_bad_model_output_rank() { data; bad_model "$DATA/out_rank4.onnx" "output 'y' has rank 4"; }
t_bad_model_output_type() { data; bad_model "$DATA/out_int64.onnx" "output 'y' is int64"; }
t_bad_model_input_type() { data; bad_model "$DATA/in_double.onnx" "input 'x' is float64"; }
t_bad_model_zoomed_output() { data; bad_model "$DATA/zoom.onnx" "output"; }
t_bad_model_roi_mismatch() { data; bad_model "$DATA/quant4.onnx" "fixed at" --roi 16; }
t_bad_model_nan() { data; bad_model "$DATA/nan.onnx" "NaN"; }
t_bad_model_head_out_of_range() { data; bad_model "$DATA/quant4.onnx" "--head 3: the model has 1 output" --head 3; }

# ---- safety ----------------------------------------------------------------------------
t_safe_existing_output() {
  data; need onnxruntime
  echo keep >"$T/o/s.nii.gz"
  seg $(quant_args) --output "$T/o/l.nii.gz" --scores "$T/o/s.nii.gz"
  expect_rc 1; one_line_err; expect_err "s.nii.gz: already exists"
  [ ! -e "$T/o/l.nii.gz" ] || fail "labels written although scores could not be"
  [ "$(cat "$T/o/s.nii.gz")" = keep ] || fail "existing scores changed"
  no_temps "$T/o"
}
t_safe_output_dir_missing() {
  data; need onnxruntime
  error_case "cannot create the output in .*/missing: No such file or directory" segment \
    $(quant_args) --output "$T/o/missing/l.nii.gz"
}
t_safe_output_is_directory() {
  data; need onnxruntime
  mkdir "$T/o/d.nii.gz"
  run segment $(quant_args) --output "$T/o/d.nii.gz" --force
  expect_rc 1; one_line_err; expect_err "d.nii.gz: is a directory"
  [ -d "$T/o/d.nii.gz" ] || fail "directory replaced"
  no_temps "$T/o"
}
t_safe_output_not_regular() {
  data; need onnxruntime
  run segment $(quant_args) --output "/dev/full" --force
  expect_rc 2   # not a .nii name
  mkfifo "$T/o/f.nii"
  run segment $(quant_args) --output "$T/o/f.nii" --force
  expect_rc 1; one_line_err; expect_err "f.nii: exists and is not a regular file"
  rm -f "$T/o/f.nii"
}
t_safe_no_leftovers_after_error() {
  data; need onnxruntime
  # fails after the temporaries exist: the network returns NaN mid-run
  error_case "NaN" segment --model "$DATA/nan.onnx" --input "$DATA/vol.nii.gz" \
    --output "$T/o/l.nii.gz" --scores "$T/o/s.nii.gz" --preview "$T/o/p.png"
}
# start a long run, wait until its temporaries exist, send a signal
signal_case() {
  local sig="$1" want="$2"
  data; need onnxruntime
  need_e2e
  "$SWI" segment --model "$E2E/unet.onnx" --input "$DATA/big.nii.gz" --output "$T/o/l.nii.gz" \
    --scores "$T/o/s.nii.gz" --tta --sw-batch 1 --threads 2 >"$T/out" 2>"$T/err" </dev/null &
  local pid=$! i=0
  while [ -z "$(ls -A "$T/o" 2>/dev/null)" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
  [ -n "$(ls -A "$T/o")" ] || { kill -9 $pid; fail "the run never created its temporary files"; }
  sleep 1
  local t0=$SECONDS
  kill -"$sig" $pid
  wait $pid
  rc=$?
  [ $((SECONDS - t0)) -le 30 ] || fail "took $((SECONDS - t0)) s to stop after SIG$sig"
  expect_rc "$want"
  expect_err "interrupted by SIG$sig"
  expect_nothing_written
}
t_safe_sigint() { signal_case INT 130; }
t_safe_sigterm() { signal_case TERM 143; }
t_safe_concurrent_same_output() {
  data; need onnxruntime
  need_e2e
  # two runs race for one output, neither with --force: exactly one may write it
  local a b
  "$SWI" segment -q --model "$E2E/unet.onnx" --input "$DATA/big.nii.gz" --output "$T/o/l.nii.gz" \
    --threads 1 >"$T/out1" 2>"$T/err1" </dev/null &
  a=$!
  "$SWI" segment -q --model "$E2E/unet.onnx" --input "$DATA/big.nii.gz" --output "$T/o/l.nii.gz" \
    --threads 1 >"$T/out2" 2>"$T/err2" </dev/null &
  b=$!
  wait $a; local ra=$?
  wait $b; local rb=$?
  if [ $ra -eq 0 ] && [ $rb -eq 0 ]; then fail "both runs claim to have written the output"; fi
  [ $ra -eq 0 ] || [ $rb -eq 0 ] || { cat "$T/err1" "$T/err2"; fail "neither run succeeded"; }
  cat "$T/err1" "$T/err2" >"$T/err"
  expect_err "l.nii.gz: (appeared while swi was running|already exists)"
  [ -f "$T/o/l.nii.gz" ] || fail "no output"
  no_temps "$T/o"
}
t_safe_budget_too_small() {
  data; need onnxruntime
  error_case "vol.nii.gz: --max-memory is too small" segment $(quant_args) --output "$T/o/l.nii.gz" --max-memory 1K
}

# ---- the memory available ---------------------------------------------------------------
t_avail_refused() {
  data; need onnxruntime
  SWI_AVAILABLE_MEMORY=1M error_case \
    "vol.nii.gz: the run needs at least [0-9.]+ [KMG]?i?B and 1.00 MiB is available \(SWI_AVAILABLE_MEMORY\); give --max-memory" \
    segment $(quant_args) --output "$T/o/l.nii.gz"
}
# a store output is refused before the store is made
t_avail_refused_store() {
  data; need onnxruntime
  "$SWI" --version | grep -q "Zarr.*: yes" || skip "swi built without Zarr"
  SWI_AVAILABLE_MEMORY=1M error_case "the run needs at least .* and 1.00 MiB is available" \
    segment $(quant_args) --output "$T/o/l.zarr"
}
t_avail_max_memory_overrides() {
  data; need onnxruntime
  SWI_AVAILABLE_MEMORY=1M seg $(quant_args) --output "$T/o/l.nii.gz" --max-memory 1G
  expect_rc 0; labels_ok "$T/o/l.nii.gz" "$DATA/vol.nii.gz"
}
t_avail_plan_reports() {
  data; need onnxruntime
  SWI_AVAILABLE_MEMORY=1M run plan $(quant_args)
  expect_rc 0; expect_out "predicted peak"; expect_out "swi segment would refuse this run: .*vol.nii.gz: the run needs at least"
  run plan $(quant_args)
  expect_rc 0
  ! grep -q "would refuse" "$T/out" || fail "a run that fits is reported as refused"
}
# between the smallest plan and the plan asked for: planned smaller (batch, pipelining),
# and the same labels as the run that had room
t_avail_fits_smaller_batch() {
  data; need onnxruntime
  run plan $(quant_args) --sw-batch 16
  expect_rc 0; expect_out "up to 16 windows"
  local peak least
  peak=$(sed -n 's/.*predicted peak .*(\([0-9]*\) bytes).*/\1/p' "$T/out")
  least=$(sed -n 's/.*smallest plan .*; \([0-9]*\) bytes).*/\1/p' "$T/out")
  [ -n "$peak" ] && [ -n "$least" ] && [ "$least" -lt "$peak" ] || fail "plan sizes: peak '$peak', least '$least'"
  local avail=$(( (peak + least) / 2 ))
  SWI_AVAILABLE_MEMORY=$avail run plan $(quant_args) --sw-batch 16
  expect_rc 0
  local fit
  fit=$(sed -n 's/.*predicted peak .*(\([0-9]*\) bytes).*/\1/p' "$T/out")
  [ -n "$fit" ] && [ "$fit" -le "$avail" ] && [ "$fit" -lt "$peak" ] ||
    fail "planned $fit bytes (from $peak) for $avail available"
  ! grep -q "would refuse" "$T/out" || fail "refused although a smaller plan fits"
  SWI_AVAILABLE_MEMORY=$avail seg $(quant_args) --sw-batch 16 --output "$T/o/a.nii.gz"
  expect_rc 0
  seg $(quant_args) --sw-batch 16 --output "$T/o/b.nii.gz"
  expect_rc 0
  labels_ok "$T/o/a.nii.gz" "$DATA/vol.nii.gz"
  "$PY" - "$T/o/a.nii.gz" "$T/o/b.nii.gz" <<'PYEOF' || fail "labels differ from the run that had room"
import sys
import numpy as np, nibabel as nib
a, b = (np.asarray(nib.load(p).dataobj) for p in sys.argv[1:3])
sys.exit(0 if np.array_equal(a, b) else 1)
PYEOF
}

# a float64 volume: reading it holds its floats and the file's own voxels (1.5 x the
# float input) before the engine runs; a budget the engine fits but reading does not is
# refused, and the plan shows what reading holds
t_budget_covers_reading() {
  data; need onnxruntime
  "$PY" - "$T/f64.nii" <<'PYEOF' || fail "could not make the volume"
import sys
import numpy as np, nibabel as nib
v = np.random.default_rng(1).uniform(0, 3, (200, 200, 100)).astype(np.float64)
nib.save(nib.Nifti1Image(v, np.eye(4)), sys.argv[1])
PYEOF
  run plan --model "$DATA/quant4.onnx" --input "$T/f64.nii"
  expect_rc 0; expect_out "reading +45.8 MiB before the engine runs"
  local peak
  peak=$(sed -n 's/.*predicted peak .*(\([0-9]*\) bytes).*/\1/p' "$T/out")
  [ -n "$peak" ] && [ "$peak" -lt 45000000 ] || fail "peak '$peak' is not below what reading holds"
  error_case "--max-memory is too small: reading .*f64.nii holds 45.8 MiB .*before the engine runs" \
    segment --model "$DATA/quant4.onnx" --input "$T/f64.nii" --output "$T/o/l.nii.gz" --max-memory 44M
}

# ---- NaN / Inf voxels ---------------------------------------------------------------------
# nonfinite_ok IN ZEROED COUNT: the run warns once with the count and the file, and its labels
# and scores are those of the run on ZEROED (the same volume with 0 there)
nonfinite_ok() {
  seg --model "$DATA/quant4.onnx" --input "$1" --output "$T/o/a.nii" --scores "$T/o/as.nii"
  expect_rc 0; one_line_err
  expect_err "warning: .*$(basename "$1"): $3 of 7680 voxels are NaN or infinite .*; read as 0"
  seg --model "$DATA/quant4.onnx" --input "$2" --output "$T/o/b.nii" --scores "$T/o/bs.nii"
  expect_rc 0
  [ ! -s "$T/err" ] || fail "a warning for a finite volume"
  cmp -s "$T/o/a.nii" "$T/o/b.nii" || fail "labels differ from the zeroed volume's"
  cmp -s "$T/o/as.nii" "$T/o/bs.nii" || fail "scores differ from the zeroed volume's"
  labels_ok "$T/o/a.nii" "$2"
}
t_nonfinite_warn() {
  data; need onnxruntime
  nonfinite_ok "$DATA/nonfinite.nii.gz" "$DATA/nonfinite_zero.nii.gz" 5
  # the warning is not progress: -q keeps it (checked above), --nonfinite zero is the default
  seg --model "$DATA/quant4.onnx" --input "$DATA/nonfinite.nii.gz" --output "$T/o/c.nii" --nonfinite zero
  expect_rc 0; one_line_err; expect_err "5 of 7680 voxels"
  cmp -s "$T/o/a.nii" "$T/o/c.nii" || fail "--nonfinite zero differs from the default"
}
t_nonfinite_fail() {
  data; need onnxruntime
  error_case "nonfinite.nii.gz: 5 of 7680 voxels are NaN or infinite .*refused \(--nonfinite fail\)" \
    segment -q --model "$DATA/quant4.onnx" --input "$DATA/nonfinite.nii.gz" --output "$T/o/l.nii.gz" \
    --scores "$T/o/s.nii" --preview "$T/o/p.png" --nonfinite fail
  # a finite volume passes
  seg $(quant_args) --output "$T/o/l.nii.gz" --nonfinite fail
  expect_rc 0; [ ! -s "$T/err" ] || fail "stderr not empty"
}
t_nonfinite_big_endian() {
  data; need onnxruntime
  nonfinite_ok "$DATA/nonfinite_be.nii" "$DATA/nonfinite_zero.nii.gz" 5
}
t_nonfinite_float64() {
  data; need onnxruntime
  # +-1e300 is finite in the file and infinite as float32: counted with the NaN
  nonfinite_ok "$DATA/nonfinite_f64.nii.gz" "$DATA/nonfinite_f64_zero.nii.gz" 3
}
t_nonfinite_second_channel() {
  data; need onnxruntime
  error_case "nonfinite.nii.gz: 5 of 7680 voxels" segment -q --model "$DATA/quant4_c2.onnx" \
    --input "$DATA/vol.nii.gz" --input "$DATA/nonfinite.nii.gz" --output "$T/o/l.nii.gz" --nonfinite fail
}
t_usage_nonfinite() { seg_usage "--nonfinite 'keep'" --nonfinite keep; }

# ---- the same file under two names ---------------------------------------------------------
# same_case PATTERN ARGS...: with and without --force, exit 1 with one line matching PATTERN
# (naming both paths), and $T/in exactly as before: no file changed, added or removed.
same_case() {
  local pat="$1" before after force
  shift
  before=$(cd "$T/in" && ls -lA --time-style=+%s.%N | sha1sum; cat ./* 2>/dev/null | sha1sum)
  for force in "" --force; do
    seg "$@" $force
    expect_rc 1; one_line_err; expect_err "$pat"
    after=$(cd "$T/in" && ls -lA --time-style=+%s.%N | sha1sum; cat ./* 2>/dev/null | sha1sum)
    [ "$before" = "$after" ] || { ls -lA "$T/in"; fail "the folder changed (swi $* $force)"; }
  done
  no_temps "$T/in"
}
same_setup() { data; need onnxruntime; mkdir -p "$T/in"; cp "$DATA/vol.nii.gz" "$T/in/v.nii.gz"; }
same_msg() { echo "$1 .*$2 is the same file as $3 .*$4; swi never writes over its inputs"; }
t_same_input_name() {
  same_setup
  same_case "$(same_msg --output in/v.nii.gz --input in/v.nii.gz)" --model "$DATA/quant4.onnx" \
    --input "$T/in/v.nii.gz" --output "$T/in/v.nii.gz"
  # as --scores: the labels would be fine, the input would not
  same_case "$(same_msg --scores v.nii.gz --input v.nii.gz)" --model "$DATA/quant4.onnx" \
    --input "$T/in/v.nii.gz" --output "$T/o/l.nii.gz" --scores "$T/in/v.nii.gz"
  expect_nothing_written
}
t_same_input_relative() {
  same_setup
  cd "$T/in" || fail "cd"
  same_case "--output \./v.nii.gz is the same file as --input v.nii.gz;" --model "$DATA/quant4.onnx" \
    --input v.nii.gz --output ./v.nii.gz
  same_case "--output \.\./in/v.nii.gz is the same file as --input .*/in/v.nii.gz" \
    --model "$DATA/quant4.onnx" --input "$T/in/v.nii.gz" --output ../in/v.nii.gz
}
t_same_input_symlink() {
  same_setup
  ln -s v.nii.gz "$T/in/link.nii.gz"
  same_case "$(same_msg --output link.nii.gz --input v.nii.gz)" --model "$DATA/quant4.onnx" \
    --input "$T/in/v.nii.gz" --output "$T/in/link.nii.gz"
  # and the other way round: the input named through the link
  same_case "$(same_msg --output v.nii.gz --input link.nii.gz)" --model "$DATA/quant4.onnx" \
    --input "$T/in/link.nii.gz" --output "$T/in/v.nii.gz"
}
t_same_input_hardlink() {
  same_setup
  ln "$T/in/v.nii.gz" "$T/in/hard.nii.gz"
  same_case "$(same_msg --output hard.nii.gz --input v.nii.gz)" --model "$DATA/quant4.onnx" \
    --input "$T/in/v.nii.gz" --output "$T/in/hard.nii.gz"
}
t_same_input_second_channel() {
  same_setup
  cp "$DATA/vol2.nii.gz" "$T/in/w.nii.gz"
  same_case "$(same_msg --scores w.nii.gz --input w.nii.gz)" --model "$DATA/quant4_c2.onnx" \
    --input "$T/in/v.nii.gz" --input "$T/in/w.nii.gz" --output "$T/o/l.nii.gz" --scores "$T/in/w.nii.gz"
  expect_nothing_written
}
t_same_input_symlinked_dir() {
  same_setup
  ln -s in "$T/alias"
  same_case "$(same_msg --output alias/v.nii.gz --input in/v.nii.gz)" --model "$DATA/quant4.onnx" \
    --input "$T/in/v.nii.gz" --output "$T/alias/v.nii.gz"
}
t_same_model() {
  same_setup
  cp "$DATA/quant4.onnx" "$T/in/m.onnx"
  ln "$T/in/m.onnx" "$T/in/m.nii"
  ln -s m.onnx "$T/in/m2.nii.gz"
  same_case "$(same_msg --output m.nii --model m.onnx)" --model "$T/in/m.onnx" --input "$T/in/v.nii.gz" \
    --output "$T/in/m.nii"
  same_case "$(same_msg --scores m2.nii.gz --model m.onnx)" --model "$T/in/m.onnx" \
    --input "$T/in/v.nii.gz" --output "$T/o/l.nii.gz" --scores "$T/in/m2.nii.gz"
  expect_nothing_written
}
# two outputs, one file: nothing may be written
outs_case() {
  local pat="$1"
  shift
  for force in "" --force; do
    seg $(quant_args) "$@" $force
    expect_rc 1; one_line_err; expect_err "$pat"
  done
}
t_same_outputs_relative() {
  data; need onnxruntime
  outs_case "--output .*o/l.nii and --scores .*o/\.\./o/l.nii are the same file" \
    --output "$T/o/l.nii" --scores "$T/o/../o/l.nii"
  expect_nothing_written
}
t_same_outputs_symlinked_dir() {
  data; need onnxruntime
  ln -s o "$T/o2"
  outs_case "--output .*/o/l.nii.gz and --scores .*/o2/l.nii.gz are the same file" \
    --output "$T/o/l.nii.gz" --scores "$T/o2/l.nii.gz"
  expect_nothing_written
}
t_same_outputs_hardlink() {
  data; need onnxruntime
  mkdir -p "$T/in"
  echo keep >"$T/in/a.nii"
  ln "$T/in/a.nii" "$T/in/b.nii.gz"
  outs_case "--output .*a.nii and --scores .*b.nii.gz are the same file" \
    --output "$T/in/a.nii" --scores "$T/in/b.nii.gz"
  [ "$(cat "$T/in/a.nii")" = keep ] && [ "$(ls -A "$T/in" | tr '\n' ' ')" = "a.nii b.nii.gz " ] ||
    fail "the outputs' folder changed: $(ls -A "$T/in")"
}
t_same_outputs_preview() {
  data; need onnxruntime; need png
  mkdir -p "$T/in"
  echo keep >"$T/in/l.nii.gz"
  ln -s l.nii.gz "$T/in/p.png"
  outs_case "--output .*l.nii.gz and --preview .*p.png are the same file" \
    --output "$T/in/l.nii.gz" --preview "$T/in/p.png"
  [ "$(cat "$T/in/l.nii.gz")" = keep ] && [ -L "$T/in/p.png" ] && [ "$(ls -A "$T/in" | tr '\n' ' ')" = "l.nii.gz p.png " ] ||
    fail "the outputs' folder changed: $(ls -A "$T/in")"
}

# ---- plan ------------------------------------------------------------------------------
t_plan_grid() {
  data; need onnxruntime
  need_e2e
  run plan --model "$E2E/unet.onnx" --input "$E2E/volume.nii.gz" --roi 32 --overlap 0.25 --mode gaussian --sw-batch 4
  expect_rc 0
  expect_out "window +32 x 32 x 32"
  expect_out "grid +2 x 3 x 2 = 12 windows"
  expect_out "calls +3 engine batches"
  expect_out "classes +4"
}
t_plan_overlap() {
  data; need onnxruntime
  run plan --model "$DATA/quant4.onnx" --input "$DATA/vol.nii.gz" --overlap 0
  expect_rc 0; expect_out "grid +3 x 3 x 2 = 18 windows"
  run plan --model "$DATA/quant4.onnx" --input "$DATA/vol.nii.gz" --overlap 0.5
  expect_rc 0; expect_out "grid +4 x 5 x 3 = 60 windows"
}
t_plan_memory() {
  data; need onnxruntime
  run plan $(quant_args) --scores "$T/o/s.nii.gz"
  expect_rc 0
  for w in "predicted peak" "input" "windows" "partial sums" "outputs" "labels \+ scores"; do expect_out "$w"; done
}
t_plan_budget() {
  data; need onnxruntime
  run plan $(quant_args) --max-memory 1K
  expect_rc 1; one_line_err; expect_err "--max-memory is too small"
}
# A 136-byte .zarray claiming 8192^3 voxels: the plan answers (its memory follows the
# frontier, not the volume) within an address space of 1.5 GB, reading no voxel.
t_plan_huge_header() {
  data; need onnxruntime
  "$SWI" --version | grep -q "Zarr.*: yes" || skip "swi built without Zarr"
  mkdir -p "$T/big.zarr"
  printf '{"zarr_format":2,"shape":[8192,8192,8192],"chunks":[64,64,64],"dtype":"<f4","compressor":null,"fill_value":0,"order":"C","filters":null}' >"$T/big.zarr/.zarray"
  (limit_address_space 1500000; exec timeout 120 "$SWI" plan --model "$DATA/quant4_dyn.onnx" --input "$T/big.zarr" \
    --roi 32 --no-reuse >"$T/out" 2>"$T/err" </dev/null)
  rc=$?
  expect_rc 0
  expect_out "341 x 341 x 341 = 39651821 windows"; expect_out "partial sums"
}
t_plan_writes_nothing() {
  data; need onnxruntime
  run plan $(quant_args) --output "$T/o/l.nii.gz" --scores "$T/o/s.nii.gz" --preview "$T/o/p.png"
  expect_rc 0; expect_nothing_written
}

# ---- window reuse ----------------------------------------------------------------------
# A volume of uniform background (-1000, clipped to 0 by --clip 0,4) with a textured
# block: most windows are pure background, so they repeat byte for byte.
background_volume() { # OUT SHAPE(i,j,k) BLOCK(i,j,k)
  "$PY" - "$@" <<'PYEOF' || fail "could not make the background volume"
import sys
import numpy as np, nibabel as nib
out, shape, block = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], [int(x) for x in sys.argv[3].split(",")]
v = np.full(shape, -1000.0, np.float32)
rng = np.random.default_rng(3)
v[2:2 + block[0], 3:3 + block[1], 1:1 + block[2]] = rng.uniform(0.05, 3.4, size=block)
nib.save(nib.Nifti1Image(v, np.diag([0.8, 0.8, 2.5, 1.0])), out)
PYEOF
}
reused_of() { sed -n 's/.*windows in [0-9]* calls (\([0-9]*\) run, \([0-9]*\) reused).*/\1 \2/p' "$1"; }
t_usage_reuse_cache() { seg_usage "--reuse-cache '0'" --reuse-cache 0; seg_usage "--reuse-cache '65'" --reuse-cache 65; }
t_reuse_labels_scores() {
  data; need onnxruntime
  background_volume "$T/bg.nii.gz" 40,36,30 9,7,6
  local a=(--model "$DATA/quant4.onnx" --input "$T/bg.nii.gz" --clip 0,4 --overlap 0.5 --sw-batch 3)
  run segment "${a[@]}" --output "$T/o/l.nii" --scores "$T/o/s.nii"
  expect_rc 0
  local rr; rr=$(reused_of "$T/err"); [ -n "$rr" ] || fail "no 'N run, M reused' in the summary"
  set -- $rr; [ "$2" -gt 0 ] || fail "no window reused on a background volume ($rr)"
  run segment "${a[@]}" --no-reuse --output "$T/o/l0.nii" --scores "$T/o/s0.nii"
  expect_rc 0
  rr=$(reused_of "$T/err"); set -- $rr; [ "${2:-x}" = 0 ] || fail "--no-reuse reused windows ($rr)"
  cmp -s "$T/o/l.nii" "$T/o/l0.nii" || fail "labels differ with and without reuse"
  cmp -s "$T/o/s.nii" "$T/o/s0.nii" || fail "scores differ with and without reuse"
  labels_ok "$T/o/l.nii" "$T/bg.nii.gz" --clip 0,4
  run segment "${a[@]}" --reuse-cache 8 --output "$T/o/l8.nii" --scores "$T/o/s8.nii"
  expect_rc 0
  cmp -s "$T/o/s.nii" "$T/o/s8.nii" || fail "scores differ with --reuse-cache 8"
}
t_reuse_tta() {
  data; need onnxruntime
  background_volume "$T/bg.nii.gz" 30,30,24 7,7,5
  local a=(--model "$DATA/quant4.onnx" --input "$T/bg.nii.gz" --clip 0,4 --sw-batch 2 --tta)
  run segment "${a[@]}" --output "$T/o/l.nii" --scores "$T/o/s.nii"
  expect_rc 0
  local rr; rr=$(reused_of "$T/err"); set -- $rr; [ "${2:-0}" -gt 0 ] || fail "no window reused with --tta ($rr)"
  seg "${a[@]}" --no-reuse --output "$T/o/l0.nii" --scores "$T/o/s0.nii"
  expect_rc 0
  cmp -s "$T/o/s.nii" "$T/o/s0.nii" || fail "--tta scores differ with and without reuse"
  cmp -s "$T/o/l.nii" "$T/o/l0.nii" || fail "--tta labels differ with and without reuse"
}
t_reuse_plan() {
  data; need onnxruntime
  background_volume "$T/bg.nii.gz" 40,36,30 9,7,6
  local a=(--model "$DATA/quant4.onnx" --input "$T/bg.nii.gz" --clip 0,4 --overlap 0.5 --sw-batch 3)
  run plan "${a[@]}" --reuse-cache 4
  expect_rc 0; expect_out "reuse cache"; expect_out "cache 4 windows"
  local planned; planned=$(sed -n 's/^reuse    \([0-9]*\) of .*/\1/p' "$T/out")
  [ -n "$planned" ] && [ "$planned" -gt 0 ] || { cat "$T/out"; fail "plan shows no reused windows"; }
  run segment "${a[@]}" --reuse-cache 4 --output "$T/o/l.nii"
  expect_rc 0
  local rr; rr=$(reused_of "$T/err"); set -- $rr
  [ "${2:-x}" = "$planned" ] || fail "plan predicted $planned reused windows, the run reused ${2:-?}"
  run plan "${a[@]}" --no-reuse
  expect_rc 0; expect_out "reuse    off"
}
t_reuse_e2e() {
  # the e2e U-Net (real convolutions: the output of a window must not depend on its
  # batch-mates for reuse to be exact)
  need onnxruntime; need nifti; need_e2e
  "$PY" - "$E2E/volume.nii.gz" "$T/bg.nii.gz" <<'PYEOF' || fail "could not make the volume"
import sys
import numpy as np, nibabel as nib
src = nib.load(sys.argv[1]); a = np.asarray(src.dataobj, np.float32)
v = np.full((104, 104, 88), float(a.min()), np.float32)
v[:a.shape[0], :a.shape[1], :a.shape[2]] = a
nib.save(nib.Nifti1Image(v, src.affine), sys.argv[2])
PYEOF
  local a=(--model "$E2E/unet.onnx" --input "$T/bg.nii.gz" --mode gaussian --sw-batch 3)
  run segment "${a[@]}" --output "$T/o/l.nii" --scores "$T/o/s.nii"
  expect_rc 0
  local rr; rr=$(reused_of "$T/err"); set -- $rr; [ "${2:-0}" -gt 0 ] || fail "no window reused ($rr)"
  seg "${a[@]}" --no-reuse --output "$T/o/l0.nii" --scores "$T/o/s0.nii"
  expect_rc 0
  cmp -s "$T/o/s.nii" "$T/o/s0.nii" || fail "e2e scores differ with and without reuse"
  cmp -s "$T/o/l.nii" "$T/o/l0.nii" || fail "e2e labels differ with and without reuse"
}

# ---- network rewrites ------------------------------------------------------------------
t_help_optimize() { run optimize --help; expect_rc 0; expect_out "Examples"; expect_out "ConvTranspose"; }
t_usage_optimize() {
  usage_case "--output is required" optimize --model m.onnx
  usage_case "--model is required" optimize --output "$T/o/x.onnx"
  usage_case "--output '.*x.txt'" optimize --model m.onnx --output "$T/o/x.txt"
  usage_case "unknown option '--frob'" optimize --frob
}
t_optimize_e2e() {
  need onnxruntime; need nifti; need_e2e
  run optimize --model "$E2E/unet.onnx" --output "$T/o/fast.onnx"
  expect_rc 0; one_line_err; expect_err "2 ConvTranspose layers rewritten"
  [ -s "$T/o/fast.onnx" ] || fail "no model written"
  no_temps "$T/o"
  cp "$T/o/fast.onnx" "$T/keep.onnx"
  run optimize --model "$E2E/unet.onnx" --output "$T/o/fast.onnx"
  expect_rc 1; one_line_err; expect_err "already exists"
  cmp -s "$T/o/fast.onnx" "$T/keep.onnx" || fail "an existing output was changed without --force"
  run optimize -q --model "$E2E/unet.onnx" --output "$T/o/fast.onnx" --force
  expect_rc 0
  # the saved model, the original rewritten at load and the original as it is: one function
  local a=(--input "$E2E/volume.nii.gz" --roi 32 --mode gaussian --sw-batch 2)
  seg --model "$T/o/fast.onnx" "${a[@]}" --output "$T/o/l1.nii" --scores "$T/o/s1.nii"; expect_rc 0
  seg --model "$E2E/unet.onnx" "${a[@]}" --output "$T/o/l2.nii" --scores "$T/o/s2.nii"; expect_rc 0
  seg --model "$E2E/unet.onnx" "${a[@]}" --no-rewrite --output "$T/o/l3.nii" --scores "$T/o/s3.nii"; expect_rc 0
  cmp -s "$T/o/s1.nii" "$T/o/s2.nii" || fail "the saved model and the load-time rewrite differ"
  "$PY" - "$T/o/s1.nii" "$T/o/s3.nii" <<'PYEOF' || fail "rewritten and original scores differ"
import sys
import numpy as np, nibabel as nib
a = np.asarray(nib.load(sys.argv[1]).dataobj); b = np.asarray(nib.load(sys.argv[2]).dataobj)
d = np.abs(a - b).max(); s = np.abs(b).max()
print(f"max difference {d:.3g} at scale {s:.3g}")
sys.exit(0 if d <= 1e-5 * s and s > 0 else 1)
PYEOF
}
t_optimize_bad_model() {
  data; need onnxruntime
  printf 'not a model' >"$T/bad.onnx"
  error_case "not an ONNX model" optimize --model "$T/bad.onnx" --output "$T/o/x.onnx"
  error_case "cannot open" optimize --model "$T/missing.onnx" --output "$T/o/x.onnx"
}
t_rewrite_plan() {
  need onnxruntime; need nifti; need_e2e
  run plan --model "$E2E/unet.onnx" --input "$E2E/volume.nii.gz"
  expect_rc 0; expect_out "2 ConvTranspose layers run as Conv"
  run plan --model "$E2E/unet.onnx" --input "$E2E/volume.nii.gz" --no-rewrite
  expect_rc 0; expect_out "as it is \(--no-rewrite\)"
}

# ---- e2e extras, demo ------------------------------------------------------------------
t_e2e_tta() {
  need onnxruntime; need nifti
  need_e2e
  run segment -q --model "$E2E/unet.onnx" --input "$E2E/volume.nii.gz" --output "$T/o/l.nii.gz" \
    --mode gaussian --sw-batch 4 --tta
  expect_rc 0
  [ -s "$T/o/l.nii.gz" ] || fail "no labels"
}
t_e2e_preview() {
  need onnxruntime; need nifti; need png
  need_e2e
  run segment -q --model "$E2E/unet.onnx" --input "$E2E/volume.nii.gz" --output "$T/o/l.nii.gz" \
    --preview "$T/o/p.png"
  expect_rc 0
  [ "$(head -c 8 "$T/o/p.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "not a PNG"
}
t_demo_run() {
  need onnxruntime; need nifti; need png
  local model
  model="$(cd "$here/../.." && pwd)/models/demo.onnx"
  [ -f "$model" ] || fail "models/demo.onnx not found"
  run demo --output-dir "$T/o" -q
  [ "$rc" -eq 0 ] || fail "swi demo exited $rc"
  for f in demo_image.nii.gz demo_truth.nii.gz demo_labels.nii.gz demo_preview.png; do
    [ -s "$T/o/$f" ] || fail "swi demo did not write $f"
  done
  local mean
  mean=$(sed -n 's/^mean Dice: \([0-9.]*\).*/\1/p' "$T/out")
  [ -n "$mean" ] || { cat "$T/out"; fail "no mean Dice printed"; }
  awk -v m="$mean" 'BEGIN { exit !(m >= 0.9) }' || fail "mean Dice $mean < 0.9"
  echo "demo mean Dice $mean"
}

# ---- driver ----------------------------------------------------------------------------
run_case() {
  local c="$1"
  declare -F "t_$c" >/dev/null || { echo "unknown case $c" >&2; return 2; }
  T="$WORK/cases/$c"
  rm -rf "$T" && mkdir -p "$T/o" || return 1
  ( "t_$c" ) && { rm -rf "$T"; return 0; }
}

if [ "$1" = all ]; then
  pass=0 failed=0 skipped=0
  for c in "${CASES[@]}"; do
    out=$(run_case "$c" 2>&1); r=$?
    case $r in
      0) pass=$((pass + 1));;
      77) skipped=$((skipped + 1)); echo "skip $c: $out";;
      *) failed=$((failed + 1)); echo "FAIL $c:"; echo "$out" | sed 's/^/    /';;
    esac
  done
  echo "$pass passed, $failed failed, $skipped skipped"
  [ $failed -eq 0 ]
  exit
fi
run_case "$1"
