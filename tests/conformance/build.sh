#!/usr/bin/env bash
# Builds Kubernetes' own end-to-end suite, e2e.test from k8s.io/kubernetes/test/e2e v1.37.2,
# into a cache directory, so that tests/conformance/run can measure wasmplane against it.
# Usage: build.sh [CACHE_DIR]   (default: $WASMPLANE_CONFORMANCE_CACHE or
# ~/.cache/wasmplane-conformance). Prints the path of the binary on its last line.
#
# The module is the one ../shared/tools/k8s-peers uses for the peers (a copy of its go.mod is
# kept here, because that directory lies outside the repository and a CI machine has none):
# every k8s.io staging module is pinned to v0.37.2 with a replace directive, which is what
# makes k8s.io/kubernetes usable as a dependency. The suite's test-only imports are resolved
# by -mod=mod against the versions k8s.io/kubernetes v1.37.2 itself requires.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:-${WASMPLANE_CONFORMANCE_CACHE:-$HOME/.cache/wasmplane-conformance}}
mkdir -p "$cache"; cache=$(cd "$cache" && pwd)
version=v1.37.2
stamp="$cache/e2e.test.version"
if [ -x "$cache/e2e.test" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  echo "$cache/e2e.test"
  exit 0
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp "$here/e2e.go.mod" "$work/go.mod"; cp "$here/e2e.go.sum" "$work/go.sum"; chmod u+w "$work"/*
# The same version stamps as the peers: the suite compares its own version with the
# server's in a few places, and an unstamped binary reports v0.0.0.
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=37"
done
start=$SECONDS
(cd "$work" && GOFLAGS="${GOFLAGS:-} -mod=mod" go test -c -vet=off -ldflags="$ldflags" -o "$cache/e2e.test.tmp" k8s.io/kubernetes/test/e2e) >&2
mv "$cache/e2e.test.tmp" "$cache/e2e.test"
echo "$version" >"$stamp"
echo "built e2e.test in $((SECONDS - start)) s" >&2
echo "$cache/e2e.test"
