#!/usr/bin/env bash
# Writes Sources/HaulAPI/OpenAPIDocument.swift from openapi.yaml, so the binary serves the contract without
# needing the file at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
{
    echo "// Generated from openapi.yaml by scripts/embed-openapi.sh (make spec). Do not edit."
    echo "enum OpenAPIDocument {"
    echo "    static let yaml = #\"\"\""
    cat openapi.yaml
    echo "\"\"\"#"
    echo "}"
} > Sources/HaulAPI/OpenAPIDocument.swift
