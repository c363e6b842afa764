#!/usr/bin/env bash
# Lints the OpenAPI document the service serves (/openapi.json) with Redocly's recommended rules and Spectral's
# `spectral:oas`: any error fails (warnings are printed). Offline: no telemetry, no update check, no remote refs.
set -euo pipefail
cd "$(dirname "$0")/.."
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
node_modules/.bin/bun scripts/openapi.ts >"$dir/openapi.json"
node_modules/.bin/redocly lint --config redocly.yaml --format=summary "$dir/openapi.json" 2>&1 | grep -v '[║╔╚]' || {
  echo "redocly lint: errors" >&2
  exit 1
}
node_modules/.bin/spectral lint --ruleset .spectral.yaml --fail-severity error --display-only-failures \
  --format text "$dir/openapi.json"
echo "openapi lint: 0 errors (redocly recommended, spectral:oas)"
