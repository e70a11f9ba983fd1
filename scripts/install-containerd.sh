#!/usr/bin/env bash
# Installs containerd 1.6 (with its CRI plugin and ctr), runc and busybox-static from
# Debian for the containerd end-to-end test (tests/e2e/containerd_test.go). Only the
# packages are installed: no service is started (the machines have no systemd; the test
# starts containerd by hand with its own config). Idempotent and quiet: it does nothing
# when all three are installed, and skips apt-get update when the caller already ran it
# and exported WASMPLANE_APT_UPDATED=1.
set -euo pipefail

sudo=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo=sudo; fi

missing=()
for p in containerd runc busybox-static; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-containerd: installing ${missing[*]}"
  if [ "${WASMPLANE_APT_UPDATED:-}" != 1 ]; then
    $sudo apt-get update -qq
    export WASMPLANE_APT_UPDATED=1
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

command -v containerd >/dev/null
command -v ctr >/dev/null
command -v runc >/dev/null
test -x /bin/busybox
