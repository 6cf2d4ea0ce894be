#!/usr/bin/env bash
# Compiles the files the server serves into Swift sources, so the binary needs nothing beside it at run time:
# openapi.yaml into Sources/HaulAPI/OpenAPIDocument.swift, dashboard/* into Sources/HaulAPI/DashboardAssets.swift.
# Tests fail when a generated file is older than its source (`make embed` brings them up to date).
set -euo pipefail
cd "$(dirname "$0")/.."

# A raw string literal holding the file; the delimiter is checked not to occur in it.
literal() {
    if grep -q -e '"""#' -e '\\#' "$1"; then echo "$1 contains \"\"\"# or \\#, which a raw literal would not keep" >&2; exit 1; fi
    echo "#\"\"\""
    cat "$1"
    echo "\"\"\"#"
}

{
    echo "// Generated from openapi.yaml by scripts/embed.sh (make embed). Do not edit."
    echo "enum OpenAPIDocument {"
    echo "    static let yaml = $(literal openapi.yaml)"
    echo "}"
} > Sources/HaulAPI/OpenAPIDocument.swift

{
    echo "// Generated from dashboard/ by scripts/embed.sh (make embed). Do not edit."
    echo "enum DashboardAssets {"
    echo "    static let indexHTML = $(literal dashboard/index.html)"
    echo "    static let appJS = $(literal dashboard/app.js)"
    echo "    static let appCSS = $(literal dashboard/app.css)"
    echo "}"
} > Sources/HaulAPI/DashboardAssets.swift
