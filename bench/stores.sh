#!/usr/bin/env bash
# bench/stores.sh [BUILD_DIR] [D,H,W] [WORK_DIR] -- swi bench through chunked stores: a
# uint16 Zarr volume (generated chunk by chunk with python3-zarr, 64^3 chunks, blosc lz4),
# 8 classes, roi 128, overlap 0.25, gaussian, argmax written to a Zarr label store through
# `swi bench --input`, against the same work on a volume generated in memory
# (`swi bench --shape`). Prints each run's last line (seconds, peak RSS) and the time
# ratio; deletes the volume and the labels at the end. The default 2048,2048,512 needs
# about 4.5 GB of disk and 10+ minutes on 2 cores; the in-memory run of that size needs
# 16 GiB for its float32 input, so pass a smaller D,H,W for a direct comparison.
set -euo pipefail
BUILD="${1:-build}"
SIZE="${2:-2048,2048,512}"
WORK="${3:-$(mktemp -d "${TMPDIR:-/tmp}/swi-stores-bench.XXXXXX")}"
SWI="$BUILD/swi"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
[ -x "$SWI" ] || { echo "bench/stores.sh: $SWI not built" >&2; exit 1; }
mkdir -p "$WORK"
trap 'rm -rf "$WORK/volume.zarr" "$WORK/labels.zarr"' EXIT
df -h "$WORK" | tail -1

IFS=, read -r D H W <<<"$SIZE"
echo "== generating $SIZE uint16 in $WORK/volume.zarr"
t0=$(date +%s)
"$PY" - "$WORK/volume.zarr" "$D" "$H" "$W" <<'PYEOF'
import sys
import numpy as np
import numcodecs
import zarr
path, D, H, W = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
z = zarr.open(path, mode="w", shape=(D, H, W), chunks=(64, 64, 64), dtype="<u2",
              compressor=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
rng = np.random.default_rng(0)
j = np.arange(H, dtype=np.uint32)[:, None]
k = np.arange(W, dtype=np.uint32)[None, :]
for i0 in range(0, D, 64):
    rows = min(64, D - i0)
    i = np.arange(i0, i0 + rows, dtype=np.uint32)[:, None, None]
    # a smooth ramp with noise: a CT-like range, compressible like real data
    v = (i * 3 + j * 5 + k * 7) % 3000 + rng.integers(0, 64, (rows, H, W), dtype=np.uint32)
    z[i0:i0 + rows] = v.astype(np.uint16)
PYEOF
echo "generated in $(( $(date +%s) - t0 )) s; stored $(du -sh "$WORK/volume.zarr" | cut -f1)"

ARGS=(--classes 8 --roi 128 --overlap 0.25 --mode gaussian --output argmax --no-floor)
rss() { grep "Maximum resident" "$1" | awk '{printf "%.0f MB", $6 / 1024}'; }

echo "== store: swi bench --input volume.zarr --output-file labels.zarr ${ARGS[*]}"
/usr/bin/time -v "$SWI" bench --input "$WORK/volume.zarr" --output-file "$WORK/labels.zarr" "${ARGS[@]}" \
  >"$WORK/store.out" 2>"$WORK/store.time"
grep -E "^plan: windows|seconds=" "$WORK/store.out"
echo "peak RSS (time -v): $(rss "$WORK/store.time")"
if [ -n "${SWI_BENCH_SKIP_MEMORY:-}" ]; then exit 0; fi

echo "== in memory: swi bench --shape $SIZE ${ARGS[*]}"
/usr/bin/time -v "$SWI" bench --shape "$SIZE" "${ARGS[@]}" >"$WORK/mem.out" 2>"$WORK/mem.time"
grep -E "^plan: windows|seconds=" "$WORK/mem.out"
echo "peak RSS (time -v): $(rss "$WORK/mem.time")"
s=$(sed -n 's/^seconds=\([0-9.]*\).*/\1/p' "$WORK/store.out")
m=$(sed -n 's/^seconds=\([0-9.]*\).*/\1/p' "$WORK/mem.out")
awk -v s="$s" -v m="$m" 'BEGIN { printf "store / in-memory time: %.2f\n", s / m }'
