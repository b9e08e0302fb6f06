#!/usr/bin/env bash
# bench/gpu.sh -- swi against MONAI with the network on a CUDA GPU, side by side in one run.
#
#   bench/gpu.sh MONAI_SRC
#
# (a) the seed case: 1x1x384x384x256, 100 classes, roi 128, overlap 0.25, gaussian,
#     argmax, the network x * w[c] on the GPU, sw-batch 4;
# (b) MONAI's UNet (14 classes) on 1x1x256x256x192, roi 128, sw-batch 4.
# Each run is its own process (bench/python/gpu_case.py): wall time, device memory
# (torch.cuda.max_memory_allocated) and host peak RSS; then whether the labels agree.
# Needs the swi package importable (make python, or PYTHONPATH with the built package),
# torch with CUDA and MONAI 1.4.0's source (bench/monai/README.md). Without a CUDA device
# it says so and exits 0. A benchmark, not a test: it fails only when a run fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MONAI_SRC="${1:-${MONAI_SRC:-}}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY=/usr/bin/python3
CASE="$ROOT/bench/python/gpu_case.py"
"$PY" -c "import torch, swi" || { echo "bench/gpu.sh: $PY cannot import torch and swi" >&2; exit 2; }
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "bench/gpu.sh: no CUDA device (torch.cuda.is_available() is False): not run"
  exit 0
fi
[ -n "$MONAI_SRC" ] || { echo "bench/gpu.sh: give MONAI 1.4.0's source folder" >&2; exit 2; }
OUT="${OUT_DIR:-$(mktemp -d)}"
run() { PYTHONPATH="$MONAI_SRC${PYTHONPATH:+:$PYTHONPATH}" "$PY" "$CASE" "$@"; }
echo "== (a) seed case"
A=(--net linear --shape 384,384,256 --classes 100 --roi 128 --overlap 0.25 --mode gaussian --sw-batch 4)
run --impl monai "${A[@]}" --labels "$OUT/a_monai.npy"
run --impl swi "${A[@]}" --labels "$OUT/a_swi.npy"
echo "== (b) MONAI UNet, 14 classes"
B=(--net unet --shape 256,256,192 --classes 14 --roi 128 --overlap 0.25 --mode gaussian --sw-batch 4)
run --impl monai "${B[@]}" --labels "$OUT/b_monai.npy"
run --impl swi "${B[@]}" --labels "$OUT/b_swi.npy"
"$PY" - "$OUT" <<'PYEOF'
import sys
import numpy as np
d = sys.argv[1]
for case in ("a", "b"):
    m, s = np.load(f"{d}/{case}_monai.npy"), np.load(f"{d}/{case}_swi.npy")
    print(f"({case}) labels agree on {np.mean(m == s) * 100:.4f} % of voxels")
PYEOF
