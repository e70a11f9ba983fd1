package version

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	deps := []*debug.Module{{Path: "k8s.io/apimachinery", Version: "v0.37.2"}, {Path: "k8s.io/kubectl", Version: "v0.37.1"}}
	for _, tc := range []struct {
		name                 string
		bi                   *debug.BuildInfo
		version, rev, state  string
		kube, kubectl        string
		server, client, text string
	}{{
		name: "vcs stamped, modified",
		bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261205145824-5f4fce9abcde+dirty"}, Deps: deps,
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "5f4fce9abcde"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-12-05T14:58:24Z"}}},
		version: "v0.0.0-20261205145824-5f4fce9abcde+dirty", rev: "5f4fce9abcde", state: "dirty", kube: "v1.37.2", kubectl: "v1.37.1",
		server: "v1.37.2+wasmplane", client: "v1.37.1", text: "wasmplane v0.0.0-20261205145824-5f4fce9abcde+dirty (revision 5f4fce9abcde, modified)",
	}, {
		name:    "-buildvcs=false",
		bi:      &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Deps: deps[:1]},
		version: "(devel)", kube: "v1.37.2", kubectl: "v1.37.2", server: "v1.37.2+wasmplane", client: "v1.37.2", text: "wasmplane (devel)\n",
	}, {
		name:    "a tag, a replaced module",
		bi:      &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Deps: []*debug.Module{{Path: "k8s.io/apimachinery", Version: "v0.36.0", Replace: &debug.Module{Path: "k8s.io/apimachinery", Version: "v0.38.0-rc.1"}}}},
		version: "v1.2.3", kube: "v1.38.0-rc.1", kubectl: "v1.38.0-rc.1", server: "v1.38.0-rc.1+wasmplane", client: "v1.38.0-rc.1", text: "Kubernetes API 1.38 (v1.38.0-rc.1)",
	}, {
		name:    "no build info",
		version: "(devel)", kube: fallbackKubernetes, kubectl: fallbackKubernetes, server: fallbackKubernetes + "+wasmplane", client: fallbackKubernetes, text: "wasmplane (devel)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := fromBuildInfo(tc.bi)
			if b.Version != tc.version || b.Revision != tc.rev || b.treeState() != tc.state || b.Kubernetes != tc.kube || b.Kubectl != tc.kubectl {
				t.Errorf("build %+v", b)
			}
			s, c := b.Server(), b.KubectlClient()
			if s.GitVersion != tc.server || c.GitVersion != tc.client || s.GitCommit != tc.rev || s.GitTreeState != tc.state {
				t.Errorf("server %+v, client %+v", s, c)
			}
			major, minor := majorMinor(tc.kube)
			if s.Major != major || s.Minor != minor || major != "1" {
				t.Errorf("server major/minor %s/%s, want %s/%s", s.Major, s.Minor, major, minor)
			}
			if p := runtime.GOOS + "/" + runtime.GOARCH; s.Platform != p || c.Platform != p || s.GoVersion != runtime.Version() {
				t.Errorf("platform %s, go %s", s.Platform, s.GoVersion)
			}
			if !strings.Contains(b.String(), tc.text) {
				t.Errorf("String() = %q, want %q in it", b.String(), tc.text)
			}
		})
	}
}

// TestFallbackIsThePinnedRelease: the version used without build info is the one go.mod
// pins for the k8s.io modules, and a test binary's build info agrees.
func TestFallbackIsThePinnedRelease(t *testing.T) {
	f, err := os.Open("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pinned string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "k8s.io/apimachinery" {
			pinned = fields[1]
		}
	}
	if want, _ := kubernetesRelease(pinned); want != fallbackKubernetes {
		t.Errorf("go.mod pins k8s.io/apimachinery %s (Kubernetes %s); fallbackKubernetes is %s", pinned, want, fallbackKubernetes)
	}
	if got := Read().Kubernetes; got != fallbackKubernetes {
		t.Errorf("the build info says Kubernetes %s, go.mod %s", got, fallbackKubernetes)
	}
}
