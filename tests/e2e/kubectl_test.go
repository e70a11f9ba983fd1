// The kubectl tests run the real kubectl (k8s.io/kubectl v0.37.2, built from tests/cmd/kubectl
// once per test binary) against an in-process wasmplane and checks what a user sees.

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectl is a kubectl bound to one server and namespace, with its own HOME so that its
// discovery cache starts empty and stays out of the user's.
type kubectl struct {
	kubeconfig, home, ns string
}

func (k *kubectl) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", k.kubeconfig, "-n", k.ns}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+k.home, "KUBECONFIG="+k.kubeconfig)
	return cmd
}

// run runs kubectl to completion and returns stdout; a failure reports stderr.
func (k *kubectl) run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := k.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: hello
    image: example.com/hello:1
`

const configMapYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  color: blue
`

// TestKubectl walks the everyday kubectl commands in the order a user would type them; each
// step depends on the state the previous ones left.
func TestKubectl(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ctx := context.Background()
	const ns = "demo"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	k := &kubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: ns}
	podFile := writeFile(t, dir, "pod.yaml", podYAML)
	cmFile := writeFile(t, dir, "cm.yaml", configMapYAML)

	steps := []struct {
		name string
		args []string
		// want are regular expressions the output must match.
		want []string
		// fallback, when the step fails, runs the same command with client-side
		// validation off: the step's failure is reported, and the later steps still find
		// the state they build on (and the fallback's output is checked too).
		fallback bool
	}{
		{"create -f", []string{"create", "-f", podFile}, []string{`^pod/web created\n$`}, true},
		{"get table", []string{"get", "pods"}, []string{`(?m)^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$`, `(?m)^web\s+0/1\s+Pending\s+0\s+\d+s$`}, false},
		{"get wide table", []string{"get", "pods", "-o", "wide"}, []string{`(?m)^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\s+NOMINATED NODE\s+READINESS GATES$`}, false},
		{"get -o yaml", []string{"get", "pod", "web", "-o", "yaml"}, []string{`(?m)^kind: Pod$`, `(?m)^  name: web$`, `(?m)^  namespace: demo$`, `image: example.com/hello:1`, `(?m)^  uid: [0-9a-f-]{36}$`}, false},
		{"get -o jsonpath", []string{"get", "pod", "web", "-o", "jsonpath={.spec.containers[0].image} {.metadata.labels.app}"}, []string{`^example.com/hello:1 web$`}, false},
		{"describe pod", []string{"describe", "pod", "web"}, []string{`(?m)^Name:\s+web$`, `(?m)^Namespace:\s+demo$`, `(?m)^Status:\s+Pending$`, `(?m)^Containers:$`, `(?m)^\s+Image:\s+example.com/hello:1$`}, false},
		{"apply -f (create)", []string{"apply", "-f", cmFile}, []string{`^configmap/settings created\n$`}, true},
		{"apply -f (again)", []string{"apply", "-f", cmFile}, []string{`^configmap/settings unchanged\n$`}, true},
		{"patch", []string{"patch", "pod", "web", "-p", `{"metadata":{"labels":{"tier":"front"}}}`}, []string{`^pod/web patched\n$`}, false},
		{"label", []string{"label", "pod", "web", "env=test"}, []string{`^pod/web labeled\n$`}, false},
		{"labels applied", []string{"get", "pod", "web", "-o", "jsonpath={.metadata.labels.tier},{.metadata.labels.env}"}, []string{`^front,test$`}, false},
		{"get by label selector", []string{"get", "pods", "-l", "tier=front", "-o", "name"}, []string{`^pod/web\n$`}, false},
		{"explain pods", []string{"explain", "pods"}, []string{`(?m)^KIND:\s+Pod$`, `(?m)^VERSION:\s+v1$`, `(?m)^DESCRIPTION:$`, `(?m)^FIELDS:$`, `(?m)^\s+spec\s+<PodSpec>$`}, false},
	}
	for _, st := range steps {
		out, err := k.run(t, "", st.args...)
		if err != nil {
			t.Errorf("%s: %v", st.name, err)
			if !st.fallback {
				continue
			}
			if out, err = k.run(t, "", append(st.args, "--validate=false")...); err != nil {
				t.Errorf("%s --validate=false: %v", st.name, err)
				continue
			}
		}
		for _, w := range st.want {
			if !regexp.MustCompile(w).MatchString(out) {
				t.Errorf("%s: output does not match %q:\n%s", st.name, w, out)
			}
		}
	}

	t.Run("get -w", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := k.command(ctx, "get", "pods", "-w")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cancel()
			_ = cmd.Wait()
		}()
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				case <-ctx.Done():
					return
				}
			}
		}()
		waitLine := func(re string) {
			t.Helper()
			rx := regexp.MustCompile(re)
			var seen []string
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("kubectl get -w ended before a line matching %q; saw %q; stderr: %s", re, seen, stderr.String())
					}
					if rx.MatchString(l) {
						return
					}
					seen = append(seen, l)
				case <-ctx.Done():
					t.Fatalf("no line matching %q; saw %q; stderr: %s", re, seen, stderr.String())
				}
			}
		}
		waitLine(`^web\s+0/1\s+Pending\s+0\s+\d+s$`)
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "watched"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/hello:1"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitLine(`^watched\s+0/1\s+Pending\s+0\s+\d+s$`)
	})

	out, err := k.run(t, "", "delete", "pod", "web")
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if !regexp.MustCompile(`^pod "web" deleted`).MatchString(out) {
		t.Errorf("delete: output %q", out)
	}
	if out, err := k.run(t, "", "get", "pods", "-o", "name"); err != nil || strings.Contains(out, "pod/web\n") {
		t.Errorf("after delete: %v %q", err, out)
	}
	if _, err := k.run(t, "", "get", "pod", "web"); err == nil || !strings.Contains(err.Error(), `pods "web" not found`) {
		t.Errorf("get of a deleted pod: %v, want NotFound", err)
	}
}
