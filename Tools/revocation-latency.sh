#!/usr/bin/env bash
# How long a revoked token keeps working on a running logsync-server, measured from the moment
# `logsync-server user revoke` returns to the first 401 for that token (which the server had in
# memory: each round uses it first).
#
#   Tools/revocation-latency.sh                       # LMDB store: one node following its token file
#   Tools/revocation-latency.sh postgres://U@H:P/DB   # two nodes on PostgreSQL: revoked, asked on node B
#
# Builds nothing: run `swift build` first (it uses .build/debug/logsync-server). Ports 18771–18772.
set -euo pipefail
BIN="$(cd "$(dirname "$0")/.." && pwd)/.build/debug/logsync-server"
STORE_URL="${1:-}"
WORK="$(mktemp -d)"
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$WORK"' EXIT
if [ -n "$STORE_URL" ]; then STORE=(--store "$STORE_URL"); else STORE=(--data "$WORK/data"); fi
"$BIN" serve "${STORE[@]}" --port 18771 >"$WORK/a.log" 2>&1 & PIDS+=($!)
ASK=18771
if [ -n "$STORE_URL" ]; then "$BIN" serve "${STORE[@]}" --port 18772 >"$WORK/b.log" 2>&1 & PIDS+=($!); ASK=18772; fi
status() {
    curl -s -o /dev/null -w "%{http_code}" -X POST -H "Authorization: Bearer $1" -H "Content-Type: application/json" \
        -d '{"allZones":true}' "http://127.0.0.1:$2/v1/databases/private/fetchZones" || true
}
for round in 1 2 3 4 5; do
    user="revocation-$round-$$"
    token=$("$BIN" user add "$user" "${STORE[@]}" | tail -1)
    until [ "$(status "$token" "$ASK")" = 200 ]; do sleep 0.05; done
    "$BIN" user revoke "$user" "${STORE[@]}" >/dev/null
    start=$(date +%s%N)
    until [ "$(status "$token" "$ASK")" = 401 ]; do :; done
    echo "round $round: 401 on port $ASK $(( ($(date +%s%N) - start) / 1000000 )) ms after user revoke returned"
done
