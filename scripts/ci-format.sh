#!/usr/bin/env bash
# ci-format.sh -- every C and C++ source of the repository is as .clang-format lays it out
# (clang-format from Debian's clang-format package; the check changes nothing).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
command -v clang-format >/dev/null || { echo "ci-format: clang-format not found (apt-get install clang-format)" >&2; exit 1; }
files=$(git ls-files '*.c' '*.h' '*.cxx' '*.cpp' | grep -v '^tests/data/')
if ! clang-format --dry-run -Werror $files 2>/tmp/ci-format.$$; then
  head -40 /tmp/ci-format.$$ >&2
  rm -f /tmp/ci-format.$$
  echo "ci-format: run: git ls-files '*.c' '*.h' '*.cxx' | xargs clang-format -i" >&2
  exit 1
fi
rm -f /tmp/ci-format.$$
echo "ci-format: $(echo "$files" | wc -l) files laid out as .clang-format says"
