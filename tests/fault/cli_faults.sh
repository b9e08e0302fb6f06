#!/usr/bin/env bash
# cli_faults.sh -- fault injection and hostile conditions for `swi segment`.
#
#   cli_faults.sh --list      the case names
#   cli_faults.sh CASE        run one case (exit 0 pass, 1 fail, 77 skipped)
#   cli_faults.sh all         every case, in order
#
# Environment (set by tests/fault/CMakeLists.txt): SWI (the binary, built with
# SWI_FAULT_INJECTION, preferably SWI_SANITIZE too), SWI_FAULT_IO (the fault_io.so shim),
# SWI_E2E (tests/data/golden/e2e), SWI_PYTHON (python3 with numpy, nibabel, onnx),
# SWI_TEST_WORK (scratch).
#
# Every failing run must exit 1 with one line on stderr that says what went wrong, and
# leave nothing in the output folder: no output, no temporary.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

CASES=(
  alloc_walk            # every allocation of a small run fails in turn (library, swi_io, swi_ort, swi)
  ort_walk              # every ONNX Runtime object creation (session, tensors, run) fails in turn
  write_walk            # every write/fsync of every output kind fails in turn (ENOSPC, then EIO)
  write_walk_hdf5       # every write/fsync/copy of the HDF5 writer fails in turn: the file stays as it was
  write_full_fs         # a really full file system (tmpfs, needs root)
  write_file_too_big    # RLIMIT_FSIZE: EFBIG with SIGXFSZ ignored; killed by it otherwise
  write_dev_full        # the output path is /dev/full (through a symlink)
  write_readonly_dir    # the output folder is read-only
  write_vanished_dir    # the output folder is removed while swi runs
  signal_twice          # SIGINT twice: immediate exit, temporaries removed
  predictor_midway      # the network fails on a window late in the run
  model_wrong_shape     # the network returns another window size than the roi
  model_nan             # the network returns NaN
  input_nan_voxels      # NaN / Inf voxels in the input
  input_promises_too_much  # a tiny .nii.gz whose header promises 2^38 voxels
  input_sibling_nii     # X.nii.gz read while a different X.nii lies beside it
  concurrent_force      # two runs with --force writing one path
  special_files         # FIFOs as the input, the card, the model, a NRRD data file: refused, no hang
  outputs_over_inputs   # outputs that are, hold or lie in an input, with --force: refused, inputs kept
  store_write_walk      # every write/fsync/rename/link/mkdir of a Zarr store write fails in turn
)

if [ "${1:-}" = --list ]; then
  printf '%s\n' "${CASES[@]}" | sed 's/ *#.*//'
  exit 0
fi
[ $# -eq 1 ] || { echo "usage: cli_faults.sh --list | CASE | all" >&2; exit 2; }

SWI="${SWI:-}"
IO_SHIM="${SWI_FAULT_IO:-}"
E2E="${SWI_E2E:-}"
PY="${SWI_PYTHON:-/usr/bin/python3}"
WORK="${SWI_TEST_WORK:-${TMPDIR:-/tmp}/swi-fault-tests}"
DATA="$WORK/data"
[ -x "$SWI" ] || { echo "FAIL: SWI=$SWI is not an executable"; exit 1; }

# Sanitizer builds: refused allocations come back as NULL (the code's own out-of-memory
# path), ONNX Runtime's internal leak is suppressed, a report fails the run.
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
unset SWI_FAULT_ALLOC

fail() { echo "FAIL: $*"; [ -f "$T/err" ] && { echo "--- stderr:"; head -c 3000 "$T/err"; }; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }
# the golden e2e case is committed (tests/data/golden/e2e): missing, it is a failure
need_e2e() { [ -f "$E2E/unet.onnx" ] || fail "e2e model not found: $E2E/unet.onnx (SWI_E2E)"; }

data() {
  [ -f "$DATA/.done" ] && return 0
  "$PY" -c "import numpy, nibabel, onnx" 2>/dev/null ||
    skip "$PY lacks numpy/nibabel/onnx (apt-get install python3-numpy python3-nibabel python3-onnx)"
  mkdir -p "$WORK"
  (
    flock 9
    [ -f "$DATA/.done" ] || { "$PY" "$here/make_data.py" "$DATA" && touch "$DATA/.done"; }
  ) 9>"$WORK/.lock" || fail "could not make the test data"
}
need_swi_features() {
  "$SWI" --version >"$T/ver" 2>&1 || fail "swi --version failed"
  grep -q "ONNX Runtime: [0-9]" "$T/ver" || skip "swi built without ONNX Runtime"
  grep -q "NIfTI (niftilib): yes" "$T/ver" || skip "swi built without NIfTI"
}

# run ARGS...: swi with stdout/stderr captured; sets rc
run() { "$SWI" "$@" >"$T/out" 2>"$T/err" </dev/null; rc=$?; }
seg() { run segment -q "$@"; }
no_sanitizer_report() {
  ! grep -qE "Sanitizer|runtime error:" "$T/err" || fail "sanitizer report"
}
expect_rc() { [ "$rc" -eq "$1" ] || fail "exit status $rc, expected $1"; }
expect_err() { grep -qE -- "$1" "$T/err" || fail "stderr does not match '$1'"; }
one_line_err() {
  no_sanitizer_report
  [ "$(grep -c '' "$T/err")" -eq 1 ] || fail "stderr is not one line"
}
# nothing at all in folder $1 (outputs or .NAME.swi-XXXXXX temporaries)
empty_dir() {
  [ -z "$(ls -A "$1" 2>/dev/null)" ] || { ls -la "$1"; fail "left behind in $1: $(ls -A "$1" | tr '\n' ' ')"; }
}
# error_run DIR PATTERN ARGS...: exit 1, one line matching PATTERN, DIR empty
error_run() {
  local dir="$1" pat="$2"
  shift 2
  seg "$@"
  expect_rc 1
  one_line_err
  expect_err "$pat"
  empty_dir "$dir"
}
# same_labels A B: the two NIfTI files hold the same voxels (and shape)
same_labels() {
  "$PY" - "$1" "$2" <<'EOF' || fail "$1 and $2 differ"
import sys, nibabel as nib, numpy as np
a, b = (nib.load(p) for p in sys.argv[1:3])
da, db = np.asanyarray(a.dataobj), np.asanyarray(b.dataobj)
if da.shape != db.shape or not np.array_equal(da, db, equal_nan=True):
    print("shapes %s %s, %d voxels differ" % (da.shape, db.shape,
          -1 if da.shape != db.shape else int((da != db).sum())))
    sys.exit(1)
EOF
}
tiny_args() { echo --model "$DATA/tiny.onnx" --input "$DATA/vol.nii.gz" --threads 2 --sw-batch 3 --mode gaussian; }

# a case folder from an earlier run: take down the tmpfs mounts a killed run may have left
clean_case_dir() {
  local m
  if [ -d "$1" ] && [ "$(id -u)" -eq 0 ]; then
    for m in "$1/ro" "$1/full"; do
      while mountpoint -q "$m" 2>/dev/null; do umount "$m" 2>/dev/null || break; done
    done
  fi
  rm -rf "$1"
  mkdir -p "$1/o"
}
T="$WORK/$1"
clean_case_dir "$T"

# ---- allocation failures -----------------------------------------------------------------
t_alloc_walk() {
  data; need_swi_features
  # reference: a fault-free run
  seg $(tiny_args) --output "$T/ref.nii" --scores "$T/ref_scores.nii" --preview "$T/ref.png"
  expect_rc 0; no_sanitizer_report
  local n=1 limit=5000
  : >"$T/messages"
  while [ $n -le $limit ]; do
    SWI_FAULT_ALLOC=$n "$SWI" segment -q $(tiny_args) --output "$T/o/l.nii" --scores "$T/o/s.nii" \
      --preview "$T/o/p.png" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    if [ $rc -eq 0 ]; then
      break # past the last allocation
    fi
    [ $rc -eq 1 ] || fail "SWI_FAULT_ALLOC=$n: exit status $rc, expected 1"
    one_line_err
    expect_err "out of memory"
    empty_dir "$T/o"
    cat "$T/err" >>"$T/messages"
    n=$((n + 1))
  done
  [ $n -le $limit ] || fail "still failing after $limit allocations"
  [ $n -gt 1 ] || fail "no allocation was injected (is swi built with -DSWI_FAULT_INJECTION=ON?)"
  no_sanitizer_report
  cmp -s "$T/o/l.nii" "$T/ref.nii" || fail "labels differ from the fault-free run"
  cmp -s "$T/o/s.nii" "$T/ref_scores.nii" || fail "scores differ from the fault-free run"
  cmp -s "$T/o/p.png" "$T/ref.png" || fail "preview differs from the fault-free run"
  # the walk reached the allocations outside the core: the command's, swi_io's, swi_ort's
  local who
  for who in "out of memory reading the volume" "vol.nii.gz: out of memory reading .* of voxels" \
             "p.png: out of memory" "tiny.onnx: out of memory"; do
    grep -qE -- "$who" "$T/messages" || fail "no fault reached '$who'"
  done
  echo "PASS: $((n - 1)) allocation faults in swi segment, each a clean exit 1"
}

t_ort_walk() {
  data; need_swi_features
  seg $(tiny_args) --output "$T/ref.nii" --scores "$T/ref_scores.nii"
  expect_rc 0; no_sanitizer_report
  local n=1 limit=2000
  while [ $n -le $limit ]; do
    SWI_FAULT_ORT=$n "$SWI" segment -q $(tiny_args) --output "$T/o/l.nii" --scores "$T/o/s.nii" \
      >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    [ $rc -eq 0 ] && break # past the last creation
    [ $rc -eq 1 ] || fail "SWI_FAULT_ORT=$n: exit status $rc, expected 1"
    one_line_err
    expect_err "tiny.onnx: .*injected failure \(SWI_FAULT_ORT\)"
    empty_dir "$T/o"
    n=$((n + 1))
  done
  [ $n -le $limit ] || fail "still failing after $limit ONNX Runtime calls"
  [ $n -gt 5 ] || fail "only $((n - 1)) ONNX Runtime calls were injected (is swi built with -DSWI_FAULT_INJECTION=ON?)"
  no_sanitizer_report
  cmp -s "$T/o/l.nii" "$T/ref.nii" || fail "labels differ from the fault-free run"
  cmp -s "$T/o/s.nii" "$T/ref_scores.nii" || fail "scores differ from the fault-free run"
  echo "PASS: $((n - 1)) ONNX Runtime creation failures in swi segment, each a clean exit 1"
}

# ---- write failures --------------------------------------------------------------------
# write_walk_one ERRNO ARGS...: every counted write/fsync of the run with outputs ARGS fails
# in turn with ERRNO (fsync: EIO); sets $walked to the number of points
write_walk_one() {
  local errno_="$1" shim_env="verify_asan_link_order=0:$ASAN_OPTIONS"
  shift
  rm -rf "$T/o" "$T/ref" && mkdir "$T/o" "$T/ref"
  ASAN_OPTIONS="$shim_env" LD_PRELOAD="$IO_SHIM" SWI_FAULT_IO_DIR="$T/o" SWI_FAULT_IO_COUNT="$T/count" \
    "$SWI" segment -q $(tiny_args) "$@" >"$T/out" 2>"$T/err" </dev/null
  rc=$?
  expect_rc 0; no_sanitizer_report
  mv "$T/o/"* "$T/ref/"
  local count
  count=$(cat "$T/count")
  [ "${count:-0}" -ge 3 ] || fail "the shim saw only ${count:-0} writes"
  # every N is tried, so one report lists all the points that misbehave
  local bad="" n
  for n in $(seq 1 "$count"); do
    ASAN_OPTIONS="$shim_env" LD_PRELOAD="$IO_SHIM" SWI_FAULT_IO_DIR="$T/o" SWI_FAULT_IO_AT=$n \
      SWI_FAULT_IO_ERRNO=$errno_ "$SWI" segment -q $(tiny_args) "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    echo "errno $errno_, write $n of $count fails: exit $rc: $(head -c 300 "$T/err" | tr '\n' ' ')"
    cat "$T/err" >>"$T/wmsg"
    if [ $rc -ne 1 ] || ! (one_line_err && expect_err "(write failed|cannot complete the output).*(No space left on device|Input/output error)") >/dev/null ||
       [ -n "$(ls -A "$T/o")" ]; then
      bad="$bad $n"
      echo "    BAD: exit $rc, left behind: [$(ls -A "$T/o" | tr '\n' ' ')]"
    fi
    rm -rf "$T/o" && mkdir "$T/o"
  done
  [ -z "$bad" ] || fail "write failures$bad of $count (errno $errno_, outputs $*) misbehave (see above)"
  walked=$count
}

t_write_walk() {
  data; need_swi_features
  [ -f "$IO_SHIM" ] || skip "no fault_io shim (SWI_FAULT_IO)"
  local total=0 e walked png=()
  : >"$T/wmsg"
  "$SWI" --version | grep -q "PNG (libpng): yes" && png=(--preview "$T/o/p.png")
  # every output kind: labels and scores, gzip and plain, and the PNG preview
  for e in 28 5; do # ENOSPC, EIO
    write_walk_one $e --output "$T/o/l.nii.gz" --scores "$T/o/s.nii" "${png[@]}"
    total=$((total + walked))
    write_walk_one $e --output "$T/o/l.nii" --scores "$T/o/s.nii.gz"
    total=$((total + walked))
  done
  # each kind's own writes were among the failures
  local what
  for what in "l.nii.gz: write failed" "s.nii.gz: write failed" "l.nii: write failed" \
              "s.nii: write failed" "cannot complete the output: Input/output error"; do
    grep -q "$what" "$T/wmsg" || fail "no failure reported '$what'"
  done
  [ ${#png[@]} -eq 0 ] || grep -q "p.png: write failed: " "$T/wmsg" || fail "no write of the PNG preview failed"
  echo "PASS: $total write/fsync failures, each a clean exit 1"
}

# every counted write/fsync/copy_file_range of a run writing labels and scores into an HDF5
# file fails in turn: into a user's file holding other datasets (--force rewrites /labels)
# and into a new file. Each failure exits 1 with one line naming the file; the user's file is
# byte for byte as before, no new file appears, no temporary is left.
t_write_walk_hdf5() {
  data; need_swi_features
  [ -f "$IO_SHIM" ] || skip "no fault_io shim (SWI_FAULT_IO)"
  "$SWI" --version | grep -q "HDF5 (libhdf5): yes" || skip "swi built without HDF5"
  "$PY" -c "import h5py" 2>/dev/null || skip "$PY lacks h5py (apt-get install python3-h5py)"
  local shim_env="verify_asan_link_order=0:$ASAN_OPTIONS" total=0 out count n bad=""
  rm -rf "$T/o" && mkdir "$T/o"
  "$PY" - "$T/o/f.h5" <<'EOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["study"] = "mine"
    f.create_dataset("ct", data=np.arange(1000, dtype="<i2").reshape(10, 10, 10), chunks=(5, 5, 5),
                     compression="gzip")
    f.create_group("notes").attrs["who"] = "me"
EOF
  seg $(tiny_args) --output "$T/o/f.h5:/labels"
  expect_rc 0
  cp "$T/o/f.h5" "$T/before.h5"
  : >"$T/wmsg"
  for out in f.h5 new.h5; do
    local args=(--output "$T/o/$out:/labels" --scores "$T/o/$out:/scores" --force)
    ASAN_OPTIONS="$shim_env" LD_PRELOAD="$IO_SHIM" SWI_FAULT_IO_DIR="$T/o" SWI_FAULT_IO_COUNT="$T/count" \
      "$SWI" segment -q $(tiny_args) "${args[@]}" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    expect_rc 0; no_sanitizer_report
    count=$(cat "$T/count")
    [ "${count:-0}" -ge 3 ] || fail "the shim saw only ${count:-0} writes into $out"
    rm -f "$T/o/new.h5" && cp "$T/before.h5" "$T/o/f.h5"
    for n in $(seq 1 "$count"); do
      ASAN_OPTIONS="$shim_env" LD_PRELOAD="$IO_SHIM" SWI_FAULT_IO_DIR="$T/o" SWI_FAULT_IO_AT=$n \
        "$SWI" segment -q $(tiny_args) "${args[@]}" >"$T/out" 2>"$T/err" </dev/null
      rc=$?
      echo "$out: write $n of $count fails: exit $rc: $(head -c 300 "$T/err" | tr '\n' ' ')"
      cat "$T/err" >>"$T/wmsg"
      if [ $rc -ne 1 ] || ! (one_line_err && expect_err "$out") >/dev/null ||
         ! cmp -s "$T/o/f.h5" "$T/before.h5" || [ "$(ls -A "$T/o")" != f.h5 ]; then
        bad="$bad $out:$n"
        echo "    BAD: exit $rc, folder: [$(ls -A "$T/o" | tr '\n' ' ')]"
        rm -rf "$T/o/new.h5" "$T/o"/.*.swi-* && cp "$T/before.h5" "$T/o/f.h5"
      fi
    done
    total=$((total + count))
  done
  [ -z "$bad" ] || fail "write failures$bad misbehave (see above)"
  # the walk reached the copy, HDF5's own writes and the final fsync
  local what
  for what in "cannot copy the file" "cannot (write the box|finish)" "cannot complete the output"; do
    grep -qE "$what" "$T/wmsg" || fail "no failure reported '$what'"
  done
  echo "PASS: $total write/fsync/copy failures of the HDF5 writer, each an exit 1 naming the file, the file as it was"
}

t_write_full_fs() {
  data; need_swi_features
  [ "$(id -u)" -eq 0 ] || skip "mounting a small tmpfs needs root"
  mkdir -p "$T/full"
  mount -t tmpfs -o size=16k swi-full "$T/full" 2>/dev/null || skip "cannot mount a tmpfs here"
  trap "umount '$T/full' 2>/dev/null" EXIT
  error_run "$T/full" "s.nii: write failed: No space left on device" $(tiny_args) \
    --output "$T/full/l.nii" --scores "$T/full/s.nii"
}

t_write_file_too_big() {
  data; need_swi_features
  # SIGXFSZ ignored: write() fails with EFBIG and swi says so
  ( ulimit -f 8; trap '' XFSZ; exec "$SWI" segment -q $(tiny_args) --output "$T/o/l.nii" --scores "$T/o/s.nii" ) \
    >"$T/out" 2>"$T/err" </dev/null
  rc=$?
  expect_rc 1; one_line_err; expect_err "s.nii: write failed: File too large"
  empty_dir "$T/o"
  # SIGXFSZ at its default: the kernel kills swi mid-write. No output may appear under its
  # name (an interrupted temporary .s.nii.swi-* may remain: nothing runs after SIGKILL-like
  # termination).
  ( ulimit -f 8; trap - XFSZ; exec "$SWI" segment -q $(tiny_args) --output "$T/o/l.nii" --scores "$T/o/s.nii" ) \
    >"$T/out" 2>"$T/err" </dev/null
  rc=$?
  [ $rc -ne 0 ] || fail "exit 0 although the file size limit was exceeded"
  [ ! -e "$T/o/l.nii" ] && [ ! -e "$T/o/s.nii" ] || fail "an output appeared after SIGXFSZ"
}

t_write_dev_full() {
  data; need_swi_features
  ln -s /dev/full "$T/o/l.nii"
  seg $(tiny_args) --output "$T/o/l.nii" --force
  expect_rc 1; one_line_err; expect_err "l.nii: exists and is not a regular file"
  [ -L "$T/o/l.nii" ] && [ "$(readlink "$T/o/l.nii")" = /dev/full ] || fail "the symlink was replaced"
  [ "$(ls -A "$T/o")" = l.nii ] || fail "left behind: $(ls -A "$T/o")"
  rm "$T/o/l.nii"
  ln -s /dev/full "$T/o/s.nii"
  seg $(tiny_args) --output "$T/o/l.nii" --scores "$T/o/s.nii"
  expect_rc 1; one_line_err; expect_err "s.nii: exists and is not a regular file"
  [ "$(ls -A "$T/o")" = s.nii ] || fail "left behind: $(ls -A "$T/o")"
}

t_write_readonly_dir() {
  data; need_swi_features
  local ro="$T/ro"
  mkdir -p "$ro"
  if [ "$(id -u)" -eq 0 ]; then
    # root ignores permission bits: a read-only mount is what stops it
    mount -t tmpfs -o ro,size=64k swi-ro "$ro" 2>/dev/null || skip "root, and cannot mount a read-only tmpfs"
    trap "umount '$ro' 2>/dev/null" EXIT  # expanded now: \$ro is local
    error_run "$ro" "cannot create the output in .*: Read-only file system" $(tiny_args) --output "$ro/l.nii.gz"
  else
    chmod 555 "$ro"
    error_run "$ro" "cannot create the output in .*: Permission denied" $(tiny_args) --output "$ro/l.nii.gz"
    chmod 755 "$ro"
  fi
}

t_write_vanished_dir() {
  data; need_swi_features
  need_e2e
  local d="$T/o/gone"
  mkdir -p "$d"
  "$SWI" segment -q --model "$E2E/unet.onnx" --input "$DATA/long.nii.gz" --output "$d/l.nii.gz" \
    --scores "$d/s.nii" --tta --sw-batch 1 --threads 1 >"$T/out" 2>"$T/err" </dev/null &
  local pid=$! i=0
  while [ -z "$(ls -A "$d" 2>/dev/null)" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
  [ -n "$(ls -A "$d" 2>/dev/null)" ] || { kill -9 $pid; fail "the run never created its temporaries"; }
  rm -rf "$d"
  wait $pid
  rc=$?
  expect_rc 1; one_line_err
  expect_err "(cannot move the output into place|cannot complete the output|write failed).*No such file or directory"
  [ ! -e "$d" ] || fail "the removed folder was recreated: $(ls -A "$d")"
  empty_dir "$T/o"
}

# ---- signals ---------------------------------------------------------------------------
t_signal_twice() {
  data; need_swi_features
  need_e2e
  "$SWI" segment -q --model "$E2E/unet.onnx" --input "$DATA/long.nii.gz" --output "$T/o/l.nii.gz" \
    --scores "$T/o/s.nii" --tta --sw-batch 1 --threads 1 >"$T/out" 2>"$T/err" </dev/null &
  local pid=$! i=0
  while [ -z "$(ls -A "$T/o" 2>/dev/null)" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
  [ -n "$(ls -A "$T/o")" ] || { kill -9 $pid; fail "the run never created its temporaries"; }
  sleep 0.5
  local t0=$SECONDS
  kill -INT $pid
  kill -INT $pid
  wait $pid
  rc=$?
  [ $((SECONDS - t0)) -le 5 ] || fail "took $((SECONDS - t0)) s to stop after two SIGINTs"
  expect_rc 130
  no_sanitizer_report
  expect_err "interrupted"
  empty_dir "$T/o"
}

# ---- the network misbehaves --------------------------------------------------------------
t_predictor_midway() {
  data; need_swi_features
  # 8 windows without overlap, one per call; only the last reaches the hot block
  seg --model "$DATA/midway.onnx" --input "$DATA/hot.nii.gz" --output "$T/o/l.nii.gz" \
    --scores "$T/o/s.nii" --sw-batch 1 --threads 1 --overlap 0
  expect_rc 1; one_line_err
  expect_err "midway.onnx"
  empty_dir "$T/o"
}

t_model_wrong_shape() {
  data; need_swi_features
  error_run "$T/o" "shrink.onnx" --model "$DATA/shrink.onnx" --input "$DATA/vol.nii.gz" \
    --output "$T/o/l.nii.gz" --scores "$T/o/s.nii"
}

t_model_nan() {
  data; need_swi_features
  error_run "$T/o" "NaN" --model "$DATA/nan.onnx" --input "$DATA/vol.nii.gz" \
    --output "$T/o/l.nii.gz" --scores "$T/o/s.nii"
}

# ---- hostile input files ------------------------------------------------------------------
t_input_nan_voxels() {
  data; need_swi_features
  # non-finite voxels read as 0 with one warning that counts them: the run succeeds and
  # equals the run on the same volume with zeros there; --nonfinite fail refuses it
  error_run "$T/o" "nanvox.nii.gz: 3 of [0-9]+ voxels .*--nonfinite fail" --model "$DATA/tiny.onnx" \
    --input "$DATA/nanvox.nii.gz" --output "$T/o/c.nii" --scores "$T/o/cs.nii" --nonfinite fail
  seg --model "$DATA/tiny.onnx" --input "$DATA/nanvox.nii.gz" --output "$T/o/a.nii" --scores "$T/o/as.nii"
  expect_rc 0; one_line_err; expect_err "warning: .*nanvox.nii.gz: 3 of [0-9]+ voxels are NaN or infinite"
  seg --model "$DATA/tiny.onnx" --input "$DATA/nanvox_as_zero.nii.gz" --output "$T/o/b.nii" --scores "$T/o/bs.nii"
  expect_rc 0
  same_labels "$T/o/a.nii" "$T/o/b.nii"
  same_labels "$T/o/as.nii" "$T/o/bs.nii"
}

t_input_promises_too_much() {
  data; need_swi_features
  local t0=$SECONDS
  # refused when opened, naming the file: its compressed bytes cannot hold what it claims
  error_run "$T/o" "promise.nii.gz: the header describes .*deflate inflates at most 1032:1" \
    --model "$DATA/tiny.onnx" --input "$DATA/promise.nii.gz" --output "$T/o/l.nii.gz"
  [ $((SECONDS - t0)) -le 30 ] || fail "took $((SECONDS - t0)) s to refuse"
}

t_input_sibling_nii() {
  data; need_swi_features
  # scan.nii.gz and a different scan.nii in one folder: --input scan.nii.gz must read
  # scan.nii.gz, not its sibling's voxels
  seg --model "$DATA/tiny.onnx" --input "$DATA/sib/scan.nii.gz" --output "$T/o/a.nii" --scores "$T/o/as.nii"
  expect_rc 0; no_sanitizer_report
  seg --model "$DATA/tiny.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/b.nii" --scores "$T/o/bs.nii"
  expect_rc 0
  same_labels "$T/o/as.nii" "$T/o/bs.nii"
  same_labels "$T/o/a.nii" "$T/o/b.nii"
}

# ---- two runs, one path ------------------------------------------------------------------
t_concurrent_force() {
  data; need_swi_features
  seg $(tiny_args) --output "$T/ref.nii"
  expect_rc 0
  local pids=() k
  for k in 1 2 3; do
    "$SWI" segment -q $(tiny_args) --output "$T/o/l.nii" --force >"$T/out$k" 2>"$T/err$k" </dev/null &
    pids+=($!)
  done
  for k in 0 1 2; do
    wait "${pids[$k]}" || { cat "$T/err$((k + 1))"; fail "run $((k + 1)) failed"; }
  done
  cat "$T"/err? >"$T/err"
  no_sanitizer_report
  [ "$(ls -A "$T/o")" = l.nii ] || fail "left behind: $(ls -A "$T/o")"
  cmp -s "$T/o/l.nii" "$T/ref.nii" || fail "the output is not one complete run's labels"
}

# ---- special files and outputs over inputs -----------------------------------------------
# hang_guard ARGS...: swi segment -q ARGS under a 20 s guard (a FIFO opened blocking hangs)
hang_guard() {
  timeout -k 2 20 "$SWI" segment -q "$@" >"$T/out" 2>"$T/err" </dev/null
  rc=$?
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "swi segment $* hung"
}
t_special_files() {
  data; need_swi_features
  mkfifo "$T/f.nii.gz" "$T/m.onnx" "$T/raw.fifo"
  cp "$DATA/tiny.onnx" "$T/c.onnx"
  mkfifo "$T/c.json"
  hang_guard --model "$DATA/tiny.onnx" --input "$T/f.nii.gz" --output "$T/o/l.nii.gz"
  expect_rc 1; one_line_err; expect_err "f.nii.gz: is a FIFO"; empty_dir "$T/o"
  hang_guard --model "$T/m.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz"
  expect_rc 1; one_line_err; expect_err "m.onnx: is a FIFO"; empty_dir "$T/o"
  hang_guard --model "$T/c.onnx" --input "$DATA/vol.nii.gz" --output "$T/o/l.nii.gz"
  expect_rc 1; one_line_err; expect_err "c.json: is a FIFO"; empty_dir "$T/o"
  if grep -q "NRRD.*yes\|ITK.*yes" "$T/ver"; then
    printf 'NRRD0004\ntype: float\ndimension: 3\nsizes: 4 4 4\nencoding: gzip\ndata file: raw.fifo\n\n' \
      >"$T/d.nhdr"
    hang_guard --model "$DATA/tiny.onnx" --input "$T/d.nhdr" --output "$T/o/l.nii.gz"
    expect_rc 1; one_line_err; expect_err "raw.fifo: is a FIFO"; empty_dir "$T/o"
  fi
}
t_outputs_over_inputs() {
  data; need_swi_features
  mkdir -p "$T/w.zarr" "$T/in"
  cp "$DATA/vol.nii.gz" "$T/w.zarr/v.nii.gz"
  cp "$DATA/vol.nii.gz" "$T/in/v.nii.gz"
  ln "$T/in/v.nii.gz" "$T/in/hard.nii.gz"
  local before
  before=$(cat "$T/w.zarr/v.nii.gz" "$T/in/v.nii.gz" | cksum)
  seg --model "$DATA/tiny.onnx" --input "$T/w.zarr/v.nii.gz" --output "$T/w.zarr" --force
  expect_rc 1; one_line_err; expect_err "w.zarr contains --input"
  seg --model "$DATA/tiny.onnx" --input "$T/in/v.nii.gz" --output "$T/o/l.nii.gz" --scores "$T/in/hard.nii.gz" \
    --force
  expect_rc 1; one_line_err; expect_err "hard.nii.gz is the same file as --input"
  # a folder input (a DICOM series' place): nothing below it, even below folders not there yet
  seg --model "$DATA/tiny.onnx" --input "$T/in" --output "$T/in/new/deeper/l.zarr" --force
  expect_rc 1; one_line_err; expect_err "lies inside --input"
  [ "$(cat "$T/w.zarr/v.nii.gz" "$T/in/v.nii.gz" | cksum)" = "$before" ] || fail "an input changed"
  [ "$(ls -A "$T/w.zarr")" = v.nii.gz ] && [ ! -e "$T/in/new" ] || fail "something written beside the inputs"
  empty_dir "$T/o"
}

# store_walk_one ERRNO FORCE: `swi bench` writes a Zarr store (over a complete one with
# FORCE=1) while each counted write, fsync, rename, link and mkdir under the output folder
# fails in turn with ERRNO: exit 1 with one line naming what failed; with FORCE the previous
# store is byte for byte as it was and nothing lies beside it, without it the store is absent
# or marked incomplete, with no temporary left in it. Sets $walked.
store_walk_one() {
  local errno_="$1" force="$2" shim_env="verify_asan_link_order=0:$ASAN_OPTIONS"
  local args=(bench --shape 130,40,40 --classes 4 --roi 16 --no-floor --output-file "$T/o/s.zarr")
  rm -rf "$T/o" "$T/ref" && mkdir "$T/o" "$T/ref"
  if [ "$force" = 1 ]; then
    run "${args[@]}" --predictor atlas
    expect_rc 0
    cp -a "$T/o/s.zarr" "$T/ref/s.zarr"
    args+=(--force)
  fi
  ASAN_OPTIONS="$shim_env" LD_PRELOAD="$IO_SHIM" SWI_FAULT_IO_DIR="$T/o" SWI_FAULT_IO_NAMES=1 \
    SWI_FAULT_IO_COUNT="$T/count" "$SWI" "${args[@]}" >"$T/out" 2>"$T/err" </dev/null
  rc=$?
  expect_rc 0; no_sanitizer_report
  local count bad="" n
  count=$(cat "$T/count")
  [ "${count:-0}" -ge 5 ] || fail "the shim saw only ${count:-0} calls"
  for n in $(seq 1 "$count"); do
    rm -rf "$T/o" && mkdir "$T/o"
    [ "$force" = 1 ] && cp -a "$T/ref/s.zarr" "$T/o/s.zarr"
    ASAN_OPTIONS="$shim_env" LD_PRELOAD="$IO_SHIM" SWI_FAULT_IO_DIR="$T/o" SWI_FAULT_IO_NAMES=1 \
      SWI_FAULT_IO_AT=$n SWI_FAULT_IO_ERRNO=$errno_ "$SWI" "${args[@]}" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    echo "errno $errno_, force $force, call $n of $count fails: exit $rc: $(head -c 300 "$T/err" | tr '\n' ' ')"
    local ok=1
    [ $rc -eq 1 ] || ok=0
    (one_line_err && expect_err "s\.zarr.*(No space left on device|Input/output error)") >/dev/null || ok=0
    if [ "$force" = 1 ]; then
      diff -r "$T/ref/s.zarr" "$T/o/s.zarr" >/dev/null || ok=0
      [ "$(ls -A "$T/o")" = s.zarr ] || ok=0
    else
      [ ! -e "$T/o/s.zarr" ] || [ -e "$T/o/s.zarr/.swi-incomplete" ] || ok=0
      [ -z "$(ls -A "$T/o" | grep -v '^s\.zarr$')" ] || ok=0
      [ -z "$(find "$T/o" -name '.tmp-*' 2>/dev/null)" ] || ok=0
    fi
    [ $ok = 1 ] || { bad="$bad $n"; echo "    BAD: left: [$(cd "$T/o" && find . | head -20 | tr '\n' ' ')]"; }
  done
  [ -z "$bad" ] || fail "store write failures$bad of $count (errno $errno_, force $force) misbehave (see above)"
  walked=$count
}

t_store_write_walk() {
  [ -f "$IO_SHIM" ] || skip "no fault_io shim (SWI_FAULT_IO)"
  "$SWI" --version 2>&1 | grep -q "Zarr.*: yes" || skip "swi built without Zarr"
  local total=0 e f walked
  for f in 1 0; do
    for e in 28 5; do
      store_walk_one "$e" "$f"
      total=$((total + walked))
    done
  done
  echo "store write walk: $total failure points"
}

run_case() {
  local c="$1"
  declare -F "t_$c" >/dev/null || { echo "unknown case '$c'"; exit 2; }
  "t_$c"
}

if [ "$1" = all ]; then
  bad=0
  for c in $("$0" --list); do
    if (T="$WORK/$c"; clean_case_dir "$T"; run_case "$c") >"$WORK/$c.log" 2>&1; then
      echo "PASS $c"
    else
      r=$?
      [ $r -eq 77 ] && echo "SKIP $c: $(tail -1 "$WORK/$c.log")" || { echo "FAIL $c"; sed 's/^/    /' "$WORK/$c.log"; bad=1; }
    fi
  done
  exit $bad
fi
run_case "$1"
echo "PASS"
