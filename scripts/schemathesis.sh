#!/usr/bin/env bash
# Fuzzes a live Haul against openapi.yaml with schemathesis (from PyPI, in .build/venv): no 5xx, and every status,
# content type, header and body as the spec says. Bounded by --max-examples so it fits in `make test`.
# Usage: scripts/schemathesis.sh [path/to/haul] [max-examples]
set -euo pipefail
# The downloads the fuzzer invents must not leave the machine: the server and the fuzzer run in a network namespace
# of their own whose only interface is loopback, so no name resolves and nothing is fetched. (Haul ignores proxy
# variables, so a dead ALL_PROXY no longer does this.)
if [ -z "${HAUL_ISOLATED:-}" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        exec env HAUL_ISOLATED=1 unshare --net "$0" "$@"
    fi
    exec env HAUL_ISOLATED=1 unshare --map-root-user --net "$0" "$@"
fi
ip link set lo up
cd "$(dirname "$0")/.."
haul=${1:-.build/debug/haul}
examples=${2:-40}
venv=$(./scripts/venv.sh)

work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
"$haul" serve --listen 127.0.0.1:0 --download-dir "$work/dl" \
    --data-dir "$work/data" --log-level error --max-attempts 1 > "$work/address" 2> "$work/haul.log" &
pid=$!
for _ in $(seq 100); do grep -q listening "$work/address" 2>/dev/null && break; sleep 0.1; done
base=$(sed -n 's/.*listening on //p' "$work/address")
[ -n "$base" ] || { echo "haul did not start"; cat "$work/haul.log"; exit 1; }

# Event streams never end, so they are left to the end-to-end tests.
# Event streams never end; /jsonrpc answers a body that is not JSON with 500 as aria2 does (its decoder is
# fuzzed by HaulFuzz, its answers checked against aria2c by Aria2ClientTests).
"$venv/bin/st" --config-file scripts/schemathesis.toml run openapi.yaml --url "$base" --checks all \
    --max-examples "$examples" --seed 1 --workers 1 \
    --exclude-path-regex '(events|jsonrpc)$' --request-timeout 10 --generation-database none --no-color --output-sanitize false \
    --suppress-health-check all --report junit,har --report-dir "${REPORT_DIR:-$work/report}"
kill -0 "$pid" || { echo "haul died"; cat "$work/haul.log"; exit 1; }
