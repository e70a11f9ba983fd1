package main

import (
	_ "unsafe" // for go:linkname

	componentversion "k8s.io/component-base/version"

	"github.com/wasmplane/wasmplane/core/version"
)

// The client version the built-in kubectl prints, and checks against the server's for
// version skew, is k8s.io/component-base/version.Get(); client-go's user agent comes from
// k8s.io/client-go/pkg/version.Get(). Both read unexported variables that Kubernetes'
// release build sets with -ldflags -X; a plain `go build` leaves
// "v0.0.0-master+$Format:%H$", which `kubectl version` cannot parse. Neither package
// offers a setter a library user can use (component-base's SetDynamicVersion accepts
// only the default's major.minor.patch), so these linknames reach the variables. They
// are written once, by setKubectlVersion at the start of the kubectl subcommand, which
// owns the process from then on; a build that did set them with -ldflags keeps its values.

//go:linkname componentGitVersion k8s.io/component-base/version.gitVersion
var componentGitVersion string

//go:linkname componentGitMajor k8s.io/component-base/version.gitMajor
var componentGitMajor string

//go:linkname componentGitMinor k8s.io/component-base/version.gitMinor
var componentGitMinor string

//go:linkname componentGitCommit k8s.io/component-base/version.gitCommit
var componentGitCommit string

//go:linkname componentGitTreeState k8s.io/component-base/version.gitTreeState
var componentGitTreeState string

//go:linkname componentBuildDate k8s.io/component-base/version.buildDate
var componentBuildDate string

//go:linkname clientGitVersion k8s.io/client-go/pkg/version.gitVersion
var clientGitVersion string

//go:linkname clientGitMajor k8s.io/client-go/pkg/version.gitMajor
var clientGitMajor string

//go:linkname clientGitMinor k8s.io/client-go/pkg/version.gitMinor
var clientGitMinor string

//go:linkname clientGitCommit k8s.io/client-go/pkg/version.gitCommit
var clientGitCommit string

//go:linkname clientGitTreeState k8s.io/client-go/pkg/version.gitTreeState
var clientGitTreeState string

//go:linkname clientBuildDate k8s.io/client-go/pkg/version.buildDate
var clientBuildDate string

// unsetGitVersion is the gitVersion of both packages when no -ldflags set it.
const unsetGitVersion = "v0.0.0-master+$Format:%H$"

// setKubectlVersion gives kubectl's version packages the build info's values (see above).
func setKubectlVersion() error {
	v := version.Read().KubectlClient()
	if clientGitVersion == unsetGitVersion {
		clientGitVersion, clientGitMajor, clientGitMinor = v.GitVersion, v.Major, v.Minor
		clientGitCommit, clientGitTreeState, clientBuildDate = v.GitCommit, v.GitTreeState, v.BuildDate
	}
	if componentGitVersion != unsetGitVersion {
		return nil
	}
	componentGitVersion, componentGitMajor, componentGitMinor = v.GitVersion, v.Major, v.Minor
	componentGitCommit, componentGitTreeState, componentBuildDate = v.GitCommit, v.GitTreeState, v.BuildDate
	// Get reads the version from a copy its init took; the setter accepts the default,
	// which is now v.GitVersion.
	return componentversion.SetDynamicVersion(v.GitVersion)
}
