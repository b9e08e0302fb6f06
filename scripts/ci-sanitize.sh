#!/usr/bin/env bash
# ci-sanitize.sh -- the whole ctest suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (LeakSanitizer included), then the fault-injection suite under the same sanitizers.
#
#   scripts/ci-sanitize.sh            # from anywhere; exits non-zero on any failure
#
# Stage 1: build-asan   (-DSWI_SANITIZE=ON), every ctest test.
# Stage 2: build-fault  (Debug, -DSWI_SANITIZE=ON -DSWI_FAULT_INJECTION=ON), the tests labelled
#          `fault` (tests/fault: every allocation of core runs and of `swi segment`, write
#          failures, signals, hostile inputs). Skip it with SWI_CI_FAULT=0.
# Environment: SWI_ASAN_BUILD, SWI_FAULT_BUILD (build folders), JOBS (parallelism),
# SWI_GOLDEN_DIR (golden data; default tests/data/golden).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
asan_build="${SWI_ASAN_BUILD:-$root/build-asan}"
fault_build="${SWI_FAULT_BUILD:-$root/build-fault}"
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
extra=()
[ -n "${SWI_GOLDEN_DIR:-}" ] && extra+=("-DSWI_GOLDEN_DIR=$SWI_GOLDEN_DIR")

# Sanitizer reports fail the test that triggers them. ONNX Runtime's own process-lifetime
# allocation is the only suppressed leak (tests/fault/lsan.supp).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$root/tests/fault/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

stage() { printf '\n==== %s\n' "$*"; }

configure_build() { # DIR CMAKE-ARGS...
  local dir="$1"
  shift
  # a folder configured with another generator cannot be reused: start it afresh
  if [ -f "$dir/CMakeCache.txt" ] && [ ${#gen[@]} -gt 0 ] && ! grep -q "CMAKE_GENERATOR:INTERNAL=Ninja" "$dir/CMakeCache.txt"; then
    rm -rf "$dir"
  fi
  cmake -S "$root" -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" "${extra[@]}"
  cmake --build "$dir" -j "$jobs"
}

stage "ASan + UBSan build ($asan_build)"
configure_build "$asan_build" -DSWI_SANITIZE=ON -DSWI_FAULT_INJECTION=OFF
stage "ctest under ASan + UBSan"
ctest --test-dir "$asan_build" --output-on-failure -j "$jobs" --timeout 1800

if [ "${SWI_CI_FAULT:-1}" != 0 ]; then
  stage "ASan + UBSan + fault-injection build ($fault_build)"
  # Debug: unoptimised, so fault_core can tell every allocation call site that got a fault
  configure_build "$fault_build" -DSWI_SANITIZE=ON -DSWI_FAULT_INJECTION=ON -DCMAKE_BUILD_TYPE=Debug
  stage "fault-injection suite (ctest -L fault)"
  ctest --test-dir "$fault_build" --output-on-failure -j "$jobs" -L fault --timeout 1800
fi
stage "sanitizer job passed"
