#!/usr/bin/env bash
# Installs the toolchains the WASM plugin tests need on a bare Debian machine:
# wabt (wat2wasm, for the WAT plugins) and binaryen (wasm-opt, for module size figures).
# Go itself is expected at /usr/local/go or on PATH. Idempotent and quiet.
set -euo pipefail

need=()
command -v wat2wasm >/dev/null 2>&1 || need+=(wabt)
command -v wasm-opt >/dev/null 2>&1 || need+=(binaryen)

if [ ${#need[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq >/dev/null
	$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

command -v wat2wasm >/dev/null
command -v wasm-opt >/dev/null

# --- C, Rust and AssemblyScript plugin toolchains (examples/plugins/langs, sdk/c,
# sdk/rust, sdk/assemblyscript): see install-toolchains-langs.sh. It skips apt-get update
# when the part above already ran it.
if [ ${#need[@]} -gt 0 ]; then export WASMPLANE_APT_UPDATED=1; fi
bash "$(dirname "$0")/install-toolchains-langs.sh"

# --- containerd, runc and busybox-static for the containerd end-to-end test
# (tests/e2e/containerd_test.go): see install-containerd.sh.
bash "$(dirname "$0")/install-containerd.sh"
