#!/usr/bin/env bash
# ci-fuzz.sh -- build the libFuzzer targets with clang and run each for a bounded time.
#
#   scripts/ci-fuzz.sh [SECONDS]      # default 60 s per target; non-zero on any crash
#
# Needs clang (clang-14 preferred) with its compiler-rt (Debian: clang-14
# libclang-rt-14-dev). Builds SWI_FUZZ_BUILD (default build-fuzz) with -DSWI_FUZZ=ON and
# runs fuzz/run.sh, which starts every target from its seeds in fuzz/corpus/, keeps the
# grown corpus in the build folder and saves crashing inputs under
# SWI_FUZZ_BUILD/fuzz/artifacts/ (keep them as CI artifacts).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
secs="${1:-${SWI_FUZZ_SECONDS:-60}}"
build="${SWI_FUZZ_BUILD:-$root/build-fuzz}"
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
cc="${SWI_FUZZ_CC:-}"
if [ -z "$cc" ]; then
  for c in clang-14 clang; do
    command -v "$c" >/dev/null 2>&1 && { cc="$c"; break; }
  done
fi
[ -n "$cc" ] || { echo "ci-fuzz: clang not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 1; }
# libFuzzer's runtime must be there: a one-line program proves it
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
"$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2>"$probe/err" ||
  { cat "$probe/err" >&2; echo "ci-fuzz: $cc cannot link libFuzzer (apt-get install libclang-rt-14-dev)" >&2; exit 1; }

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
if [ -f "$build/CMakeCache.txt" ] && ! grep -q "SWI_FUZZ:BOOL=ON" "$build/CMakeCache.txt"; then
  rm -rf "$build"
fi
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DSWI_FUZZ=ON -DSWI_SANITIZE=OFF -DSWI_FAULT_INJECTION=OFF
targets=$(cd "$root/fuzz" && ls fuzz_*.c | sed 's/\.c$//')
built=()
for t in $targets; do
  if cmake --build "$build" -j "$jobs" --target "$t" >"$build/build-$t.log" 2>&1; then
    built+=("$t")
  elif grep -q "unknown target\|No rule to make target" "$build/build-$t.log"; then
    echo "ci-fuzz: $t not configured (its component or dependency is missing): skipped"
  else
    cat "$build/build-$t.log" >&2
    echo "ci-fuzz: building $t failed" >&2
    exit 1
  fi
done
[ ${#built[@]} -gt 0 ] || { echo "ci-fuzz: no fuzz target built" >&2; exit 1; }
status=0
"$root/fuzz/run.sh" "$secs" "$build" "${built[@]}" || status=1

# The nnU-Net converter's inputs (Python): python/tests/test_convert_fuzz.py with about 20
# cases a second for as long, when the package is built (SWI_PYTHON_BUILD, default
# build/python) and /usr/bin/python3 has torch and onnx. The seed is printed to rerun a failure.
pybuild="${SWI_PYTHON_BUILD:-$root/build/python}"
if [ -f "$pybuild/swi/_nnunet_inputs.py" ] && /usr/bin/python3 -c "import torch, onnx, pytest" 2>/dev/null; then
  seed="${SWI_CONVERT_FUZZ_SEED:-$(date +%s)}"
  echo "ci-fuzz: convert_fuzz: $((secs * 20)) cases, SWI_CONVERT_FUZZ_SEED=$seed"
  SWI_CONVERT_FUZZ_CASES=$((secs * 20)) SWI_CONVERT_FUZZ_SEED="$seed" PYTHONPATH="$pybuild" \
    /usr/bin/python3 -m pytest -q -s -p no:cacheprovider "$root/python/tests/test_convert_fuzz.py" || status=1
else
  echo "ci-fuzz: convert_fuzz: skipped (needs $pybuild/swi built and /usr/bin/python3 with torch, onnx, pytest)"
fi
exit $status
