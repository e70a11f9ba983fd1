#!/usr/bin/env bash
# Runs the cri-tools conformance suite (critest) against wasmplane's built-in WASI runtime.
#
#   scripts/critest.sh                 # the applicable specs (see docs/cri-conformance.md)
#   CRITEST_FOCUS=. scripts/critest.sh # everything, to see what does not apply
#
# critest and crictl are built from tools/critest (a separate Go module pinned to
# cri-tools v1.37.0) into $WASMPLANE_TOOLS_CACHE (default ~/.cache/wasmplane-tools) once.
# The runtime gets a fresh temp root; the toolbox workload is imported under the name of
# critest's default test image (busybox), since WASI modules cannot run Linux binaries.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${WASMPLANE_TOOLS_CACHE:-$HOME/.cache/wasmplane-tools}
mkdir -p "$cache"

if [[ ! -x $cache/critest || ! -x $cache/crictl || $repo/tools/critest/go.mod -nt $cache/critest ]]; then
  echo "building critest and crictl into $cache" >&2
  (cd "$repo/tools/critest" &&
    GOWORK=off go test -c -o "$cache/critest" sigs.k8s.io/cri-tools/cmd/critest &&
    GOWORK=off go build -o "$cache/crictl" sigs.k8s.io/cri-tools/cmd/crictl)
fi

work=$(mktemp -d /tmp/wasmplane-critest.XXXXXX)
pid=""
cleanup() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$repo" && go build -o "$work/wasmplane" ./cmd/wasmplane)
(cd "$repo/examples/workloads" && GOOS=wasip1 GOARCH=wasm go build -o "$work/toolbox.wasm" ./toolbox)

busybox=registry.k8s.io/e2e-test-images/busybox:1.29-2
"$work/wasmplane" image import "$work/toolbox.wasm" --name "$busybox" --root "$work/root"

sock=$work/cri.sock
"$work/wasmplane" runtime --listen "unix://$sock" --root "$work/root" --log-level "${RUNTIME_LOG_LEVEL:-warn}" \
  >"$work/runtime.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  [[ -S $sock ]] && break
  sleep 0.1
done
[[ -S $sock ]] || { cat "$work/runtime.log" >&2; echo "runtime did not start" >&2; exit 1; }

"$cache/crictl" --runtime-endpoint "unix://$sock" --image-endpoint "unix://$sock" version

# The applicable specs; docs/cri-conformance.md lists every spec and why the rest do not apply.
default_focus='Runtime info|basic operations on PodSandbox|basic operations on container|adding volume and device|runtime should support log|Idempotence|support DNS config|support set hostname|ReadOnlyRootfs|RunAsGroup is set without RunAsUser|OOMKilled'
focus=${CRITEST_FOCUS:-$default_focus}
# execSync-with-timeout's second half runs `pgrep`, which a WASI guest cannot implement.
default_skip='execSync with timeout'
skip=${CRITEST_SKIP:-$default_skip}

cat >"$work/images.yaml" <<YAML
defaultTestContainerImage: $busybox
YAML

set +e
"$cache/critest" --runtime-endpoint "unix://$sock" --image-endpoint "unix://$sock" \
  --test-images-file "$work/images.yaml" \
  --ginkgo.focus "$focus" --ginkgo.skip "$skip" --ginkgo.no-color "$@"
rc=$?
set -e
if [[ $rc -ne 0 && -n ${CRITEST_SHOW_RUNTIME_LOG:-} ]]; then cat "$work/runtime.log" >&2; fi
exit $rc
