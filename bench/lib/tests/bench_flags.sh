#!/usr/bin/env bash
# bench_flags.sh SWI WORK_DIR -- `swi bench`'s nnU-Net flags (--grid, --tile-step-size,
# --mirror-axes, --folds, --labels-raw): what they print, and every bad value or combination
# refused with exit status 2 (1 for an existing --labels-raw) and a one-line message.
set -u
SWI="$1"
T="$2"
rm -rf "$T" && mkdir -p "$T"
fails=0
small=(--shape 40,36,30 --classes 4 --roi 16 --no-floor)

# expect RC REGEX ARGS...: swi bench ARGS exits RC and its stdout+stderr match REGEX
expect() {
  local rc="$1" re="$2"
  shift 2
  "$SWI" bench "$@" >"$T/out" 2>&1
  local got=$?
  if [ "$got" -ne "$rc" ] || ! grep -Eq -- "$re" "$T/out"; then
    echo "FAIL: swi bench $* -> exit $got (want $rc), output:" >&2
    sed 's/^/  /' "$T/out" >&2
    echo "  (wanted /$re/)" >&2
    fails=$((fails + 1))
  fi
}

# what the flags print
"$SWI" bench --help | tr '\n' ' ' >"$T/help"
grep -Eq -- "--grid G .*--tile-step-size F .*--mirror-axes A,B,C .*--folds N .*--labels-raw FILE .*--grid nnunet" \
  "$T/help" || { echo "FAIL: --help lacks a flag or the nnU-Net example" >&2; fails=$((fails + 1)); }
expect 0 "nnU-Net's grid, tile step 0.5  nnU-Net's gaussian" "${small[@]}" --grid nnunet
expect 0 "plan: windows 4x4x3 = 48" "${small[@]}" --grid nnunet
expect 0 "tile step 0.25  nnU-Net's gaussian" "${small[@]}" --grid nnunet --tile-step-size 0.25
expect 0 "plan: windows 7x6x5 = 210" "${small[@]}" --grid nnunet --tile-step-size 0.25
expect 0 "tile step 0.75  constant" "${small[@]}" --grid nnunet --overlap 0.25 --mode constant
# nnU-Net's own step goes to the grid: tile step 0.2 is 11 starts on 48 with 16 (as nnU-Net
# counts them); overlap 0.8 is 1 - 0.8 = 0.19999999999999996 in double, and 12
expect 0 "plan: windows 11x11x11 = 1331" --shape 48,48,48 --classes 2 --roi 16 --no-floor --grid nnunet \
  --tile-step-size 0.2
expect 0 "plan: windows 12x12x12 = 1728" --shape 48,48,48 --classes 2 --roi 16 --no-floor --grid nnunet \
  --overlap 0.8
expect 0 "overlap 0.25  gaussian" "${small[@]}" --mode gaussian
expect 0 "network 1 member, mirrored along axes 0,2: 4 network runs a window" "${small[@]}" --mirror-axes 2,0
expect 0 "network: 192 windows predicted \\(48 windows, each run 4 times\\)" "${small[@]}" --grid nnunet --mirror-axes 0,2
expect 0 "network 3 members: 3 network runs a window" "${small[@]}" --folds 3
expect 0 "network 2 members, mirrored along axes 0,1: 8 network runs a window" --shape 40,36 --classes 3 --roi 16 \
  --no-floor --mirror-axes 0,1 --folds 2
expect 0 "separate z there axis 2; back .* the nearest slice along axis 2" --shape 48,40,12 --classes 3 --roi 16 \
  --no-floor --input-spacing 0.8,0.8,4 --spacing 1.5 --grid nnunet
expect 0 "model grid 26x21x32 at 1.5,1.5,1.5 mm \\(nnU-Net's shape rule\\)" --shape 48,40,12 --classes 3 --roi 16 \
  --no-floor --input-spacing 0.8,0.8,4 --spacing 1.5 --grid nnunet
expect 0 "MONAI's Spacingd" --shape 48,40,12 --classes 3 --roi 16 --no-floor --input-spacing 0.8,0.8,4 --spacing 1.5

# --labels-raw: the label map's bytes; an existing file only with --force
expect 0 "seconds=" "${small[@]}" --labels-raw "$T/l.raw"
[ "$(stat -c %s "$T/l.raw" 2>/dev/null)" = $((40 * 36 * 30)) ] ||
  { echo "FAIL: --labels-raw wrote $(stat -c %s "$T/l.raw" 2>/dev/null) bytes" >&2; fails=$((fails + 1)); }
expect 1 "^swi bench: --labels-raw .*l.raw: already exists \\(use --force to overwrite\\)$" "${small[@]}" \
  --labels-raw "$T/l.raw"
expect 0 "seconds=" "${small[@]}" --labels-raw "$T/l.raw" --force
expect 0 "seconds=" --shape 40,36,30 --classes 300 --roi 16 --no-floor --labels-raw "$T/l16.raw"
[ "$(stat -c %s "$T/l16.raw" 2>/dev/null)" = $((40 * 36 * 30 * 2)) ] ||
  { echo "FAIL: --labels-raw of 300 classes is not uint16" >&2; fails=$((fails + 1)); }
expect 1 "^swi bench: --labels-raw .*/no/such/dir/l.raw: cannot create the output" "${small[@]}" \
  --labels-raw "$T/no/such/dir/l.raw"
mkfifo "$T/fifo"
expect 1 "fifo: exists and is not a regular file" "${small[@]}" --labels-raw "$T/fifo" --force
touch "$T/in.nii.gz"
expect 1 "is the same file as --input" --input "$T/in.nii.gz" --classes 3 --roi 16 --labels-raw "$T/in.nii.gz" --force
# a run that fails leaves no file, nor a temporary
expect 1 "below the smallest plan" "${small[@]}" --labels-raw "$T/l2.raw" --max-memory 1K
[ -z "$(ls -A "$T" | grep -E '^\.?l2\.raw')" ] || { echo "FAIL: a failed run left $(ls -A "$T")" >&2; fails=$((fails + 1)); }
# the engine mirrors in place: beside it only the second member's window (16^3 x 4 floats);
# mirroring by a combinator adds a flipped input and output window
expect 0 "plan: mirroring and ensemble scratch 64.0 KiB beside the engine" "${small[@]}" --mirror-axes 0 --folds 2
expect 0 "plan: mirroring and ensemble scratch 144 KiB beside the engine" "${small[@]}" --mirror-axes 0 --folds 2 \
  --mirror-by combinator

# refusals: exit 2, one line naming the flag
expect 2 "--grid takes monai or nnunet" "${small[@]}" --grid nnU-Net
expect 2 "--tile-step-size is nnU-Net's step: give --grid nnunet" "${small[@]}" --tile-step-size 0.5
for bad in 0 -0.5 1.5 abc 0.5,0.5 nan; do
  expect 2 "--tile-step-size takes a fraction of the window in \\(0, 1\\]" "${small[@]}" --grid nnunet \
    --tile-step-size "$bad"
done
expect 2 "--tile-step-size is 1 - overlap: give one of it and --overlap" "${small[@]}" --grid nnunet \
  --tile-step-size 0.5 --overlap 0.5
for bad in 3 -1 0,0 0,1,2,0 x ""; do
  expect 2 "--mirror-axes" "${small[@]}" --mirror-axes "$bad"
done
expect 2 "--mirror-axes: an axis beyond --shape's dims" --shape 40,36 --classes 3 --roi 16 --mirror-axes 2
for bad in 0 17 -1 x 2.5; do
  expect 2 "--folds takes 1..16" "${small[@]}" --folds "$bad"
done
expect 2 "--labels-raw writes argmax labels held in memory" "${small[@]}" --output scores --labels-raw "$T/s.raw"
expect 2 "--labels-raw takes a file name" "${small[@]}" --labels-raw ""
[ -e "$T/s.raw" ] && { echo "FAIL: a refused run wrote --labels-raw" >&2; fails=$((fails + 1)); }

if [ "$fails" -ne 0 ]; then
  echo "bench_flags: $fails failed" >&2
  exit 1
fi
echo "bench_flags: all passed"
