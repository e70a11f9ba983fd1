package e2e

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	apiversion "k8s.io/apimachinery/pkg/version"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// TestVersionOfAPlainBuild runs the binary TestMain built with a plain `go build` (no
// -ldflags): `wasmplane version`, `wasmplane kubectl version --client` and `kubectl
// version` against a server report parseable versions of this platform. It then restarts
// the server with --port 0 and checks that it serves on the port it had.
func TestVersionOfAPlainBuild(t *testing.T) {
	c := newCluster(t)
	platform := runtime.GOOS + "/" + runtime.GOARCH

	out, err := c.wp("", "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "wasmplane ") || !strings.Contains(out, "Kubernetes API 1.") || !strings.Contains(out, runtime.Version()+" "+platform) {
		t.Errorf("wasmplane version printed %q", out)
	}

	check := func(what string, v *apiversion.Info) {
		t.Helper()
		if v == nil {
			t.Fatalf("%s: missing", what)
		}
		sv, err := utilversion.ParseSemantic(v.GitVersion)
		if err != nil {
			t.Fatalf("%s %q: %v", what, v.GitVersion, err)
		}
		if v.Major != "1" || v.Minor != fmt.Sprint(sv.Minor()) || sv.Major() != 1 {
			t.Errorf("%s: major %q minor %q, gitVersion %q", what, v.Major, v.Minor, v.GitVersion)
		}
		if v.Platform != platform || v.GoVersion != runtime.Version() {
			t.Errorf("%s: platform %q go %q, want %q %q", what, v.Platform, v.GoVersion, platform, runtime.Version())
		}
	}
	var client struct {
		ClientVersion *apiversion.Info `json:"clientVersion"`
	}
	out, err = c.wp("", "kubectl", "version", "--client", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &client); err != nil {
		t.Fatalf("kubectl version --client -o json: %v\n%s", err, out)
	}
	check("client", client.ClientVersion)

	var both struct {
		ClientVersion *apiversion.Info `json:"clientVersion"`
		ServerVersion *apiversion.Info `json:"serverVersion"`
	}
	out = c.mustKubectl(c.adminKubeconfig(), "", "version", "-o", "json")
	if err := json.Unmarshal([]byte(out), &both); err != nil {
		t.Fatalf("kubectl version -o json: %v\n%s", err, out)
	}
	check("client", both.ClientVersion)
	check("server", both.ServerVersion)
	if both.ServerVersion.Minor != both.ClientVersion.Minor {
		t.Errorf("server %s and the built-in kubectl %s are different minors", both.ServerVersion.GitVersion, both.ClientVersion.GitVersion)
	}

	// --port 0 again on the same data dir: the port the first start picked.
	port := c.proc.port
	c.proc.kill9(t)
	c.proc = startUp(t, c.dir, 0)
	if c.proc.port != port {
		t.Errorf("restarted with --port 0 on port %d, want the earlier %d", c.proc.port, port)
	}
	c.connect()
	c.mustKubectl(c.adminKubeconfig(), "", "get", "namespaces")
}
