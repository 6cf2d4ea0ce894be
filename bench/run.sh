#!/usr/bin/env bash
# make bench: Haul against curl and aria2 on loopback nginx, in one run.
#   bench/run.sh [size-in-MiB] [rounds]   one connection, unthrottled (default 1024 MiB, 3 rounds), then
#                                         128 MiB throttled to 8 MiB/s per connection with 1-16 connections
set -euo pipefail
cd "$(dirname "$0")/.."
python3 bench/bench.py --haul .build/release/haul --size-mib "${1:-1024}" --rounds "${2:-3}"
echo
python3 bench/bench.py --haul .build/release/haul --size-mib 128 --scenario throttled
