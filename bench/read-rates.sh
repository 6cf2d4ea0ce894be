#!/bin/bash
# Status and list read rates of one server, by wrk on loopback:
#   bench/read-rates.sh BINARY THREADS [SECONDS]
# starts BINARY with --threads THREADS and one paused download, adds 99 more paused, then runs
# `wrk -t2 -c32 --latency` on GET /downloads/{id} and on GET /downloads?limit=100 (what every-core.md quotes).
set -euo pipefail
binary=$1 threads=$2 seconds=${3:-4}
port=$((20000 + RANDOM % 20000))
work=$(mktemp -d)
"$binary" serve --listen "127.0.0.1:$port" --data-dir "$work/data" --download-dir "$work/downloads" \
    --threads "$threads" --log-level warning > "$work/log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" > /dev/null && break; sleep 0.1; done
python3 - "$port" > "$work/id" <<'PY'
import json, sys, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}/downloads"
def post(body):
    request = urllib.request.Request(base, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request).read())
print(post({"url": "http://127.0.0.1:9/x.bin", "filename": "read.bin", "start_paused": True})["id"])
post({"downloads": [{"url": "http://127.0.0.1:9/x.bin", "filename": f"p{i}.bin", "start_paused": True}
                    for i in range(99)]})
PY
id=$(cat "$work/id")
for target in "downloads/$id" "downloads?limit=100"; do
    label=$target
    [ "$target" = "downloads/$id" ] && label="downloads/{id}"
    result=$(wrk -t2 -c32 -d"${seconds}s" --latency "http://127.0.0.1:$port/$target")
    rate=$(awk '/Requests\/sec/ {print $2}' <<< "$result")
    p99=$(awk '$1 == "99%" {print $2}' <<< "$result")
    echo "threads=$threads GET /$label: $rate req/s, p99 $p99"
done
