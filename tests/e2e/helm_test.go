// The Helm tests install, upgrade, roll back and uninstall a chart with the real Helm v4
// (helm.sh/helm/v4, built from tests/cmd/helm once per test binary) against an in-process
// wasmplane running its whole control plane, as a user of a Kubernetes cluster would.

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// gadgets is the resource of the chart's CustomResourceDefinition.
var gadgets = schema.GroupVersionResource{Group: "demo.wasmplane.io", Version: "v1", Resource: "gadgets"}

// cluster is one server with the clients the checks read it with and the user's tools
// bound to it, each with its own HOME so that no cache or configuration is shared with
// the user's or another test's.
type helmCluster struct {
	kubeconfig, home string
	cs               kubernetes.Interface
	dyn              dynamic.Interface
}

func newHelmCluster(t *testing.T) *helmCluster {
	t.Helper()
	srv := testserver.Start(t)
	dyn, err := dynamic.NewForConfig(srv.Config(true))
	if err != nil {
		t.Fatal(err)
	}
	return &helmCluster{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), cs: srv.Clientset(t, false), dyn: dyn}
}

// exec runs bin with args to completion, stdin on its standard input, and returns its
// stdout; a failure reports both streams.
func (c *helmCluster) exec(t *testing.T, stdin, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+c.home, "KUBECONFIG="+c.kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(c.home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(c.home, "config"),
		"HELM_DATA_HOME="+filepath.Join(c.home, "data"))
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v\nstdout: %s\nstderr: %s", filepath.Base(bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// helm runs Helm in namespace ns and fails the test if it fails.
func (c *helmCluster) helm(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := c.exec(t, "", helmBin, append([]string{"--namespace", ns}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (c *helmCluster) createNamespace(t *testing.T, ns string) {
	t.Helper()
	if _, err := c.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// listed is one entry of `helm list -o json`.
type listed struct {
	Name     string `json:"name"`
	Revision string `json:"revision"`
	Status   string `json:"status"`
}

// expectRelease asserts that `helm list` shows release name alone, at revision rev.
func (c *helmCluster) expectRelease(t *testing.T, ns, name, rev string) {
	t.Helper()
	var list []listed
	if err := json.Unmarshal([]byte(c.helm(t, ns, "list", "-o", "json")), &list); err != nil {
		t.Fatalf("decoding helm list: %v", err)
	}
	if len(list) != 1 || list[0].Name != name || list[0].Revision != rev || list[0].Status != "deployed" {
		t.Fatalf("helm list shows %+v, want %s deployed at revision %s", list, name, rev)
	}
	var status struct {
		Version int `json:"version"`
		Info    struct {
			Status string `json:"status"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(c.helm(t, ns, "status", name, "-o", "json")), &status); err != nil {
		t.Fatalf("decoding helm status: %v", err)
	}
	if fmt.Sprint(status.Version) != rev || status.Info.Status != "deployed" {
		t.Fatalf("helm status shows revision %d %s, want %s deployed", status.Version, status.Info.Status, rev)
	}
}

// rendered is what a revision of the demo chart puts in the objects, read back from the
// server.
type rendered struct {
	greeting    string
	replicas    int32
	gadgetSize  int64
	gadgetColor string
}

func (c *helmCluster) read(t *testing.T, ns, release string) rendered {
	t.Helper()
	ctx := context.Background()
	var r rendered
	cm, err := c.cs.CoreV1().ConfigMaps(ns).Get(ctx, release+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the release's ConfigMap: %v", err)
	}
	r.greeting = cm.Data["greeting"]
	d, err := c.cs.AppsV1().Deployments(ns).Get(ctx, release+"-web", metav1.GetOptions{})
	if err != nil || d.Spec.Replicas == nil {
		t.Fatalf("reading the release's Deployment: %v", err)
	}
	r.replicas = *d.Spec.Replicas
	g, err := c.dyn.Resource(gadgets).Namespace(ns).Get(ctx, release+"-gadget", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the release's Gadget: %v", err)
	}
	r.gadgetSize, _, _ = unstructured.NestedInt64(g.Object, "spec", "size")
	r.gadgetColor, _, _ = unstructured.NestedString(g.Object, "spec", "colour")
	for kind, get := range c.objects(ns, release) {
		if err := get(ctx); err != nil {
			t.Fatalf("the release's %s is missing: %v", kind, err)
		}
	}
	return r
}

// managers returns the field managers recorded on the release's ConfigMap.
func (c *helmCluster) managers(t *testing.T, ns, name string) []string {
	t.Helper()
	cm, err := c.cs.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range cm.ManagedFields {
		out = append(out, fmt.Sprintf("%s/%s", e.Manager, e.Operation))
	}
	return out
}

// objects reads each object of the release's templates, by kind.
func (c *helmCluster) objects(ns, release string) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"ConfigMap": func(ctx context.Context) error {
			_, err := c.cs.CoreV1().ConfigMaps(ns).Get(ctx, release+"-config", metav1.GetOptions{})
			return err
		},
		"Deployment": func(ctx context.Context) error {
			_, err := c.cs.AppsV1().Deployments(ns).Get(ctx, release+"-web", metav1.GetOptions{})
			return err
		},
		"Service": func(ctx context.Context) error {
			_, err := c.cs.CoreV1().Services(ns).Get(ctx, release+"-web", metav1.GetOptions{})
			return err
		},
		"ServiceAccount": func(ctx context.Context) error {
			_, err := c.cs.CoreV1().ServiceAccounts(ns).Get(ctx, release+"-app", metav1.GetOptions{})
			return err
		},
		"Secret": func(ctx context.Context) error {
			_, err := c.cs.CoreV1().Secrets(ns).Get(ctx, release+"-secret", metav1.GetOptions{})
			return err
		},
		"Gadget": func(ctx context.Context) error {
			_, err := c.dyn.Resource(gadgets).Namespace(ns).Get(ctx, release+"-gadget", metav1.GetOptions{})
			return err
		},
	}
}

// gone waits until every object of the release has been deleted.
func (c *helmCluster) gone(t *testing.T, ns, release string) {
	t.Helper()
	ctx := context.Background()
	for kind, get := range c.objects(ns, release) {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			last = get(ctx)
			return apierrors.IsNotFound(last), nil
		})
		if err != nil {
			t.Fatalf("the release's %s is still there after uninstall (last read: %v)", kind, last)
		}
	}
}

// lifecycle installs, upgrades, rolls back and uninstalls the demo chart as release in
// namespace ns; extra flags go to every command that writes objects (install, upgrade,
// rollback), and manager is how Helm's writes show in the objects' managedFields.
func (c *helmCluster) lifecycle(t *testing.T, ns, release, chart, manager string, extra ...string) {
	t.Helper()
	ctx := context.Background()
	c.createNamespace(t, ns)
	c.helm(t, ns, append([]string{"install", release, chart}, extra...)...)
	c.expectRelease(t, ns, release, "1")
	if got, want := c.read(t, ns, release), (rendered{"hello", 1, 1, "blue"}); got != want {
		t.Fatalf("after install the objects hold %+v, want %+v", got, want)
	}
	if m := c.managers(t, ns, release+"-config"); !slices.Contains(m, manager) {
		t.Fatalf("the installed ConfigMap's field managers are %v, want %s", m, manager)
	}
	if _, err := c.cs.Discovery().ServerResourcesForGroupVersion("demo.wasmplane.io/v1"); err != nil {
		t.Fatalf("the chart's CRD is not served: %v", err)
	}

	c.helm(t, ns, append([]string{"upgrade", release, chart, "--set", "greeting=bonjour", "--set", "replicas=2",
		"--set", "gadget.size=3", "--set", "gadget.colour=green"}, extra...)...)
	c.expectRelease(t, ns, release, "2")
	if got, want := c.read(t, ns, release), (rendered{"bonjour", 2, 3, "green"}); got != want {
		t.Fatalf("after upgrade the objects hold %+v, want %+v", got, want)
	}

	c.helm(t, ns, append([]string{"rollback", release, "1"}, extra...)...)
	c.expectRelease(t, ns, release, "3")
	if got, want := c.read(t, ns, release), (rendered{"hello", 1, 1, "blue"}); got != want {
		t.Fatalf("after rollback the objects hold %+v, want %+v", got, want)
	}
	var history []struct {
		Revision int    `json:"revision"`
		Status   string `json:"status"`
	}
	if err := json.Unmarshal([]byte(c.helm(t, ns, "history", release, "-o", "json")), &history); err != nil {
		t.Fatalf("decoding helm history: %v", err)
	}
	var revs []string
	for _, r := range history {
		revs = append(revs, fmt.Sprintf("%d:%s", r.Revision, r.Status))
	}
	if got := strings.Join(revs, ","); got != "1:superseded,2:superseded,3:deployed" {
		t.Fatalf("helm history shows %s, want each revision", got)
	}

	c.helm(t, ns, "uninstall", release)
	c.gone(t, ns, release)
	if out := c.helm(t, ns, "list", "-q"); strings.TrimSpace(out) != "" {
		t.Fatalf("helm list after uninstall shows %q, want nothing", out)
	}
	records, err := c.cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil || len(records.Items) != 0 {
		t.Fatalf("release records after uninstall: %v (%v), want none", records, err)
	}
	// Helm never deletes what it installed from crds/: other releases' objects may use it.
	if _, err := c.cs.Discovery().ServerResourcesForGroupVersion("demo.wasmplane.io/v1"); err != nil {
		t.Fatalf("the chart's CRD is no longer served after uninstall: %v", err)
	}
}

// TestHelm: one chart (a Deployment, Service, ServiceAccount, ConfigMap and Secret, a CRD
// in crds/ and a custom object of it in templates/) through Helm v4's whole release life,
// by server-side apply (v4's default) and by the client-side three-way merge Helm v3 used;
// then a server-side dry run, and `helm template` piped into `kubectl apply --server-side`.
func TestHelm(t *testing.T) {
	c := newHelmCluster(t)
	ctx := context.Background()
	chart, err := filepath.Abs("testdata/demo")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("server-side apply", func(t *testing.T) {
		c.lifecycle(t, "helm-ssa", "demo", chart, "helm/Apply")
	})
	t.Run("client-side apply", func(t *testing.T) {
		c.lifecycle(t, "helm-csa", "legacy", chart, "helm/Update", "--server-side=false")
	})

	t.Run("install --dry-run=server", func(t *testing.T) {
		const ns = "helm-dry"
		c.createNamespace(t, ns)
		out := c.helm(t, ns, "install", "preview", chart, "--dry-run=server", "--set", "greeting=preview")
		if !strings.Contains(out, "greeting: \"preview\"") || !strings.Contains(out, "kind: Gadget") {
			t.Fatalf("the dry run does not show the rendered manifest:\n%s", out)
		}
		if _, err := c.cs.CoreV1().ConfigMaps(ns).Get(ctx, "preview-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a dry run created the release's ConfigMap (get: %v)", err)
		}
		if out := c.helm(t, ns, "list", "-q"); strings.TrimSpace(out) != "" {
			t.Fatalf("a dry run recorded a release: %q", out)
		}
	})

	t.Run("template | kubectl apply --server-side", func(t *testing.T) {
		const ns = "helm-template"
		c.createNamespace(t, ns)
		manifest := c.helm(t, ns, "template", "plain", chart, "--include-crds", "--set", "greeting=templated")
		if _, err := c.exec(t, manifest, kubectlBin, "-n", ns, "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		if got, want := c.read(t, ns, "plain"), (rendered{"templated", 1, 1, "blue"}); got != want {
			t.Fatalf("after kubectl apply the objects hold %+v, want %+v", got, want)
		}
		if m := c.managers(t, ns, "plain-config"); !slices.Contains(m, "kubectl/Apply") {
			t.Fatalf("the applied ConfigMap's field managers are %v, want kubectl/Apply", m)
		}
		// Applying the same manifest again changes nothing and is not a conflict.
		if _, err := c.exec(t, manifest, kubectlBin, "-n", ns, "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	})
}
