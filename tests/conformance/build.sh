#!/usr/bin/env bash
# Builds Kubernetes' own end-to-end suite, e2e.test from k8s.io/kubernetes/test/e2e v1.37.2,
# into a cache directory, so that tests/conformance/run can measure wasmplane against it.
# Usage: build.sh [--small] [CACHE_DIR]   (default: $WASMPLANE_CONFORMANCE_CACHE or
# ~/.cache/wasmplane-conformance). Prints the path of the binary on its last line.
#
# --small builds e2e-small.test instead, the short suite of tests/conformance/small (a few
# spec packages, for CI), with every module the two builds share at wasmplane's version, so
# that the packages `go test ./...` compiled are reused from the Go build cache.
#
# The module is the one ../shared/tools/k8s-peers uses for the peers (a copy of its go.mod is
# kept here, because that directory lies outside the repository and a CI machine has none):
# every k8s.io staging module is pinned to v0.37.2 with a replace directive, which is what
# makes k8s.io/kubernetes usable as a dependency. The suite's test-only imports are resolved
# by -mod=mod against the versions k8s.io/kubernetes v1.37.2 itself requires.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
small=""
if [ "${1:-}" = --small ]; then small=1; shift; fi
cache=${1:-${WASMPLANE_CONFORMANCE_CACHE:-$HOME/.cache/wasmplane-conformance}}
mkdir -p "$cache"; cache=$(cd "$cache" && pwd)
version=v1.37.2
name=e2e.test pkg=k8s.io/kubernetes/test/e2e tags="" built=$version
if [ -n "$small" ]; then
  name=e2e-small.test pkg=./small tags=e2esmall
  # The short suite is two files of this repository: rebuild when it changes.
  built="$version $(cat "$here"/small/*.go "$here"/small/*/*.go | sha256sum | cut -c1-16)"
fi
stamp="$cache/$name.version"
if [ -x "$cache/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$built" ]; then
  echo "$cache/$name"
  exit 0
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp "$here/e2e.go.mod" "$work/go.mod"; cp "$here/e2e.go.sum" "$work/go.sum"; chmod u+w "$work"/*
if [ -n "$small" ]; then
  cp -r "$here/small" "$work/small"
  # Raise every module both builds use to wasmplane's version (the k8s.io modules are
  # pinned by replace directives in both): a different golang.org/x/sys alone would make
  # every package above it a new compile.
  cat "$here/../../go.sum" >>"$work/go.sum"
  (cd "$here/../.." && go list -m -f '{{if not .Main}}{{.Path}} {{.Version}}{{end}}' all) | sort >"$work/wasmplane.mods"
  (cd "$work" && GOFLAGS="${GOFLAGS:-} -mod=mod" go list -m -f '{{if not .Replace}}{{.Path}} {{.Version}}{{end}}' all) | sort >"$work/e2e.mods"
  edits=()
  while read -r path theirs ours; do
    [ "$theirs" = "$ours" ] || edits+=("-require=$path@$ours")
  done < <(join "$work/e2e.mods" "$work/wasmplane.mods")
  [ ${#edits[@]} -eq 0 ] || (cd "$work" && go mod edit "${edits[@]}")
fi
# The same version stamps as the peers: the suite compares its own version with the
# server's in a few places, and an unstamped binary reports v0.0.0.
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=37"
done
start=$SECONDS
(cd "$work" && GOFLAGS="${GOFLAGS:-} -mod=mod" go test -c -vet=off -tags="$tags" -ldflags="$ldflags" -o "$cache/$name.tmp" "$pkg") >&2
mv "$cache/$name.tmp" "$cache/$name"
echo "$built" >"$stamp"
echo "built $name in $((SECONDS - start)) s" >&2
echo "$cache/$name"
