package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/api/initializers"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
)

// seedInitializerConfiguration is the seed's InitializerConfiguration, unchanged.
const seedInitializerConfiguration = `apiVersion: admissionregistration.k8s.io/v1alpha1
kind: InitializerConfiguration
metadata:
  name: custom-pod-initializer
initializers:
  - name: podimage.example.com
    rules:
      - apiGroups:
          - ""
        apiVersions:
          - v1
        resources:
          - pods
`

// TestSeedFlow walks the seed's flow on the real binary: kubectl (as a user authenticated
// by a WASM authenticator, authorized by RBAC) creates a Deployment; the Deployment and
// ReplicaSet controllers create pods, which pass WASM mutating and validating admission and
// the seed's podimage.example.com initializer (WASM) before they become visible; the
// scheduler binds them; the kubelet runs them as WASI modules; kubectl logs shows their
// output.
func TestSeedFlow(t *testing.T) {
	c := newCluster(t)
	ctx := testCtx(t, 3*time.Minute)
	mods := artifacts.pluginsFor(t, tokenAuthenticator, labelInjector, requireLabels, podimageInitializer)
	admin := c.adminKubeconfig()

	// The initializer rewrites counter:1 to the mirror: the node must hold both names.
	// Imported while the server runs, by another process.
	c.importImage(artifacts.workload(t, "counter"), "counter:1", "mirror.example.com/library/counter:1")

	// Authentication: a ClusterWasmPlugin gives "dev" a bearer token.
	c.mustPluginApply(admin, "tokens", "", "--module", mods[tokenAuthenticator], "--hooks", "authenticate",
		"--config", c.writeFile("tokens.json", `{"tokens":{"dev-secret":{"username":"dev","uid":"42","groups":["developers"]}}}`))
	// Authorization: "dev" may edit namespace demo, nothing else.
	c.mustKubectl(admin, "", "create", "namespace", "demo")
	c.mustKubectl(admin, "", "-n", "demo", "create", "rolebinding", "dev-edit", "--clusterrole=edit", "--user=dev")
	dev := c.tokenKubeconfig("dev", "dev-secret", "demo")

	t.Run("authentication through the WASM authenticator", func(t *testing.T) {
		out, err := c.kubectl(dev, "", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}")
		if err != nil || !strings.HasPrefix(out, "dev ") || !strings.Contains(out, "developers") {
			t.Fatalf("dev's whoami: %q %v", out, err)
		}
		_, err = c.kubectl(c.tokenKubeconfig("intruder", "wrong-secret", "demo"), "", "get", "pods")
		// kubectl's wording of a 401.
		if err == nil || !strings.Contains(err.Error(), "the server has asked for the client to provide credentials") {
			t.Fatalf("an unknown token: %v, want 401 Unauthorized", err)
		}
		c.waitCan(dev, "create", "deployments.apps")
		if out, _ := c.kubectl(dev, "", "auth", "can-i", "list", "pods", "-n", "default"); strings.TrimSpace(out) != "no" {
			t.Fatalf("dev may list pods in default: %q", out)
		}
	})

	// Admission and initialization, installed by the admin.
	c.mustPluginApply(admin, "inject", "demo", "--module", mods[labelInjector], "--hooks", "mutate", "--rules", "pods:CREATE",
		"--config", c.writeFile("inject.json", `{"labels":{"injected-by":"wasm"}}`))
	c.mustPluginApply(admin, "require-team", "demo", "--module", mods[requireLabels], "--hooks", "validate", "--rules", "pods:CREATE",
		"--config", c.writeFile("require.json", `{"labels":["team"]}`))
	c.mustKubectl(admin, seedInitializerConfiguration, "apply", "-f", "-")
	c.mustPluginApply(admin, "podimage", "", "--module", mods[podimageInitializer], "--hooks", "initialize",
		"--initializer", "podimage.example.com", "--config", c.writeFile("mirror.json", `{"mirror":"mirror.example.com"}`))
	// Like a webhook configuration, the InitializerConfiguration takes effect once the
	// server's cache holds it: a dry-run create shows the pending initializer then.
	waitfor.Condition(t, 30*time.Second, "the InitializerConfiguration to take effect", func(ctx context.Context) (bool, error) {
		p, err := c.admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "counter:1"}}}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return p.Annotations[initializers.PendingAnnotation] != "", nil
	})

	// As dev: a Deployment whose pod template lacks the required label.
	c.mustKubectl(dev, "", "create", "deployment", "web", "--image=counter:1", "--replicas=3")
	var failed *appsv1.ReplicaSet
	t.Run("the validate plugin refuses the pods", func(t *testing.T) {
		waitfor.Condition(t, 60*time.Second, "the ReplicaSet to report the denial", func(ctx context.Context) (bool, error) {
			rss, err := c.admin.AppsV1().ReplicaSets("demo").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil || len(rss.Items) != 1 {
				return false, err
			}
			for _, cond := range rss.Items[0].Status.Conditions {
				if cond.Type == appsv1.ReplicaSetReplicaFailure && cond.Status == corev1.ConditionTrue {
					failed = &rss.Items[0]
					return true, nil
				}
			}
			return false, nil
		})
		cond := failed.Status.Conditions[0]
		for _, cnd := range failed.Status.Conditions {
			if cnd.Type == appsv1.ReplicaSetReplicaFailure {
				cond = cnd
			}
		}
		if cond.Reason != "FailedCreate" || !strings.Contains(cond.Message, `"demo/require-team"`) || !strings.Contains(cond.Message, `label "team" is required`) {
			t.Errorf("ReplicaFailure condition %s: %q, want FailedCreate naming demo/require-team and the label", cond.Reason, cond.Message)
		}
		// The Deployment carries it on, as in Kubernetes, on its next sync.
		waitfor.Condition(t, 30*time.Second, "the Deployment to carry the ReplicaFailure condition", func(ctx context.Context) (bool, error) {
			d, err := c.admin.AppsV1().Deployments("demo").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return hasDeploymentCondition(d, appsv1.DeploymentReplicaFailure, "team"), nil
		})
		// Nothing was stored, not even uninitialized.
		var all corev1.PodList
		if err := c.admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/demo/pods").Param("includeUninitialized", "true").Do(ctx).Into(&all); err != nil {
			t.Fatal(err)
		}
		if len(all.Items) != 0 {
			t.Errorf("%d pods stored in demo, want none", len(all.Items))
		}
	})
	if failed == nil {
		t.FailNow()
	}
	t.Run("the ReplicaSet controller records a FailedCreate event", func(t *testing.T) {
		// Kubernetes' ReplicaSet controller records a Warning event with the admission
		// error: what `kubectl describe rs` and `kubectl get events` show a user.
		var seen string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := c.admin.CoreV1().Events("demo").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			seen = ""
			for _, e := range l.Items {
				seen += fmt.Sprintf("%s %s/%s: %s\n", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
				if e.Reason == "FailedCreate" && e.InvolvedObject.Name == failed.Name && strings.Contains(e.Message, `label "team" is required`) {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Errorf("no FailedCreate event for ReplicaSet %s within 15s; events in demo:\n%s", failed.Name, seen)
		}
	})

	// dev fixes the template: a new ReplicaSet whose pods pass.
	c.mustKubectl(dev, "", "patch", "deployment", "web", "-p", `{"spec":{"template":{"metadata":{"labels":{"team":"payments"}}}}}`)
	c.mustKubectl(dev, "", "rollout", "status", "deployment/web", "--timeout=120s")

	var pods []corev1.Pod
	t.Run("three pods mutated, initialized, scheduled and Running", func(t *testing.T) {
		waitfor.Condition(t, 60*time.Second, "3 Running pods", func(ctx context.Context) (bool, error) {
			l, err := c.admin.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{LabelSelector: labels.Set{"app": "web"}.String()})
			if err != nil {
				return false, err
			}
			running := 0
			for i := range l.Items {
				if podRunning(&l.Items[i]) {
					running++
				}
			}
			pods = l.Items
			return len(l.Items) == 3 && running == 3, nil
		})
		nodes, err := c.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != 1 {
			t.Fatalf("nodes: %v %v", nodes, err)
		}
		for _, p := range pods {
			if p.Labels["injected-by"] != "wasm" || p.Labels["team"] != "payments" {
				t.Errorf("pod %s labels %v: want injected-by=wasm (mutate) and team=payments", p.Name, p.Labels)
			}
			if img := p.Spec.Containers[0].Image; img != "mirror.example.com/library/counter:1" {
				t.Errorf("pod %s image %q, want the initializer's mirror", p.Name, img)
			}
			if _, pending := p.Annotations[initializers.PendingAnnotation]; pending {
				t.Errorf("pod %s still pending initialization: %v", p.Name, p.Annotations)
			}
			if p.Spec.NodeName != nodes.Items[0].Name {
				t.Errorf("pod %s on node %q, want %q", p.Name, p.Spec.NodeName, nodes.Items[0].Name)
			}
			if cs := p.Status.ContainerStatuses; len(cs) != 1 || !strings.HasSuffix(cs[0].Image, "mirror.example.com/library/counter:1") || cs[0].State.Running == nil {
				t.Errorf("pod %s container statuses %+v, want one running the mirrored image", p.Name, cs)
			}
			if owner := metav1.GetControllerOf(&p); owner == nil || owner.Kind != "ReplicaSet" || owner.Name == failed.Name {
				t.Errorf("pod %s owner %+v, want the new ReplicaSet", p.Name, owner)
			}
		}
	})
	if len(pods) == 0 {
		t.FailNow()
	}

	t.Run("kubectl logs shows the WASI program's output", func(t *testing.T) {
		for _, p := range pods {
			waitfor.Condition(t, 30*time.Second, "logs of "+p.Name, func(context.Context) (bool, error) {
				out, err := c.kubectl(dev, "", "logs", p.Name, "--tail=5")
				return err == nil && strings.Contains(out, "count "), nil
			})
		}
		out, err := c.kubectl(dev, "", "logs", "deployment/web", "--tail=3")
		if err != nil || !strings.Contains(out, "count ") {
			t.Fatalf("kubectl logs deployment/web: %q %v", out, err)
		}
	})

	t.Run("kubectl get shows the rollout", func(t *testing.T) {
		out := c.mustKubectl(dev, "", "get", "deployment", "web", "-o", "json")
		var d appsv1.Deployment
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		if d.Status.ReadyReplicas != 3 || d.Status.UpdatedReplicas != 3 || d.Status.AvailableReplicas != 3 {
			t.Errorf("deployment status %+v, want 3 ready, updated and available", d.Status)
		}
	})
}

func hasDeploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType, msg string) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue && strings.Contains(c.Message, msg) {
			return true
		}
	}
	return false
}
