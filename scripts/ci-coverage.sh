#!/usr/bin/env bash
# ci-coverage.sh -- line coverage of the core library (src/) by the whole ctest suite.
#
#   scripts/ci-coverage.sh            # non-zero on a failing test or src/ under the floor
#
# Builds SWI_COVERAGE_BUILD afresh (default build-coverage: Debug, -DSWI_COVERAGE=ON, i.e. gcc
# --coverage -O0), runs every ctest test, prints gcovr's per-file table for src/ and
# fails when src/'s line coverage is below SWI_COVERAGE_MIN percent (default 90).
# Only src/ is measured: the CLI, the exporter and the tests are clients of the library.
# Needs gcovr (Debian: gcovr).
# Environment: SWI_COVERAGE_BUILD, SWI_COVERAGE_MIN, JOBS, SWI_GOLDEN_DIR (golden data;
# default tests/data/golden).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SWI_COVERAGE_BUILD:-$root/build-coverage}"
min="${SWI_COVERAGE_MIN:-90}"
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
command -v gcovr >/dev/null 2>&1 || { echo "ci-coverage: gcovr not found (apt-get install gcovr)" >&2; exit 1; }
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
# always a fresh folder: the notes (.gcno) of a removed or renamed source would be counted
rm -rf "$build"
extra=()
[ -n "${SWI_GOLDEN_DIR:-}" ] && extra+=("-DSWI_GOLDEN_DIR=$SWI_GOLDEN_DIR")

cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Debug -DSWI_COVERAGE=ON \
      -DSWI_SANITIZE=OFF -DSWI_FAULT_INJECTION=OFF "${extra[@]}"
cmake --build "$build" -j "$jobs"

ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 1800

echo "== line coverage of src/ (floor ${min} %)"
gcovr --root "$root" --filter "$root/src/" --txt --print-summary --fail-under-line "$min" "$build" ||
  { echo "ci-coverage: line coverage of src/ is below ${min} % (or gcovr failed)" >&2; exit 1; }
