#!/usr/bin/env bash
# make bench: single-connection throughput of haul against curl -o and aria2c on a loopback nginx origin.
# Usage: bench/run.sh [size-in-MiB] [rounds]   (default 1024 MiB, 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/bench.py --haul .build/release/haul --size-mib "${1:-1024}" --rounds "${2:-3}"
