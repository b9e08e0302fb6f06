#!/usr/bin/env bash
# run.sh BUILD WORK E2E_DIR CMAKE CC [CFLAGS [SWI DEMO_MODEL]] -- the install_consumer test.
#
# Installs the libswi build BUILD to WORK/prefix, copies this folder to WORK/src (a
# project that knows nothing of the libswi tree), and builds and runs consumer.c three
# ways: with CMake's find_package(swi COMPONENTS ort io), with
# `pkg-config --cflags --libs swi-ort swi-io`, and statically with the archives and
# `pkg-config --static` (which must list every private dependency). Each run segments
# E2E_DIR/volume.nii.gz and must match its reference scores and labels. CFLAGS are added
# to every compile and link (the sanitizer flags of a sanitizer build).
set -eu
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$1" work="$2" e2e="$3" cmake="$4" cc="$5" flags="${6:-}" swi="${7:-}" demo="${8:-}"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/../../backends/ort/tests/lsan.supp:print_suppressions=0"
[ -f "$e2e/unet.onnx" ] || { echo "FAIL: $e2e/unet.onnx not found"; exit 1; }
prefix="$work/prefix"
rm -rf "$work" && mkdir -p "$work/src"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log"; echo "FAIL: cmake --install"; exit 1; }
cp "$here/consumer.c" "$here/pipeline_job.c" "$here/CMakeLists.txt" "$work/src/"

echo "== find_package(swi COMPONENTS ort io)"
"$cmake" -S "$work/src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; echo "FAIL: configuring the consumer"; exit 1; }
"$cmake" --build "$work/cmake-build" >>"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; echo "FAIL: building the consumer"; exit 1; }
"$work/cmake-build/consumer" "$e2e"
if [ -n "$swi" ]; then
  [ -x "$work/cmake-build/pipeline_job" ] || { cat "$work/cmake.log"; echo "FAIL: pipeline_job not built"; exit 1; }
  "$work/cmake-build/pipeline_job" "$e2e" "$demo" "$swi" "$work"
fi

echo "== find_package(swi COMPONENTS nosuch) fails cleanly"
mkdir -p "$work/src-bad"
sed 's/COMPONENTS ort io/COMPONENTS ort io nosuch/' "$here/CMakeLists.txt" >"$work/src-bad/CMakeLists.txt"
cp "$here/consumer.c" "$here/pipeline_job.c" "$work/src-bad/"
if "$cmake" -S "$work/src-bad" -B "$work/bad-build" -DCMAKE_PREFIX_PATH="$prefix" \
     -DCMAKE_C_COMPILER="$cc" >"$work/bad.log" 2>&1; then
  cat "$work/bad.log"; echo "FAIL: an unknown component was accepted"; exit 1
fi
grep -q "nosuch" "$work/bad.log" || { cat "$work/bad.log"; echo "FAIL: no message naming the component"; exit 1; }

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
echo "== pkg-config --cflags --libs swi-ort swi-io"
# shellcheck disable=SC2046,SC2086
"$cc" $flags -o "$work/consumer-pc" "$work/src/consumer.c" $(pkg-config --cflags --libs swi-ort swi-io) \
  -lm -Wl,-rpath,"$prefix/lib"
"$work/consumer-pc" "$e2e"
if [ -n "$swi" ]; then
  echo "== pkg-config --cflags --libs swi-pipeline"
  # shellcheck disable=SC2046,SC2086
  "$cc" $flags -o "$work/pipeline_job-pc" "$work/src/pipeline_job.c" $(pkg-config --cflags --libs swi-pipeline) \
    -lm -Wl,-rpath,"$prefix/lib"
  "$work/pipeline_job-pc" "$e2e" "$demo" "$swi" "$work"
fi

echo "== static archives + pkg-config --static"
libs=$(pkg-config --static --libs swi-ort swi-io | sed -E 's/(^| )-lswi[a-z_]*//g')
# libonnxruntime.so.1 is still a shared library: the program must be able to find it.
rpaths=$(pkg-config --static --libs-only-L swi-ort | tr ' ' '\n' | sed -n 's/^-L\(.*\)/-Wl,-rpath,\1/p')
# shellcheck disable=SC2086
"$cc" $flags -o "$work/consumer-static" "$work/src/consumer.c" $(pkg-config --cflags swi-ort swi-io) \
  "$prefix/lib/libswi_ort.a" "$prefix/lib/libswi_io.a" "$prefix/lib/libswi.a" $libs $rpaths
"$work/consumer-static" "$e2e"
echo "install_consumer: ok"
