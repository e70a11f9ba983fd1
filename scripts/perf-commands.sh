#!/usr/bin/env bash
# Runs every benchmark command of docs/performance.md and docs/wasm-performance.md once, at
# small sizes (about 12 minutes on 2 cores). CI runs only the `go run` programs and checks
# the rest statically.
set -euo pipefail
cd "$(dirname "$0")/.."
WASMPLANE_PERF_COMMANDS=all go test -count=1 -timeout 40m -run 'TestPerformanceCommands$' -v ./tests/docs/ "$@"
