#!/usr/bin/env bash
# Builds the DocC catalog of every library target and fails on any warning: a broken symbol
# link, an undocumented parameter of a documented function, a curation that names nothing.
# CI runs it after the tests; run it by hand after changing doc comments. The archives go to
# .build/docs/<Target>.doccarchive (open one with `swift package preview-documentation`).
#
#   Tools/docs.sh                 # every target
#   Tools/docs.sh LogSync SyncModel
set -euo pipefail
cd "$(dirname "$0")/.."

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    # Every target with a catalog: Sources/<Target>/<Target>.docc.
    for catalog in Sources/*/*.docc; do
        targets+=("$(basename "$catalog" .docc)")
    done
fi

args=()
for target in "${targets[@]}"; do args+=(--target "$target"); done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
swift package --disable-sandbox generate-documentation "${args[@]}" --warnings-as-errors \
    --output-path .build/docs >"$log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    # DocC's diagnostics, without the plugin's build progress.
    grep -A6 "^warning: \|^error: " "$log" | grep -v "which are unhandled" || true
    echo "docs: DocC failed (status $status) for: ${targets[*]}"
    exit "$status"
fi
echo "docs: ${#targets[@]} catalogs built without warnings"
