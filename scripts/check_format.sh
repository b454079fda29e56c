#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what clang-format (.clang-format:
# Google style) makes of it. Exit 77 (a skip for ctest) without clang-format
# or outside a git checkout. Fix with:
#   git ls-files '*.cc' '*.h' | xargs clang-format -i
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v clang-format >/dev/null 2>&1 || { echo "clang-format not installed"; exit 77; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git checkout"; exit 77; }
mapfile -t files < <(git ls-files '*.cc' '*.h')
clang-format --dry-run --Werror "${files[@]}"
