#!/usr/bin/env bash
# run_if_dir.sh DIR CMD... -- run CMD, or skip (exit 77) when DIR is missing.
dir="$1"; shift
if [ ! -d "$dir" ]; then
  echo "SKIPPED: $dir not found (set SWI_GOLDEN_DIR to shared/golden)"
  exit 77
fi
exec "$@"
