#!/usr/bin/env bash
# ci-valgrind.sh -- the golden suite and a few unit tests under valgrind memcheck: no
# invalid access, no use of uninitialised values, no leak.
#
#   scripts/ci-valgrind.sh            # exits non-zero on any error or leak
#
# Builds a plain (unsanitized) RelWithDebInfo tree in SWI_VALGRIND_BUILD (default
# build-valgrind), then runs under `valgrind --tool=memcheck --leak-check=full
# --error-exitcode=1`:
#   - swi-golden over every case of SWI_GOLDEN_DIR/cases (default tests/data/golden),
#     blended scores and argmax labels, with 1 and 3 threads;
#   - the unit tests test_case_file, test_layout, test_errors and test_cellmem.
# Environment: SWI_GOLDEN_DIR, SWI_VALGRIND_BUILD, JOBS, VALGRIND (the valgrind binary).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SWI_VALGRIND_BUILD:-$root/build-valgrind}"
golden="${SWI_GOLDEN_DIR:-$root/tests/data/golden}"
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
vg="${VALGRIND:-valgrind}"
command -v "$vg" >/dev/null 2>&1 || { echo "ci-valgrind: valgrind not found (apt-get install valgrind)" >&2; exit 1; }
[ -d "$golden/cases" ] || { echo "ci-valgrind: no golden cases at $golden/cases (set SWI_GOLDEN_DIR)" >&2; exit 1; }
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
if [ -f "$build/CMakeCache.txt" ] && [ ${#gen[@]} -gt 0 ] && ! grep -q "CMAKE_GENERATOR:INTERNAL=Ninja" "$build/CMakeCache.txt"; then
  rm -rf "$build"
fi

cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSWI_SANITIZE=OFF \
      -DSWI_FAULT_INJECTION=OFF -DSWI_GOLDEN_DIR="$golden"
cmake --build "$build" -j "$jobs" --target swi-golden test_case_file test_layout test_errors test_cellmem

logs="$build/valgrind"
rm -rf "$logs"
mkdir -p "$logs"
fail=0
# memcheck NAME COMMAND...: run under valgrind, log to $logs/NAME.log, record a failure
memcheck() {
  local name="$1"
  shift
  if "$vg" --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect,possible \
       --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes \
       --error-exitcode=1 --num-callers=30 --log-file="$logs/$name.log" "$@" >"$logs/$name.out" 2>&1; then
    echo "PASS $name"
  else
    echo "FAIL $name (exit $?); valgrind log: $logs/$name.log"
    grep -E "^==[0-9]+== (Invalid|Conditional|Use of|Mismatched|Syscall|.*definitely|.*indirectly|.*possibly|ERROR SUMMARY)" \
      "$logs/$name.log" | head -20 | sed 's/^/    /'
    tail -3 "$logs/$name.out" | sed 's/^/    /'
    fail=1
  fi
}

cases=("$golden"/cases/*/)
echo "valgrind memcheck: ${#cases[@]} golden cases"
memcheck golden_scores "$build/swi-golden" --threads 1 "${cases[@]}"
memcheck golden_scores_3threads "$build/swi-golden" --threads 3 "${cases[@]}"
memcheck golden_argmax "$build/swi-golden" --reduce argmax --threads 2 "${cases[@]}"
memcheck test_case_file "$build/test_case_file"
memcheck test_layout "$build/test_layout"
memcheck test_errors "$build/test_errors"
memcheck test_cellmem "$build/test_cellmem"
exit $fail
