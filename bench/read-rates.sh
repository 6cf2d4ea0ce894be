#!/bin/bash
# Status and list read rates of one server, by wrk on loopback:
#   bench/read-rates.sh BINARY THREADS [SECONDS]
# starts BINARY with --threads THREADS and one paused download, adds 99 more paused, then runs
# `wrk -t2 -c32 --latency` on GET /downloads/{id} and on GET /downloads?limit=100 (what every-core.md quotes),
# with each server thread's CPU per request (from /proc: what stays on the engine's thread sets the ceiling).
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
# CPU seconds (user + system) each of the server's threads has used, as "name seconds" lines.
thread_cpu() {
    local tick
    tick=$(getconf CLK_TCK)
    for stat in /proc/"$server"/task/*/stat; do
        # The name is in parentheses and may hold spaces: the fields after it are counted from its end.
        sed -E 's/^[0-9]+ \((.*)\) (.*)$/\1|\2/' "$stat" | awk -F'|' -v tick="$tick" \
            '{ split($2, f, " "); gsub(/ /, "_", $1); print $1, (f[12] + f[13]) / tick }'
    done | sort
}

for target in "downloads/$id" "downloads?limit=100"; do
    label=$target
    [ "$target" = "downloads/$id" ] && label="downloads/{id}"
    thread_cpu > "$work/before"
    result=$(wrk -t2 -c32 -d"${seconds}s" --latency "http://127.0.0.1:$port/$target")
    thread_cpu > "$work/after"
    rate=$(awk '/Requests\/sec/ {print $2}' <<< "$result")
    requests=$(awk '/requests in/ {print $1}' <<< "$result")
    p99=$(awk '$1 == "99%" {print $2}' <<< "$result")
    echo "threads=$threads GET /$label: $rate req/s, p99 $p99"
    # Each thread's CPU per request over the run (microseconds), the threads that used any.
    join "$work/before" "$work/after" | awk -v n="$requests" \
        '{ used = $3 - $2; if (used > 0) printf "  %-16s %7.2f us/request\n", $1, used * 1e6 / n }'
done
