package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestRegoPolicyThroughKubectl installs Gatekeeper's k8srequiredlabels policy, compiled by
// OPA, as a WasmPlugin and creates pods with kubectl: without the label kubectl prints
// the policy's refusal, with it the pod is created.
func TestRegoPolicyThroughKubectl(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ctx := context.Background()
	const ns = "rego"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client, err := toolkit.NewClientForConfig(srv.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := client.PushIn(ctx, wasmtest.Rego(t, "require-labels"), ns)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := toolkit.BuildSpec(toolkit.SpecOptions{Digest: m.Spec.Digest, Hooks: []string{"validate"}, Rules: []string{"pods:CREATE"},
		Config: []byte(`{"parameters":{"labels":["team"]}}`), FailurePolicy: "Fail"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Apply(ctx, toolkit.ApplyOptions{Name: "required-labels", Namespace: ns, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	k := &kubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: ns}
	// The plugin loads asynchronously: kubectl is refused once it is in force.
	var out string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		_, err := k.run(t, "", "run", "no-team", "--image=hello:1", "--restart=Never")
		if err == nil {
			_, _ = k.run(t, "", "delete", "pod", "no-team", "--wait=false")
			return false, nil
		}
		out = err.Error()
		return true, nil
	})
	if err != nil {
		t.Fatalf("the policy never refused a pod: %v", err)
	}
	if !strings.Contains(out, "rego/required-labels") || !strings.Contains(out, `you must provide labels: ["team"]`) {
		t.Fatalf("kubectl's refusal does not name the plugin and the missing label:\n%s", out)
	}
	if got, err := k.run(t, "", "run", "with-team", "--image=hello:1", "--restart=Never", "--labels=team=a"); err != nil || !strings.Contains(got, "pod/with-team created") {
		t.Fatalf("kubectl run with the label: %q, %v", got, err)
	}
}
