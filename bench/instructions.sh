#!/usr/bin/env bash
# The instructions a Haul server spends on two fixed workloads, counted by callgrind: repeatable for the same
# binary whatever else the machine is doing, so two builds are compared without the noise of wall time.
#   add:   2,000 paused downloads added one request at a time, then 2,000 status reads
#   fetch: 300 files of 64 KiB from a local origin, added as one batch, until all complete
# usage: bench/instructions.sh HAUL_BINARY...   (one line per binary and workload)
set -euo pipefail
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d)
origin_pid=
cleanup() { [ -n "$origin_pid" ] && kill "$origin_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# What the workloads send and read: `add PORT` and `get PORT ID` write curl -K configs, one request a section
# (2,000 paused downloads; 2,000 reads of one), `batch ORIGIN` the body of 300 downloads, and `id` and `ended`
# read an answer on standard input (the first download's id; how many of /stats's downloads have ended).
cat >"$work/config.py" <<'PY'
import json, sys
kind = sys.argv[1]
if kind == "id":
    print(json.load(sys.stdin)["downloads"][0]["id"]); sys.exit()
if kind == "ended":
    stats = json.load(sys.stdin); print(stats["completed"] + stats["failed"]); sys.exit()
if kind == "batch":
    print(json.dumps({"downloads": [{"url": f"http://127.0.0.1:{sys.argv[2]}/f{i}.bin"} for i in range(1, 301)]}))
    sys.exit()
port = sys.argv[2]
if kind == "add":
    sections = [f'url = "http://127.0.0.1:{port}/downloads"\nrequest = "POST"\n'
                f'header = "Content-Type: application/json"\noutput = "/dev/null"\n'
                f'data = {json.dumps(json.dumps({"url": f"http://127.0.0.1:9/f{i}.bin", "start_paused": True}))}'
                for i in range(2000)]
else:
    sections = [f'url = "http://127.0.0.1:{port}/downloads/{sys.argv[3]}"\noutput = "/dev/null"'] * 2000
print("\nnext\n".join(sections))
PY

mkdir -p "$work/www"
for i in $(seq 1 300); do head -c 65536 /dev/urandom > "$work/www/f$i.bin"; done
origin=$(free_port)
(cd "$work/www" && exec python3 -m http.server "$origin" --bind 127.0.0.1 >/dev/null 2>&1) &
origin_pid=$!

# Starts `haul serve` under callgrind on a free port; sets $port and $pid.
start() {
    local binary=$1 name=$2
    port=$(free_port)
    mkdir -p "$work/$name/data" "$work/$name/dl"
    valgrind --tool=callgrind --callgrind-out-file="$work/$name.out" "$binary" serve --listen 127.0.0.1:$port \
        --data-dir "$work/$name/data" --download-dir "$work/$name/dl" >"$work/$name.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && return; sleep 0.1; done
    echo "the server did not start: $(tail -3 "$work/$name.log")" >&2; exit 1
}

# Stops the server (in this shell: `wait` must be its parent) and sets $total to what callgrind counted.
stop() {
    kill -TERM "$pid"; wait "$pid" || true
    total=$(grep -E '^totals:' "$work/$1.out" | awk '{print $2}')
}

for binary in "$@"; do
    tag=$(basename "$binary")-$RANDOM
    start "$binary" "add-$tag"
    python3 "$work/config.py" add "$port" >"$work/add.k"
    curl -s -K "$work/add.k" >/dev/null
    id=$(curl -s "http://127.0.0.1:$port/downloads?limit=1" | python3 "$work/config.py" id)
    python3 "$work/config.py" get "$port" "$id" >"$work/get.k"
    curl -s -K "$work/get.k" >/dev/null
    stop "add-$tag"
    printf '%s add   %s instructions\n' "$binary" "$total"

    start "$binary" "fetch-$tag"
    python3 "$work/config.py" batch "$origin" >"$work/batch.json"
    curl -s -X POST -H 'Content-Type: application/json' --data @"$work/batch.json" \
        "http://127.0.0.1:$port/downloads" >/dev/null
    for _ in $(seq 1 1200); do
        ended=$(curl -s "http://127.0.0.1:$port/stats" | python3 "$work/config.py" ended)
        [ "$ended" = 300 ] && break
        sleep 0.5
    done
    stop "fetch-$tag"
    printf '%s fetch %s instructions\n' "$binary" "$total"
done
