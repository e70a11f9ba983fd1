package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (e *kubeletEnv) kubectl(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", e.s.KubeconfigPath(), "-n", "default"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+e.t.TempDir())
	return cmd
}

func (e *kubeletEnv) kubectlRun(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := e.kubectl(ctx, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// TestKubectlLogs runs the real kubectl logs, -f, --previous, --tail and --timestamps
// through the API server's pods/log proxy to the kubelet.
func TestKubectlLogs(t *testing.T) {
	e := kubeletSetup(t)
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "talker"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{container("counter", "counter", "50ms"), container("crash", "crash")}}})
	e.waitPod("talker", "crashed twice", 180*time.Second, func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "crash" && cs.RestartCount >= 1 && cs.LastTerminationState.Terminated != nil {
				return true
			}
		}
		return false
	})
	e.poll(20*time.Second, "some counter output", func(context.Context) (bool, error) {
		out, _, err := e.kubectlRun("logs", "talker", "-c", "counter")
		return err == nil && strings.Contains(out, "count 3\n"), nil
	})
	// kubectl picks the first container itself, as against Kubernetes.
	if out, stderr, err := e.kubectlRun("logs", "talker"); err != nil || !strings.Contains(stderr, `Defaulted container "counter" out of: counter, crash`) || !strings.HasPrefix(out, "count 0\n") {
		t.Errorf("kubectl logs without -c: %v %q %s", err, out, stderr)
	}
	out, stderr, err := e.kubectlRun("logs", "talker", "-c", "counter", "--tail=2", "--timestamps")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 {
		t.Fatalf("--tail=2 --timestamps: %q %s %v", out, stderr, err)
	}
	for _, l := range lines {
		ts, rest, _ := strings.Cut(l, " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.HasPrefix(rest, "count ") {
			t.Errorf("line %q", l)
		}
	}
	out, stderr, err = e.kubectlRun("logs", "talker", "-c", "crash", "--previous")
	if err != nil || !strings.Contains(out, "crash: something went wrong, exiting 1") {
		t.Errorf("--previous: %q %s %v", out, stderr, err)
	}
	// -f keeps streaming new lines.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := e.kubectl(ctx, "logs", "-f", "talker", "-c", "counter", "--tail=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var got []string
	for len(got) < 5 && sc.Scan() {
		got = append(got, sc.Text())
	}
	cancel()
	_ = cmd.Wait()
	if len(got) < 5 || !strings.HasPrefix(got[4], "count ") {
		t.Errorf("kubectl logs -f streamed %q", got)
	}
}
