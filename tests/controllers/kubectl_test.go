package controllers

import (
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	kubectlOnce sync.Once
	kubectlBin  string
	kubectlErr  error
)

// kubectl runs the real kubectl (k8s.io/kubectl, built once) against e's server.
func kubectl(t *testing.T, e *env, kubeconfig string, args ...string) string {
	t.Helper()
	kubectlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wasmplane-kubectl")
		if err != nil {
			kubectlErr = err
			return
		}
		kubectlBin, kubectlErr = testserver.Build(dir, "github.com/wasmplane/wasmplane/tests/cmd/kubectl")
	})
	if kubectlErr != nil {
		t.Fatalf("building kubectl: %v", kubectlErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", kubeconfig, "-n", e.ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestKubectlRolloutWorkflow(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a slow end-to-end test (seconds); the full run has it")
	}
	s := testserver.Start(t)
	e := newEnvFor(t, s.Instance)
	fakeKubelet(t, e)
	kc := s.KubeconfigPath()
	ctx := testCtx(t)
	kubectl(t, e, kc, "create", "deployment", "web", "--image=img:1", "--replicas=3")
	kubectl(t, e, kc, "rollout", "status", "deployment/web", "--timeout=60s")
	kubectl(t, e, kc, "set", "image", "deployment/web", "img=img:2")
	kubectl(t, e, kc, "rollout", "status", "deployment/web", "--timeout=60s")
	hist := kubectl(t, e, kc, "rollout", "history", "deployment/web")
	if !strings.Contains(hist, "1 ") || !strings.Contains(hist, "2 ") {
		t.Fatalf("rollout history:\n%s", hist)
	}
	kubectl(t, e, kc, "rollout", "undo", "deployment/web")
	kubectl(t, e, kc, "rollout", "status", "deployment/web", "--timeout=60s")
	d, err := e.client.AppsV1().Deployments(e.ns).Get(ctx, "web", metav1.GetOptions{})
	must(t, err)
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "img:1" || d.Annotations["deployment.kubernetes.io/revision"] != "3" {
		t.Fatalf("after undo: image %s revision %s", img, d.Annotations["deployment.kubernetes.io/revision"])
	}
	kubectl(t, e, kc, "rollout", "pause", "deployment/web")
	kubectl(t, e, kc, "set", "image", "deployment/web", "img=img:3")
	// `kubectl scale` PATCHes deployments/scale, which the API server does not serve yet
	// (405); scale through the same subresource with PUT instead.
	scaleDeployment(t, e, "web", 5)
	waitfor.Condition(t, 30*time.Second, "paused scale to 5", func(ctx context.Context) (bool, error) {
		n, err := countPods(ctx, e, "app=web")
		return n == 5, err
	})
	kubectl(t, e, kc, "rollout", "resume", "deployment/web")
	kubectl(t, e, kc, "rollout", "status", "deployment/web", "--timeout=60s")
	d = waitComplete(t, e, "web", 30*time.Second)
	if d.Spec.Template.Spec.Containers[0].Image != "img:3" {
		t.Fatal("resume did not roll img:3 out")
	}

	// Deletion: --cascade=orphan keeps ReplicaSets and pods; the default removes them.
	kubectl(t, e, kc, "create", "deployment", "keep", "--image=img:1", "--replicas=2")
	kubectl(t, e, kc, "rollout", "status", "deployment/keep", "--timeout=60s")
	kubectl(t, e, kc, "delete", "deployment", "keep", "--cascade=orphan")
	kubectl(t, e, kc, "delete", "deployment", "web")
	waitfor.Condition(t, 30*time.Second, "web's pods and ReplicaSets gone", func(ctx context.Context) (bool, error) {
		n, err := countPods(ctx, e, "app=web")
		if err != nil || n != 0 {
			return false, err
		}
		rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(rss.Items) == 0, err
	})
	_, err = e.client.AppsV1().Deployments(e.ns).Get(ctx, "keep", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("keep not deleted: %v", err)
	}
	rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=keep"})
	must(t, err)
	if len(rss.Items) != 1 || len(rss.Items[0].OwnerReferences) != 0 {
		t.Fatalf("orphaned ReplicaSets: %+v", rss.Items)
	}
	if n, err := countPods(ctx, e, "app=keep"); err != nil || n != 2 {
		t.Fatalf("orphaned pods = %d (%v), want 2", n, err)
	}
}
