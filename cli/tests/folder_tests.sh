#!/usr/bin/env bash
# folder_tests.sh -- `swi segment` on NRRD, MetaImage and DICOM inputs and outputs, and
# folder mode (--input-dir). ctest runs one case per test:
#
#   folder_tests.sh --list | CASE | all
#
# Environment as cli_tests.sh (SWI, SWI_PYTHON, SWI_TEST_WORK, SWI_FEATURES). The scan in
# every format comes from io/tests/formats.py (pydicom for the DICOM series), the models
# from clitest.py; without them, or without ITK in swi, the cases are skipped (77).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan.supp:print_suppressions=0"

CASES=(
  formats_same_labels formats_output_nrrd_mha formats_bad_series formats_dicom_seg
  formats_dicom_seg_needs_dicom formats_dicom_seg_names_bad_dates
  folder_basic folder_same_as_single folder_channels folder_missing_channel
  folder_bad_case_goes_on folder_case_abort_goes_on folder_skip_existing folder_force folder_part
  folder_output_inside_input folder_output_is_input folder_output_format folder_usage
  folder_no_cases folder_names_escaped folder_side_files_rerun folder_dirs_with_slash
)
if [ "${1:-}" = --list ]; then
  printf '%s\n' "${CASES[@]}"
  exit 0
fi
[ $# -eq 1 ] || { echo "usage: folder_tests.sh --list | CASE | all" >&2; exit 2; }

SWI="${SWI:-}"
PY="${SWI_PYTHON:-/usr/bin/python3}"
WORK="${SWI_TEST_WORK:-${TMPDIR:-/tmp}/swi-cli-tests}"
FEATURES="${SWI_FEATURES:-onnxruntime,nifti,png}"
DATA="$WORK/fdata"
FORMATS_PY="$here/../../io/tests/formats.py"
[ -x "$SWI" ] || { echo "FAIL: SWI=$SWI is not an executable"; exit 1; }

fail() { echo "FAIL: $*"; [ -f "$T/err" ] && { echo "--- stderr:"; head -c 3000 "$T/err"; }; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }
need() { case ",$FEATURES," in *",$1,"*) ;; *) skip "swi built without $1";; esac; }

data() {
  need onnxruntime
  need nifti
  "$SWI" --version | grep -q "DICOM (ITK): yes" || skip "swi built without ITK"
  "$PY" -c 'import numpy, nibabel, onnx, pydicom' 2>/dev/null ||
    skip "python3 with numpy, nibabel, onnx and pydicom not found ($PY)"
  [ -f "$DATA/.done" ] && [ ! "$FORMATS_PY" -nt "$DATA/.done" ] && return 0
  mkdir -p "$WORK"
  (
    flock 9
    if [ ! -f "$DATA/.done" ] || [ "$FORMATS_PY" -nt "$DATA/.done" ]; then
      rm -rf "$DATA" "$DATA.tmp"
      "$PY" "$here/clitest.py" make "$DATA.tmp" >/dev/null &&
        "$PY" "$FORMATS_PY" make "$DATA.tmp/scan" || exit 1
      touch "$DATA.tmp/.done" && mv "$DATA.tmp" "$DATA"
    fi
  ) 9>"$WORK/.flock" || fail "could not make the test data"
}

run() { "$SWI" "$@" >"$T/stdout" 2>"$T/err" </dev/null; rc=$?; }
expect_rc() { [ "$rc" -eq "$1" ] || fail "exit status $rc, expected $1"; }
expect_err() { grep -Eq -- "$1" "$T/err" || fail "stderr lacks /$1/"; }
one_line_err() { [ "$(wc -l <"$T/err")" -eq 1 ] || fail "stderr has $(wc -l <"$T/err") lines, expected one"; }
# the scan's intensities (-1024..976 HU) onto the quant model's 0..3.6
SCALE=(--scale -1024,976,0,3.6)
seg() { run segment -q --model "$DATA/quant4.onnx" "${SCALE[@]}" "$@"; }
# same voxels and affine (nibabel) for NIfTI files, or via formats.py's readers
same() {
  "$PY" - "$FORMATS_PY" "$@" <<'PY' >"$T/check" 2>&1 || { cat "$T/check"; fail "$*: not the same labels/geometry"; }
import importlib.util, sys
import nibabel as nib
import numpy as np
spec = importlib.util.spec_from_file_location("formats", sys.argv[1])
fm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fm)
def load(p):
    if p.endswith(".nrrd"):
        return fm.read_nrrd(p)
    if p.endswith(".mha"):
        return fm.read_mha(p)
    img = nib.load(p)
    return np.asanyarray(img.dataobj), img.affine
a, aff = load(sys.argv[2])
assert len(np.unique(a)) > 1, "a constant label map proves nothing"
for p in sys.argv[3:]:
    b, bff = load(p)
    assert b.shape == a.shape and np.array_equal(a, b), p + ": labels differ"
    assert np.allclose(aff, bff, atol=1e-4), "%s: affine\n%s\nvs\n%s" % (p, bff, aff)
PY
}

t_formats_same_labels() {
  data
  local S="$DATA/scan" outs=()
  for f in scan.nii.gz scan.nrrd scan_gz.nhdr scan.mha scan_z.mhd scan_dicom; do
    seg --input "$S/$f" --output "$T/o/$f.nii.gz"; expect_rc 0
    outs+=("$T/o/$f.nii.gz")
  done
  same "${outs[@]}"
  # and the geometry is the scan's own (formats.py's affine, as nibabel reads the NIfTI copy)
  "$PY" -c "
import nibabel as nib, numpy as np, sys
a = nib.load('$S/scan.nii.gz').affine; b = nib.load('$T/o/scan_dicom.nii.gz').affine
sys.exit(0 if np.allclose(a, b, atol=1e-4) else 1)" || fail "DICOM labels not on the scan's geometry"
}

t_formats_output_nrrd_mha() {
  data
  local S="$DATA/scan"
  seg --input "$S/scan_dicom" --output "$T/o/l.nii.gz"; expect_rc 0
  seg --input "$S/scan_dicom" --output "$T/o/l.nrrd"; expect_rc 0
  seg --input "$S/scan.nii.gz" --output "$T/o/l.mha"; expect_rc 0
  seg --input "$S/scan.mha" --output "$T/o/l2.mha" --scores "$T/o/s.nrrd"; expect_rc 0
  same "$T/o/l.nii.gz" "$T/o/l.nrrd" "$T/o/l.mha" "$T/o/l2.mha"
  [ -s "$T/o/s.nrrd" ] || fail "no scores written"
  [ -z "$(ls -A "$T/o" | grep -v -E '^(l\.nii\.gz|l\.nrrd|l\.mha|l2\.mha|s\.nrrd)$')" ] ||
    fail "unexpected files: $(ls -A "$T/o")"
}

t_formats_bad_series() {
  data
  mkdir -p "$T/gap"
  cp "$DATA/scan/scan_dicom/"* "$T/gap/"
  rm "$T/gap/$(ls "$T/gap" | sort | sed -n 3p)"
  seg --input "$T/gap" --output "$T/o/l.nii.gz"
  expect_rc 1; one_line_err; expect_err "gap: .*slices? missing"
  [ -z "$(ls -A "$T/o")" ] || fail "something written: $(ls -A "$T/o")"
}

t_formats_dicom_seg() {
  data
  "$SWI" --version | grep -q "DICOM SEG output (DCMTK): yes" || skip "swi built without DICOM SEG"
  local S="$DATA/scan/scan_dicom"
  seg --input "$S" --output "$T/o/seg.dcm"; expect_rc 0
  seg --input "$S" --output "$T/o/l.nii.gz"; expect_rc 0
  "$PY" - "$S" "$T/o/seg.dcm" "$T/o/l.nii.gz" <<'PY' >"$T/check" 2>&1 || { cat "$T/check"; fail "DICOM SEG"; }
import os, sys
import nibabel as nib
import numpy as np
import pydicom
src = [pydicom.dcmread(os.path.join(sys.argv[1], f)) for f in sorted(os.listdir(sys.argv[1]))]
seg = pydicom.dcmread(sys.argv[2])
lab = np.asanyarray(nib.load(sys.argv[3]).dataobj)
assert seg.Modality == "SEG" and seg.SOPClassUID == "1.2.840.10008.5.1.4.1.1.66.4"
for key in ("StudyInstanceUID", "FrameOfReferenceUID", "PatientID"):
    assert getattr(seg, key) == getattr(src[0], key), key
ref = seg.ReferencedSeriesSequence[0]
assert ref.SeriesInstanceUID == src[0].SeriesInstanceUID
assert sorted(i.ReferencedSOPInstanceUID for i in ref.ReferencedInstanceSequence) == \
    sorted(s.SOPInstanceUID for s in src)
iop = np.array([float(x) for x in src[0].ImageOrientationPatient])
normal = np.cross(iop[:3], iop[3:])
src.sort(key=lambda s: float(np.dot([float(x) for x in s.ImagePositionPatient], normal)))
k_of = {s.SOPInstanceUID: k for k, s in enumerate(src)}
frames = seg.pixel_array.reshape((-1, lab.shape[1], lab.shape[0]))
seen = set()
for f, g in enumerate(seg.PerFrameFunctionalGroupsSequence):
    s = int(g.SegmentIdentificationSequence[0].ReferencedSegmentNumber)
    uid = g.DerivationImageSequence[0].SourceImageSequence[0].ReferencedSOPInstanceUID
    k = k_of[uid]
    pos = [float(x) for x in g.PlanePositionSequence[0].ImagePositionPatient]
    assert np.allclose(pos, [float(x) for x in src[k].ImagePositionPatient], atol=1e-4), (f, pos)
    label = int(seg.SegmentSequence[s - 1].SegmentLabel.split()[-1])
    assert np.array_equal(frames[f], (lab[:, :, k].T == label).astype(frames.dtype)), "frame %d" % f
    seen.add((label, k))
want = {(int(l), k) for k in range(lab.shape[2]) for l in np.unique(lab[:, :, k]) if l > 0}
assert seen == want, (sorted(seen), sorted(want))
print("ok", len(seen), "frames")
PY
}

# A source with dates that break their VR (DCMTK refused the whole SEG: "Value
# Representation violated") is written without them; segments carry the card's class names.
t_formats_dicom_seg_names_bad_dates() {
  data
  "$SWI" --version | grep -q "DICOM SEG output (DCMTK): yes" || skip "swi built without DICOM SEG"
  mkdir -p "$T/m" && cp "$DATA/quant4.onnx" "$T/m/q.onnx"
  echo '{"classes": ["background", "liver", "kidney", "spleen"]}' >"$T/m/q.json"
  cp -r "$DATA/scan/scan_dicom" "$T/src"
  "$PY" - "$T/src" <<'PY' 2>/dev/null || fail "could not edit the series"
import os, sys, pydicom
for f in os.listdir(sys.argv[1]):
    p = os.path.join(sys.argv[1], f)
    ds = pydicom.dcmread(p)
    ds.StudyDate, ds.PatientBirthDate, ds.StudyTime = "2004-01-19", "19XX0101", "ab:cd"
    ds.save_as(p)
PY
  run segment -q --model "$T/m/q.onnx" "${SCALE[@]}" --input "$T/src" --output "$T/o/seg.dcm"; expect_rc 0
  run segment -q --model "$T/m/q.onnx" "${SCALE[@]}" --input "$T/src" --output "$T/o/l.nii.gz"; expect_rc 0
  "$PY" - "$T/o/seg.dcm" "$T/o/l.nii.gz" <<'PY' >"$T/check" 2>&1 || { cat "$T/check"; fail "DICOM SEG names"; }
import sys
import nibabel as nib
import numpy as np
import pydicom
names = ["background", "liver", "kidney", "spleen"]
seg = pydicom.dcmread(sys.argv[1])
lab = np.asanyarray(nib.load(sys.argv[2]).dataobj)
got = [s.SegmentLabel for s in seg.SegmentSequence]
want = [names[l] for l in sorted(set(np.unique(lab).tolist()) - {0})]
assert got == want, (got, want)
assert seg.get("StudyDate", "") in ("", None), seg.StudyDate
frames = seg.pixel_array.reshape((-1, lab.shape[1], lab.shape[0]))
for f, g in enumerate(seg.PerFrameFunctionalGroupsSequence):
    s = int(g.SegmentIdentificationSequence[0].ReferencedSegmentNumber)
    label = names.index(seg.SegmentSequence[s - 1].SegmentLabel)
    k = int(g.FrameContentSequence[0].DimensionIndexValues[1]) - 1
    assert np.array_equal(frames[f], (lab[:, :, k].T == label).astype(frames.dtype)), "frame %d" % f
print("ok", got)
PY
}

t_formats_dicom_seg_needs_dicom() {
  data
  "$SWI" --version | grep -q "DICOM SEG output (DCMTK): yes" || skip "swi built without DICOM SEG"
  seg --input "$DATA/scan/scan.nrrd" --output "$T/o/seg.dcm"
  expect_rc 1; one_line_err; expect_err "seg.dcm: a DICOM SEG output needs a DICOM series input"
  [ -z "$(ls -A "$T/o")" ] || fail "something written: $(ls -A "$T/o")"
}

# a folder of four cases: NIfTI, NRRD, MetaImage (+ data file), a DICOM series
mkfolder() {
  mkdir -p "$1"
  cp "$DATA/scan/scan.nii.gz" "$1/a.nii.gz"
  cp "$DATA/scan/scan.nrrd" "$1/b.nrrd"
  cp "$DATA/scan/scan_z.mhd" "$DATA/scan/scan_z.zraw" "$1/"
  cp -r "$DATA/scan/scan_dicom" "$1/d_series"
}

t_folder_basic() {
  data; mkfolder "$T/in"
  run segment --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 0
  for c in a b scan_z d_series; do [ -f "$T/out/$c.nii.gz" ] || fail "no $c.nii.gz"; done
  [ "$(ls "$T/out" | wc -l)" -eq 4 ] || fail "expected 4 outputs: $(ls "$T/out")"
  same "$T/out/a.nii.gz" "$T/out/b.nii.gz" "$T/out/scan_z.nii.gz" "$T/out/d_series.nii.gz"
  expect_err "^case +size +time +status"
  expect_err "^d_series +12x10x7 .* ok"
  expect_err "4 done, 0 failed, 0 skipped"
}

t_folder_same_as_single() {
  data; mkfolder "$T/in"
  run segment -q --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/out" --mode gaussian
  expect_rc 0
  for c in a.nii.gz b.nrrd scan_z.mhd d_series; do
    local n="${c%%.*}"
    seg --input "$T/in/$c" --output "$T/o/$n.nii.gz" --mode gaussian; expect_rc 0
    cmp -s "$T/o/$n.nii.gz" "$T/out/$n.nii.gz" || fail "$n: folder mode differs from a single run"
  done
}

t_folder_channels() {
  data; mkdir -p "$T/in"
  cp "$DATA/vol.nii.gz" "$T/in/p_0000.nii.gz"; cp "$DATA/vol2.nii.gz" "$T/in/p_0001.nii.gz"
  cp "$DATA/vol2.nii.gz" "$T/in/q_0000.nii.gz"; cp "$DATA/vol.nii.gz" "$T/in/q_0001.nii.gz"
  run segment -q --model "$DATA/quant4_c2.onnx" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 0
  [ "$(ls "$T/out")" = "$(printf 'p.nii.gz\nq.nii.gz')" ] || fail "outputs: $(ls "$T/out")"
  run segment -q --model "$DATA/quant4_c2.onnx" --input "$DATA/vol.nii.gz" --input "$DATA/vol2.nii.gz" \
    --output "$T/o/p.nii.gz"
  expect_rc 0
  cmp -s "$T/o/p.nii.gz" "$T/out/p.nii.gz" || fail "p: the channels are not case p's"
}

t_folder_missing_channel() {
  data; mkdir -p "$T/in"
  cp "$DATA/vol.nii.gz" "$T/in/p_0000.nii.gz"; cp "$DATA/vol2.nii.gz" "$T/in/p_0002.nii.gz"
  run segment -q --model "$DATA/quant4_c2.onnx" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 1; expect_err "swi segment: p: channel 1 \(p_0001\.\*\) is missing"
  [ -z "$(ls -A "$T/out")" ] || fail "something written: $(ls -A "$T/out")"
}

t_folder_bad_case_goes_on() {
  data; mkfolder "$T/in"
  cp "$DATA/trunc_data.nii.gz" "$T/in/bad1.nii.gz"
  mkdir "$T/in/bad2"; echo "not DICOM" >"$T/in/bad2/notes.txt"
  run segment --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 1
  expect_err "swi segment: bad1: .*bad1.nii.gz: truncated"
  expect_err "swi segment: bad2: .*bad2: is a directory holding no DICOM series"
  expect_err "^bad1 .*FAILED"
  expect_err "4 done, 2 failed, 0 skipped"
  [ "$(ls "$T/out" | wc -l)" -eq 4 ] || fail "the good cases were not all written: $(ls "$T/out")"
  [ -z "$(ls -A "$T/out" | grep -E '^bad|swi-')" ] || fail "left behind: $(ls -A "$T/out")"
}

# A library that aborts inside one case's reading (a stand-in preloaded into swi: open()
# aborts on the file named ABORT_HERE) fails that case only: the others are written.
t_folder_case_abort_goes_on() {
  data; mkfolder "$T/in"
  cp "$DATA/scan/scan.nii.gz" "$T/in/0_ABORT_HERE.nii.gz"
  cat >"$T/abort.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
static int pass(const char *name, const char *p, int f, va_list ap) {
    int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, name);
    if (p && strstr(p, "ABORT_HERE")) abort();
    return real(p, f, (f & (O_CREAT | O_TMPFILE)) ? va_arg(ap, int) : 0);
}
int open(const char *p, int f, ...) { va_list ap; va_start(ap, f); int r = pass("open", p, f, ap); va_end(ap); return r; }
int open64(const char *p, int f, ...) { va_list ap; va_start(ap, f); int r = pass("open64", p, f, ap); va_end(ap); return r; }
C
  "${CC:-cc}" -shared -fPIC -o "$T/abort.so" "$T/abort.c" -ldl 2>"$T/cc.err" || skip "no C compiler for the stand-in library"
  LD_PRELOAD="$T/abort.so" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    run segment --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 1
  expect_err "swi segment: 0_ABORT_HERE: .*0_ABORT_HERE.nii.gz: reading it killed the reader \(Aborted\)"
  expect_err "^0_ABORT_HERE .*FAILED"
  expect_err "4 done, 1 failed, 0 skipped"
  for c in a b scan_z d_series; do [ -f "$T/out/$c.nii.gz" ] || fail "no $c.nii.gz"; done
  [ -z "$(ls -A "$T/out" | grep -E 'ABORT|swi-')" ] || fail "left behind: $(ls -A "$T/out")"
}

t_folder_skip_existing() {
  data; mkfolder "$T/in"
  run segment -q --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 0
  rm "$T/out/b.nii.gz"; echo keep >"$T/out/a.nii.gz"
  run segment --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 0
  [ "$(cat "$T/out/a.nii.gz")" = keep ] || fail "an existing output was replaced without --force"
  [ -f "$T/out/b.nii.gz" ] || fail "the missing output was not made again"
  expect_err "^a .*skipped \(output exists\)"
  expect_err "1 done, 0 failed, 3 skipped"
}

t_folder_force() {
  data; mkfolder "$T/in"; mkdir -p "$T/out"; echo old >"$T/out/a.nii.gz"
  run segment -q --force --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 0
  printf 'old\n' | cmp -s - "$T/out/a.nii.gz" && fail "--force kept the old output"
  same "$T/out/a.nii.gz" "$T/out/d_series.nii.gz"
}

t_folder_part() {
  data; mkfolder "$T/in"
  run segment -q --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/p0" --part 0/2
  expect_rc 0
  run segment -q --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/p1" --part 1/2
  expect_rc 0
  # sorted cases: a b d_series scan_z -> part 0: a d_series, part 1: b scan_z
  [ "$(ls "$T/p0" | tr '\n' ' ')" = "a.nii.gz d_series.nii.gz " ] || fail "part 0: $(ls "$T/p0")"
  [ "$(ls "$T/p1" | tr '\n' ' ')" = "b.nii.gz scan_z.nii.gz " ] || fail "part 1: $(ls "$T/p1")"
}

t_folder_output_inside_input() {
  data; mkfolder "$T/in"
  for r in 1 2; do
    run segment --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/in/labels"
    expect_rc 0
  done
  # the second run found the four outputs, and did not take labels/ for a case
  expect_err "0 done, 0 failed, 4 skipped"
  grep -q "^labels " "$T/err" && fail "the output directory was taken for a case"
  [ "$(ls "$T/in/labels" | wc -l)" -eq 4 ] || fail "outputs: $(ls "$T/in/labels")"
}

t_folder_output_is_input() {
  data; mkfolder "$T/in"
  run segment --model "$DATA/quant4.onnx" --input-dir "$T/in" --output-dir "$T/in/."
  expect_rc 2; one_line_err; expect_err "is the input directory"
  [ "$(ls "$T/in" | wc -l)" -eq 5 ] || fail "something written into the input: $(ls "$T/in")"
}

t_folder_output_format() {
  data; mkfolder "$T/in"
  for fmt in nrrd mha nii; do
    run segment -q --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/$fmt" \
      --output-format $fmt
    expect_rc 0
    [ "$(ls "$T/$fmt" | wc -l)" -eq 4 ] && [ -f "$T/$fmt/d_series.$fmt" ] || fail "$fmt: $(ls "$T/$fmt")"
  done
  same "$T/nii/a.nii" "$T/nrrd/d_series.nrrd" "$T/mha/scan_z.mha" "$T/nrrd/b.nrrd"
}

# The card's side files belong to each case's output: a rerun in another format replaces
# those swi wrote, without --force (before, every case failed on them).
t_folder_side_files_rerun() {
  data; mkfolder "$T/in"
  cp "$DATA/quant4.onnx" "$T/m.onnx"
  echo '{"classes": ["background", "a", "b", "c"]}' >"$T/m.json"
  run segment -q --model "$T/m.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 0
  [ -f "$T/out/a.label.txt" ] && [ -f "$T/out/d_series.ctbl" ] || fail "no side files: $(ls "$T/out")"
  echo '{"classes": ["background", "liver", "kidney", "spleen"]}' >"$T/m.json"
  run segment -q --model "$T/m.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/out" \
    --output-format nrrd
  expect_rc 0
  for c in a b scan_z d_series; do
    [ -f "$T/out/$c.nrrd" ] && [ -f "$T/out/$c.nii.gz" ] || fail "$c: $(ls "$T/out")"
    grep -q '"liver"' "$T/out/$c.label.txt" && grep -q ' liver ' "$T/out/$c.ctbl" || fail "$c: old side files"
  done
  [ "$(ls -A "$T/out" | wc -l)" -eq 16 ] || fail "unexpected files: $(ls -A "$T/out")"
}

# OUT/ as typed: paths in messages and files written read OUT/case, never OUT//case
t_folder_dirs_with_slash() {
  data; mkfolder "$T/in"
  cp "$DATA/quant4.onnx" "$T/m.onnx"
  echo '{"classes": ["background", "a", "b", "c"]}' >"$T/m.json"
  run segment --model "$T/m.onnx" "${SCALE[@]}" --input-dir "$T/in/" --output-dir "$T/out/" --report "$T/pages/"
  expect_rc 0
  [ -f "$T/out/a.nii.gz" ] && [ -f "$T/out/a.label.txt" ] && [ -f "$T/pages/a.html" ] || fail "$(ls "$T/out" "$T/pages")"
  ! grep -q "//" "$T/stdout" "$T/err" || fail "a doubled slash: $(grep -h "//" "$T/stdout" "$T/err")"
}

t_folder_usage() {
  data
  local m=(--model "$DATA/quant4.onnx")
  run segment "${m[@]}" --input-dir "$T" --output-dir "$T/o" --input x.nii.gz
  expect_rc 2; one_line_err; expect_err "takes no --input"
  run segment "${m[@]}" --input x.nii.gz --output-dir "$T/o"; expect_rc 2; expect_err "need --input-dir"
  run segment "${m[@]}" --input-dir "$T"; expect_rc 2; expect_err "needs --output-dir"
  run segment "${m[@]}" --input-dir "$T" --output-dir "$T/o" --part 2/2; expect_rc 2; expect_err "--part '2/2'"
  run segment "${m[@]}" --input-dir "$T" --output-dir "$T/o" --part x; expect_rc 2; expect_err "--part 'x'"
  run segment "${m[@]}" --input-dir "$T" --output-dir "$T/o" --shard 0/2
  expect_rc 2; expect_err "folder mode divides its cases with --part"
  run segment "${m[@]}" --input-dir "$T" --output-dir "$T/o" --shard-grid 2x1x1
  expect_rc 2; expect_err "folder mode divides its cases with --part"
  run segment "${m[@]}" --input-dir "$T" --output-dir "$T/o" --output-format png
  expect_rc 2; expect_err "--output-format 'png'"
  run segment --help; expect_rc 0; grep -q -- "--input-dir scans/" "$T/stdout" || fail "--help lacks a folder example"
  grep -q -- "--input CT_SERIES/" "$T/stdout" || fail "--help lacks a DICOM example"
}

t_folder_no_cases() {
  data; mkdir -p "$T/in"; echo hi >"$T/in/readme.txt"
  run segment --model "$DATA/quant4.onnx" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 1; one_line_err; expect_err "no cases"
}

# Names with terminal controls (a colour, a title, a carriage return, a C1 CSI, a byte that
# is no UTF-8) reach the terminal as visible escapes, in the case lines, the table and the
# messages, never raw.
no_raw_controls() {
  if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f\x80-\x9f\xff]' "$T/err" "$T/stdout" ||
     LC_ALL=C grep -q $'\xc2[\x80-\x9f]' "$T/err" "$T/stdout"; then
    fail "a raw control byte reached the terminal: $(od -c "$T/err" | head -20)"
  fi
}
t_folder_names_escaped() {
  data; mkdir -p "$T/in"
  cp "$DATA/scan/scan.nii.gz" "$T/in/c"$'\e'"[31m.nii.gz"
  cp "$DATA/scan/scan.nii.gz" "$T/in/r"$'\r'"x"$'\xc2\x9b'"y.nii.gz"
  cp "$DATA/trunc_data.nii.gz" "$T/in/bad"$'\e'"]0;title"$'\a\xff'".nii.gz"
  run segment --model "$DATA/quant4.onnx" "${SCALE[@]}" --input-dir "$T/in" --output-dir "$T/out"
  expect_rc 1
  no_raw_controls
  grep -qF 'c\x1b[31m ' "$T/err" || fail "no escaped c\\x1b[31m row"
  grep -qF 'r\rx\u009by ' "$T/err" || fail "no escaped r\\rx\\u009by row"
  grep -qF 'swi segment: bad\x1b]0;title\x07\xff: ' "$T/err" || fail "no escaped case name in the message"
  # the library's message (swi_message_one_line: controls as spaces), the rest escaped here
  grep -qF 'bad ]0;title \xff.nii.gz: truncated' "$T/err" || fail "no escaped path in the message"
  [ -f "$T/out/c"$'\e'"[31m.nii.gz" ] || fail "the output is not named as its case"
  # a single run's message naming the file
  seg --input "$T/no"$'\e'"[2J"$'\n\xc2\x9b'"such.nii.gz" --output "$T/o/x.nii.gz"
  [ "$rc" -ne 0 ] || fail "a missing input was accepted"
  no_raw_controls
  grep -qF 'no [2J \u009bsuch.nii.gz' "$T/err" || fail "no escaped name in the message"
}

run_case() {
  local c="$1"
  T="$WORK/folder_$c"
  rm -rf "$T"
  mkdir -p "$T/o"
  ("t_$c")
  local r=$?
  [ $r -eq 0 ] && rm -rf "$T"
  return $r
}

if [ "$1" = all ]; then
  st=0
  for c in "${CASES[@]}"; do
    if run_case "$c"; then echo "ok   $c"; else r=$?; [ $r -eq 77 ] && echo "skip $c" || { echo "FAIL $c"; st=1; }; fi
  done
  exit $st
fi
case " ${CASES[*]} " in *" $1 "*) ;; *) echo "unknown case: $1" >&2; exit 2;; esac
run_case "$1"
