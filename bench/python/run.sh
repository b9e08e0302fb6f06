#!/usr/bin/env bash
# bench/python/run.sh -- the Python package's benchmarks (issue 16), one process per run.
#
#   bench/python/run.sh [MONAI_SRC] [SWI_BINARY]
#
# (a) 256x256x160, 32 classes, roi 96, overlap 0.25, gaussian, sw-batch 2, 2 threads,
#     predictor x * w[c] in torch, argmax wanted: MONAI (sliding_window_inference then
#     argmax), swi (reduce="argmax"), the predictor alone on the same windows, and
#     `swi bench` (engine alone) when SWI_BINARY is given;
# (b) the seed case 384x384x256, 100 classes, roi 128 through Python: peak RSS;
# (c) MONAI's tests/test_sliding_window_inference.py with swi swapped in.
# Needs the package importable (make python, or PYTHONPATH=python after an in-place
# build); MONAI_SRC is MONAI 1.4.0's source (bench/monai/README.md); parts needing it are
# skipped without it. A benchmark, not a test: it fails only when a run fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MONAI_SRC="${1:-${MONAI_SRC:-}}"
SWI="${2:-${SWI:-}}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY=/usr/bin/python3
CASE="$ROOT/bench/python/bench_case.py"
A=(--shape 256,256,160 --classes 32 --roi 96 --overlap 0.25 --mode gaussian --sw-batch 2 --threads 2)
SEED=(--shape 384,384,256 --classes 100 --roi 128 --overlap 0.25 --mode gaussian --sw-batch 1 --threads 2)

echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== (a) ${A[*]}"
if [ -n "$MONAI_SRC" ]; then
  PYTHONPATH="$MONAI_SRC" "$PY" "$CASE" --impl monai "${A[@]}"
fi
"$PY" "$CASE" --impl swi "${A[@]}"
"$PY" "$CASE" --impl swi --order auto "${A[@]}"
"$PY" "$CASE" --impl predictor "${A[@]}"
if [ -n "$SWI" ]; then
  "$SWI" bench --shape 256,256,160 --classes 32 --roi 96 --overlap 0.25 --mode gaussian \
    --sw-batch 2 --threads 2 --order 0,1,2 --no-floor | tail -n1
fi
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== (b) seed ${SEED[*]}"
"$PY" "$CASE" --impl swi "${SEED[@]}"
"$PY" "$CASE" --impl swi --order auto "${SEED[@]}"
if [ -n "$MONAI_SRC" ]; then
  echo "== (c) MONAI's unit tests with swi"
  PYTHONPATH="$MONAI_SRC" "$PY" "$ROOT/bench/python/monai_unit_tests.py" 2>/dev/null
fi
