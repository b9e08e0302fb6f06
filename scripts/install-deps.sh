#!/usr/bin/env bash
# install-deps.sh -- install what building and testing libswi needs, on Debian 12.
#
# Idempotent and safe to re-run: apt packages are installed only when missing, and
# ONNX Runtime (from the npm package com.github.asus4.onnxruntime, which ships the
# official Linux x64 libonnxruntime.so and the C headers) is unpacked into the
# ignored directory .deps/onnxruntime/{include,lib} only when not already there; NiiVue's
# browser build (npm @niivue/niivue, dist/niivue.umd.js), which swi inlines into its review
# pages (--report), into .deps/niivue likewise.
#
#   scripts/install-deps.sh            # everything
#   SWI_SKIP_APT=1 scripts/install-deps.sh   # only ONNX Runtime
#   SWI_SKIP_ORT=1 scripts/install-deps.sh   # only apt packages (and NiiVue)
#   SWI_SKIP_NIIVUE=1 scripts/install-deps.sh   # no NiiVue
#
# Run as root (or with sudo available). Quiet unless something fails.
set -euo pipefail

# ---- Debian packages: the ONE list; add yours here -------------------------
APT_PACKAGES=(
  # build
  cmake gcc make pkg-config
  # swi CLI: NIfTI-1/-2 + gzip (niftilib: libnifti2 reads both), PNG previews
  libnifti2-dev libniftiio-dev libznz-dev zlib1g-dev libpng-dev
  # CLI tests: tiny NIfTI volumes and ONNX models made on the fly
  python3 python3-numpy python3-nibabel python3-onnx
  # swi export: ONNX read/written with protobuf-c and the onnx.proto libonnx-dev ships
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev
  # python/: the swi package (make python) and its tests
  python3-dev python3-venv python3-setuptools python3-pytest python3-torch python3-tqdm
  # nnU-Net job tests: its resampling and fill-holes restated with scipy (python/tests/nnunet_pyref.py)
  python3-scipy
  # python/: the wheel (make wheel: pip wheel, no build isolation; patchelf sets the run paths
  # of the libraries it carries) and its typing check
  python3-pip python3-wheel mypy patchelf
  # python/: swi.dask, one part box a task on a dask.distributed cluster (its tests)
  python3-dask python3-distributed
  # swi segment/plan/info/export: model cards are JSON (optional: cards refused without it)
  libjansson-dev
  # swi_io: NRRD, MetaImage and DICOM series through ITK's image I/O (brings GDCM; optional,
  # detected at configure time); its tests make DICOM series with pydicom
  libinsighttoolkit5-dev python3-pydicom
  # swi_io: DICOM SEG output (--output seg.dcm) through DCMTK's dcmseg (optional, detected)
  libdcmtk-dev
  # swi_io stores (io/zarr_*.c, io/hdf5_*.c): Zarr metadata, blosc/zstd chunks, HDF5 datasets
  libjansson-dev libblosc-dev libzstd-dev libhdf5-dev
  # io_stores, cli_stores tests: independent Zarr and HDF5 readers
  python3-zarr python3-h5py
  # backends/dnnl: networks run with oneDNN primitives (optional, detected at configure time)
  libdnnl-dev
  # swi ... under mpirun (cli/mpi_job.c, optional) and its test
  openmpi-bin libopenmpi-dev
  # swi_io: .nii.gz read and written with libdeflate (several times zlib's speed; optional)
  libdeflate-dev
  # swi segment --save-probabilities with an nnU-Net model: the .npz through libzip (optional)
  libzip-dev
  # report tests: the review pages (--report) loaded in headless Chromium
  chromium
)

ORT_NPM_PACKAGE="com.github.asus4.onnxruntime"
ORT_NPM_VERSION="${ORT_NPM_VERSION:-0.4.9}"
NIIVUE_NPM_PACKAGE="@niivue/niivue"
NIIVUE_NPM_VERSION="${NIIVUE_NPM_VERSION:-0.69.0}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.deps"
ORT_DIR="$DEPS/onnxruntime"
NIIVUE_DIR="$DEPS/niivue"

say() { printf 'install-deps: %s\n' "$*" >&2; }
die() { printf 'install-deps: error: %s\n' "$*" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run as root"
  SUDO="sudo"
fi

apt_install() {
  local missing=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "${SWI_APT_UPDATED:-}" ]; then
    $SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq >/dev/null || die "apt-get update failed"
    SWI_APT_UPDATED=1
  fi
  # Another apt run (a colleague's, unattended-upgrades) may hold the lock: wait for it.
  local log
  log="$(mktemp)"
  if ! $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends \
      "${missing[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    die "apt-get install ${missing[*]} failed"
  fi
  rm -f "$log"
}

if [ -z "${SWI_SKIP_APT:-}" ]; then
  apt_install "${APT_PACKAGES[@]}"
fi

# ---- npm packages: ONNX Runtime, NiiVue ------------------------------------
# Every temporary folder made below is removed at exit, whatever happens.
TMP_DIRS=()
trap 'rm -rf "${TMP_DIRS[@]}"' EXIT

# npm pack PACKAGE@VERSION into a fresh temporary folder under .deps/ (WHAT names it in
# messages): sets PACK_DIR to the folder and PACK_TGZ to the tarball.
npm_pack() {
  local pkg="$1" ver="$2" what="$3"
  if ! command -v npm >/dev/null 2>&1; then
    [ -z "${SWI_SKIP_APT:-}" ] || die "npm is needed to fetch $what"
    apt_install npm
  fi
  mkdir -p "$DEPS"
  PACK_DIR="$(mktemp -d "$DEPS/tmp.XXXXXX")"
  TMP_DIRS+=("$PACK_DIR")
  (cd "$PACK_DIR" && npm pack --silent "$pkg@$ver" >/dev/null 2>npm.log) \
    || { cat "$PACK_DIR/npm.log" >&2; die "npm pack $pkg failed"; }
  PACK_TGZ="$(ls "$PACK_DIR"/*.tgz 2>/dev/null | head -n1)"
  [ -n "$PACK_TGZ" ] || die "npm pack $pkg produced no tarball"
}

# ---- ONNX Runtime -----------------------------------------------------------
ort_ok() {
  [ -f "$ORT_DIR/include/onnxruntime_c_api.h" ] &&
  [ -f "$ORT_DIR/lib/libonnxruntime.so.1" ] &&
  [ -f "$ORT_DIR/VERSION" ] && [ "$(cat "$ORT_DIR/VERSION")" = "$ORT_NPM_VERSION" ]
}

if [ -z "${SWI_SKIP_ORT:-}" ] && ! ort_ok; then
  say "fetching ONNX Runtime ($ORT_NPM_PACKAGE@$ORT_NPM_VERSION, ~150 MB)"
  npm_pack "$ORT_NPM_PACKAGE" "$ORT_NPM_VERSION" "ONNX Runtime"
  tmp="$PACK_DIR" tgz="$PACK_TGZ"
  # The Linux x64 library, and the C headers (shipped inside the iOS framework;
  # the C API headers are platform independent).
  tar -xzf "$tgz" -C "$tmp" --wildcards 'package/Plugins/Linux/x64/*.so' \
    'package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers/*.h' \
    || die "unexpected layout of $ORT_NPM_PACKAGE"
  lib="$(find "$tmp/package" -path '*Linux/x64*' -name 'libonnxruntime.so*' | head -n1)"
  hdr="$(find "$tmp/package" -name onnxruntime_c_api.h | head -n1)"
  [ -n "$lib" ] && [ -n "$hdr" ] || die "libonnxruntime.so or onnxruntime_c_api.h not found in the package"
  stage="$tmp/onnxruntime"
  mkdir -p "$stage/lib" "$stage/include"
  cp "$(dirname "$hdr")"/*.h "$stage/include/"
  # The library's soname is libonnxruntime.so.1: ship that name, and the
  # development symlink for linking.
  cp "$lib" "$stage/lib/libonnxruntime.so.1"
  ln -s libonnxruntime.so.1 "$stage/lib/libonnxruntime.so"
  shared="$(dirname "$lib")/libonnxruntime_providers_shared.so"
  [ -f "$shared" ] && cp "$shared" "$stage/lib/"
  echo "$ORT_NPM_VERSION" > "$stage/VERSION"
  rm -rf "$ORT_DIR"
  mv "$stage" "$ORT_DIR"
  say "ONNX Runtime installed in $ORT_DIR"
fi

# ---- NiiVue (the review pages' viewer) ----------------------------------------
niivue_ok() {
  [ -f "$NIIVUE_DIR/niivue.umd.js" ] && [ -f "$NIIVUE_DIR/VERSION" ] &&
  [ "$(cat "$NIIVUE_DIR/VERSION")" = "$NIIVUE_NPM_VERSION" ]
}

if [ -z "${SWI_SKIP_NIIVUE:-}" ] && ! niivue_ok; then
  say "fetching NiiVue ($NIIVUE_NPM_PACKAGE@$NIIVUE_NPM_VERSION, ~10 MB)"
  npm_pack "$NIIVUE_NPM_PACKAGE" "$NIIVUE_NPM_VERSION" "NiiVue"
  ntmp="$PACK_DIR" ntgz="$PACK_TGZ"
  # The UMD build: one self-contained script (no module imports, no workers fetched) that
  # a page can inline and run from file:// with no network.
  tar -xzf "$ntgz" -C "$ntmp" package/dist/niivue.umd.js package/LICENSE 2>/dev/null ||
    tar -xzf "$ntgz" -C "$ntmp" package/dist/niivue.umd.js || die "unexpected layout of $NIIVUE_NPM_PACKAGE"
  nstage="$ntmp/niivue"
  mkdir -p "$nstage"
  cp "$ntmp/package/dist/niivue.umd.js" "$nstage/"
  [ -f "$ntmp/package/LICENSE" ] && cp "$ntmp/package/LICENSE" "$nstage/"
  echo "$NIIVUE_NPM_VERSION" > "$nstage/VERSION"
  rm -rf "$NIIVUE_DIR"
  mv "$nstage" "$NIIVUE_DIR"
  rm -rf "$ntmp"
  say "NiiVue installed in $NIIVUE_DIR"
fi
