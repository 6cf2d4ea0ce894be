#!/usr/bin/env bash
# Installs the Debian packages of the given groups when they are missing: `run` (what building and running Haul
# needs: `make run`), `test` (the suite and the benchmarks: `make test`), `docker` (building and running the image
# without a Docker engine: `make docker-test`). As root it runs apt-get itself; otherwise it prints the command.
set -euo pipefail

# The C libraries' headers and pkg-config, and the CA certificates HTTPS downloads are verified against. libpq is
# PostgreSQL's client library (--store); the server itself is only the tests'. tzdata: the speed schedule is read
# in the server's time zone (TZ), which /settings names. libtorrent-rasterbar is BitTorrent's engine (C++, behind
# the CTorrent shim).
run=(libevent-dev libcurl4-openssl-dev libsqlite3-dev libpq-dev libssl-dev pkg-config ca-certificates tzdata
     libtorrent-rasterbar-dev)
# nginx is the tests' and benchmarks' origin, aria2 and axel their anchors; wrk, python3 and gnuplot run the
# benchmark harness; openssl makes the tests' TLS certificate; python3-venv holds the PyPI tools (scripts/venv.sh) in
# .build/venv; chromium and chromium-driver run the dashboard test; prometheus brings promtool, which checks /metrics;
# postgresql is the server the store tests and the several-node tests start (initdb in a temporary directory);
# iproute2 brings up loopback in the network namespace the API fuzzing runs in (scripts/schemathesis.sh); tinyproxy
# (HTTP) and microsocks (SOCKS5) are the proxies the proxy tests go through; tmux is the terminal the client's
# progress bars are drawn in and read back from; vsftpd serves implicit FTPS (pyftpdlib, from PyPI, the rest of FTP);
# openssh-server's sshd serves SFTP; ffmpeg makes the videos played while they download (and ffprobe reads them)
# and the HLS playlists downloaded (its framemd5 is the reference decoder); mktorrent makes the torrents downloaded,
# python3-libtorrent (Debian's python3, not a venv's) seeds them and opentracker announces them; qbittorrent-nox
# is what the qBittorrent front's answers are compared with.
test=(nginx curl ca-certificates aria2 axel wrk python3 python3-venv gnuplot-nox openssl chromium chromium-driver
      prometheus postgresql iproute2 tinyproxy microsocks tmux vsftpd openssh-server ffmpeg mktorrent python3-libtorrent opentracker
      qbittorrent-nox)
# mmdebstrap makes the base images from Debian packages, buildah builds and runs the image (chroot isolation) and
# podman keeps the images; docker-compose checks the compose files (podman-compose has no `config`); iproute2 gives
# the container a network namespace of its own; nginx and openssl are the origin and the TLS proxy in the test.
docker=(mmdebstrap buildah podman docker-compose iproute2 nginx openssl python3 curl ca-certificates)

[ $# -gt 0 ] || set -- run
packages=()
for group in "$@"; do
    case $group in
        run) packages+=("${run[@]}") ;;
        test) packages+=("${run[@]}" "${test[@]}") ;;
        docker) packages+=("${run[@]}" "${docker[@]}") ;;
        *) echo "install-deps: unknown group '$group' (run, test, docker)" >&2; exit 2 ;;
    esac
done

missing=()
for p in $(printf '%s\n' "${packages[@]}" | sort -u); do
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
