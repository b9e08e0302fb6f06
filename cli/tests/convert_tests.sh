#!/usr/bin/env bash
# convert_tests.sh -- `swi convert`: the subcommand that runs `python3 -m swi convert ...`.
# Its own behaviour (help, usage, the interpreter or the package missing, the exit status
# handed back) needs no PyTorch; the conversion itself is python/tests/test_nnunet_convert.py.
#
#   convert_tests.sh --list | CASE
#
# Environment (cli/tests/CMakeLists.txt): SWI (the binary), SWI_TEST_WORK (scratch).
set -u
CASES=(convert_help convert_usage convert_unknown_source convert_no_python convert_no_package
       convert_exit_status convert_sigterm_ends_converter convert_sigint_ends_converter
       convert_stubborn_converter_killed)
if [ "${1:-}" = --list ]; then printf '%s\n' "${CASES[@]}"; exit 0; fi
fail() { echo "FAIL: $*" >&2; exit 1; }
T="${SWI_TEST_WORK:-/tmp}/convert/$1"
rm -rf "$T" && mkdir -p "$T" || exit 1
run() { "$SWI" "$@" >"$T/out" 2>"$T/err" </dev/null; rc=$?; }
lines() { wc -l <"$1"; }

t_convert_help() {
  run convert --help
  [ $rc -eq 0 ] || fail "exit $rc"
  grep -q "swi convert nnunet MODEL_DIR --output OUT_DIR" "$T/out" || fail "no usage line"
  grep -q "SWI_PYTHON" "$T/out" || fail "SWI_PYTHON not documented"
  grep -q "Examples:" "$T/out" || fail "no examples"
  run --help
  grep -q "convert" "$T/out" || fail "swi --help does not list convert"
}
t_convert_usage() {
  run convert
  [ $rc -eq 2 ] || fail "exit $rc"
  grep -q "usage: swi convert nnunet" "$T/err" || fail "no usage on stderr"
}
t_convert_unknown_source() {
  run convert monai x --output y
  [ $rc -eq 2 ] && [ "$(lines "$T/err")" -eq 1 ] || fail "exit $rc, $(lines "$T/err") lines"
  grep -q "unknown source 'monai'" "$T/err" || fail "$(cat "$T/err")"
}
t_convert_no_python() {
  SWI_PYTHON="$T/no-such-python" run convert nnunet x --output "$T/o"
  [ $rc -eq 1 ] && [ "$(lines "$T/err")" -eq 1 ] || fail "exit $rc, $(lines "$T/err") lines"
  grep -q "cannot run $T/no-such-python" "$T/err" || fail "$(cat "$T/err")"
  [ ! -e "$T/o" ] || fail "output written"
}
# a stand-in interpreter: runs the real python3 with an empty path, so `import swi` fails
t_convert_no_package() {
  command -v python3 >/dev/null || exit 77
  mkdir -p "$T/empty"
  printf '#!/bin/sh\ncd "%s" && PYTHONPATH="%s" exec python3 -I "$@"\n' "$T/empty" "$T/empty" >"$T/py"
  chmod +x "$T/py"
  SWI_PYTHON="$T/py" run convert nnunet x --output "$T/o"
  [ $rc -eq 1 ] && [ "$(lines "$T/err")" -eq 1 ] || fail "exit $rc, $(cat "$T/err")"
  grep -q "swi convert: the swi Python package is not importable" "$T/err" || fail "$(cat "$T/err")"
  [ ! -e "$T/o" ] || fail "output written"
}
# the converter's status comes back as swi's, its arguments passed as given
t_convert_exit_status() {
  printf '#!/bin/sh\nprintf "%%s\\n" "$@" > "%s/args"\nexit 3\n' "$T" >"$T/py"
  chmod +x "$T/py"
  SWI_PYTHON="$T/py" run convert nnunet "a b" --output o --folds 0,1
  [ $rc -eq 3 ] || fail "exit $rc, expected 3"
  # -c BOOT (a few lines of Python), then the command's arguments one per line
  [ "$(head -n 1 "$T/args")" = "-c" ] || fail "not run as python -c: $(head -n 1 "$T/args")"
  [ "$(tail -n 7 "$T/args" | tr '\n' '|')" = "convert|nnunet|a b|--output|o|--folds|0,1|" ] \
    || fail "arguments: $(tr '\n' '|' <"$T/args")"
}
# A stand-in converter (the real BOOT, a fake swi package) that works in a temporary beside
# the output, as the real one does, slowly: it writes its pid, then after 3 s moves the
# temporary to the output and writes a marker.
fake_converter() {
  command -v python3 >/dev/null || exit 77
  mkdir -p "$T/pkg/swi"
  : >"$T/pkg/swi/__init__.py"
  cat >"$T/pkg/swi/__main__.py" <<PY
import os, shutil, sys, tempfile, time
def main(argv, prog):
    out = argv[argv.index("--output") + 1]
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(out) + ".", dir=os.path.dirname(out))
    try:
        open(os.path.join(tmp, "fold_0.onnx"), "w").write("partial")
        open("$T/pid", "w").write(str(os.getpid()))
        time.sleep(3)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    open("$T/marker", "w").write("done")
    return 0
PY
  printf '#!/bin/sh\nPYTHONPATH="%s" exec python3 "$@"\n' "$T/pkg" >"$T/py"
  chmod +x "$T/py"
}
# swi convert in the background until the converter has started; then signal swi alone
start_convert() {
  SWI_PYTHON="$T/py" "$SWI" convert nnunet "$T/model" --output "$T/out" >"$T/out.log" 2>"$T/err" </dev/null &
  spid=$!
  for _ in $(seq 100); do [ -s "$T/pid" ] && break; sleep 0.1; done
  [ -s "$T/pid" ] || fail "the converter did not start: $(cat "$T/err")"
  cpid=$(cat "$T/pid")
}
# a process still running (a zombie, ended but not yet reaped by its new parent, is gone)
running() { kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
stopped_clean() { # $1: the expected status
  wait "$spid"; rc=$?
  [ $rc -eq "$1" ] || fail "exit $rc, expected $1: $(cat "$T/err")"
  ! running "$cpid" || { kill -9 "$cpid"; fail "the converter (pid $cpid) outlived swi"; }
  sleep 3.5 # past the converter's 3 s
  [ ! -e "$T/marker" ] || fail "the converter went on after swi ended"
  [ ! -e "$T/out" ] || fail "output written"
  left=$(find "$T" -maxdepth 1 -name '.out.*')
  [ -z "$left" ] || fail "work in progress left: $left"
}
t_convert_sigterm_ends_converter() {
  fake_converter
  start_convert
  kill -TERM "$spid"
  stopped_clean 143
}
t_convert_sigint_ends_converter() {
  fake_converter
  start_convert
  kill -INT "$spid"
  stopped_clean 130
}
# one that ignores the signal is killed (after swi's grace) and waited for, with its group
t_convert_stubborn_converter_killed() {
  printf '#!/bin/sh\ntrap "" TERM\necho $$ >"%s/pid"\nsleep 30 &\necho $! >"%s/sleeper"\nwait\ntouch "%s/marker"\n' \
    "$T" "$T" "$T" >"$T/py"
  chmod +x "$T/py"
  start_convert
  kill -TERM "$spid"
  wait "$spid"; rc=$?
  [ $rc -eq 143 ] || fail "exit $rc, expected 143: $(cat "$T/err")"
  ! running "$cpid" || { kill -9 "$cpid"; fail "the converter (pid $cpid) outlived swi"; }
  s=$(cat "$T/sleeper")
  ! running "$s" || { kill -9 "$s"; fail "the converter's child (pid $s) outlived swi"; }
  grep -Eq "stopping now|was killed" "$T/err" || fail "$(cat "$T/err")"
}
"t_$1"
