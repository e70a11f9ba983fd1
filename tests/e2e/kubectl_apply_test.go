package e2e

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func deploymentYAML(replicas, image string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: ` + replicas + `
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: app
        image: ` + image + `
`
}

// TestServerSideApply runs `kubectl apply --server-side` through a conflict between two
// managers, its --force-conflicts resolution, and `kubectl diff` (a server-side dry run)
// with and without differences.
func TestServerSideApply(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ctx := context.Background()
	const ns = "ssa"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	k := &kubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: ns}
	v1 := writeFile(t, dir, "v1.yaml", deploymentYAML("2", "example.com/app:1"))
	scaled := writeFile(t, dir, "scaled.yaml", deploymentYAML("5", "example.com/app:1"))
	v2 := writeFile(t, dir, "v2.yaml", deploymentYAML("2", "example.com/app:2"))

	// current reports replicas and image as stored.
	current := func() string {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join([]string{strconv.Itoa(int(*d.Spec.Replicas)), d.Spec.Template.Spec.Containers[0].Image, d.ResourceVersion}, " ")
	}
	match := func(step, out string, patterns ...string) {
		t.Helper()
		for _, p := range patterns {
			if !regexp.MustCompile(p).MatchString(out) {
				t.Errorf("%s: output does not match %q:\n%s", step, p, out)
			}
		}
	}

	out, err := k.run(t, "", "apply", "--server-side", "-f", v1)
	if err != nil {
		t.Fatal(err)
	}
	match("apply --server-side (create)", out, `^deployment.apps/web serverside-applied\n$`)
	before := current()
	if !strings.HasPrefix(before, "2 example.com/app:1 ") {
		t.Fatalf("stored %s", before)
	}

	out, err = k.run(t, "", "get", "deployment", "web", "-o", "yaml", "--show-managed-fields")
	if err != nil {
		t.Fatal(err)
	}
	match("get --show-managed-fields", out, `(?m)^  - apiVersion: apps/v1\n    fieldsType: FieldsV1\n`, `(?m)^    manager: kubectl\n    operation: Apply\n    time: `)

	// Another manager changing replicas conflicts with kubectl's ownership.
	out, err = k.run(t, "", "apply", "--server-side", "--field-manager=autoscaler", "-f", scaled)
	if err == nil {
		t.Fatalf("a conflicting apply succeeded: %s", out)
	}
	match("conflicting apply", err.Error(), `Apply failed with 1 conflict: conflict with "kubectl": \.spec\.replicas`, `--force-conflicts`)
	if got := current(); got != before {
		t.Fatalf("a refused apply changed the deployment: %s -> %s", before, got)
	}

	out, err = k.run(t, "", "apply", "--server-side", "--field-manager=autoscaler", "--force-conflicts", "-f", scaled)
	if err != nil {
		t.Fatal(err)
	}
	match("apply --force-conflicts", out, `^deployment.apps/web serverside-applied\n$`)
	afterForce := current()
	if !strings.HasPrefix(afterForce, "5 example.com/app:1 ") {
		t.Fatalf("after --force-conflicts: %s", afterForce)
	}

	// kubectl diff: the server answers the merged object of a dry run; nothing is stored.
	for _, flags := range [][]string{{"--server-side", "--field-manager=autoscaler", "--force-conflicts"}, nil} {
		out, err = k.run(t, "", append(append([]string{"diff"}, flags...), "-f", v2)...)
		var exit *exec.ExitError
		if !errors.As(errors.Unwrap(err), &exit) && !strings.Contains(errString(err), "exit status 1") {
			t.Fatalf("diff %v: want exit status 1 (differences), got %v\n%s", flags, err, out)
		}
		match("diff "+strings.Join(flags, " "), out, `(?m)^-\s+- image: example.com/app:1$`, `(?m)^\+\s+- image: example.com/app:2$`, `(?m)^\+  replicas: 2$`)
		if got := current(); got != afterForce {
			t.Fatalf("diff %v changed the deployment: %s -> %s", flags, afterForce, got)
		}
	}
	out, err = k.run(t, "", "diff", "--server-side", "--field-manager=autoscaler", "-f", scaled)
	if err != nil || out != "" {
		t.Fatalf("diff of what is stored: %v\n%s", err, out)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
