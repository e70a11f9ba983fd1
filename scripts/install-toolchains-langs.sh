#!/usr/bin/env bash
# Installs the C, Rust and AssemblyScript plugin toolchains (and wabt for WAT) that
# examples/plugins/langs builds with. Idempotent and quiet: it installs only what is
# missing, runs apt-get update at most once (not at all when nothing is missing, or when
# the caller already did and exported WASMPLANE_APT_UPDATED=1), and runs npm ci only when
# sdk/assemblyscript's pinned compiler is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo=sudo; fi

# Debian bookworm names: clang/lld 14 with wasi-libc and the wasm32 compiler-rt builtins;
# Debian's rustc 1.63 with its wasm32-wasi standard library (rustup cannot download one
# offline, and a rustup rustc on PATH is skipped by the tests' findRust).
pkgs=(clang lld wasi-libc libclang-rt-14-dev-wasm32 rustc libstd-rust-dev-wasm32 wabt)
# envsubst, which the README's scheduling demo uses and tests/docs runs.
pkgs+=(gettext-base)
command -v node >/dev/null || pkgs+=(nodejs)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-toolchains-langs: installing ${missing[*]}"
  if [ "${WASMPLANE_APT_UPDATED:-}" != 1 ]; then
    $sudo apt-get update -qq
    export WASMPLANE_APT_UPDATED=1
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x sdk/assemblyscript/node_modules/.bin/asc ]; then
  echo "install-toolchains-langs: npm ci in sdk/assemblyscript"
  (cd sdk/assemblyscript && npm ci --no-audit --no-fund --silent)
fi

# OPA, whose compiler builds the Rego plugins (examples/plugins/rego, `wasmplane plugin
# build` of a .rego project). Built from the Go module proxy, outside this module (its
# dependencies are not ours): about 4 CPU-minutes once.
opa_version=v1.22.4
have_opa=$(command -v opa >/dev/null && opa version 2>/dev/null | sed -n 's/^Version: //p' || true)
if [ "$have_opa" != "${opa_version#v}" ]; then
  echo "install-toolchains-langs: building opa $opa_version"
  gobin=$(mktemp -d)
  GOBIN=$gobin go install "github.com/open-policy-agent/opa@$opa_version"
  $sudo install -m 0755 "$gobin/opa" /usr/local/bin/opa
  rm -rf "$gobin"
fi
