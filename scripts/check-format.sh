#!/usr/bin/env bash
# Fails when clang-format (root .clang-format) would change any C++/CUDA source in the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.hpp' '*.cpp' '*.cuh' '*.cu' '*.h' 2>/dev/null ||
                     find include tests bench examples -name '*.[ch]pp' -o -name '*.cu*')
[ ${#files[@]} -gt 0 ] || { echo "check-format: no sources"; exit 0; }
clang-format --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files formatted"
