package e2e

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAggregatedDiscovery checks what kubectl builds from aggregated discovery: the
// resource table of api-resources and short names it resolves.
func TestKubectlAggregatedDiscovery(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	const ns = "disco"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/hello:1"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k := &kubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: ns}

	// -v=8 logs response headers: kubectl must have been answered with aggregated
	// discovery, not have fallen back to the legacy documents.
	cmd := k.command(ctx, "api-resources", "-v=8")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl api-resources: %v\n%s", err, stderr.String())
	}
	// Response headers of /api and /apis (the Accept header of the requests names the type too).
	answered := regexp.MustCompile(`(?m)^\s*Content-Type: application/json;g=apidiscovery\.k8s\.io;v=v2;as=APIGroupDiscoveryList$`)
	if n := len(answered.FindAllString(stderr.String(), -1)); n < 2 {
		t.Errorf("kubectl api-resources got %d aggregated discovery answers, want 2 (/api and /apis); its log:\n%s", n, stderr.String())
	}
	// Aggregated discovery is two requests however many group versions there are.
	t.Logf("kubectl api-resources made %d requests", len(regexp.MustCompile(`"Request" verb="GET"`).FindAllString(stderr.String(), -1)))
	for _, want := range []string{
		`(?m)^NAME\s+SHORTNAMES\s+APIVERSION\s+NAMESPACED\s+KIND$`,
		`(?m)^pods\s+po\s+v1\s+true\s+Pod$`,
		`(?m)^namespaces\s+ns\s+v1\s+false\s+Namespace$`,
		`(?m)^deployments\s+deploy\s+apps/v1\s+true\s+Deployment$`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout.String()) {
			t.Errorf("api-resources output does not match %q:\n%s", want, stdout.String())
		}
	}

	steps := []struct {
		name string
		args []string
		want string
	}{
		{"get po", []string{"get", "po"}, `(?m)^web\s+0/1\s+Pending\s+0\s+\d+s$`},
		{"get po by name", []string{"get", "po", "web", "-o", "name"}, `^pod/web\n$`},
		{"api-resources namespaced=false", []string{"api-resources", "--namespaced=false", "-o", "name"}, `(?m)^namespaces$`},
		{"api-resources --api-group=apps", []string{"api-resources", "--api-group=apps", "-o", "name"}, `(?m)^deployments\.apps$`},
	}
	for _, st := range steps {
		out, err := k.run(t, "", st.args...)
		if err != nil {
			t.Errorf("%s: %v", st.name, err)
			continue
		}
		if !regexp.MustCompile(st.want).MatchString(out) {
			t.Errorf("%s: output does not match %q:\n%s", st.name, st.want, out)
		}
	}
}
