#!/usr/bin/env bash
# Installs the Debian packages Haul builds, tests and benchmarks with, when they are missing.
# As root it runs apt-get itself; otherwise it prints the command to run.
set -euo pipefail

# nginx is the tests' and benchmarks' origin, aria2 and axel their anchors; wrk, python3 and gnuplot run the
# benchmark harness; openssl makes the tests' TLS certificate; python3-venv holds the PyPI tools (scripts/venv.sh) in
# .build/venv; chromium and chromium-driver run the dashboard test; prometheus brings promtool, which checks /metrics.
packages=(libevent-dev libcurl4-openssl-dev libsqlite3-dev libssl-dev pkg-config nginx curl ca-certificates aria2
          axel wrk python3 python3-venv gnuplot-nox openssl chromium chromium-driver prometheus)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "Haul needs these Debian packages: ${missing[*]}" >&2
    echo "Install them with: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
