// Package version tells what the running binary is, from the build information the Go
// toolchain records in every binary (runtime/debug.ReadBuildInfo), so that a plain
// `go build` reports the truth without -ldflags: wasmplane's module version and VCS
// revision, the Kubernetes release its k8s.io libraries (and built-in kubectl) come
// from, the Go version and the platform.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	apiversion "k8s.io/apimachinery/pkg/version"
)

// fallbackKubernetes is the Kubernetes release of the k8s.io modules go.mod pins, used
// only if the binary carries no build information (the tests check it against go.mod).
const fallbackKubernetes = "v1.37.2"

// Build is what the running binary was built from.
type Build struct {
	// Version is the wasmplane module's version: a tag, a pseudo-version the go command
	// derived from the VCS (with +dirty for a modified tree), or "(devel)".
	Version string
	// Revision is the VCS commit and Modified whether the tree had changes; Time is the
	// commit's time (RFC 3339). All empty when built with -buildvcs=false.
	Revision, Time string
	Modified       bool
	// Kubernetes is the Kubernetes release of the linked k8s.io libraries (k8s.io/x
	// v0.37.2 is Kubernetes v1.37.2), Kubectl that of the built-in kubectl.
	Kubernetes, Kubectl string
	// GoVersion and Platform are the toolchain and GOOS/GOARCH the binary was built with.
	GoVersion, Platform string
}

// Read returns the running binary's Build.
func Read() Build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Build {
	b := Build{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Kubernetes: fallbackKubernetes}
	if bi == nil {
		b.Kubectl = b.Kubernetes
		return b
	}
	if v := bi.Main.Version; v != "" {
		b.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		switch d.Path {
		case "k8s.io/apimachinery":
			if v, ok := kubernetesRelease(d.Version); ok {
				b.Kubernetes = v
			}
		case "k8s.io/kubectl":
			if v, ok := kubernetesRelease(d.Version); ok {
				b.Kubectl = v
			}
		}
	}
	if b.Kubectl == "" {
		b.Kubectl = b.Kubernetes
	}
	return b
}

// kubernetesRelease maps a k8s.io staging module version to its Kubernetes release:
// v0.37.2 is v1.37.2 (and v0.37.0-rc.1 is v1.37.0-rc.1).
func kubernetesRelease(module string) (string, bool) {
	rest, ok := strings.CutPrefix(module, "v0.")
	if !ok || rest == "" {
		return "", false
	}
	return "v1." + rest, true
}

// majorMinor splits v1.37.2 into "1" and "37".
func majorMinor(v string) (major, minor string) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return "", ""
	}
	return parts[0], parts[1]
}

// treeState is what Kubernetes' gitTreeState holds: clean, dirty, or nothing unknown.
func (b Build) treeState() string {
	switch {
	case b.Revision == "":
		return ""
	case b.Modified:
		return "dirty"
	}
	return "clean"
}

// info fills a version.Info for the Kubernetes release gitVersion with this build's facts.
func (b Build) info(gitVersion, release string) apiversion.Info {
	major, minor := majorMinor(release)
	return apiversion.Info{Major: major, Minor: minor, GitVersion: gitVersion, GitCommit: b.Revision, GitTreeState: b.treeState(),
		BuildDate: b.Time, GoVersion: b.GoVersion, Compiler: runtime.Compiler, Platform: b.Platform}
}

// Server is what the API server's /version reports: the Kubernetes API level it serves,
// marked as wasmplane's in the build metadata (as k3s marks "+k3s1").
func (b Build) Server() apiversion.Info {
	return b.info(b.Kubernetes+"+wasmplane", b.Kubernetes)
}

// KubectlClient is the client version the built-in kubectl reports: the kubectl release
// it is, built from this binary's revision.
func (b Build) KubectlClient() apiversion.Info {
	return b.info(b.Kubectl, b.Kubectl)
}

// String is what `wasmplane version` prints.
func (b Build) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "wasmplane %s", b.Version)
	if b.Revision != "" {
		fmt.Fprintf(&s, " (revision %s", b.Revision)
		if b.Modified {
			s.WriteString(", modified")
		}
		s.WriteString(")")
	}
	major, minor := majorMinor(b.Kubernetes)
	fmt.Fprintf(&s, "\nKubernetes API %s.%s (%s), kubectl %s\n%s %s\n", major, minor, b.Kubernetes, b.Kubectl, b.GoVersion, b.Platform)
	return s.String()
}
