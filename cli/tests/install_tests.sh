#!/usr/bin/env bash
# install_tests.sh BUILD SRC CMAKE GOLDEN [PYTHON] -- the install_swi test: an installed swi
# needs neither the source tree nor the build tree.
#
# Installs BUILD to a prefix outside both trees, copies what the runs need (models/demo.onnx,
# a volume, a small nnU-Net model folder) outside too, then hides SRC and BUILD (a private
# mount namespace, `unshare -m`, with an empty tmpfs over each) and, from another folder,
# runs the installed swi: `swi segment ... --report` must write a page with NiiVue's code
# (share/swi/niivue.umd.js), ONNX Runtime must load from the prefix (RUNPATH $ORIGIN/../lib),
# `swi demo` must find its network (share/swi/models),
# and `swi convert nnunet` must run the Python swi was built for with the installed package
# (lib/swi/python) while the python3 first on PATH is one without swi. Skipped (77) when
# mount namespaces are not permitted. PYTHON (the configured Python3_EXECUTABLE, optional)
# is needed for the conversion part (PyTorch); without the installed package it is skipped.
set -u
build="$1" src="$2" cmake="$3" golden="$4" py="${5:-}"
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }
command -v unshare >/dev/null || skip "no unshare"
unshare -m true 2>/dev/null || skip "mount namespaces not permitted (unshare -m)"
work=$(mktemp -d "${TMPDIR:-/tmp}/swi-install.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
case "$work/" in "$src"/* | "$build"/*) fail "$work lies inside the trees" ;; esac
prefix="$work/prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install"; }
swi="$prefix/bin/swi"
[ -x "$swi" ] || fail "no bin/swi in the install"
# no path into either tree in the run paths of what runs
for f in "$swi" "$prefix"/lib/swi/python/swi/_swi*.so; do
  [ -f "$f" ] || continue
  rp=$(readelf -d "$f" | grep -E 'R(UN)?PATH' || true)
  case "$rp" in *"$src"* | *"$build"*) fail "$f: run path into the trees: $rp" ;; esac
done
out="$work/data"
mkdir -p "$out/run"
cp "$src/models/demo.onnx" "$out/demo.onnx" && cp "$src/models/demo.json" "$out/demo.json" 2>/dev/null
cp "$golden/e2e/volume.nii.gz" "$out/volume.nii.gz" || fail "no golden volume"
nn="$src/tests/data/nnunet-models/Dataset990_SwiTinyCT/nnUNetTrainer__nnUNetPlans__3d_fullres"
convert=0
if [ -n "$py" ] && [ -f "$prefix/lib/swi/python/swi/__init__.py" ] && [ -d "$nn" ] &&
   "$py" -c 'import torch, onnx' 2>/dev/null; then
  cp -r "$nn" "$out/nnunet" && convert=1
fi
# a python3 first on PATH that has no swi (and says when it is run)
mkdir -p "$out/bin"
printf '#!/bin/sh\necho "the python3 on PATH was run" >>"%s/wrong-python"\nexit 1\n' "$out" >"$out/bin/python3"
chmod +x "$out/bin/python3"

cat >"$work/inside.sh" <<'SH'
set -u
src="$1" build="$2" swi="$3" out="$4" convert="$5"
mount -t tmpfs none "$src" || exit 3
case "$build/" in "$src"/*) ;; *) mount -t tmpfs none "$build" || exit 3 ;; esac
[ ! -e "$src/models/demo.onnx" ] || { echo "FAIL: the source tree is still visible"; exit 1; }
cd "$out/run" || exit 1
unset SWI_NIIVUE_JS SWI_PYTHON PYTHONPATH LD_LIBRARY_PATH
export PATH="$out/bin:$PATH"
"$swi" segment -q --model "$out/demo.onnx" --input "$out/volume.nii.gz" --output labels.nii.gz \
  --report page.html 2>err.txt || { cat err.txt; echo "FAIL: swi segment --report"; exit 1; }
[ -s labels.nii.gz ] || { echo "FAIL: no labels"; exit 1; }
grep -q "niivue" page.html 2>/dev/null && [ "$(wc -c <page.html)" -gt 100000 ] ||
  { cat err.txt; echo "FAIL: the page lacks NiiVue's code"; exit 1; }
# swi demo's bundled network (share/swi/models)
"$swi" demo --output-dir demo --size 32,32,32 -q >demo.txt 2>&1
rc=$?
if grep -q "phantom generator" demo.txt && [ $rc -ne 0 ]; then
  echo "demo: skipped (built without the phantom generator)"
else
  [ $rc -eq 0 ] && [ -s demo/demo_labels.nii.gz ] || { cat demo.txt; echo "FAIL: swi demo"; exit 1; }
  echo "demo: ok"
fi
if [ "$convert" = 1 ]; then
  "$swi" convert nnunet "$out/nnunet" --output converted --folds 0 >conv.txt 2>&1 ||
    { cat conv.txt; echo "FAIL: swi convert nnunet"; exit 1; }
  [ -f converted/nnunet.json ] && [ -f converted/fold_0.onnx ] || { cat conv.txt; echo "FAIL: nothing converted"; exit 1; }
  [ ! -e "$out/wrong-python" ] || { echo "FAIL: swi convert ran the python3 on PATH"; exit 1; }
  echo "convert: ok"
else
  echo "convert: skipped (no installed Python package, or no PyTorch/onnx)"
fi
echo "report: ok"
SH
unshare -m bash "$work/inside.sh" "$src" "$build" "$swi" "$out" "$convert"
rc=$?
[ $rc -eq 3 ] && skip "cannot mount a tmpfs in the namespace"
[ $rc -eq 0 ] || exit 1
echo "install_swi: ok"
