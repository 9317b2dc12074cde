#!/usr/bin/env bash
# Formats the package's Swift code with `swift format` (it ships with the toolchain) and the
# committed configuration, `.swift-format`: four-space indents, 120 columns. The generated
# Protocol Buffers code (`*/Generated/*`) is left as protoc writes it.
#
#   Tools/format.sh           # rewrite every file in place
#   Tools/format.sh --check   # change nothing; fail on any file that is not formatted or that
#                             # breaks a lint rule (CI runs this)
set -euo pipefail
cd "$(dirname "$0")/.."

files=()
while IFS= read -r file; do files+=("$file"); done < <(
    git ls-files --cached --others --exclude-standard -- '*.swift' | grep -v '/Generated/' | sort)

if [ "${1:-}" = "--check" ]; then
    if ! swift format lint --strict --parallel "${files[@]}"; then
        echo "format: the files above are not formatted; run Tools/format.sh and commit the result"
        exit 1
    fi
    echo "format: ${#files[@]} files formatted and lint-clean"
else
    swift format format --in-place --parallel "${files[@]}"
fi
