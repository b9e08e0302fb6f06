#!/usr/bin/env bash
# fuzz/run.sh [SECONDS] [BUILD_DIR] [TARGET...] -- run each libFuzzer target for SECONDS
# (default 60) and fail on any crash, leak, timeout or out-of-memory.
#
# BUILD_DIR (default build-fuzz) is a build configured with clang and -DSWI_FUZZ=ON; the
# targets are BUILD_DIR/fuzz/fuzz_*. Each target starts from its committed seeds
# (fuzz/corpus/<target>/) and a working corpus kept in BUILD_DIR/fuzz/work/<target>/,
# so later runs continue where earlier ones stopped; the seeds are never modified.
# A crashing input is saved as BUILD_DIR/fuzz/artifacts/<target>/crash-* and the log
# as BUILD_DIR/fuzz/logs/<target>.log; reproduce with BUILD_DIR/fuzz/<target> FILE.
# Environment: SWI_FUZZ_JOBS=N runs N targets at a time (default 1).
set -u
here=$(cd "$(dirname "$0")" && pwd)
secs=${1:-60}
build=${2:-$here/../build-fuzz}
shift $(( $# > 2 ? 2 : $# ))
case $secs in '' | *[!0-9]*) echo "run.sh: SECONDS must be a whole number" >&2; exit 2 ;; esac
build=$(cd "$build" 2>/dev/null && pwd) || { echo "run.sh: no build directory ${2:-build-fuzz}" >&2; exit 2; }

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$build"/fuzz/fuzz_*; do
    [ -x "$f" ] && [ -f "$f" ] && targets+=("$(basename "$f")")
  done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "run.sh: no fuzz targets in $build/fuzz (configure with -DCMAKE_C_COMPILER=clang-14 -DSWI_FUZZ=ON and build)" >&2
  exit 2
fi

# Readers under test allocate what headers ask for: a refused allocation must come back as
# NULL (the code's out-of-memory path), not abort the process.
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

run_one() {
  local t=$1 bin="$build/fuzz/$1"
  local work="$build/fuzz/work/$t" art="$build/fuzz/artifacts/$t" log="$build/fuzz/logs/$t.log"
  mkdir -p "$work" "$art" "$(dirname "$log")"
  local seeds=()
  [ -d "$here/corpus/$t" ] && seeds=("$here/corpus/$t")
  # -close_fd_mask=3: the targets' own messages (usage errors, refusals) are not
  # interesting; sanitizer and libFuzzer reports still reach the log.
  "$bin" -max_total_time="$secs" -timeout=30 -rss_limit_mb=3072 -malloc_limit_mb=3072 \
         -max_len=8192 -print_final_stats=1 -close_fd_mask=3 \
         -artifact_prefix="$art/" "$work" "${seeds[@]}" >"$log" 2>&1
  local rc=$?
  local execs speed cov
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  local corpus
  corpus=$(find "$work" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    printf 'PASS %-18s %6ss %10s execs %7s/s  cov %5s  corpus %5s\n' "$t" "$secs" "${execs:-?}" \
           "${speed:-?}" "${cov:-?}" "$corpus"
  else
    printf 'FAIL %-18s exit %d after %s execs; see %s\n' "$t" "$rc" "${execs:-?}" "$log"
    grep -m1 -E 'ERROR|check failed|SUMMARY' "$log" | sed 's/^/     /'
    ls "$art" 2>/dev/null | sed "s|^|     artifact $art/|"
  fi
  return $rc
}

jobs=${SWI_FUZZ_JOBS:-1}
fail=0
pids=()
names=()
for t in "${targets[@]}"; do
  if [ ! -x "$build/fuzz/$t" ]; then
    echo "FAIL $t: not built" && fail=1 && continue
  fi
  if [ "$jobs" -le 1 ]; then
    run_one "$t" || fail=1
  else
    run_one "$t" &
    pids+=($!)
    names+=("$t")
    if [ ${#pids[@]} -ge "$jobs" ]; then
      wait "${pids[0]}" || fail=1
      pids=("${pids[@]:1}")
      names=("${names[@]:1}")
    fi
  fi
done
for p in "${pids[@]}"; do wait "$p" || fail=1; done
exit $fail
